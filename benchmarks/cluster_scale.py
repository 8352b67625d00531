"""Predicted step times at scale: causal multi-head attention and a transformer block's MLP on 8 H100 over NVLink 4
and on 64 H100 (nodes of 8 over NVLink 4, InfiniBand NDR between them), sequences up to 1M (issue 37 item 5;
docs/distributed.md, section 8).

Not a timing: every number is the model's.  At each cluster and sequence length ``n`` the library derives the
device form itself, ``nc.derive(f, sizes=..., hardware=cluster, layout=..., compute=...)``: each form the device
rules make from the one-device program, timed as one device runs it (its per-device algorithm by the GPU time
model), its link traffic read off the cost, the memory each device holds checked against its 80 GB.  Recorded per
point: the chosen form, its predicted time and bound, memory per device, every other form's time or the reason it
was refused (``memory: …`` where it does not fit), and the seconds the derivation took on this machine.

Programs (the inputs arrive sharded along the sequence, ``layout``; weights whole on every device, not counted on
the link):

    attention  causal attention woven over h = 32 heads of d = 128, bf16 (Llama-3-8B's query heads, without
               grouping the key/value heads); layout (q, x, x)
    mlp        the transformer block's MLP, ``nc.library.mlp`` (GELU) at e = 4096, f = 16384, fp32 as the library
               writes it; layout (n, whole, whole, whole, whole)
    block      ``nc.library.transformer_block`` at e = 4096, h = 32, d = 128, f = 16384, fp32 as the library writes
               it; layout (n, whole, …): run with ``--compute time`` (the one algorithm of fewest transfers at the
               whole shared memory holds too many registers for the H100: refused)

``attention TFLOPS per GPU``: the causal attention's useful FLOPs, ``4·h·d·n²/2`` (the two contractions over the
unmasked half), over ``P`` and the predicted time: the figure Megatron / NeMo report per GPU for a whole model.

Run ``python benchmarks/cluster_scale.py`` (results to ``benchmarks/results/cluster_scale-<commit>.json`` and
``.md``, rewritten after every point; ``--tag T`` adds ``-T`` to the name, for runs apart); ``--write`` puts the
table of the results files it names (default: the newest commit's), merged, in docs/distributed.md between its
markers.  ``--lengths``, ``--programs``, ``--clusters`` cut the run down.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import time
import sys
from pathlib import Path

import napkin_cat as nc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from page_markers import between, write_between  # noqa: E402
from napkin_cat.hardware.clustered import time_form

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "distributed.md"
RESULTS = ROOT / "benchmarks" / "results"
BEGIN, END = "<!-- scale-table: begin (benchmarks/cluster_scale.py --write) -->", "<!-- scale-table: end -->"

CLUSTERS = {"8xnvlink4": dict(gpu="h100-sxm5", devices=8, link="nvlink4"),
            "64xnvlink4+ib-ndr": dict(gpu="h100-sxm5", devices=64, link="nvlink4", inter_node_link="ib-ndr")}
LENGTHS = (32768, 131072, 1048576)
HEADS, D, E, F = 32, 128, 4096, 16384
BF16 = {"Q": "bf16", "K": "bf16", "V": "bf16", "P": "bf16"}


def programs() -> dict:
    """name → (function, sizes at n, layout)."""
    att = nc.weave(nc.library.causal_attention(formats=BF16), "h", h=HEADS)
    return {"attention": (att, lambda n: {"q": n, "x": n, "d": D}, ("q", "x", "x")),
            "mlp": (nc.library.mlp(), lambda n: {"n": n, "i": E, "f": F, "o": E}, ("n", None, None, None, None)),
            "block": (nc.library.transformer_block(), lambda n: {"n": n, "e": E, "h": HEADS, "d": D, "f": F},
                      ("n",) + (None,) * 12)}


def useful(n: int) -> float:
    """The causal attention's useful FLOPs at ``n``: its two contractions over the unmasked half."""
    return 4 * HEADS * D * n * n / 2


def block_flops(n: int) -> float:
    """The transformer block's FLOPs at ``n`` (its contractions): the Q, K, V and output projections, attention's
    two contractions over every pair (no mask), the MLP's two."""
    return 2 * n * E * HEADS * D * 4 + 4 * HEADS * D * n * n + 4 * n * E * F


def cluster(name: str):
    kw = dict(CLUSTERS[name])
    return nc.hardware.cluster(kw.pop("gpu"), **kw)


def point(c, program: str, n: int, compute: str, retime: bool = False) -> dict:
    f, sizes, layout = programs()[program]
    t0 = time.process_time()
    row = {"program": program, "n": n, "cluster": c.name, "devices": c.devices, "compute": compute}
    try:
        r = nc.derive(f, sizes=sizes(n), hardware=c, layout=layout, compute=compute)
    except nc.errors.NapkinError as e:
        row.update(chosen=None, error=str(e).splitlines()[0][:600])
    else:
        row.update(chosen=r.label, time_s=float(r.time), bound=r.prediction.bound, memory_B=int(r.memory),
                   candidates=[{"label": x.label, "time_s": None if x.time is None else float(x.time),
                                "memory_B": x.memory, "refused": x.refused} for x in r.candidates
                               if x.refused is None or x.refused.startswith("memory")])
        if program == "attention":
            row["attention_tflops_per_gpu"] = useful(n) / c.devices / float(r.time) / 1e12
        if retime and compute != "time":     # the chosen form, its per-device algorithm by the time model
            chosen = next(x for x in r.candidates if x.label == r.label)
            t1 = time.process_time()
            again = time_form(chosen, c, sizes(n), compute="time", layout=layout)
            row["retimed"] = {"time_s": None if again.time is None else float(again.time), "refused": again.refused,
                              "cpu_s": round(time.process_time() - t1, 1)}
    row["derive_cpu_s"] = round(time.process_time() - t0, 1)
    return row


