"""Obligations of cross-entropy's laws (``rewrites.log_probability``): log SoftMax computes what ``βx − LSE(βx)``
computes on finite and −∞ scores (any axes, any β, the log's output in any order), a gather of a cone of maps what
the maps of the gathered operands compute under the range guard, at positions and at indices outside the axis;
each cost claim holds; a mutant of each rule fails its proof; the side conditions refuse what is not the pattern."""
from dataclasses import replace

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.rewriting import ObligationError
from rewrites.log_probability import LOG_FORM, gather_before_maps, log_of_softmax, maps_of_gathered
from rewrites.normal_form_boxes import box_like, reduced

proves = pytest.mark.proves
SYMBOLIC = {"log_of_softmax": ("log_of_exp_over_sum",), "gather_before_maps": ("gather_of_map",)}


@pytest.mark.parametrize("rule", [pytest.param(r, id=r.name, marks=proves(r.name)) for r in LOG_FORM])
def test_each_rule_is_sound(rule):
    proof = rule.obligation.discharge(rule, trials=16, variants=8)
    assert proof.rewrites >= 16 and proof.varied >= 4 and proof.cost_checked
    assert proof.max_error < 1e-9
    assert proof.symbolic == SYMBOLIC[rule.name]


# ---------------------------------------------------------------------- mutants fail their proofs
def _beta_dropped(m):
    """x − LSE(x) whatever β is."""
    s, lg = m.node("s"), m.node("lg")
    x = s.dom[0]
    rows = x.replace(axes=tuple(a for a in x.axes if a.name not in reduced(s)))
    b, ins = m.wiring()
    lse = b(box_like("reduce_logsumexp", [x], rows), ins[("s", 0)])
    return m.finish(b, {("lg", 0): b(box_like("sub", [x, rows], lg.cod[0]), ins[("s", 0)], lse)})


def _without_the_guard(m):
    """The maps of the gathered operands, f(0, …) left at an index outside the axis."""
    b, ins = m.wiring()
    top, out = maps_of_gathered(m, b, ins), m.node("g").cod[0]
    return m.finish(b, {("g", 0): b(box_like("id", [top.array], out), top)})


@pytest.mark.parametrize("rule, wrong", [
    (log_of_softmax, _beta_dropped),                 # the temperature forgotten
    (gather_before_maps, _without_the_guard),        # f(0, …) at an index outside the axis
], ids=lambda v: getattr(v, "name", None) or v.__name__)
def test_a_mutant_of_each_rule_fails_its_proof(rule, wrong):
    with pytest.raises(ObligationError, match="is unsound"):
        replace(rule, rhs=wrong).obligation.discharge(replace(rule, rhs=wrong), trials=16)


# ---------------------------------------------------------------------- what the conditions refuse, the numerics
def test_a_gather_at_an_index_over_other_axes_is_not_moved():
    """A table along v read at q x positions (a relative bias): gathered first, exp would run on q·x values."""
    b = nc.Builder(nc.types("v") @ nc.types("q x", dtype=nc.INT32))
    X, t = b.inputs
    d = b.build(b(nc.gather("v, q x -> q x"), b(nc.elementwise("exp", "v"), X), t))
    (cand,) = gather_before_maps.candidates(d)
    with pytest.raises(nc.RewriteError, match="index_in_table"):
        gather_before_maps.apply(d, cand)


def test_a_map_read_elsewhere_stays_before_the_gather():
    b = nc.Builder(nc.types("n v") @ nc.types("n", dtype=nc.INT32))
    X, t = b.inputs
    e = b(nc.elementwise("exp", "n v"), X)
    assert not gather_before_maps.candidates(b.build(b(nc.gather("n v, n -> n"), e, t), e))


def _cross_entropy_by_log_softmax():
    b = nc.Builder(nc.types("n v") @ nc.types("n", dtype=nc.INT32))
    L, t = b.inputs
    logp = b(nc.elementwise("log", "n v"), b(nc.softmax("n v", over="v"), L))
    return b.build(b(nc.elementwise("neg", "n"), b(nc.gather("n v, n -> n"), logp, t)))


def test_cross_entropy_by_log_softmax_becomes_lse_less_the_target_logit_on_every_index():
    """Both rules: −log SoftMax(L)[t] → −[0 ≤ t < v]·(L[t] − LSE(L)); equal to the written form at indices outside v
    too (nc.equivalent draws indices up to the largest size), and to the maths at positions."""
    d = _cross_entropy_by_log_softmax()
    r = nc.rewrite(d, LOG_FORM)
    assert [s.rule for s in r.trace] == ["log_of_softmax", "gather_before_maps"]
    kinds = [getattr(b.data, "kind", None) for b in r.diagram.boxes]
    assert "log" not in kinds and kinds.count("sub") == 1 and kinds.count("gather") == 2   # L[t], position[t]
    assert nc.equivalent(d, r.diagram, trials=6)
    rng = np.random.default_rng(0)
    L, t = rng.normal(size=(5, 7)) * 3, np.array([0, 6, 3, -1, 7])
    m = L.max(axis=1)
    want = m + np.log(np.exp(L - m[:, None]).sum(axis=1)) - L[np.arange(5), np.clip(t, 0, 6)]
    want[3:] = 0.0                        # an index outside v: the gather reads 0, so does its rewrite
    np.testing.assert_allclose(nc.evaluate(r.diagram, L, t, sizes={"n": 5, "v": 7}), want, rtol=1e-12, atol=1e-12)


def test_log_softmax_written_underflows_where_x_less_lse_does_not():
    """log SoftMax([0, −800]) is [0, −∞] by hand (exp(−800) = 0), [0, −800] rewritten (the stable form)."""
    d = nc.softmax("v", over="v") >> nc.elementwise("log", "v")
    x = np.array([0.0, -800.0])
    with np.errstate(divide="ignore"):
        assert nc.evaluate(d, x).tolist() == [0.0, -np.inf]
    np.testing.assert_allclose(nc.evaluate(log_of_softmax.apply(d), x), [0.0, -800.0], atol=1e-12)
