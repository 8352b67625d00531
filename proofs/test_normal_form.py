"""Obligations of the normal form (``rewrites.normal_form``): each operation written by hand computes what the
primitive that replaces it computes, on random instances (any axes reduced and mapped over, in any order; the
scores after a map or not) and random variants of them (axes renamed, extra axes weaved anywhere); each rewrite
shrinks the netlist (the bound on the normal form); a mutant of each rule fails its proof; the side conditions
refuse what is not the pattern."""
from dataclasses import replace

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.rewriting import ObligationError, RuleSet
from rewrites.basic import RULES as BASIC
from rewrites.normal_form_boxes import box_like, reduced, unscaled, without_factor
from rewrites.normal_form import (NORMAL_FORM, mean_of_sum, product_with_itself, scale_into_softmax, times_reciprocal,
                                  unshifted_softmax, written_logsumexp, written_softmax)

proves = pytest.mark.proves
SYMBOLIC = {"written_softmax": ("exp_over_sum_of_shifted",), "unshifted_softmax": ("exp_over_sum_of_shifted",),
            "written_logsumexp": ("log_sum_exp_shifted",),
            "scale_into_softmax": ("softmax_of_scaled", "sum_over_count"),
            "product_with_itself": (), "times_reciprocal": (),
            "mean_of_sum": ("sum_over_count",)}


@pytest.mark.parametrize("rule", [pytest.param(r, id=r.name, marks=proves(r.name)) for r in NORMAL_FORM])
def test_each_normal_form_rule_is_sound(rule):
    proof = rule.obligation.discharge(rule, trials=16, variants=8)
    assert proof.rewrites >= 16 and proof.varied >= 4 and proof.cost_checked
    assert proof.max_error < 1e-9
    assert proof.symbolic == SYMBOLIC[rule.name]


# ---------------------------------------------------------------------- mutants fail their proofs
def _softmax_of_the_shifted_scores_at_half_the_temperature(m):
    b, ins = m.wiring()
    box = box_like("softmax", [m.node("sb").dom[0]], m.node("dv").cod[0], core=reduced(m.node("sm")),
                   params={"beta": 0.5})
    return m.finish(b, {("dv", 0): b(box, ins[("sb", 0)])})


def _unshifted_at_twice_the_temperature(m):
    b, ins = m.wiring()
    box = box_like("softmax", [m.node("ex").dom[0]], m.node("dv").cod[0], core=reduced(m.node("sm")),
                   params={"beta": 2})
    return m.finish(b, {("dv", 0): b(box, ins[("ex", 0)])})


def _sum_not_logsumexp(m):
    b, ins = m.wiring()
    x = ins[("c", 0)]
    y = b(box_like("reduce_sum", [m.node("c").dom[0]], m.node("ad").cod[0]), x)
    return m.finish(b, {p: (y if p == ("ad", 0) else x) for p in m.outputs})


def _beta_kept(m):
    """The scale dropped (a mean's 1/|B| too: its sum kept), β not multiplied by it."""
    s, sc = m.node("s"), m.node("sc")
    b, ins = m.wiring()
    params = {} if s.spec.param("beta", 1) == 1 else {"beta": s.spec.param("beta")}
    return m.finish(b, {("s", 0): b(box_like("softmax", [unscaled(sc)], s.cod[0], core=reduced(s), params=params),
                                    without_factor(b, sc, ins[("sc", 0)]))})


def _abs_not_square(m):
    b, ins = m.wiring()
    x = ins[("c", 0)]
    y = b(box_like("abs", [m.node("c").dom[0]], m.node("m").cod[0]), x)
    return m.finish(b, {p: (y if p == ("m", 0) else x) for p in m.outputs})


def _times_not_over(m):
    (port,) = [p for v, p in m.inputs if v == "m"]
    b, ins = m.wiring()
    box = box_like("mul", [m.node("m").dom[port], m.node("r").dom[0]], m.node("m").cod[0])
    return m.finish(b, {("m", 0): b(box, ins[("m", port)], ins[("r", 0)])})


def _sum_not_mean(m):
    b, ins = m.wiring()
    return m.finish(b, {("c", 0): b(box_like("reduce_sum", [m.node("s").dom[0]], m.node("c").cod[0]),
                                    ins[("s", 0)])})


