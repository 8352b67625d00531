"""The optimum over the tiles of every group partition, with or without a closed form (Soundness item 10).

The three-matrix chain ``(A B) C`` is the running example: fused into one kernel, streamed over the
inner axis ``c`` and grouped over both output axes, its Lagrange system has no closed form (the
large-M form holds ``sqrt(M + bc)``); unfused into two kernels, it has two group partitions
(``g_a`` in both, ``g_d`` in the second). Independent routes: plain Python loops over the divisors
in exact ``Fraction`` arithmetic, and a dense grid over real tiles.
"""
import itertools
from fractions import Fraction

import numpy as np
import pytest
import sympy

import napkin_cat as nc

S = nc.symbol
a, b, c, d, M, g_a, g_d = (S(n) for n in ("a", "b", "c", "d", "M", "g_a", "g_d"))


def chain():
    return (nc.einsum("a b, b c -> a c") @ nc.Id("c d")) >> nc.einsum("a c, c d -> a d")


def fused_chain():
    """One kernel, streamed over c (s_c), grouped over a (g_a) and d (g_d)."""
    return nc.group(nc.group(nc.stream(nc.kernel(chain()), "c", "s_c"), "a", "g_a"), "d", "g_d")


def grouped_query_attention():
    """Three tiles in one nest: g_q, g_g, g_h (H sees g_q and g_g only through their product)."""
    att = nc.stream(nc.library.grouped_query_attention(), "x", "s_x")
    return nc.group(nc.group(nc.group(att, "q", "g_q"), "g", "g_g"), "h", "g_h")


def two_partitions():
    """Two kernels: (A B) grouped over a; (· C) grouped over a and d."""
    return nc.group(nc.group(nc.unfused(chain()), "a", "g_a"), "d", "g_d")


def as_fraction(expr) -> Fraction:
    r = sympy.nsimplify(expr)
    return Fraction(int(r.p), int(r.q))


def brute_force(cost, sizes, memory):
    """min H over divisor tiles of every group, in exact arithmetic (no call into the optimiser)."""
    env = {S(k): v for k, v in sizes.items()}
    tiles, fulls = [], {}
    for grp in cost.groups:
        for tile, full in zip(grp.tiles, grp.fulls):
            if tile not in fulls:
                tiles.append(tile)
                fulls[tile] = int(sympy.sympify(full).subs(env))
    H = cost.H[1].subs(env)
    cols = [col.subs(env) for col in cost.columns[1]]
    best = None
    for combo in itertools.product(*([g for g in range(1, fulls[t] + 1) if fulls[t] % g == 0] for t in tiles)):
        at = dict(zip(tiles, combo))
        if all(col.subs(at) <= memory for col in cols):
            h = as_fraction(H.subs(at))
            if best is None or h < best[0]:
                best = (h, at)
    return best


