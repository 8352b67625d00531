"""The law of skipped trips (``napkin_cat.algorithms.skipping``), and of the interval arithmetic it rests on.

1. **Intervals bound the values** (``napkin_cat.algorithms.intervals``): for a mask built from positions by
   shifts, differences, ``abs``, comparisons and logic, on any tile of the axes it reads::

       always(m) ⟹ m[e]        m[e] ⟹ possibly(m)        for every element e of the tile

2. **A skipped trip is neutral**: when a mask is never true on a stream's slice, the trip leaves every
   reducer's state as it is (the online SoftMax's μ, z, o; a sum's 0; log-sum-exp's μ, z), so::

       run with skips == run without skips         (at any sizes and tiles, ragged included)

   and a run that skips moves exactly what ``nc.cost(d, sizes=...)`` counts.
"""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.algorithms.intervals import evaluate as intervals
from napkin_cat.syntax.interval import Truth
from napkin_cat.syntax.wiring import trace_values

# ---------------------------------------------------------------------------------------------- 1. intervals


def _mask(kind, w):
    """A mask over q × x from positions: the causal, windowed, banded and shifted ones, and their logic."""
    b = nc.Builder(nc.Ty())
    qi, xi = b(nc.position("q")), b(nc.position("x"))
    if kind == "causal":
        m = b(nc.compare("le", "x, q -> q x"), xi, qi)
    elif kind == "window":
        m = b(nc.library.window_mask(w), )
    elif kind == "abs":
        diff = b(nc.elementwise("sub", "q, x -> q x", dtype="int32"), qi, xi)
        m = b(nc.compare("le", "q x, q x -> q x"), b(nc.elementwise("abs", "q x", dtype="int32"), diff),
              b(nc.elementwise("shift", "q x", const=w, dtype="int32"),
                b(nc.elementwise("scale", "q x", const=0, dtype="int32"), diff)))
    elif kind == "strict":
        m = b(nc.compare("gt", "q, x -> q x"), b(nc.elementwise("shift", "q", const=w, dtype="int32"), qi), xi)
    elif kind == "ne":
        m = b(nc.compare("ne", "q, x -> q x"), qi, xi)
    else:                                                   # not (causal) or (x ≥ q + w)
        c = b(nc.logical("not", "q x"), b(nc.compare("le", "x, q -> q x"), xi, qi))
        m = b(nc.logical("or", "q x, q x -> q x"), c, b(nc.compare("ge", "x, q -> q x"), xi,
                                                        b(nc.elementwise("shift", "q", const=w, dtype="int32"), qi)))
    return b.build(m)


@pytest.mark.parametrize("kind", ["causal", "window", "abs", "strict", "ne", "logic"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_intervals_bound_the_mask_on_every_tile(kind, data):
    q, x = data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12))
    w = data.draw(st.integers(0, 4))
    mask = nc.substitute(_mask(kind, w), q=q, x=x)
    whole = nc.evaluate(mask).astype(bool)
    q0, qn = data.draw(st.integers(0, q - 1)), data.draw(st.integers(1, q))
    x0, xn = data.draw(st.integers(0, x - 1)), data.draw(st.integers(1, x))
    qn, xn = min(qn, q - q0), min(xn, x - x0)
    tiles = {"q": (q0, qn), "x": (x0, xn)}
    ops, _, (out,) = trace_values(mask)
    truth = intervals(ops, lambda a, n: tiles[a]).get(out)
    assert isinstance(truth, Truth)
    tile = whole[q0:q0 + qn, x0:x0 + xn]
    if truth.always:
        assert tile.all(), (tiles, tile)
    if not truth.possibly:
        assert not tile.any(), (tiles, tile)


def test_intervals_decide_the_causal_tiles_exactly():
    """Causal tiles: never true strictly above the diagonal, always true strictly below, mixed on it."""
    ops, _, (out,) = trace_values(nc.substitute(_mask("causal", 0), q=8, x=8))
    seen = {}
    for i, j in itertools.product(range(4), range(4)):
        t = intervals(ops, lambda a, n: (2 * i, 2) if a == "q" else (2 * j, 2))[out]
        seen[(i, j)] = (bool(t.always), bool(t.possibly))
    assert all(seen[(i, j)] == ((True, True) if j < i else (False, True) if j == i else (False, False))
               for i, j in seen)


# ---------------------------------------------------------------------------------------------- 2. skips


def _masked_sum():
    """Σ_x where(x ≤ q, v, 0): a monoid reducer whose masked part is its identity."""
    b = nc.Builder(nc.types("q x"))
    (v,) = b.inputs
    m = b(nc.library.causal_mask())
    return b.build(b(nc.reduce("sum", "q x -> q"), b(nc.where("q x, q x -> q x", other=0.0), m, v)))


