"""Obligations of ``uncentred_variance`` (``rewrites.variance_normal_form``): mean(x²) − mean(x)² computes what
mean((x − μ)²) computes, on random instances (one or two averaged axes, zero to two row axes, the statistics in
their own orders, μ and x − μ read elsewhere or not) and random variants (axes renamed, extra axes weaved
anywhere); exactly, symbolically; the rewrite shrinks the netlist; mutants fail; the conditions refuse what is not
the uncentred variance; in float32 the uncentred form loses every digit where the centred one keeps them."""
from dataclasses import replace

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.rewriting import ObligationError, RuleSet
from rewrites import SIMPLIFY
from rewrites.normal_form_boxes import box_like
from rewrites.variance_normal_form import uncentred_variance

proves = pytest.mark.proves


def _uncentred(X_sig="n d", mu_over="n d -> n", sq_over="n d -> n", *, of_other=False, normalised=False):
    """mean(x²) − mean(x)² over ``d`` of an n × d input (the mean of an other input where ``of_other``), the
    normalising pass's x − μ an output too where ``normalised``."""
    b = nc.Builder(nc.types(f"{X_sig}, {X_sig}"))
    X, Y = b.inputs
    mu = b(nc.reduce("mean", mu_over), Y if of_other else X)
    ex2 = b(nc.reduce("mean", sq_over), b(nc.elementwise("square", X_sig), X))
    mr, sr = mu_over.split("-> ")[1], sq_over.split("-> ")[1]
    var = b(nc.elementwise("sub", f"{sr}, {mr} -> {sr}"), ex2, b(nc.elementwise("square", mr), mu))
    return b.build(var, b(nc.elementwise("sub", f"{X_sig}, {mr} -> {X_sig}"), X, mu)) if normalised else b.build(var)


@proves("uncentred_variance")
def test_the_uncentred_variance_is_the_centred_one():
    proof = uncentred_variance.obligation.discharge(uncentred_variance, trials=16, variants=8)
    assert proof.rewrites >= 16 and proof.varied >= 4 and proof.cost_checked
    assert proof.max_error < 1e-9
    assert proof.symbolic == ("uncentred_is_centred", "moments_identity")


def _no_centring(m):
    """mean(x²) for mean(x²) − μ²: the squared mean forgotten."""
    b, ins = m.wiring()
    x, out = m.node("q").dom[0], m.node("v").cod[0]
    var = b(box_like("reduce_mean", [x], out), b(box_like("square", [x], x), ins[("q", 0)]))
    outs = {("v", 0): var}
    if "c" in m.nodes:
        outs[("c", 0)] = b(m.box("c"), ins[("c", 0)], ins[("c", 1)])
    return m.finish(b, {p: outs[p] for p in m.outputs})


def _centred_values_squared_twice(m):
    """mean((x − μ)²)² where the program's x − μ is read: the centred branch squaring once too often."""
    b, ins = m.wiring()
    out = m.node("v").cod[0]
    if "c" not in m.nodes:
        return uncentred_variance.rhs(m)
    c = b(m.box("c"), ins[("c", 0)], ins[("c", 1)])
    x = m.node("c").cod[0]
    sq = b(box_like("square", [x], x), c)
    var = b(box_like("reduce_mean", [x], out), b(box_like("square", [x], x), sq))
    return m.finish(b, {("v", 0): var, ("c", 0): c})


@pytest.mark.parametrize("wrong", [_no_centring, _centred_values_squared_twice], ids=lambda f: f.__name__)
def test_a_mutant_fails_the_proof(wrong):
    with pytest.raises(ObligationError, match="is unsound"):
        mutant = replace(uncentred_variance, rhs=wrong)
        mutant.obligation.discharge(mutant, trials=16)


def test_the_program_s_mean_and_centred_values_are_read_not_made_again():
    d = _uncentred(normalised=True)
    r = nc.rewrite(d, RuleSet((uncentred_variance,)) + SIMPLIFY)
    kinds = sorted(b.data.kind for b in r.diagram.boxes if b.data is not None)
    assert kinds == ["reduce_mean", "reduce_mean", "square", "sub"]     # one μ, one x − μ, its square, its mean
    x = np.random.default_rng(4).normal(size=(3, 7)) * 2 + 5
    var, centred = nc.evaluate(r.diagram, x, x)
    np.testing.assert_allclose(var, x.var(axis=1), rtol=1e-12)
    np.testing.assert_allclose(centred, x - x.mean(axis=1, keepdims=True), rtol=1e-12)


def _broadcast_statistics():
    """μ over ``d`` and ``e`` of an n × d × e array, the mean of squares over ``d`` alone: μ² broadcast along e."""
    b = nc.Builder(nc.types("n d e"))
    (X,) = b.inputs
    mu = b(nc.reduce("mean", "n d e -> n"), X)
    ex2 = b(nc.reduce("mean", "n d e -> n e"), b(nc.elementwise("square", "n d e"), X))
    return b.build(b(nc.elementwise("sub", "n e, n -> n e"), ex2, b(nc.elementwise("square", "n"), mu)))


@pytest.mark.parametrize("build, why", [
    (lambda: _uncentred(of_other=True), "averages another array"),
    (_broadcast_statistics, r"averages over \['d', 'e'\], the mean of squares over \['d'\]"),
], ids=["mean of another array", "means over other axes"])
def test_what_is_not_the_uncentred_variance_is_refused(build, why):
    with pytest.raises(nc.RewriteError, match=why):
        uncentred_variance.apply(build())


def test_in_float32_the_uncentred_variance_loses_every_digit_and_the_centred_one_does_not():
    """Rows of 10⁴ + noise of 10⁻²: E[x²] and E[x]² are ~10⁸, where float32's spacing is 8, so their difference is
    rounding (0 or a multiple of 8, never the 10⁻⁴ it should be); the rewritten (centred) form is within 1 %."""
    d = _uncentred()
    r = uncentred_variance.apply(d)
    x = (1e4 + 1e-2 * np.random.default_rng(3).normal(size=(4, 256))).astype(np.float32)
    want = x.astype(np.float64).var(axis=1)
    written, centred = nc.evaluate(d, x, x), nc.evaluate(r, x, x)
    assert written.dtype == centred.dtype == np.float32
    assert np.all(np.abs(written - want) >= 0.99 * want)        # not one digit right (0, or off by 10⁵×)
    assert np.all(np.mod(written, 8) == 0)
    np.testing.assert_allclose(centred, want, rtol=1e-2)
