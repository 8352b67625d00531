"""kkt-35d census: how many of a derive's symbolic KKT solves are renamings of one another (issue 35: "symbolic mode
solves the envelope once per structure").  Every ``kkt_points`` call of ``nc.derive(f, memory="M")`` is recorded
(the form less its tile-free terms, the active columns, the free tiles, whether tidied) with its CPU seconds;
each is put in a canonical form up to a renaming of its size symbols (every permutation, or only those keeping
the symbols' order: the renamings under which sympy's printed forms are renamed alike) and of its tiles (by
position), and the classes are counted with the time spent on all but the first of each (what solving once per
class could save).  Usage: ``PYTHONPATH=$PWD python benchmarks/census_kkt_renamings.py [block|mha|gqa|...]``.

At 72b7567 on the block: 69 calls (65 tidied), 67 distinct as given, 50 classes under any renaming (their later
members 0.10 of 1.25 CPU s, 8%), 59 under order-keeping ones (0.01 s)."""
from __future__ import annotations

import itertools
import sys
import time
from collections import defaultdict

import sympy

import napkin_cat as nc
from napkin_cat.cost import lagrange
from napkin_cat.search import top_columns


def recorded(f):
    calls, orig = [], lagrange.kkt_points

    def kkt_points(H, active, free, M, tidied=True):
        t = time.process_time()
        out = orig(H, active, free, M, tidied)
        calls.append((H, list(active), list(free), M, tidied, time.process_time() - t))
        return out
    top_columns.kkt_points = kkt_points
    try:
        nc.derive(f, memory="M")
    finally:
        top_columns.kkt_points = orig
    return calls


def canonical(H, active, free, M, ordered: bool) -> str:
    H = sympy.Add(*[t for t in sympy.Add.make_args(H) if t.has(*free)])
    sizes = sorted((H.free_symbols | set().union(*[c.free_symbols for c in active])) - set(free) - {M}, key=str)
    T = [sympy.Symbol(f"T{i}", positive=True) for i in range(len(free))]
    S = [sympy.Symbol(f"S{i}", positive=True) for i in range(len(sizes))]
    best = None
    for p in ([tuple(sizes)] if ordered else itertools.permutations(sizes)):
        m = {x: S[i] for i, x in enumerate(p)}
        m.update({g: T[i] for i, g in enumerate(free)})
        key = sympy.srepr((H.xreplace(m), tuple(c.xreplace(m) for c in active)))
        best = key if best is None or key < best else best
    return best


def main(name: str = "block"):
    L = nc.library
    f = {"block": L.transformer_block, "mha": L.multi_head_attention, "gqa": L.grouped_query_attention,
         "mlp": L.mlp, "swiglu": L.swiglu_mlp, "attention": L.attention}[name]()
    calls = recorded(f)
    total = sum(c[5] for c in calls)
    exact = {(c[4], sympy.srepr((c[0], tuple(c[1]), tuple(c[2])))) for c in calls}
    print(f"{name}: {len(calls)} kkt_points calls ({sum(c[4] for c in calls)} tidied), {total:.2f} CPU s, "
          f"{len(exact)} distinct as given")
    for ordered in (False, True):
        classes = defaultdict(list)
        for i, (H, act, free, M, tidied, _) in enumerate(calls):
            classes[(tidied, canonical(H, act, free, M, ordered))].append(i)
        later = sum(calls[i][5] for v in classes.values() for i in v[1:])
        print(f"  {'order-keeping' if ordered else 'any'} renamings: {len(classes)} classes, "
              f"{later:.3f} CPU s in their later members")


if __name__ == "__main__":
    main(*sys.argv[1:])
