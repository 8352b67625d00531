"""Obligation of the online-softmax accumulator form (registered by ``rewrites.softmax``).

For the form read at SoftMax · v (the function) and at SoftMax₁(x, Initialize(x)) · v / z (the rule's
right-hand side), over random chunkings of the streamed axis::

    finish(B(… B(B(init, x₁), x₂) …, xₙ)) == SoftMax(x₁ ++ … ++ xₙ) · v

with logits up to ±1e4, randomly masked (−∞) entries, rows masked in the first chunk, and a
fully masked first chunk.  Fully masked rows give NaN in both (0/0), as the unsplit SoftMax does.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.algorithms.streaming import analyse
from rewrites.softmax import softmax_contraction_to_unscaled


def _function():
    b = nc.Builder(nc.types("q x, x d"))
    S, V = b.inputs
    P = b(nc.softmax("q x", over="x", beta=0.5), S)
    return b.build(b(nc.einsum("q x, x d -> q d"), P, V))


def _forms():
    f = _function()
    return {"softmax": (f, analyse(f, "x")),
            "unscaled": (f, analyse(softmax_contraction_to_unscaled.apply(f), "x"))}


FORMS = _forms()


def _fold(plan, S, V, cuts):
    (r,) = plan.reducers
    assert r.form.name == "softmax_contraction_to_unscaled"
    state = [np.full((S.shape[0],) + ((V.shape[1],) if s.name == "o" else ()), s.init) for s in r.state]
    bounds = [0, *cuts, S.shape[1]]
    for lo, hi in zip(bounds, bounds[1:]):
        out = nc.evaluate(r.step, *state, S[:, lo:hi], V[lo:hi])
        state = list(out) if isinstance(out, tuple) else [out]
    out = nc.evaluate(r.finish, *state)
    if isinstance(out, tuple):  # the rule's form leaves (o, z, μ) to its tail, the division by z
        return out[0] / out[1][:, None]
    return out


@pytest.mark.proves("softmax_contraction_to_unscaled")
@pytest.mark.parametrize("where", list(FORMS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_online_form_folds_to_softmax_contraction_on_any_chunking(where, data):
    f, plan = FORMS[where]
    q, x, d = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 9)), data.draw(st.integers(1, 3))
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, x - 1)), max_size=x - 1))) if x > 1 else []
    rng = np.random.default_rng(data.draw(st.integers(0, 10 ** 6)))
    S = rng.normal(size=(q, x)) * data.draw(st.sampled_from([1.0, 1e2, 1e4]))
    S[rng.random(S.shape) < data.draw(st.sampled_from([0.0, 0.2, 0.5]))] = -np.inf
    if cuts and data.draw(st.booleans()):
        S[: max(1, q // 2), : cuts[0]] = -np.inf  # some rows masked over the whole first chunk
    V = rng.normal(size=(x, d))
    with np.errstate(invalid="ignore", divide="ignore"):
        want = nc.evaluate(f, S, V)
        got = _fold(plan, S, V, cuts)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.proves("softmax_contraction_to_unscaled")
@pytest.mark.parametrize("where", list(FORMS))
def test_a_fully_masked_first_chunk_gives_no_nan(where):
    f, plan = FORMS[where]
    rng = np.random.default_rng(1)
    S, V = rng.normal(size=(3, 8)) * 1e4, rng.normal(size=(8, 2))
    S[:, :4] = -np.inf
    got = _fold(plan, S, V, [4])
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, nc.evaluate(f, S, V), rtol=1e-12)


@pytest.mark.proves("softmax_contraction_to_unscaled")
def test_streamed_flash_attention_runs_the_form_with_extreme_logits():
    """The same obligation end to end: the Stream's fold (semantics.regions) on the derived algorithm."""
    from rewrites import flash_attention
    att = nc.library.attention()
    flash = flash_attention(att).diagram
    rng = np.random.default_rng(7)
    Q, K, V = rng.normal(size=(6, 4)) * 100, rng.normal(size=(12, 4)) * 100, rng.normal(size=(12, 4))
    got = nc.evaluate(flash, Q, K, V, sizes={"g_q": 3, "s_x": 4})
    np.testing.assert_allclose(got, nc.evaluate(att, Q, K, V), rtol=1e-9, atol=1e-12)
