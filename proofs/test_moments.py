"""Obligations of the online mean and mean-and-variance forms (``napkin_cat.algorithms.moments``), over random
chunkings: folding the chunks into ``(k, m)`` or ``(k, m, M2)`` from ``(0, 0, 0)`` and finishing gives the mean and
the variance of the concatenation, for rows whose mean dwarfs their spread (where ``E[x²] − E[x]²`` would keep no
digit) as for centred ones::

    finish(B(… B(B((0, 0, 0), x₁), x₂) …, xₙ))  ==  (mean, variance) of x₁ ⧺ … ⧺ xₙ
"""
import numpy as np
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.algorithms.moments import MEAN, MEAN_VARIANCE
from napkin_cat.algorithms.streaming import analyse


def _variance_of_rows():
    b = nc.Builder(nc.types("n d"))
    (X,) = b.inputs
    mu = b(nc.reduce("mean", "n d -> n"), X)
    centred = b(nc.elementwise("sub", "n d, n -> n d"), X, mu)
    return b.build(mu, b(nc.reduce("mean", "n d -> n"), b(nc.elementwise("square", "n d"), centred)))


(MEAN_R,) = analyse(nc.reduce("mean", "n d -> n"), "d").reducers
(VAR_R,) = analyse(_variance_of_rows(), "d").reducers


def _fold(r, X, cuts):
    state = [np.full(X.shape[0], s.init) for s in r.state]
    bounds = [0, *cuts, X.shape[1]]
    for lo, hi in zip(bounds, bounds[1:]):
        out = nc.evaluate(r.step, *state, X[:, lo:hi])
        state = list(out) if isinstance(out, tuple) else [out]
    got = nc.evaluate(r.finish, *state)
    return list(got) if isinstance(got, tuple) else [got]


def _rows(data):
    n, d = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 12))
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, d - 1)), max_size=d - 1))) if d > 1 else []
    rng = np.random.default_rng(data.draw(st.integers(0, 10 ** 6)))
    X = rng.normal(size=(n, d)) * data.draw(st.sampled_from([1.0, 1e-3])) + data.draw(st.sampled_from([0.0, 1e4]))
    return X, cuts


def _assert_mean(got, X):
    """Equal to numpy's mean to the condition of a sum: each partial carries an ulp of the row's largest value, so a
    row whose values cancel to a small mean (centred, mean 10⁻⁴ of values of size 1) is compared absolutely at that
    scale, a row of large values relatively."""
    np.testing.assert_allclose(got, X.mean(axis=1), rtol=1e-13, atol=1e-13 * np.abs(X).max())


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_the_online_mean_is_the_mean_on_any_chunking(data):
    X, cuts = _rows(data)
    (got,) = _fold(MEAN_R, X, cuts)
    _assert_mean(got, X)
    assert MEAN_R.form is MEAN


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_the_online_variance_is_the_variance_on_any_chunking(data):
    X, cuts = _rows(data)
    mean, var = _fold(VAR_R, X, cuts)
    _assert_mean(mean, X)
    want = X.var(axis=1)     # relative to the spread: each value is known to an ulp of the mean only
    assert np.all(np.abs(var - want) <= 1e-6 * want + 1e-12 * X.mean(axis=1) ** 2 * 1e-12), (var, want)
    assert VAR_R.form is MEAN_VARIANCE


def test_sums_of_squares_would_lose_the_variance_the_pairwise_update_keeps():
    """The reason for the form: at mean 10⁴ and spread 10⁻³, E[x²] − E[x]² in float64 keeps no digit."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2, 64)) * 1e-3 + 1e4
    naive = (X ** 2).mean(axis=1) - X.mean(axis=1) ** 2
    _, var = _fold(VAR_R, X, [5, 17, 40])
    assert np.max(np.abs(naive / X.var(axis=1) - 1)) > 1e-3
    assert np.max(np.abs(var / X.var(axis=1) - 1)) < 1e-7


def test_a_mean_over_two_axes_or_a_variance_not_of_its_mean_is_not_matched():
    reasons = []
    for f, axis in ((nc.reduce("mean", "n d e -> n"), "d"),):
        try:
            analyse(f, axis)
        except nc.RewriteError as e:
            reasons.append(str(e))
    assert reasons and "reduces ['d', 'e']" in reasons[0]
