"""The cost of masked algorithms counts only the trips that run: symbolically where the mask is affine in the
positions, exactly at concrete sizes (ragged too), and equal to what the plan runner counts."""
import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.trips import averaged, per_tile

q, x, d, g, s, w = (nc.symbol(n) for n in ("q", "x", "d", "g_q", "s_x", "w"))


def flash(att):
    return nc.group(nc.stream(att, "x", "s_x"), "q", "g_q")


def test_causal_transfers_are_the_sum_over_q_blocks_of_the_x_blocks_at_or_below_the_diagonal():
    c = nc.cost(flash(nc.library.causal_attention()))
    H = c.H[1].subs({s: g, x: q})              # g_q = s_x, q = x
    blocks = q / g
    i = sympy.Symbol("i", integer=True, nonnegative=True)
    kv = sympy.summation((i + 1) * 2 * g * d, (i, 0, blocks - 1))   # x-blocks 0 … i of q-block i: K and V
    assert sympy.simplify(H - (2 * q * d + kv)) == 0                  # Q loaded, O stored once


def test_causal_costs_about_half_of_unmasked_transfers_and_flops():
    masked, full = nc.cost(flash(nc.library.causal_attention())), nc.cost(flash(nc.library.attention()))
    at = {x: q, s: g}
    assert sympy.limit(masked.H[1].subs(at) / full.H[1].subs(at), q, sympy.oo) == sympy.Rational(1, 2)
    assert sympy.limit(masked.flops["tensor"].subs(at) / full.flops["tensor"].subs(at), q, sympy.oo) == \
        sympy.Rational(1, 2)


def test_a_sliding_window_makes_the_transfers_linear_in_the_sequence():
    c = nc.cost(flash(nc.library.sliding_window_attention(64)))
    H = sympy.expand(c.H[1])
    assert sympy.degree(H, q) == 1 and not H.has(x)
    assert sympy.degree(sympy.expand(nc.cost(flash(nc.library.attention())).H[1]), x) == 1   # q·x: quadratic
    assert sympy.expand(H.subs(q, 2 * q) - 2 * H) == 0


@pytest.mark.parametrize("make", [nc.library.causal_attention, lambda **k: nc.library.sliding_window_attention(3, **k),
                                  lambda **k: nc.library.document_attention(causal=True, **k)])
@pytest.mark.parametrize("sizes", [{"q": 8, "x": 8, "d": 2, "g_q": 2, "s_x": 2},
                                   {"q": 9, "x": 11, "d": 3, "g_q": 4, "s_x": 3},
                                   {"q": 5, "x": 13, "d": 1, "g_q": 5, "s_x": 1}])
def test_the_cost_at_sizes_is_what_the_runner_counts_skipped_tiles_included(make, sizes):
    alg = flash(make())
    p = nc.plan(alg, sizes)
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(sizes["q"], sizes["d"])), rng.normal(size=(sizes["x"], sizes["d"])),
          rng.normal(size=(sizes["x"], sizes["d"]))]
    if len(alg.dom) == 5:
        xs += [np.sort(rng.integers(0, 3, sizes["q"])), np.sort(rng.integers(0, 3, sizes["x"]))]
    with np.errstate(invalid="ignore"):
        _, counted = p.run(*xs)
    c = nc.cost(alg, sizes=sizes)
    assert c.H == counted.transfers and c.flops == counted.flops and c.H_bytes == counted.bytes
    unmasked = nc.cost(flash(nc.library.attention()), sizes=sizes)
    assert c.H[1] < unmasked.H[1]


def test_the_symbolic_count_is_exact_where_the_slices_line_up():
    alg = flash(nc.library.causal_attention())
    for sizes in ({"q": 16, "x": 16, "d": 2, "g_q": 4, "s_x": 4}, {"q": 16, "x": 16, "d": 2, "g_q": 8, "s_x": 2},
                  {"q": 12, "x": 20, "d": 3, "g_q": 4, "s_x": 1}):
        at = nc.cost(alg, sizes=sizes)
        symbolic = nc.cost(alg).H[1].subs({nc.symbol(k): v for k, v in sizes.items()})
        assert at.H[1] == symbolic, sizes


def test_the_count_of_one_tile_and_its_average():
    i = sympy.Symbol("i_q", integer=True, nonnegative=True)
    X = sympy.Symbol("X")
    causal = per_tile(sympy.Le(X, i * g + g - 1), X, s, (0, x))
    assert causal == g * (i + 1) / s
    band = per_tile(sympy.And(sympy.Le(i * g - w, X), sympy.Le(X, i * g + g - 1 + w)), X, s, (0, x))
    assert sympy.simplify(band - (g + 2 * w) / s) == 0
    assert averaged(causal, [(i, q / g)]) == (g + q) / (2 * s)
    assert per_tile(sympy.Or(sympy.Le(X, 3), sympy.Ge(X, 9)), X, s, (0, x)) is None     # two bands: not counted