def largest_g_d(columns, env, g_a_values, memory, full):
    """For each g_a, the largest g_d that every column ``k(g_a)·g_d + r(g_a)`` admits (each is linear in g_d)."""
    out = np.full_like(g_a_values, float(full))
    for col in columns:
        col = sympy.expand(col.subs(env))
        assert sympy.degree(col, g_d) <= 1, col
        k, r = (np.broadcast_to(sympy.lambdify(g_a, col.coeff(g_d, p))(g_a_values), g_a_values.shape)
                for p in (1, 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(k > 0, (memory - r) / k, np.where(r <= memory, np.inf, -np.inf))
        out = np.minimum(out, bound)
    return out


def test_fused_chain_symbolic_optimum_covers_all_tiles_without_closed_form():
    """No closed form: the exact optimum is returned as its KKT system and a numeric function."""
    cost = nc.cost(fused_chain())
    o = nc.optimal(cost, memory="M")
    values = {"a": 512, "b": 64, "c": 512, "d": 512, "M": 20000}
    H, tiles = o.exact.at(**values)
    env = {S(k): v for k, v in values.items()} | {S("s_c"): 1}
    assert set(tiles) == {g_a, g_d} and all(t > 1 for t in tiles.values())
    for col in cost.columns[1]:
        assert float(col.subs(env).subs(tiles)) <= 20000 * (1 + 1e-9), col
    h = sympy.lambdify((g_a, g_d), cost.H[1].subs(env))
    assert abs(h(*tiles.values()) - H) <= 1e-9 * H
    # second route: H falls as g_d grows, so for each g_a on a fine grid the best g_d is the largest one
    # that every column (and g_d ≤ d) admits
    g = np.exp(np.linspace(0, np.log(512), 40001))
    g_d_max = largest_g_d(cost.columns[1], env, g, 20000, 512)
    ok = g_d_max >= 1
    best = h(g[ok], g_d_max[ok]).min()
    assert H <= best * (1 + 1e-9) and best <= H * (1 + 1e-6)
    # the solution set is a sympy object over both tiles
    assert {g_a, g_d} <= o.exact.solution_set.free_symbols | set(o.exact.solution_set.sym)
    # the large-M form (the constraint cut to b·g_a + g_a·g_d) holds sqrt(M + bc): a relaxation, so below H*
    assert sympy.sqrt(M + b * c) in o.H.atoms(sympy.Pow)
    assert float(o.H.subs(env)) <= H
    with pytest.raises(nc.NapkinError, match="is not a sum of powers of M: it has no power terms"):
        o.terms


@pytest.mark.parametrize("build, sizes, memory", [
    (two_partitions, {"a": 64, "b": 32, "c": 48, "d": 96}, 3000),
    (fused_chain, {"a": 96, "b": 16, "c": 64, "d": 80, "s_c": 1}, 2500),
    (grouped_query_attention, {"q": 64, "x": 96, "d": 16, "g": 4, "h": 6, "s_x": 1}, 1500),
])
def test_integer_optimum_over_the_tiles_of_every_group(build, sizes, memory):
    cost = nc.cost(build())
    o = nc.optimal(cost, memory=memory, sizes={k: v for k, v in sizes.items() if not k.startswith("s_")})
    h, tiles = brute_force(cost, sizes, memory)
    assert as_fraction(o.H) == h
    chosen = {t: int(o.sizes[t]) for t in tiles}
    assert as_fraction(cost.H[1].subs({S(k): v for k, v in sizes.items()}).subs(chosen)) == h
    assert all(col.subs({S(k): v for k, v in sizes.items()}).subs(chosen) <= memory for col in cost.columns[1])


def test_two_partitions_symbolic_optimum_leaves_no_tile_free():
    o = nc.optimal(nc.cost(two_partitions()), memory="M")
    assert not (o.H.free_symbols & {g_a, g_d}), o.H
    assert set(o.sizes) >= {g_a, g_d}


def test_two_partitions_exact_optimum_at_numbers_fits_every_column():
    cost = nc.cost(two_partitions())
    o = nc.optimal(cost, memory="M")
    values = {"a": 4096, "b": 64, "c": 96, "d": 4096, "M": 30000}
    H, tiles = o.exact.at(**values)
    env = {S(k): v for k, v in values.items()}
    assert max(float(col.subs(env).subs(tiles)) for col in cost.columns[1]) <= 30000 * (1 + 1e-9)
    assert abs(float(cost.H[1].subs(env).subs(tiles)) - H) <= 1e-9 * H
    # never better than the large-M relaxation, never worse than the best integer tiling
    sizes = {k: v for k, v in values.items() if k != "M"}
    assert float(o.H.subs(env)) <= H <= float(nc.optimal(cost, memory=30000, sizes=sizes).H)


def test_a_tile_no_transfer_depends_on_is_one():
    """Grouping an elementwise map saves nothing: the least memory, tiles of 1, in every route."""
    cost = nc.cost(nc.group(nc.kernel(nc.elementwise("exp", "q d")), "q", "g_q"))
    o = nc.optimal(cost, memory="M")
    assert o.exact_sizes == {S("g_q"): 1} and o.exact_H == cost.H[1]
    assert nc.optimal(cost, memory=1000, sizes={"q": 64, "d": 8}).sizes == {"q": 64, "d": 8, S("g_q"): 1}
