"""Cost functor and optimal tile sizes: attention, the three-matrix chain, chains and stacked transformer blocks.

Run: OPENBLAS_NUM_THREADS=1 python benchmarks/bench_cost.py            (this tree)
     OPENBLAS_NUM_THREADS=1 PYTHONPATH=<other tree> python benchmarks/bench_cost.py   (a baseline)
Reports medians of several runs. ``nc.optimal`` memoises its symbolic work per tiling program, so
the "cold" rows clear those caches before every run (the first call on a new algorithm); the
"sweep" row is what a derivation search does: one algorithm, many memory sizes. A row whose first
run raises, or takes more than ``SLOW`` seconds, is run once and reported as such.

Measured here (2 cores, load ~2.6 from other jobs; medians, ranges over two runs; main at 8df4bab):

    what                                                     main                       this branch
    optimal(flash attention), symbolic, cold                 0.23-0.24                  0.33-0.49
    optimal(tiled matmul), symbolic, cold                    0.50-0.81                  0.15-0.17
    optimal(three-matrix chain, fused, g_a g_d), symbolic    raises after 172-250 s     0.43-0.73
    optimal(three-matrix chain, two partitions), integer     TypeError                  0.0016-0.0019
    optimal(tiled matmul), integer 1024^3, M=16384, cold     0.057-0.088                0.0013-0.0017
    optimal(tiled matmul), integer, memory sweep, per call   0.051-0.057                0.0003-0.0005
    optimal(GQA, 3 tiles), integer, cold                     0.11-0.12                  0.0037-0.0046
    exact.at(three-matrix chain), numeric real optimum       (none)                     0.013-0.031

The symbolic attention optimum is slower: it now solves every binding column (a Piecewise) and
checks the result at sample sizes against every column and the numeric optimum.

``--only kernels`` (the cost functor on one kernel of n elementwise boxes, cold; ms per box and its ratio to
n = 50) and ``--only derived`` (``nc.optimal(r.cost, memory=M, sizes=...)`` on ``nc.derive`` results), measured
on the same machine, busy (2 cores shared), main at 32c29ad against the schedule branch:

    one kernel of n elementwise boxes       n     main ms/box (vs 50)   schedule ms/box (vs 50)
    kernel of n maps                       800     0.034 (0.67)          0.039 (0.67)
    grouped kernel of n maps               800     0.039 (0.59)          0.046 (0.77)
    streamed kernel of n maps              800     0.085 (0.86)          0.061 (0.75)
    kernel of n weighted maps              400     0.198 (1.07)          0.214 (1.05)
    streamed kernel of n weighted maps      50     0.859                 0.436
    streamed kernel of n weighted maps     200     1.763 (2.05)          0.416 (0.95)
    streamed kernel of n weighted maps     400     2.999 (3.49)          0.423 (0.97)

    nc.optimal on an nc.derive result                      kernels   main optimal s     schedule optimal s
    SwiGLU MLP, n=4096 e=1024 f=4096 o=1024, M=4096            4     > 120 (stopped)    0.014
    MLP, n=4096 i=1024 f=4096 o=1024, M=4096                   2     0.013              0.008
    attention, q=x=4096 d=128, M=2^14                          2     0.008              0.009
    transformer block, n=512 e=512 h=8 d=64 f=2048, M=2^14    12     > 120 (stopped)    0.099

``--only scaling --runs 1`` (fast-functor at 468829c, 2 cores shared): ms per box (ratio to the first row) at
48/192/816/2016 stacked-block boxes 0.417/0.312/0.266/0.259 (0.62 at 2016); n maps beside n wires of one size at
n = 50/200/800/2000: 0.200/0.174/0.135/0.138 (0.69); beside n wires each of its own size p_k: 0.493/1.142/3.648 ms
(7.40 at 800) and 85.6 s in all at 2000.  A column of k distinct monomials is still built as a sympy sum of k terms
after every layer, so that case stays quadratic (and sympy's sort makes it worse): see the report of fast-functor.

``--only scaling --runs 3`` (speed-35c at 1c99a3d against main 52ff5f4, one after the other, 2 cores shared and
busy): n maps beside n wires each of its own size p_k, ms per box at 50/200/800/2000 boxes: main
0.255/0.351/0.518/1.482 (5.80 at 2000), now 0.158/0.075/0.094/0.060 (flat): a level's total is re-summed only
where a layer changed its terms (a map puts back the monomial it took; napkin_cat/cost/live.py).  The cost of a
32-block derive's winner (5,421 boxes with regions' insides) is linear with the collector paused, as inside
``derive``: 0.274/0.268/0.267 ms per box at 1/8/32 blocks; the 2.8-3.2 s one call takes after a derive is the
cyclic collector walking the 2.9 million objects the derive left (1.9 s with it disabled, 2.2 s after gc.freeze()).

``--only scaling`` (lin-35 at 4e1c3e3, cold: a fresh diagram per run, sympy's cache and the functor's memos by value
emptied; CPU ms per box, median of 3; main 40e1a85 one run; 2 cores shared): ratio of the ~2,000-box row to the
~50-box row, symbolic / at sizes:

    shape                              main sym   main sized    lin-35 sym  lin-35 sized   (ms/box at ~2,000, lin-35)
    stacked transformer blocks           0.49        0.66          0.55        0.25          0.034 / 0.014
    n maps beside n wires (q d)          0.58        0.84          0.61        0.73          0.017 / 0.023
    n maps beside n wires (p_k each)     0.69        0.97          0.84        0.90          0.027 / 0.037
    deep MLP, own width per layer       10.05       16.36          1.28        0.96          0.130 / 0.118
    unfused deep MLP, own widths         2.02        2.69          0.98        1.01          0.096 / 0.092
    balanced tree of matrix products    26.66       34.90          1.42        1.07          0.241 / 0.204
    random wide/deep shape               1.04        1.45          0.46        0.72          0.022 / 0.030

A changed level's sympy total was ``sympy.Add`` of every live monomial, sorted afresh (``Basic.compare``): it now
keeps its terms in sympy's order (napkin_cat/cost/ordered_sum.py), the changed ones placed by bisection (what is
left grows as log k, and the new total's tuple and hash, in C, as k).  At sizes every symbolic column was
evaluated (a walk over all its terms): the live data is a running number per level (napkin_cat/cost/live_at.py).

``--only scaling --runs 1`` (poly-35 at 9885b7b against main e0e2321, two alternating fresh-interpreter runs each,
medians; CPU ms per box, ~50 → ~2,000 boxes; 2 cores shared): the search's arithmetic (``poly``: ``cost(d,
arithmetic=POLYNOMIAL)``) and ``M`` (µs per term of the columns, "-": a run past 20 s, not repeated):

    shape                              main poly        poly-35 poly       main M us/term      poly-35 M us/term
    deep MLP, own width per layer      0.099 → 0.359    0.090 → 0.100      103 → 291 (799)     42 → 3.2
    unfused deep MLP, own widths       0.064 → 0.079    0.076 → 0.071      2238 → 216          2333 → 2.4
    balanced tree of matrix products   0.187 → 1.628    0.141 → 0.348      62 → 170 (800)      13 → 4.5
    stacked transformer blocks         0.052 → 0.017    0.051 → 0.017      851 → 112           765 → 50

A changed level's Poly total was built afresh from its terms (a Python dict of every live term, a frozenset of them
as its memo key, and a term-by-term hash when the record pooled it): each level's terms are now kept with the hash
of their frozenset (napkin_cat/cost/poly_sum.py).  The tree's 2,000-box row is the cyclic collector: 0.107/0.123 ms
per box at 800/2,000 with it disabled.  ``M`` compared every pair of columns (sympy ``>=`` on their coefficients):
each column is now compared with the current maxima that could bound it or that it could bound
(napkin_cat/cost/maxima.py ``undominated``); ``M`` of a deep MLP of 25/50/100/200/400 layers 0.035/0.10/0.55/3.3/24.6
s → 0.018/0.020/0.041/0.104/0.31 s.  What is left reads each column's terms once (the columns of a deep MLP hold a
term per layer each: their size, not the work per term, grows as the square of the depth).

A stream's columns were read value by value at every step of its expansion, so a stream whose trip keeps many
values live (the weights not yet added) cost work per box growing with its length; they are now kept up to date
(napkin_cat/cost/columns.py).  The tiles of kernels separated by global memory are independent problems: the
integer search scores the sum of their candidate grids, not the product (napkin_cat/cost/integer_search.py).
"""
import argparse
import gc
import os
import statistics
import sys
import time

