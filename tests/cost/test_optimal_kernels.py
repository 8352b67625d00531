"""``nc.optimal`` on an algorithm of several kernels: kernels separated by global memory are independent problems.

Each kernel has its own tiles, its own columns (what it holds while it runs) and its own transfers, so the
integer optimum is the sum of the kernels' optima, each within the memory limit, and the search scores the
sum of their candidate grids, not the product (issue 20: the 4-kernel SwiGLU MLP that ``nc.derive`` returns
took over 900 s; the benchmark ``benchmarks/bench_cost.py --only kernels`` times it).
"""
from __future__ import annotations

import itertools

import sympy

import napkin_cat as nc
from napkin_cat.cost.integer_search import divisors
from napkin_cat.syntax.axis import symbol


def swiglu():
    b = nc.Builder(nc.types("n e, e f, e f, f o"))
    x, w1, w3, w2 = b.inputs
    gate = b(nc.elementwise("silu", "n f"), b(nc.einsum("n e, e f -> n f"), x, w1))
    h = b(nc.elementwise("mul", "n f, n f -> n f"), gate, b(nc.einsum("n e, e f -> n f"), x, w3))
    return b.build(b(nc.einsum("n f, f o -> n o"), h, w2))


def test_the_optimum_of_several_kernels_is_the_sum_of_theirs():
    sizes, memory = {"n": 64, "e": 32, "f": 64, "o": 32}, 512
    r = nc.derive(swiglu(), memory=memory, sizes=sizes)
    kernels = [b for b in r.diagram.boxes if isinstance(b, nc.Region)]
    assert len(kernels) >= 2        # the up-projection is one kernel since it loads X once (issue 21), then W₂
    o = nc.optimal(r.cost, memory=memory, sizes=sizes)
    alone = [nc.optimal(nc.cost(nc.Diagram.id(k.dom).then(k)), memory=memory, sizes=sizes) for k in kernels]
    assert o.H == sum(a.H for a in alone) == r.H
    assert o.exact_sizes == {t: g for a in alone for t, g in a.exact_sizes.items()}


def test_it_is_the_joint_optimum():
    """Brute force over every tiling of the two kernels of a chain of products, each grouped along two axes."""
    first = nc.group(nc.group(nc.unfused(nc.einsum("a b, b c -> a c")), "a", "g_a"), "c", "g_c")
    second = nc.group(nc.group(nc.unfused(nc.einsum("a c, c d -> a d")), "a", "h_a"), "d", "g_d")
    d = (first @ nc.Id("c d")) >> second
    c, sizes, memory = nc.cost(d), {"a": 12, "b": 4, "c": 6, "d": 8}, 60
    tiles, axes = zip(*{t: a for g in c.groups for t, a in zip(g.tiles, g.axes)}.items())
    env = {symbol(k): v for k, v in sizes.items()}
    H, cols = c.H[1].subs(env), [col.subs(env) for col in c.columns[1]]
    values = [divisors(sizes[a]) for a in axes]
    best = min(H.subs(dict(zip(tiles, g))) for g in itertools.product(*values)
               if all(col.subs(dict(zip(tiles, g))) <= memory for col in cols))
    assert len(tiles) == 4 and nc.optimal(c, memory=memory, sizes=sizes).H == best
    assert isinstance(best, sympy.Integer)
