"""Predicted efficiency of causal ring attention on 8 GPUs, plain ring and zigzag order, beside ring-flash-attention's
published figures (issue 37, item 5; docs/distributed.md, section 6).

Not a timing: every number is the model's, read off the cost.  The program is ring-flash-attention's benchmark
(``benchmark/benchmark_kvpacked_func.py``: Llama-3-8B's attention, 32 query heads sharing 8 key/value heads of 128,
8192 tokens per GPU, batch 1, bf16, causal) written as the library's program: causal attention woven over the
query heads of a group (``g = 4``) and the key/value heads (``h = 8``), FlashAttention inside each step (queries in
groups of 128, keys streamed by 128, the tiles the mask leaves empty skipped), sharded over the queries and ringed
over the keys, contiguously or in the zigzag order::

    ideal      = FLOPs of the same FlashAttention on one device over the whole sequence / P / rate
    predicted  = predict_program(cluster, ring, rate=rate).time      (each ring step its slowest device's FLOPs / rate,
                                                                      its K/V transfer overlapped)
    efficiency = ideal / predicted                                   (ring-flash-attention's "theoretic flash_attn"
                                                                      rate against its measured one)

``rate``: the GPU model's dense bf16 tensor peak.  Run ``python benchmarks/zigzag_published.py`` to print the table,
``--write`` to put it in docs/distributed.md (between its markers); tests/hardware/test_zigzag_published.py checks
that the page holds what this computes.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import napkin_cat as nc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from page_markers import between, write_between  # noqa: E402

PAGE = Path(__file__).resolve().parent.parent / "docs" / "distributed.md"
BEGIN, END = "<!-- zigzag-table: begin (benchmarks/zigzag_published.py --write) -->", "<!-- zigzag-table: end -->"

#: ring-flash-attention's README, batch API, forward: measured iterations per second as a fraction of
#: "theoretic flash_attn" (docs/distributed.md, section 5)
PUBLISHED = {("h800", "contiguous"): "52.1 %", ("h800", "zigzag"): "85.2 %",
             ("a100", "contiguous"): "51.4 %", ("a100", "zigzag"): "81.7 %"}
GPUS = ("h800", "a100")
LINK = "nvlink4"
ORDERS = ("contiguous", "zigzag")
BF16 = {"Q": "bf16", "K": "bf16", "V": "bf16", "P": "bf16"}


def program(tile: int = 128):
    """FlashAttention of Llama-3-8B's grouped-query causal attention (g = 4 query heads per key/value head, h = 8)."""
    f = nc.weave(nc.weave(nc.library.causal_attention(formats=BF16), "g", inputs={0: 0}, g=4), "h", h=8)
    return nc.group(nc.stream(nc.kernel(f), "x", "s_x"), "q", "g_q")


def rows(devices: int = 8, tokens: int = 8192, tile: int = 128, gpus=GPUS) -> list:
    """One row per GPU model and order: ``(gpu, order, predicted s, ideal s, efficiency, compute s / link s)``."""
    flash = program()
    n = devices * tokens
    sizes = {"q": n, "x": n, "d": 128, "s_x": tile, "g_q": tile}
    one = sum(nc.cost(flash, sizes=sizes).flops.values())
    out = []
    for gpu in gpus:
        c = nc.hardware.cluster(gpu, devices=devices, link=LINK)
        rate = c.gpu.peak("tensor", "bf16")
        ideal = float(one / devices / rate)
        for order in ORDERS:
            d = nc.ring(nc.shard(flash, "q", devices=devices, order=order), "x")
            p = nc.hardware.predict_program(c, d, sizes=sizes, rate=rate)
            (ring,) = p.phases
            out.append((gpu, order, p.time, ideal, ideal / p.time, ring.compute / ring.link))
    return out


def table(**kw) -> str:
    lines = ["| GPU model | link | order | predicted step | ideal | predicted efficiency | published (fwd) | "
             "compute / link |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for gpu, order, t, ideal, eff, ratio in rows(**kw):
        lines.append(f"| `{gpu}` | `{LINK}` | {order} | {t * 1e3:.2f} ms | {ideal * 1e3:.2f} ms | {100 * eff:.1f} % | "
                     f"{PUBLISHED.get((gpu, order), '')} | {ratio:.1f} |")
    return "\n".join(lines)


def write(text: str, page: Path = PAGE) -> None:
    """The table written on the page between its markers."""
    write_between(page, BEGIN, END, text)


def on_page(page: Path = PAGE) -> str:
    """The table the page holds between its markers."""
    return between(page, BEGIN, END)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="put the table in docs/distributed.md")
    args = ap.parse_args(argv)
    text = table()
    print(text)
    if args.write:
        write(text)


if __name__ == "__main__":
    main()