import napkin_cat as nc
from napkin_cat.testing.scaling import deep_mlp

SLOW = 20.0


def fresh():
    """Clear the optimiser's memo tables (absent in older trees)."""
    for name in ("napkin_cat.cost.optimum", "napkin_cat.cost.sized_optimum", "napkin_cat.cost.tiling"):
        module = sys.modules.get(name)
        for attr in ("symbolic_optimum", "_compiled", "compiled", "_program", "_restricted"):
            cached = getattr(module, attr, None)
            if hasattr(cached, "cache_clear"):
                cached.cache_clear()


def median_time(fn, runs=5, *, cold=False):
    """Median seconds over ``runs``; a string if the first run raises or is slower than ``SLOW``."""
    ts = []
    for _ in range(runs):
        if cold:
            fresh()
        t = time.perf_counter()
        try:
            fn()
        except Exception as err:                  # a baseline may fail: report it, do not stop
            return f"raises {type(err).__name__} after {time.perf_counter() - t:.1f} s: {str(err)[:60]}"
        ts.append(time.perf_counter() - t)
        if ts[-1] > SLOW:
            return f"{ts[-1]:.1f} (one run)"
    return statistics.median(ts)


def chain(n):
    """An unfused chain of n elementwise kernels on q×d (n boxes, n kernels)."""
    boxes = [nc.elementwise("exp" if k % 2 else "relu", "q d") for k in range(n)]
    return nc.unfused(nc.Diagram.id(boxes[0].dom).then(*boxes))


