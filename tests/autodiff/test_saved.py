"""``nc.grad(f, saved=True, aux=k)``: the gradient reads f's saved outputs.  Checked against the unsaved gradient
and central finite differences, with the two laws of :mod:`napkin_cat.autodiff.saved` seen in the diagram (where
their conditions hold) and not applied (where they do not), the library forward's log-sum-exp against numpy, and
the typed errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.wiring import trace_values

RNG = np.random.default_rng(11)


def kinds(d):
    return [box.data.kind for box, _, _ in trace_values(d)[0] if getattr(box, "data", None) is not None]


def reduce_inputs(d):
    """The axes of what every ``reduce_sum`` of ``d`` reduces."""
    return [tuple(box.dom.inside[0].names) for box, _, _ in trace_values(d)[0]
            if getattr(getattr(box, "data", None), "kind", None) == "reduce_sum"]


def lse_rows(S, beta):
    """logsumexp over the last axis of β·S, from the mathematics (rows of −∞ give −∞)."""
    m = np.max(beta * S, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.where(np.isfinite(m), m, 0) + np.log(np.sum(np.exp(beta * S - np.where(np.isfinite(m), m, 0)),
                                                                axis=-1, keepdims=True)))[..., 0]


def softmax_then(z_sig, *, lse_scale=1.0, lse_over="x", beta=0.5, sizes=dict(q=3, x=4, d=2)):
    """S ↦ (z = contract(SoftMax_β over x (S), V), L = logsumexp over ``lse_over`` of (lse_scale·β·S))."""
    b = nc.Builder(nc.types("q x, x d", **sizes))
    S, V = b.inputs
    P = b(nc.softmax("q x", over="x", beta=beta, **{k: sizes[k] for k in "qx"}), S)
    z = b(nc.einsum(f"q x, x d -> {z_sig}", **sizes), P, V)
    kept = " ".join(n for n in "q x".split() if n != lse_over)
    scaled = b(nc.elementwise("scale", "q x", const=lse_scale * beta, **{k: sizes[k] for k in "qx"}), S)
    L = b(nc.reduce("logsumexp", f"q x -> {kept}", **{k: sizes[k] for k in "qx"}), scaled)
    return b.build(z, L)


def check_saved_equals_unsaved(f, xs, wrt=None):
    outs = nc.evaluate(f, *xs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    ybar = [RNG.standard_normal(o.shape) for o in outs[:1]]
    want = nc.evaluate(nc.grad(f, wrt, aux=len(outs) - 1), *xs, *ybar)
    got = nc.evaluate(nc.grad(f, wrt, saved=True, aux=len(outs) - 1), *xs, *outs, *ybar)
    for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("z_sig", ["q d", "d q"])
def test_the_adjoint_identity_pairs_over_the_contractions_output(z_sig):
    """Σ_x ȳ⊙P with ȳ = z̄Vᵀ becomes Σ_d z̄⊙z: the only reduce_sum reads a q×d product, not a q×x one."""
    f = softmax_then(z_sig)
    g = nc.grad(f, saved=True, aux=1)
    assert reduce_inputs(g) == [tuple(z_sig.split())]
    assert ("q", "x") in reduce_inputs(nc.grad(f, aux=1))
    check_saved_equals_unsaved(f, [RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))])


@pytest.mark.parametrize("z_sig, why", [("q x d", "the contraction keeps x"), ("x d", "it sums the row axis q")])
def test_the_adjoint_identity_falls_back_where_its_conditions_fail(z_sig, why):
    f = softmax_then(z_sig)
    g = nc.grad(f, saved=True, aux=1)
    assert any(set(r) == {"q", "x"} for r in reduce_inputs(g)), why
    check_saved_equals_unsaved(f, [RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))])


def test_the_adjoint_identity_needs_the_cotangent_from_one_contraction_only():
    b = nc.Builder(nc.types("q x, x d", q=3, x=4, d=2))
    S, V = b.inputs
    P = b(nc.softmax("q x", over="x", q=3, x=4), S)
    f = b.build(b(nc.einsum("q x, x d -> q d", q=3, x=4, d=2), P, V), b(nc.elementwise("exp", "q x", q=3, x=4), P))
    g = nc.grad(f, saved=True)                      # P's cotangent: from the contraction and from exp
    assert ("q", "x") in reduce_inputs(g)
    xs = [RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))]
    outs = nc.evaluate(f, *xs)
    ybar = [RNG.standard_normal(o.shape) for o in outs]
    for a, w in zip(nc.evaluate(g, *xs, *outs, *ybar), nc.evaluate(nc.grad(f), *xs, *ybar), strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-10)


def test_softmax_is_recomputed_from_the_saved_log_sum_exp():
    """softmax_β(S) = exp(β·S − L): no SoftMax box (no row maximum, no row sum) in the gradient."""
    f = softmax_then("q d")
    assert "softmax" in kinds(nc.grad(f, aux=1))
    g = nc.grad(f, saved=True, aux=1)
    assert "softmax" not in kinds(g) and "reduce_logsumexp" not in kinds(g) and "exp" in kinds(g)
    check_saved_equals_unsaved(f, [RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))])


@pytest.mark.parametrize("scale, over", [(2.0, "x"), (1.0, "q")])
def test_a_log_sum_exp_of_other_scores_or_axes_is_not_used(scale, over):
    f = softmax_then("q d", lse_scale=scale, lse_over=over)
    assert "softmax" in kinds(nc.grad(f, saved=True, aux=1))
    check_saved_equals_unsaved(f, [RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))])


def test_masked_scores_minus_infinity_give_zero_probabilities():
    f = nc.library.masked_attention(nc.library.causal_mask(q=4, x=5), q=4, x=5, d=3, lse=True)
    g = nc.grad(f, wrt=[0, 1, 2], saved=True, aux=1)
    assert "softmax" not in kinds(g)
    Q, K, V = (RNG.standard_normal(s) for s in ((4, 3), (5, 3), (5, 3)))
    check_saved_equals_unsaved(f, [Q, K, V], wrt=[0, 1, 2])
    O, L = nc.evaluate(f, Q, K, V)
    S = np.where(np.arange(5)[None, :] <= np.arange(4)[:, None], Q @ K.T, -np.inf)
    np.testing.assert_allclose(L, lse_rows(S, 1 / math.sqrt(3)), rtol=1e-12)


@pytest.mark.parametrize("make, shapes", [
    (lambda lse: nc.library.attention(q=3, x=5, d=4, lse=lse), ((3, 4), (5, 4), (5, 4))),
    (lambda lse: nc.library.multi_head_attention(q=3, x=4, d=2, h=2, lse=lse), ((2, 3, 2), (2, 4, 2), (2, 4, 2))),
    (lambda lse: nc.library.grouped_query_attention(q=3, x=4, d=2, h=2, g=3, lse=lse),
     ((2, 3, 3, 2), (2, 4, 2), (2, 4, 2))),
])
def test_the_library_forward_returns_the_log_sum_exp_and_its_gradient_agrees(make, shapes):
    Q, K, V = (RNG.standard_normal(s) for s in shapes)
    O, L = nc.evaluate(make(True), Q, K, V)
    np.testing.assert_allclose(O, nc.evaluate(make(False), Q, K, V), rtol=1e-12)
    Kb = K.reshape(K.shape[:1] + (1,) * (Q.ndim - K.ndim) + K.shape[1:]) if Q.ndim > K.ndim else K
    S = Q @ np.swapaxes(Kb, -1, -2)
    np.testing.assert_allclose(L, lse_rows(S, 1 / math.sqrt(Q.shape[-1])), rtol=1e-12)
    dO = RNG.standard_normal(O.shape)
    g = nc.grad(make(True), wrt=[0, 1, 2], saved=True, aux=1)
    assert "softmax" not in kinds(g)
    got = nc.evaluate(g, Q, K, V, O, L, dO)
    for a, w in zip(got, nc.evaluate(nc.grad(make(False)), Q, K, V, dO), strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-9, atol=1e-12)
    eps = 1e-6                                       # and central finite differences of ⟨dO, O⟩
    for i, x in enumerate((Q, K, V)):
        v = RNG.standard_normal(x.shape)
        pair = [float(np.sum(dO * nc.evaluate(make(False), *[y + t * v if j == i else y
                                                              for j, y in enumerate((Q, K, V))])))
                for t in (eps, -eps)]
        assert float(np.sum(got[i] * v)) == pytest.approx((pair[0] - pair[1]) / (2 * eps), rel=1e-5, abs=1e-6)


def test_aux_without_saved_differentiates_the_other_outputs():
    f = nc.library.attention(q=3, x=4, d=2, lse=True)
    g = nc.grad(f, aux=1)
    assert [str(a) for a in g.dom.inside] == ["q[3]×d[2]", "x[4]×d[2]", "x[4]×d[2]", "q[3]×d[2]"]
    xs = [RNG.standard_normal(s) for s in ((3, 2), (4, 2), (4, 2), (3, 2))]
    for a, w in zip(nc.evaluate(g, *xs), nc.evaluate(nc.grad(nc.library.attention(q=3, x=4, d=2)), *xs), strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-12)
    assert len(nc.grad(f).dom) == 5 and len(nc.grad(f, saved=True).dom) == 7


@pytest.mark.parametrize("kw, match", [
    (dict(aux=-1), r"aux=-1: f has 2 output\(s\); aux is 0 … 1"),
    (dict(aux=2), r"aux=2: f has 2 output\(s\)"),
    (dict(aux=1.0), r"aux=1.0: aux is the number of f's last outputs that are auxiliary \(an int\)"),
    (dict(aux=True), r"aux=True: aux is the number"),
    (dict(saved="yes"), r"saved='yes': saved is True .* or False"),
])
def test_bad_aux_and_saved_are_typed_errors(kw, match):
    with pytest.raises(nc.GradError, match=match):
        nc.grad(nc.library.attention(lse=True), **kw)