def _masked_logsumexp():
    b = nc.Builder(nc.types("q x"))
    (v,) = b.inputs
    m = b(nc.library.window_mask(1))
    return b.build(b(nc.reduce("logsumexp", "q x -> q"), b(nc.where("q x, q x -> q x"), m, v)))


def _union_attention():
    """``(x ≤ q) or (x ≥ q + 3)``: a union of half-planes (its symbolic count is every trip; the runs skip)."""
    b = nc.Builder(nc.Ty())
    qi, xi = b(nc.position("q")), b(nc.position("x"))
    far = b(nc.compare("le", "q, x -> q x"), b(nc.elementwise("shift", "q", const=3, dtype="int32"), qi), xi)
    return nc.library.masked_attention(b.build(b(nc.logical("or", "q x, q x -> q x"),
                                                 b(nc.compare("le", "x, q -> q x"), xi, qi), far)))


def _difference_attention():
    """``x ≤ q and not |q − x| ≤ 1``: causal minus a window."""
    b = nc.Builder(nc.Ty())
    qi, xi = b(nc.position("q")), b(nc.position("x"))
    outside = b(nc.logical("not", "q x"), b(nc.library.window_mask(1)))
    return nc.library.masked_attention(b.build(b(nc.logical("and", "q x, q x -> q x"),
                                                 b(nc.compare("le", "x, q -> q x"), xi, qi), outside)))


ALGORITHMS = {
    "causal": (lambda: nc.library.causal_attention(), "qkv"),
    "union": (_union_attention, "qkv"),
    "difference": (_difference_attention, "qkv"),
    "window": (lambda: nc.library.sliding_window_attention(2), "qkv"),
    "alibi": (lambda: nc.library.alibi_attention(0.25), "qkv"),
    "document": (lambda: nc.library.document_attention(causal=True), "qkv+seg"),
    "masked sum": (_masked_sum, "v"),
    "masked logsumexp": (_masked_logsumexp, "v"),
}


def _inputs(kind, rng, q, x, d):
    if kind == "v":
        return [rng.normal(size=(q, x))]
    qkv = [rng.normal(size=(q, d)), rng.normal(size=(x, d)), rng.normal(size=(x, d))]
    if kind == "qkv+seg":
        qkv += [np.sort(rng.integers(0, 3, q)), np.sort(rng.integers(0, 3, x))]
    return qkv


@pytest.mark.parametrize("name", list(ALGORITHMS))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_skipping_changes_nothing_and_the_run_moves_what_the_cost_counts(name, data):
    make, kind = ALGORITHMS[name]
    f = make()
    alg = nc.group(nc.stream(f, "x", "s_x"), "q", "g_q")
    q, x, d = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 11)), data.draw(st.integers(1, 3))
    g, s = data.draw(st.integers(1, q)), data.draw(st.integers(1, x))
    rng = np.random.default_rng(data.draw(st.integers(0, 10 ** 6)))
    xs = _inputs(kind, rng, q, x, d)
    sizes = {"g_q": g, "s_x": s}
    with np.errstate(invalid="ignore", divide="ignore"):
        skipped, every = {}, {}
        got = nc.evaluate(alg, *xs, sizes=sizes, counters=skipped)
        full = nc.evaluate(alg, *xs, sizes=sizes, counters=every, skip=False)
        want = nc.evaluate(f, *xs)
    np.testing.assert_allclose(got, full, rtol=1e-12, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)
    named = {"q": q, "x": x, "g_q": g, "s_x": s, **({"d": d} if kind != "v" else {})}
    assert nc.cost(alg, sizes=named).H == skipped
    assert sum(skipped.values()) <= sum(every.values())


def test_a_causal_stream_skips_the_tiles_above_the_diagonal():
    """q = x = 8, g_q = s_x = 2: per q-block i the x-blocks 0 … i run (10 of 16), each loading K and V."""
    alg = nc.group(nc.stream(nc.library.causal_attention(q=8, x=8, d=1), "x", "s_x"), "q", "g_q")
    rng = np.random.default_rng(0)
    skipped, every = {}, {}
    xs = [rng.normal(size=(8, 1)) for _ in range(3)]
    nc.evaluate(alg, *xs, sizes={"g_q": 2, "s_x": 2}, counters=skipped)
    nc.evaluate(alg, *xs, sizes={"g_q": 2, "s_x": 2}, counters=every, skip=False)
    q_and_o = 8 + 8
    assert skipped[1] - q_and_o == 10 * 2 * 2 and every[1] - q_and_o == 16 * 2 * 2