def git(*args) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def fmt_time(t) -> str:
    if t is None:
        return "—"
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


def merged(paths) -> dict:
    """The results files ``paths`` (one commit's, run apart: ``--tag``) as one: their rows ordered by program,
    devices and length; ``files``: their names."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    order = {"attention": 0, "mlp": 1, "block": 2}
    rows = sorted((row for r in parts for row in r["rows"]),
                  key=lambda row: (order.get(row["program"], 9), row["devices"], row["n"]))
    return {"commit": parts[0]["commit"], "dirty": any(r["dirty"] for r in parts), "compute": parts[0]["compute"],
            "files": [Path(p).name for p in paths], "rows": rows}


def table(result: dict) -> str:
    """The page's table: one row per point."""
    files = ", ".join(f"`benchmarks/results/{f}`" for f in result.get("files", [
        f"cluster_scale-{result['commit'][:12]}.json"]))
    lines = [f"Results {files} (each named by the commit it ran at{'; a dirty tree' if result['dirty'] else ''}; "
             f"compute=\"{result['compute']}\").",
             "",
             "| program | cluster | n | chosen form | predicted step | bound | memory / device | "
             "attention TFLOPS / GPU | chosen form at compute=\"time\" | other forms (predicted, or refused) | "
             "derive (CPU s) |",
             "| --- | --- | ---: | --- | ---: | --- | ---: | ---: | ---: | --- | ---: |"]
    for row in result["rows"]:
        program = row["program"] + (f" (compute=\"{row['compute']}\")" if row.get("compute", result["compute"])
                                    != result["compute"] else "")
        if row.get("chosen") is None:
            lines.append(f"| {program} | {row['cluster']} | {row['n']:,} | not derived: "
                         f"{row['error'][:160]} | | | | | | | {row['derive_cpu_s']} |")
            continue
        others = "; ".join(f"{x['label']}: {fmt_time(x['time_s']) if x['refused'] is None else 'memory'}"
                           for x in row["candidates"] if x["label"] != row["chosen"])
        tf = f"{row['attention_tflops_per_gpu']:.0f}" if "attention_tflops_per_gpu" in row else ""
        again = row.get("retimed")
        if again is None:
            retimed = ""
        elif again["time_s"] is None:
            retimed = f"refused: {again['refused'][:80]}"
        else:
            rate = useful(row["n"]) / row["devices"] / again["time_s"] / 1e12
            retimed = f"{fmt_time(again['time_s'])} ({rate:.0f} TFLOPS / GPU)"
        lines.append(f"| {program} | {row['cluster']} | {row['n']:,} | {row['chosen']} | "
                     f"{fmt_time(row['time_s'])} | {row['bound']} | {row['memory_B'] / 1e9:.2f} GB | {tf} | "
                     f"{retimed} | {others} | {row['derive_cpu_s']} |")
    return "\n".join(lines)


def newest() -> list:
    """The results files of the newest run's commit (each ``--tag``'s)."""
    last = max(RESULTS.glob("cluster_scale-*.json"), key=lambda p: p.stat().st_mtime)
    commit = json.loads(last.read_text())["commit"][:12]
    return sorted(RESULTS.glob(f"cluster_scale-{commit}*.json"))


def write(text: str, page: Path = PAGE) -> None:
    """The table written on the page between its markers."""
    write_between(page, BEGIN, END, text)


def on_page(page: Path = PAGE) -> str:
    """The table the page holds between its markers."""
    return between(page, BEGIN, END)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    ap.add_argument("--programs", default="attention,mlp,block")
    ap.add_argument("--clusters", default=",".join(CLUSTERS))
    ap.add_argument("--compute", default="transfers", choices=("transfers", "time"))
    ap.add_argument("--tag", default="", help="a suffix of the results file (runs apart, merged by --write)")
    ap.add_argument("--retime", action="store_true", help="re-time each chosen attention form with compute='time'")
    ap.add_argument("--write", nargs="*", metavar="RESULTS", help="put the table of these results files (default: the "
                    "newest commit's), merged, in docs/distributed.md")
    args = ap.parse_args(argv)
    if args.write is not None:
        write(table(merged(args.write or newest())))
        return
    commit = git("rev-parse", "HEAD")
    result = {"commit": commit, "dirty": bool(git("status", "--porcelain", "--", "napkin_cat")),
              "compute": args.compute, "rows": []}
    out = RESULTS / f"cluster_scale-{commit[:12]}{'-' + args.tag if args.tag else ''}.json"
    result["files"] = [out.name]                 # the .md names the file it sits beside, ``--tag`` included
    lengths = [int(v) for v in args.lengths.split(",")]
    for program in args.programs.split(","):
        for name in args.clusters.split(","):
            c = cluster(name)
            for n in lengths:
                row = point(c, program, n, args.compute, retime=args.retime and program == "attention")
                result["rows"].append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "candidates"}), flush=True)
                out.write_text(json.dumps(result, indent=1, default=str))
                out.with_suffix(".md").write_text(f"# `cluster_scale.py` at {commit[:12]}\n\n{table(result)}\n")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