def stacked_blocks(n_blocks: int):
    """``n_blocks`` transformer blocks composed with ``>>``, each with its own 12 weight inputs.

    Block k reads the running activation and its weights; the weights of the blocks after it pass
    beside it on identity wires, so the diagram is as wide as all the weights not yet used.
    """
    block = nc.library.transformer_block()
    x, weights = block.dom.inside[0], block.dom.inside[1:]
    d = nc.Diagram.id(nc.Ty(x, *(weights * n_blocks)))
    for k in range(n_blocks):
        d = d >> (block @ nc.Diagram.id(nc.Ty(*(weights * (n_blocks - k - 1)))))
    return d


def count_boxes(diagram) -> int:
    """Boxes the cost functor visits: every layer's box (swaps and copies too), inside regions as well."""
    total = 0
    for layer in diagram.inside:
        box = layer.boxes_or_types[1]
        total += 1 + (count_boxes(box.arg) if isinstance(getattr(box, "arg", None), nc.Diagram) else 0)
    return total


def clear_sympy():
    """Empty sympy's expression cache and the cost functor's own memo (absent in older trees)."""
    from sympy.core.cache import clear_cache
    clear_cache()
    for module, name in (("napkin_cat.cost.iocost", "_terms"), ("napkin_cat.cost.live", "_terms"),
                         ("napkin_cat.cost.live", "_expanded")):
        terms = getattr(sys.modules.get(module), name, None)
        if hasattr(terms, "cache_clear"):
            terms.cache_clear()
    for module, name in (("napkin_cat.cost.live", "TOTALS"), ("napkin_cat.cost.boxes", "PIECES"),
                         ("napkin_cat.cost.polynomial", "NUMELS"), ("napkin_cat.cost.scope", "TRIPS")):
        memo = getattr(sys.modules.get(module), name, None)     # the functor's memos by value (absent in older trees)
        if hasattr(memo, "clear"):
            memo.clear()


def stacked(runs: int):
    """The cost functor on 1, 4, 8, 16 stacked blocks (function diagram and unfused algorithm): ms per box.

    "cold": sympy's cache emptied before every run (what a first call on a new diagram costs);
    "warm": the same call repeated.  sympy keeps at most 1000 expressions, so a warm run on a small
    diagram is served from the previous run's results and a large one is not: compare cold rows
    for how the time per box grows with width.
    """
    print(f"{'stacked transformer blocks':28s} {'boxes':>6s} {'cold s':>8s} {'ms/box':>7s} {'vs 4':>5s}  "
          f"{'warm s':>8s} {'ms/box':>7s} {'vs 4':>5s}")
    for form, make in (("function", stacked_blocks), ("unfused", lambda n: nc.unfused(stacked_blocks(n)))):
        base = {}
        for n in (1, 4, 8, 16):
            d = make(n)
            boxes = count_boxes(d)
            row = f"{form + ', ' + str(n) + ' blocks':28s} {boxes:6d}"
            for mode in ("cold", "warm"):
                nc.cost(d)
                t = median_time(lambda: (clear_sympy() if mode == "cold" else None, nc.cost(d)), runs)
                if not isinstance(t, float):
                    row += f" {t}"
                    break
                per_box = 1000 * t / boxes
                if n == 4:
                    base[mode] = per_box
                ratio = f"{per_box / base[mode]:5.2f}" if mode in base else f"{'':5s}"
                row += f" {t:8.4f} {per_box:7.3f} {ratio} "
            print(row)