@pytest.mark.parametrize("rule, wrong", [
    (written_softmax, _softmax_of_the_shifted_scores_at_half_the_temperature),   # exp(x/2)/Σ exp(x/2)
    (unshifted_softmax, _unshifted_at_twice_the_temperature),   # exp(2x)/Σ exp(2x) for exp(x)/Σ exp(x)
    (written_logsumexp, _sum_not_logsumexp),         # Σ x for log Σ exp x
    (scale_into_softmax, _beta_kept),                # the scale (a mean's 1/|B|) dropped, β not multiplied
    (product_with_itself, _abs_not_square),          # |x| for x · x
    (times_reciprocal, _times_not_over),             # x · y for x · (1/y)
    (mean_of_sum, _sum_not_mean),                    # the count forgotten
], ids=lambda v: getattr(v, "name", None) or v.__name__)
def test_a_mutant_of_each_rule_fails_its_proof(rule, wrong):
    with pytest.raises(ObligationError, match="is unsound"):
        replace(rule, rhs=wrong).obligation.discharge(replace(rule, rhs=wrong), trials=16)


def test_a_mutant_that_takes_a_shift_varying_along_the_sum_fails_its_proof():
    """Without ``constant_shift`` the rule takes the instances' decoy exp(x − y) / Σ_A exp(x − y), y over every axis,
    for SoftMax_A(x): its proof finds the counterexample."""
    loose = replace(written_softmax, conditions=tuple(c for c in written_softmax.conditions
                                                      if c.name != "constant_shift"))
    with pytest.raises(ObligationError, match="is unsound"):
        loose.obligation.discharge(loose, trials=16)


# ---------------------------------------------------------------------- what the conditions refuse
def _written(max_over="x", sum_over="x", leak=False):
    b = nc.Builder(nc.types("q x y"))
    (S,) = b.inputs
    m = b(nc.reduce("max", f"q x y -> {' '.join(n for n in 'qxy' if n not in max_over)}"), S)
    keep_m = " ".join(n for n in "qxy" if n not in max_over)
    e = b(nc.elementwise("exp", "q x y"), b(nc.elementwise("sub", f"q x y, {keep_m} -> q x y"), S, m))
    keep_z = " ".join(n for n in "qxy" if n not in sum_over)
    z = b(nc.reduce("sum", f"q x y -> {keep_z}"), e)
    P = b(nc.elementwise("div", f"q x y, {keep_z} -> q x y"), e, z)
    return b.build(P, e) if leak else b.build(P)


def _shifted_by_an_input(shift: str):
    """exp(s − c) / Σ_x exp(s − c), c an input over the axes ``shift``."""
    b = nc.Builder(nc.types(f"q x, {shift}"))
    S, c = b.inputs
    e = b(nc.elementwise("exp", "q x"), b(nc.elementwise("sub", f"q x, {shift} -> q x"), S, c))
    return b.build(b(nc.elementwise("div", "q x, q -> q x"), e, b(nc.reduce("sum", "q x -> q"), e)))


@pytest.mark.parametrize("build, why", [
    (lambda: _written(max_over="x", sum_over="y"), "constant_shift"),   # max_x s varies along y, the sum's axis
    (lambda: _shifted_by_an_input("q x"), "constant_shift"),            # c[q, x] varies along x
    (lambda: _shifted_by_an_input("x"), "constant_shift"),
    (lambda: _written(leak=True), "private"),
])
def test_the_written_softmax_is_refused_where_it_is_not_one(build, why):
    d = build()
    (cand,) = written_softmax.candidates(d)
    with pytest.raises(nc.RewriteError, match=why):
        written_softmax.apply(d, cand)


def test_a_shift_varying_along_the_sum_stays_in_the_normal_form():
    """exp(s − c)/Σ_x exp(s − c) with c[q, x] is SoftMax_x(s − c) (``unshifted_softmax``), not SoftMax_x(s)."""
    d = _shifted_by_an_input("q x")
    r = nc.rewrite(d, NORMAL_FORM + BASIC)
    assert [s.rule for s in r.trace] == ["unshifted_softmax"]
    assert sorted(b.data.kind for b in r.diagram.boxes if b.data is not None) == ["softmax", "sub"]
    rng = np.random.default_rng(3)
    s, c = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    want = np.exp(s - c) / np.exp(s - c).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(nc.evaluate(r.diagram, s, c), want, rtol=1e-12)
    assert not np.allclose(want, np.exp(s) / np.exp(s).sum(axis=1, keepdims=True))


def _simplified(d):
    return nc.rewrite(d, RuleSet((written_softmax,)) + BASIC).diagram


def test_a_written_softmax_over_two_axes_is_one_softmax_over_both():
    d = _written(max_over="x y", sum_over="x y")
    r = _simplified(d)
    assert nc.isomorphic(r, nc.softmax("q x y", over=["x", "y"]))
    assert nc.equivalent(d, r)


def test_a_max_over_more_axes_than_the_sum_is_a_shift_constant_along_it():
    """exp(s − max_{x,y} s) / Σ_x exp(…) is SoftMax_x(s): the max over x and y is one value along x."""
    d = _written(max_over="x y", sum_over="x")
    assert nc.isomorphic(_simplified(d), nc.softmax("q x y", over="x"))
    s = np.random.default_rng(4).normal(size=(2, 3, 4)) * 10
    want = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(nc.evaluate(_simplified(d), s), want / want.sum(axis=1, keepdims=True), rtol=1e-12)


