"""The runner compiles each block once into steps (closures over printed index functions, a stream's trips on one
frame): what a run counts is still every trip's own count, as the cost functor says, at tiles of 1 (many small
trips) and at ragged tiles (the last trip's extent rebound), masks from positions included; its values are
``nc.evaluate``'s."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.plan.ir import Range
from napkin_cat.plan.expressions import indexer, number


def _run(alg, sizes, seed=0):
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(tuple(sizes[a] for a in arr.names)) for arr in alg.dom.inside]
    (y, counted) = nc.plan(alg, sizes).run(*xs)
    return xs, y, counted


@pytest.mark.parametrize("b, s_b", [(5, 1), (10, 1), (10, 3), (7, 7)])
def test_a_streams_counts_are_every_trips_own(b, s_b):
    """Counted once instead of per trip, or a FLOP count memoised by shape added once, would fall short of ``H``
    and the FLOPs, which grow with the trips."""
    sizes = {"a": 3, "b": b, "c": 2, "s_b": s_b}
    alg = nc.stream(nc.library.matmul(), "b", "s_b")
    xs, y, counted = _run(alg, sizes)
    c = at(alg, sizes)
    np.testing.assert_allclose(y, xs[0] @ xs[1], rtol=1e-12)
    assert counted.transfers == c.H and counted.flops == c.flops
    assert counted.transfers[1] == 3 * b + b * 2 + 3 * 2     # each trip loads its columns and rows: b of each


@pytest.mark.parametrize("mask", ["causal", "window"])
@pytest.mark.parametrize("tiles", [(1, 1), (4, 3), (5, 2)])
def test_masked_ragged_streams_count_as_the_cost_functor(mask, tiles):
    """The trips of a stream share one frame, its index and tile's extent rebound per trip: a last (ragged) trip
    run at the full tile's extent computes and counts the wrong positions."""
    f = nc.library.causal_attention() if mask == "causal" else nc.library.sliding_window_attention(3)
    sizes = {"q": 11, "x": 11, "d": 3, "g_q": tiles[0], "s_x": tiles[1]}
    alg = nc.group(nc.stream(nc.kernel(f, level=1), "x", "s_x"), "q", "g_q")
    xs, y, counted = _run(alg, sizes, seed=1)
    with np.errstate(all="ignore"):
        want = nc.evaluate(f, *xs, sizes={k: sizes[k] for k in ("q", "x", "d")})
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-12)
    c = at(alg, sizes)
    assert (counted.transfers, counted.flops, counted.peak) == (c.H, c.flops, {l: m for l, m in c.M.items() if l})


def test_an_index_function_is_numbers_of_its_ranges():
    """The printed index of a view bounds each axis as :func:`number` evaluates its range, exact rationals and
    floors included, and a symbol named as a builtin or a keyword read as itself."""
    i, g, n, lam, mn = sympy.symbols("i g n lambda min", integer=True, nonnegative=True)
    start = sympy.floor(sympy.Rational(4, 3) * i + sympy.Rational(1, 3)) + lam
    rng = Range(start, sympy.Min(g, mn), n)
    for env in ({i: 3, g: 4, n: 40, lam: 0, mn: 9}, {i: 7, g: 3, n: 11, lam: 1, mn: 2}):
        lo = number(rng.start, env)
        want = slice(lo, min(lo + number(rng.tile, env), number(rng.end, env)))
        assert indexer((None, rng))(env) == (slice(None), want, ...)
    assert indexer((None, rng))({i: 7, g: 3, n: 11, lam: 1, mn: 2})[1] == slice(10, 11)     # the end cuts the tile