def beside(n: int, distinct: bool = False):
    """A chain of ``n`` elementwise maps on ``q d`` with ``n`` pass-through wires beside it, half on each side (every
    column crosses them all).  ``distinct``: each pass-through wire of its own size ``p_k`` (a column of ``n + 1``
    distinct monomials), else all ``q d`` (one monomial)."""
    boxes = [nc.elementwise("exp" if k % 2 else "relu", "q d") for k in range(n)]
    shapes = [f"p{k}" if distinct else "q d" for k in range(n)]
    left, right = nc.types(", ".join(shapes[:n // 2])), nc.types(", ".join(shapes[n // 2:]))
    return nc.Diagram.id(left) @ nc.Diagram.id(boxes[0].dom).then(*boxes) @ nc.Diagram.id(right)


def product_tree(n: int):
    """A balanced tree of matrix products of the inputs c_i × c_{i+1}, i < n, level by level (every level's
    products live beside the next level's: each layer changes the column's monomials)."""
    b = nc.Builder(nc.types(", ".join(f"c{i} c{i + 1}" for i in range(n))))
    level = [(x, i, i + 1) for i, x in enumerate(b.inputs)]
    while len(level) > 1:
        nxt = [(b(nc.einsum(f"c{a} c{m}, c{m} c{z} -> c{a} c{z}"), x, y), a, z)
               for (x, a, m), (y, _, z) in zip(level[0::2], level[1::2])]
        level = nxt + (level[-1:] if len(level) % 2 else [])
    return b.build(level[0][0])


def random_shape(n: int, seed: int = 0):
    """A random wide and deep diagram of ``n`` boxes over ``n/6`` axes of distinct sizes: ``n/8`` matrix inputs,
    then maps and contractions of values made lately (most read once, some again later), so values of many distinct
    sizes are live at once and come and go irregularly."""
    import random
    rng = random.Random(seed)
    axes = [f"a{k}" for k in range(max(4, n // 6))]
    ins = [tuple(rng.sample(axes, 2)) for _ in range(max(2, n // 8))]
    b = nc.Builder(nc.types(", ".join(f"{p} {q}" for p, q in ins)))
    vals = list(zip(b.inputs, ins))
    for _ in range(n):
        i = len(vals) - 1 - min(int(rng.expovariate(0.5)), len(vals) - 1)
        x, (p, q) = vals[i]
        partners = [j for j, (_, t) in enumerate(vals) if j != i and q in t and p not in t]
        if rng.random() < 0.5 and partners:
            j = rng.choice(partners)
            y, t = vals[j]
            r = t[0] if t[1] == q else t[1]
            out, t_out, used = b(nc.einsum(f"{p} {q}, {t[0]} {t[1]} -> {p} {r}"), x, y), (p, r), (i, j)
        else:
            out, t_out, used = b(nc.elementwise(rng.choice(["relu", "exp"]), f"{p} {q}"), x), (p, q), (i,)
        for k in sorted(used, reverse=True):
            if rng.random() < 0.8:
                vals.pop(k)
        vals.append((out, t_out))
    return b.build(vals[-1][0])


def axis_sizes(d) -> dict:
    """Every axis of ``d``'s inputs and outputs a number (8 … 24)."""
    names = sorted({a.name for arr in (*d.dom.inside, *d.cod.inside) for a in arr.axes})
    return {name: 8 + 4 * (k % 5) for k, name in enumerate(names)}


def scaling(runs: int):
    """The cost functor's time per box at about 50, 200, 800 and 2,000 boxes, symbolic, at concrete sizes, in the
    search's arithmetic (:class:`~napkin_cat.cost.polynomial.Poly`) and its ``M`` (the max of the symbolic columns),
    and its ratio to the smallest: flat when the functor is linear in the boxes (issue 35, item 4); ``M`` per term of
    the columns (µs: a deep MLP's columns hold a term per layer each, so their size grows as the square of the
    depth, and the max reads each term once).  Cold: every run on a diagram built afresh, sympy's cache and the
    functor's memos by value emptied (a repeat on one diagram is served by them and looks flatter than a first call
    is); CPU seconds, the median of ``runs``.  The live wires beside a layer are a running total
    (:class:`~napkin_cat.cost.live.Live`: a level's sympy sum keeps its terms in order,
    :class:`~napkin_cat.cost.ordered_sum.OrderedSum`; at sizes a number, :class:`~napkin_cat.cost.live_at.LiveAt`)."""
    shapes = {
        "stacked transformer blocks": lambda n: stacked_blocks(max(1, round(n / 48))),
        "n maps beside n wires (q d)": beside,
        "n maps beside n wires (p_k each)": lambda n: beside(n, distinct=True),
        "deep MLP, own width per layer": lambda n: deep_mlp(max(1, n // 2)),
        "unfused deep MLP, own widths": lambda n: nc.unfused(deep_mlp(max(1, n // 8))),
        "balanced tree of matrix products": lambda n: product_tree(n + 1),
        "random wide/deep shape": lambda n: random_shape(max(8, round(n / 1.4))),
    }
    nc.cost(beside(4))                  # the first call's imports and set-up: not a box's time
    nc.cost(beside(4), sizes={"q": 2, "d": 3})
    modes = ("sym", "sized", "poly", "M")
    units = {"M": "M us/term"}
    print(f"{'cost functor, per box (cold)':36s} {'boxes':>6s}" + "".join(
        f" {units.get(m, m + ' ms/box'):>13s} {'vs first':>8s}" for m in modes))
    for name, make in shapes.items():
        base, stopped = {}, set()
        for n in (50, 200, 800, 2000):
            boxes, row = count_boxes(make(n)), ""
            for mode in modes:
                if mode in stopped:
                    row += f" {'-':>13s} {'':8s}"
                    continue
                ts = []
                for _ in range(runs):
                    t = _scaling_run(make(n), mode)
                    ts.append(t)
                    if t > SLOW:
                        stopped.add(mode)       # (one run; the larger sizes not run)
                        break
                per_box = 1000 * statistics.median(ts) / boxes if mode != "M" else \
                    1e6 * statistics.median(ts) / column_terms(make(n))
                base.setdefault(mode, per_box)
                row += f" {per_box:13.3f} {per_box / base[mode]:8.2f}"
            print(f"{name:36s} {boxes:6d}{row}", flush=True)
    print()


def column_terms(d) -> int:
    """The terms of ``d``'s symbolic columns, every level (what its ``M`` reads)."""
    return sum(len(c.args) if c.is_Add else 1 for cols in nc.cost(d).columns.values() for c in cols)


def _scaling_run(d, mode: str) -> float:
    """CPU seconds of one cold run of ``mode`` on ``d``: ``nc.cost`` symbolic (``sym``), at sizes (``sized``), in the
    search's arithmetic (``poly``: :data:`~napkin_cat.cost.polynomial.POLYNOMIAL`), or the symbolic cost's ``M``
    (``M``: the max of its columns, the cost itself not timed)."""
    from napkin_cat.cost.iocost import cost
    from napkin_cat.cost.polynomial import POLYNOMIAL
    sizes = axis_sizes(d) if mode == "sized" else None
    record = nc.cost(d) if mode == "M" else None
    clear_sympy()
    gc.collect()        # (a full collection the allocations before set off, inside a short run, is not its boxes' time)
    t = time.process_time()
    if mode == "sym":
        nc.cost(d)
    elif mode == "sized":
        nc.cost(d, sizes=sizes)
    elif mode == "poly":
        cost(d, arithmetic=POLYNOMIAL)
    else:
        record.M
    return time.process_time() - t


def three_matrices():
    return (nc.einsum("a b, b c -> a c") @ nc.Id("c d")) >> nc.einsum("a c, c d -> a d")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("optimal", "chain", "stacked", "scaling", "kernels", "derived"),
                        help="run one part")
    parser.add_argument("--limit", type=float, default=120.0,
                        help="seconds after which a row of 'derived' is stopped (a baseline may not finish)")
    parser.add_argument("--runs", type=int, default=5, help="runs per stacked-blocks row (median)")
    args = parser.parse_args()
    if os.environ.get("OPENBLAS_NUM_THREADS") != "1":
        print("warning: run with OPENBLAS_NUM_THREADS=1 (see benchmarks/README.md)", file=sys.stderr)
    if args.only in (None, "optimal"):
        optimal_rows()
    if args.only in (None, "chain"):
        chains()
    if args.only in (None, "stacked"):
        stacked(args.runs)
    if args.only in (None, "scaling"):
        scaling(args.runs)
    if args.only in (None, "kernels"):
        kernels()
    if args.only in (None, "derived"):
        derived(args.limit)


def optimal_rows():
    flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    fused = nc.group(nc.group(nc.stream(nc.kernel(three_matrices()), "c", "s_c"), "a", "g_a"), "d", "g_d")
    split = nc.group(nc.group(nc.unfused(three_matrices()), "a", "g_a"), "d", "g_d")
    gqa = nc.group(nc.group(nc.group(nc.stream(nc.library.grouped_query_attention(), "x", "s_x"),
                                     "q", "g_q"), "g", "g_g"), "h", "g_h")
    c_flash, c_mm, c_fused, c_split, c_gqa = (nc.cost(d) for d in (flash, mm, fused, split, gqa))
    cube = {"a": 1024, "b": 1024, "c": 1024}
    chain4 = {"a": 1024, "b": 64, "c": 64, "d": 1024}
    memories = [2 ** 10 + 2048 * k for k in range(32)]

    def sweep():
        for m in memories:
            nc.optimal(c_mm, memory=m, sizes=cube)

    def numeric():
        if not hasattr(nc.Optimum, "has_power_terms"):        # a tree without o.exact: do not solve for minutes
            raise AttributeError("no o.exact in this tree")
        nc.optimal(c_fused).exact.at(a=1024, b=64, c=1024, d=1024, M=20000)    # the symbolic part is memoised

    sweep_time = median_time(sweep, 3)
    rows = [
        ("cost(flash attention)", median_time(lambda: nc.cost(flash))),
        ("optimal(flash attention), symbolic, cold", median_time(lambda: nc.optimal(c_flash), 3, cold=True)),
        ("optimal(tiled matmul), symbolic, cold", median_time(lambda: nc.optimal(c_mm), 3, cold=True)),
        ("optimal(three-matrix chain, fused, g_a g_d), symbolic", median_time(lambda: nc.optimal(c_fused), 3,
                                                                                cold=True)),
        ("optimal(three-matrix chain, two partitions), integer",
         median_time(lambda: nc.optimal(c_split, memory=16384, sizes=chain4), 5, cold=True)),
        ("optimal(tiled matmul), integer 1024^3, M=16384, cold",
         median_time(lambda: nc.optimal(c_mm, memory=16384, sizes=cube), 5, cold=True)),
        ("optimal(tiled matmul), integer, sweep of 32 memory sizes, per call",
         sweep_time / len(memories) if isinstance(sweep_time, float) else sweep_time),
        ("optimal(GQA, 3 tiles), integer, cold",
         median_time(lambda: nc.optimal(c_gqa, memory=20000, sizes={"q": 4096, "x": 4096, "d": 128, "h": 8,
                                                                     "g": 4}), 5, cold=True)),
        ("exact.at(three-matrix chain), numeric real optimum, warm", median_time(numeric, 5)),
    ]
    print(f"{'what':70s} {'median s':>10s}")
    for name, t in rows:
        print(f"{name:70s} {t:10.4f}" if isinstance(t, float) else f"{name:70s} {t}")
    print()


def chains():
    print(f"{'unfused chain boxes':>20s} {'cost median s':>14s} {'ms per box':>12s}")
    for n in (125, 250, 500, 1000):
        d = chain(n)
        t = median_time(lambda: nc.cost(d), 3)
        print(f"{n:20d} {t:14.4f} {1000 * t / n:12.3f}")
    print()


def weighted_chain(n):
    """``x ← x + w_k`` for k = 1 … n on q×d: the weights not yet added are live beside the running sum."""
    b = nc.Builder(nc.types(", ".join(["q d"] + ["d"] * n)))
    x, *ws = b.inputs
    for w in ws:
        x = b(nc.elementwise("add", "q d, d -> q d"), x, w)
    return b.build(x)


def kernels():
    """The cost functor on one kernel of n elementwise boxes, alone, grouped, and streamed: ms per box (cold:
    sympy's cache emptied before every run).  Linear: the time per box stays flat as n grows."""
    shapes = {
        "kernel of n maps": lambda n: nc.kernel(chain_maps(n)),
        "grouped kernel of n maps": lambda n: nc.group(nc.kernel(chain_maps(n)), "q", "g_q"),
        "streamed kernel of n maps": lambda n: nc.stream(nc.kernel(chain_maps(n)), "q", "s_q", sliced=True),
        "kernel of n weighted maps": lambda n: nc.kernel(weighted_chain(n)),
        "streamed kernel of n weighted maps": lambda n: nc.stream(nc.kernel(weighted_chain(n)), "q", "s_q",
                                                                  sliced=True),
    }
    print(f"{'one kernel of n elementwise boxes':36s} {'n':>5s} {'cost ms/box':>12s} {'vs n=50':>8s}")
    for name, make in shapes.items():
        base = None
        for n in (50, 200, 800):
            if "weighted" in name and n > 400:
                n = 400                       # the Builder takes ~9 s to make 800 weighted maps
            d = make(n)
            t = median_time(lambda: (clear_sympy(), nc.cost(d)), 3)
            if not isinstance(t, float):
                print(f"{name:36s} {n:5d} {t}")
                break
            per_box = 1000 * t / n
            base = base or per_box
            print(f"{name:36s} {n:5d} {per_box:12.3f} {per_box / base:8.2f}")
    print()


def chain_maps(n):
    boxes = [nc.elementwise("exp" if k % 2 else "relu", "q d") for k in range(n)]
    return nc.Diagram.id(boxes[0].dom).then(*boxes)


def swiglu():
    b = nc.Builder(nc.types("n e, e f, e f, f o"))
    x, w1, w3, w2 = b.inputs
    gate = b(nc.elementwise("silu", "n f"), b(nc.einsum("n e, e f -> n f"), x, w1))
    h = b(nc.elementwise("mul", "n f, n f -> n f"), gate, b(nc.einsum("n e, e f -> n f"), x, w3))
    return b.build(b(nc.einsum("n f, f o -> n o"), h, w2))


def derived(limit: float):
    """``nc.optimal(r.cost, memory=M, sizes=...)`` on the result of ``nc.derive`` (several kernels separated by
    global memory): the SwiGLU MLP of the issue (4 kernels), the MLP, attention, a transformer block."""
    import signal

    class Stopped(Exception):
        pass

    def alarm(*_):
        raise Stopped
    cases = [
        ("SwiGLU MLP, n=4096 e=1024 f=4096 o=1024, M=4096", swiglu(), dict(n=4096, e=1024, f=4096, o=1024), 4096),
        ("MLP, n=4096 i=1024 f=4096 o=1024, M=4096", nc.library.mlp(), dict(n=4096, i=1024, f=4096, o=1024), 4096),
        ("attention, q=x=4096 d=128, M=2^14", nc.library.attention(), dict(q=4096, x=4096, d=128), 2 ** 14),
        ("transformer block, n=512 e=512 h=8 d=64 f=2048, M=2^14", nc.library.transformer_block(),
         dict(n=512, e=512, h=8, d=64, f=2048), 2 ** 14),
    ]
    print(f"{'nc.optimal on an nc.derive result':58s} {'kernels':>7s} {'derive s':>9s} {'optimal s':>10s}  same H")
    for name, f, sizes, memory in cases:
        t = time.perf_counter()
        r = nc.derive(f, memory=memory, sizes=sizes)
        t_derive = time.perf_counter() - t
        kernels_ = sum(1 for b in r.diagram.boxes if isinstance(b, nc.Region))
        signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, limit)
        t = time.perf_counter()
        try:
            o = nc.optimal(r.cost, memory=memory, sizes=sizes)
            took, same = f"{time.perf_counter() - t:10.3f}", str(o.H == r.H)
        except Stopped:
            took, same = f"> {limit:.0f} (stopped)", "-"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        print(f"{name:58s} {kernels_:7d} {t_derive:9.2f} {took:>10s}  {same}")
    print()


if __name__ == "__main__":
    main()
