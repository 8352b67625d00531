"""Tables and plots from committed GPU results, and the README's table written from them.

    python benchmarks/gpu/report.py [RESULTS.json ...] [--readme README.md]

With no file, every ``results/*.json`` that is not a first or dry run.  ``--readme`` rewrites the part of
the README between ``<!-- gpu-table -->`` and ``<!-- /gpu-table -->`` (``tests/benchmarks`` fails when it
is stale); it never holds a number that is not in a results file.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
BEGIN, END = "<!-- gpu-table -->", "<!-- /gpu-table -->"


def label(row) -> str:
    if row["kind"] == "matmul":
        return f"matmul {row['a']}×{row['b']}×{row['c']}"
    heads = f"{row['heads']}/{row['kv_heads']}" if row["kind"] == "gqa" else str(row["heads"])
    return f"{row['kind']} N={row['N']} d={row['d']} B={row['batch']} H={heads}"


def flash(row):
    """torch's flash backend on the same inputs (the issue's baseline), if it ran."""
    for b in row.get("baselines", ()):
        if b["path"].startswith("sdpa flash") and b.get("time_s"):
            return b
    return None


def table(result) -> str:
    """A markdown table: our fastest candidate, torch's fastest path and its flash backend, the model."""
    lines = ["| configuration | tiles (ours, fastest) | ours ms | TFLOP/s | torch fastest path | torch ms | "
             "ours vs fastest | ours vs sdpa flash | predicted ms (datasheet) | predicted ms (measured ceilings) "
             "| predicted / measured | error |",
             "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def ms(t):
        return f"{t * 1e3:.3f}" if t else "—"
    for row in result["rows"]:
        if "failed" in row:
            lines.append(f"| {label(row)} | failed: {row['failed'][:80]} |" + " |" * 10)
            continue
        timed = [c for c in row["candidates"] if c.get("time_s")]
        c = min(timed, key=lambda c: c["time_s"]) if timed else row["candidates"][0]
        b, f = row.get("baseline", {}), flash(row)
        tiles = ", ".join(f"{k}={v}" for k, v in c["tiles"].items())
        pred = c.get("predicted_measured_ceilings_s")
        ratio = f"{pred / c['time_s']:.2f}" if pred and c.get("time_s") else "—"
        if row["kind"] == "cuda":
            ratio = "— (reference backend)"
        vs_flash = f"{f['time_s'] / c['time_s']:.2f}×" if f and c.get("time_s") else "—"
        vs_best = f"{row['speedup']:.2f}×" if row.get("speedup") else "—"
        lines.append(f"| {label(row)} | {tiles} | {ms(c.get('time_s'))} | {c.get('tflops', 0):.0f} | "
                     f"{b.get('path', '—')} | {ms(b.get('time_s'))} | {vs_best} | {vs_flash} | "
                     f"{ms(c['predicted_s'])} | {ms(pred)} | {ratio} | {c.get('error', float('nan')):.1e} |")
    return "\n".join(lines)


def plot(result, path):
    """Left: TFLOP/s of ours and torch's fastest path per attention size; right: predicted against measured."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    kind = "attention" if any(r.get("kind") == "attention" for r in result["rows"]) else "causal"
    for d, colour in ((64, "tab:blue"), (128, "tab:red"), (16, "tab:blue")):
        rows = [r for r in result["rows"] if r.get("kind") == kind and r.get("d") == d and "failed" not in r]
        if not rows:
            continue
        ns = [r["N"] for r in rows]
        ours = [max((c.get("tflops") or 0) for c in r["candidates"]) for r in rows]
        base = [r["flops"] / r["baseline"]["time_s"] / 1e12 if r.get("baseline", {}).get("time_s") else 0
                for r in rows]
        fl = [r["flops"] / flash(r)["time_s"] / 1e12 if flash(r) else 0 for r in rows]
        pred = [r["flops"] / (r["candidates"][0].get("predicted_measured_ceilings_s") or
                              r["candidates"][0]["predicted_s"]) / 1e12 for r in rows]
        a.plot(ns, ours, "o-", color=colour, label=f"napkin-cat Triton, d={d}")
        a.plot(ns, base, "s--", color=colour, alpha=0.6, label=f"torch fastest path, d={d}")
        a.plot(ns, fl, "^-.", color=colour, alpha=0.4, label=f"torch sdpa flash, d={d}")
        a.plot(ns, pred, ":", color=colour, alpha=0.6, label=f"model (measured ceilings), d={d}")
    a.set_xscale("log", base=2)
    a.set_xlabel("sequence length N")
    a.set_ylabel("TFLOP/s")
    a.set_title(f"{kind} attention forward, bf16 — {result['device']}")
    a.legend(fontsize=7)
    pts = [(c["predicted_s"], c["time_s"], c.get("predicted_measured_ceilings_s")) for r in result["rows"]
           if "failed" not in r and r["kind"] != "cuda" for c in r["candidates"] if c.get("time_s")]
    if pts:
        lo, hi = min(min(p[:2]) for p in pts) / 1.5, max(max(p[:2]) for p in pts) * 1.5
        b.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        b.fill_between([lo, hi], [lo / 1.25, hi / 1.25], [lo * 1.25, hi * 1.25], color="0.9", label="±25 %")
        b.loglog([p[1] for p in pts], [p[0] for p in pts], "o", label="datasheet rates")
        b.loglog([p[1] for p in pts if p[2]], [p[2] for p in pts if p[2]], "x", label="measured ceilings")
        b.set_xlabel("measured s")
        b.set_ylabel("predicted s")
        b.legend(fontsize=7)
    b.set_title("time model: predicted against measured (Triton kernels)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def result_files() -> list[Path]:
    return sorted(p for p in (HERE / "results").glob("*.json") if "run1" not in p.stem and "dry" not in p.stem)


def section(paths) -> str:
    """The README's section: per results file, its device, date, versions, ceilings and table."""
    out = []
    for p in paths:
        r = json.loads(Path(p).read_text())
        c = r["ceilings"]
        out.append(f"**{r['device']}**, {r['date']} (model `{r['model']}`; torch {r['versions']['torch']}, "
                   f"Triton {r['versions']['triton']}; measured ceilings: copy {c['hbm'] / 1e12:.2f} TB/s, bf16 "
                   f"matmul {c['tensor:bf16'] / 1e12:.0f} TFLOP/s), from "
                   f"[`{Path(p).relative_to(HERE.parent.parent)}`]({Path(p).relative_to(HERE.parent.parent)}):")
        out.append("")
        out.append(table(r))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def readme_with(text: str, paths) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"the README has no {BEGIN} … {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{section(paths)}{END}{tail}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="*")
    ap.add_argument("--readme", help="rewrite this README's GPU table")
    ap.add_argument("--plots", action="store_true", help="redraw each results file's .png beside it")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.results] or result_files()
    if args.plots:
        for p in paths:
            plot(json.loads(p.read_text()), p.with_suffix(".png"))
    if args.readme:
        readme = Path(args.readme)
        readme.write_text(readme_with(readme.read_text(), paths))
    else:
        print(section(paths))


if __name__ == "__main__":
    main()