def test_a_scale_by_another_count_is_not_a_mean():
    d = nc.reduce("sum", "n d -> n", d=8) >> nc.elementwise("scale", "n", const=0.25)
    (cand,) = mean_of_sum.candidates(d)
    with pytest.raises(nc.RewriteError, match="count"):
        mean_of_sum.apply(d, cand)
    assert mean_of_sum.matches(nc.reduce("sum", "n d -> n", d=8) >> nc.elementwise("scale", "n", const=0.125))


def test_a_softmax_written_without_its_max_overflows_and_the_primitive_does_not():
    """exp(x)/Σ exp(x) at x = [1000, 0] is [NaN, 0] by hand (∞/∞); its rewrite is the stable primitive, [1, 0]; a row
    all below −745 is 0/0 by hand, uniform in the primitive.  Where both are defined they agree (the proof)."""
    b = nc.Builder(nc.types("n v"))
    (X,) = b.inputs
    e = b(nc.elementwise("exp", "n v"), X)
    d = b.build(b(nc.elementwise("div", "n v, n -> n v"), e, b(nc.reduce("sum", "n v -> n"), e)))
    r = nc.rewrite(d, NORMAL_FORM)
    assert [s.rule for s in r.trace] == ["unshifted_softmax"]
    assert nc.isomorphic(r.diagram, nc.softmax("n v", over="v"))
    x = np.array([[1000.0, 0.0], [-800.0, -800.0]])
    with np.errstate(all="ignore"):
        assert np.isnan(nc.evaluate(d, x)).tolist() == [[True, False], [True, True]]     # 0/∞ = 0 is right
    np.testing.assert_allclose(nc.evaluate(r.diagram, x), [[1.0, 0.0], [0.5, 0.5]], atol=1e-300)


def test_a_mean_read_by_a_softmax_is_its_sum_at_the_temperature_over_the_count():
    """SoftMax_β(mean_u x) = SoftMax_{β/|u|}(Σ_u x), against numpy's SoftMax of the mean at moderate scores (where a
    temperature off by |u| shows, unlike at saturated ones)."""
    d = nc.reduce("mean", "u n v -> n v", u=3) >> nc.softmax("n v", over="v", beta=0.5)
    r = scale_into_softmax.apply(d)
    assert [b.data.kind for b in r.boxes if b.data is not None] == ["reduce_sum", "softmax"]
    x = np.random.default_rng(7).normal(size=(3, 2, 5))
    s = 0.5 * x.mean(axis=0)
    want = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(nc.evaluate(r, x), want / want.sum(axis=1, keepdims=True), rtol=1e-12)


def _shifted_softmax(shift: str):
    """exp(s − c) / Σ_v exp(s − c) with c the row's mean (``shift="mean"``) or the constant 30."""
    b = nc.Builder(nc.types("n v"))
    (X,) = b.inputs
    if shift == "mean":
        y = b(nc.elementwise("sub", "n v, n -> n v"), X, b(nc.reduce("mean", "n v -> n"), X))
    else:
        y = b(nc.elementwise("shift", "n v", const=-30), X)
    e = b(nc.elementwise("exp", "n v"), y)
    return b.build(b(nc.elementwise("div", "n v, n -> n v"), e, b(nc.reduce("sum", "n v -> n"), e)))


@pytest.mark.parametrize("shift", ["mean", "constant"])
def test_a_softmax_shifted_by_another_value_overflows_and_the_primitive_does_not(shift):
    """Shifted by the row's mean or by 30 the written form is NaN at [2000, 0] (exp(1000) or exp(1970) = ∞: ∞/∞) and at
    [−800, −800] by 30 (exp(−830) = 0: 0/0); its normal form is the stable primitive: [1, 0] and [½, ½], numpy's
    max-shifted SoftMax."""
    d = _shifted_softmax(shift)
    r = nc.rewrite(d, NORMAL_FORM + BASIC)
    assert [s.rule for s in r.trace][0] == "written_softmax"
    assert nc.isomorphic(r.diagram, nc.softmax("n v", over="v"))
    x = np.array([[2000.0, 0.0], [-800.0, -800.0]])
    with np.errstate(all="ignore"):
        by_hand = nc.evaluate(d, x)
    assert np.isnan(by_hand[0, 0]) and (shift == "mean" or np.isnan(by_hand[1]).all())
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(nc.evaluate(r.diagram, x), e / e.sum(axis=1, keepdims=True), atol=1e-300)
    np.testing.assert_allclose(nc.evaluate(r.diagram, x), [[1.0, 0.0], [0.5, 0.5]], atol=1e-300)
