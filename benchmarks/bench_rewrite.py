"""Matching and rewriting time on a ~500-box diagram (medians of several runs).

Run with ``OPENBLAS_NUM_THREADS=1 python benchmarks/bench_rewrite.py [--blocks N] [--runs R]``.

The diagram is a chain of attention-like blocks at level 1 (scores, SoftMax,
contraction, a Save;Load round trip of the block's output, an identity box,
tanh) sharing K and V, so every rule of ``rewrites.ALL_RULES`` has matches.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import napkin_cat as nc  # noqa: E402
from napkin_cat.syntax.flat import is_structural  # noqa: E402
from napkin_cat.rewriting import isomorphic, to_diagram, to_netlist  # noqa: E402
from rewrites import ALL_RULES, SIMPLIFY, UNSCALED, save_load_elimination  # noqa: E402


def chain(blocks: int):
    t = nc.types("q d, x d, x d", level=1)
    b = nc.Builder(t)
    Y, K, V = b.inputs
    for _ in range(blocks):
        S = b(nc.einsum("q d, x d -> q x", level=1), Y, K)
        P = b(nc.softmax("q x", over="x", level=1), S)
        O = b(nc.einsum("q x, x d -> q d", level=1), P, V)
        O = b(nc.transfer("load", O.array.replace(level=0)), b(nc.transfer("save", O.array), O))
        Y = b(nc.elementwise("tanh", "q d", level=1), b(nc.elementwise("id", "q d", level=1), O))
    return b.build(Y)


def median_time(fn, runs: int) -> tuple:
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=42)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    d = chain(args.blocks)
    prim = sum(is_structural(b) is None for b in d.boxes)
    print(f"diagram: {len(d.boxes)} boxes ({prim} primitive), {args.blocks} blocks; "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}; medians of {args.runs} runs")
    rows = []
    t, net = median_time(lambda: to_netlist(d), args.runs)
    rows.append(("to_netlist", t, f"{len(net)} nodes, {len(net.wires)} wires"))
    t, back = median_time(lambda: to_diagram(net), args.runs)
    rows.append(("to_diagram", t, f"{len(back.boxes)} boxes"))
    t, same = median_time(lambda: isomorphic(d, back), args.runs)
    rows.append(("isomorphic(d, round trip)", t, str(same)))
    for rule in ALL_RULES:
        t, ms = median_time(lambda: rule.matches(net), args.runs)
        rows.append((f"matches: {rule.name}", t, f"{len(ms)} matches"))
    t, total = median_time(lambda: sum(len(r.matches(net)) for r in ALL_RULES), args.runs)
    rows.append(("matches: all rules", t, f"{total} matches"))
    m = save_load_elimination.matches(d)[len(save_load_elimination.matches(d)) // 2]
    t, after = median_time(lambda: save_load_elimination.apply(d, m), args.runs)
    rows.append(("apply one rewrite (Save;Load)", t, f"{len(after.boxes)} boxes after"))
    t, r = median_time(lambda: nc.rewrite(d, SIMPLIFY), max(1, args.runs // 2))
    rows.append(("fixpoint SIMPLIFY", t, f"{len(r.trace)} steps, {1e3 * t / max(1, len(r.trace)):.1f} ms/step"))
    t, r = median_time(lambda: nc.rewrite(d, UNSCALED), 1)
    rows.append(("fixpoint UNSCALED (+SIMPLIFY)", t,
                 f"{len(r.trace)} steps, {1e3 * t / max(1, len(r.trace)):.1f} ms/step"))
    t, ok = median_time(lambda: bool(nc.equivalent(d, r.diagram, trials=1)), 1)
    rows.append(("equivalent(start, result)", t, str(ok)))
    from rewrites import flash_attention, tiled_matmul
    att, mm = nc.library.attention(), nc.library.matmul()
    t, der = median_time(lambda: flash_attention(att), args.runs)
    rows.append(("derive flash_attention(attention)", t, f"{len(der.trace)} steps"))
    t, ok = median_time(lambda: bool(der.trace.check()) and der.trace.replay(att) == der.diagram, 1)
    rows.append(("  verify: trace.check + replay", t, str(ok)))
    t, o = median_time(lambda: nc.optimal(nc.cost(der.diagram)).H, 1)
    rows.append(("  cost + optimal of the result", t, str(o)))
    t, der = median_time(lambda: tiled_matmul(mm), args.runs)
    rows.append(("derive tiled_matmul(matmul)", t, f"{len(der.trace)} steps"))
    mha = nc.library.multi_head_attention()
    t, der = median_time(lambda: flash_attention(mha), max(1, args.runs // 2))
    rows.append(("derive flash_attention(multi-head)", t, f"{len(der.trace)} steps"))
    width = max(len(name) for name, _, _ in rows)
    for name, t, note in rows:
        print(f"  {name:<{width}}  {1e3 * t:9.1f} ms   {note}")


if __name__ == "__main__":
    main()
