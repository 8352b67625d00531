"""The ``napkin`` command: the main jobs on built-in examples.

``napkin demo`` draws and evaluates attention, derives FlashAttention by group
and stream partitions, checks the equivalence and prints the IO cost and the
optimal tile sizes next to the paper's formulas.

>>> main(["cost", "attention"]) == 0
H = 2*d*q + 2*d*x + 4*q*x
...
True
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

EXAMPLES = ("matmul", "attention", "multi_head_attention", "grouped_query_attention", "mlp",
            "layer_norm", "rms_norm", "transformer_block")


def _example(name):
    import napkin_cat as nc
    if name not in EXAMPLES:
        raise SystemExit(f"unknown example {name!r}; choose one of {', '.join(EXAMPLES)}")
    return getattr(nc.library, name)()


def _derivation(name):
    """The named derivation of the rule book (found through the ``napkin_cat.rules`` entry point)."""
    from napkin_cat.rewriting.registry import rulebook
    return rulebook().derivations["tiled_matmul" if name == "matmul" else "flash_attention"]


def _derive(name):
    """The tiled/streamed form of a library algorithm, derived by the rewrite rules (axes read off it)."""
    if name not in ("matmul", "attention", "multi_head_attention", "grouped_query_attention"):
        raise SystemExit(f"no derivation for {name!r}; derivable: matmul, attention, multi_head_attention, "
                         "grouped_query_attention")
    return _derivation(name)(_example(name)).diagram


def cmd_demo(args):
    import napkin_cat as nc
    out = args.out
    os.makedirs(out, exist_ok=True)
    att = nc.library.attention()
    rng = np.random.default_rng(0)
    Q, K, V = (rng.normal(size=s) for s in ((64, 32), (96, 32), (96, 32)))
    O = nc.evaluate(att, Q, K, V)
    S = Q @ K.T / np.sqrt(32)
    P = np.exp(S - S.max(1, keepdims=True))
    ref = (P / P.sum(1, keepdims=True)) @ V
    print(f"attention: evaluate vs numpy, max |error| = {np.abs(O - ref).max():.2e}")
    derivation = _derivation("attention")(att)
    flash = derivation.diagram
    print("FlashAttention derived by rules: " + " ; ".join(s.rule for s in derivation.trace))
    print(f"  every step checked: {bool(derivation.trace.check())};  "
          f"equivalent to attention: {bool(nc.equivalent(att, flash, trials=5))}")
    Of = nc.evaluate(flash, Q, K, V, sizes={"g_q": 16, "s_x": 8})
    print(f"  tiled run (g_q=16, s_x=8) vs numpy, max |error| = {np.abs(Of - ref).max():.2e}")
    c = nc.cost(flash)
    o = nc.optimal(c)
    print(f"  N_g = {c.N_g},  H_g = {c.H_g[1]},  M = {c.M[1]}")
    print(f"  H* (large M) = {o.H}   tiles {o.sizes}   [paper: 2qd + 4xqd²/M]")
    print(f"  H* (exact memory model, errata D-12) = {o.exact_H}   tiles {o.exact_sizes}")
    u = nc.cost(nc.unfused(att))
    print(f"  unfused baseline H = {u.H[1]}")
    if hasattr(nc, "draw"):
        for name, d in (("attention", att), ("flash_attention", flash)):
            for ext in ("png", "svg"):
                nc.draw(d, path=os.path.join(out, f"{name}.{ext}"))
        derivation.trace.draw(os.path.join(out, "flash_derivation.png"))
        print(f"drawings written to {out}/attention.png, {out}/flash_attention.png (and .svg), "
              f"{out}/flash_derivation.png (one row per rewrite)")
    return 0


def cmd_cost(args):
    import napkin_cat as nc
    d = _derive(args.example) if args.derived else nc.unfused(_example(args.example))
    c = nc.cost(d)
    for lvl in c.levels:
        if lvl in c.H:
            print(f"H = {c.H[lvl]}" if lvl == 1 else f"H[{lvl}] = {c.H[lvl]}")
    for lvl, m in c.M.items():
        print(f"M[{lvl}] = {m}")
    print(f"FLOPs = {c.flops}")
    if args.derived:
        o = nc.optimal(c)
        print(f"H* = {o.H}  with {o.sizes}")
    return 0


def cmd_derive(args):
    import napkin_cat as nc
    d = _example(args.example)
    r = _derivation(args.example)(d)
    for k, step in enumerate(r.trace):
        print(f"{k}: {step.rule}")
    print(f"checked: {bool(r.trace.check())}")
    o = nc.optimal(nc.cost(r.diagram))
    print(f"H* = {o.H}  with {o.sizes}")
    if args.strip:
        r.trace.draw(args.strip)
        print(args.strip)
    return 0


def cmd_draw(args):
    import napkin_cat as nc
    if not hasattr(nc, "draw"):
        raise SystemExit("drawing is not available in this build")
    d = _derive(args.example) if args.derived else _example(args.example)
    nc.draw(d, path=args.path)
    print(args.path)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="napkin", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("demo", help="draw, evaluate and derive FlashAttention; print its IO cost")
    s.add_argument("--out", default="out")
    s.set_defaults(fn=cmd_demo)
    s = sub.add_parser("cost", help="IO cost of a library algorithm (unfused, or --derived tiled form)")
    s.add_argument("example", choices=EXAMPLES)
    s.add_argument("--derived", action="store_true")
    s.set_defaults(fn=cmd_cost)
    s = sub.add_parser("derive", help="derive the tiled/streamed algorithm by rewrite rules; print the trace")
    s.add_argument("example", choices=("matmul", "attention", "multi_head_attention", "grouped_query_attention"))
    s.add_argument("--strip", help="draw the derivation (one row per rewrite) to this PNG/SVG path")
    s.set_defaults(fn=cmd_derive)
    s = sub.add_parser("draw", help="draw a library algorithm to PNG/SVG")
    s.add_argument("example", choices=EXAMPLES)
    s.add_argument("path")
    s.add_argument("--derived", action="store_true")
    s.set_defaults(fn=cmd_draw)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
