"""Obligation of the online log-sum-exp form (``napkin_cat.algorithms.online``), over random chunkings::

    μ + log z  after  B(… B(B((−∞, 0), x₁), x₂) …, xₙ)  ==  log Σ exp(x₁ ⧺ … ⧺ xₙ)

with logits up to ±1e4, randomly masked (−∞) entries, rows masked over the whole first chunk, and rows
masked everywhere (−∞ on both sides); and a chunk of −∞ leaves the state as it is (the form's ``neutral``).
"""
import numpy as np
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.algorithms.online import LOGSUMEXP
from napkin_cat.algorithms.streaming import analyse

F = nc.reduce("logsumexp", "q x -> q")
(REDUCER,) = analyse(F, "x").reducers


def _fold(X, cuts):
    state = [np.full(X.shape[0], s.init) for s in REDUCER.state]
    bounds = [0, *cuts, X.shape[1]]
    for lo, hi in zip(bounds, bounds[1:]):
        state = list(nc.evaluate(REDUCER.step, *state, X[:, lo:hi]))
    return nc.evaluate(REDUCER.finish, *state), state


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_online_logsumexp_folds_to_logsumexp_on_any_chunking(data):
    q, x = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 10))
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, x - 1)), max_size=x - 1))) if x > 1 else []
    rng = np.random.default_rng(data.draw(st.integers(0, 10 ** 6)))
    X = rng.normal(size=(q, x)) * data.draw(st.sampled_from([1.0, 1e2, 1e4]))
    X[rng.random(X.shape) < data.draw(st.sampled_from([0.0, 0.3, 0.7]))] = -np.inf
    if cuts and data.draw(st.booleans()):
        X[: max(1, q // 2), : cuts[0]] = -np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        got, _ = _fold(X, cuts)
        m = np.max(X, axis=1)
        safe = np.where(np.isfinite(m), m, 0.0)
        want = np.log(np.sum(np.exp(X - safe[:, None]), axis=1)) + safe
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)
    assert REDUCER.form is LOGSUMEXP


def test_a_chunk_of_minus_infinity_leaves_the_state_as_it_is():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3, 6))
    _, before = _fold(X, [])
    after = list(nc.evaluate(REDUCER.step, *before, np.full((3, 4), -np.inf)))
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    assert LOGSUMEXP.neutral([-np.inf]) and not LOGSUMEXP.neutral([0.0]) and not LOGSUMEXP.neutral([None])
