"""Obligation of the gathered SoftMax's law (``rewrites.gathered_probability``): a SoftMax read only by a gather along
a reduced axis computes what ``exp(βx − LSE(βx))`` computes on finite scores (spread until probabilities underflow)
and −∞ ones, any axes, any β, at positions and at indices outside the axis; its cost claim (the gather
taken first by ``gather_before_maps``, the exponentials run on the picked values) holds; a mutant fails the proof; the
side conditions refuse a SoftMax another reader needs whole and a gather that picks rows; an index over an axis of
its own keeps the gather after the maps."""
from dataclasses import replace

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.rewriting import ObligationError
from rewrites import GATHERED
from rewrites.gathered_probability import softmax_of_gathered
from rewrites.normal_form_boxes import box_like, reduced

proves = pytest.mark.proves


@proves("softmax_of_gathered")
def test_the_rule_is_sound():
    rule = softmax_of_gathered
    proof = rule.obligation.discharge(rule, trials=24, variants=8)
    assert proof.rewrites >= 24 and proof.varied >= 4 and proof.cost_checked
    assert proof.max_error < 1e-9
    assert proof.symbolic == ("softmax_as_exp_of_log", "gather_of_map")


def _beta_dropped(m):
    """exp(x − LSE(x)) whatever β is."""
    s, g = m.node("s"), m.node("g")
    x = s.dom[0]
    rows = x.replace(axes=tuple(a for a in x.axes if a.name not in reduced(s)))
    b, ins = m.wiring()
    lse = b(box_like("reduce_logsumexp", [x], rows), ins[("s", 0)])
    p = b(box_like("exp", [s.cod[0]], s.cod[0]), b(box_like("sub", [x, rows], s.cod[0]), ins[("s", 0)], lse))
    return m.finish(b, {("g", 0): b(g.box, p, ins[("g", 1)])})


def _logits_gathered(m):
    """βx − LSE(βx) gathered: the log-probability where the probability is meant (the exp forgotten)."""
    s, g = m.node("s"), m.node("g")
    x = s.dom[0]
    rows = x.replace(axes=tuple(a for a in x.axes if a.name not in reduced(s)))
    b, ins = m.wiring()
    beta = s.spec.param("beta", 1)
    scores = b(box_like("scale", [x], x, params={"c": beta}), ins[("s", 0)])
    lse = b(box_like("reduce_logsumexp", [x], rows), scores)
    return m.finish(b, {("g", 0): b(g.box, b(box_like("sub", [x, rows], s.cod[0]), scores, lse), ins[("g", 1)])})


@pytest.mark.parametrize("wrong", [_beta_dropped, _logits_gathered], ids=lambda f: f.__name__)
def test_a_mutant_fails_the_proof(wrong):
    bad = replace(softmax_of_gathered, rhs=wrong)
    with pytest.raises(ObligationError, match="is unsound"):
        bad.obligation.discharge(bad, trials=24)


def _picked(*, over="v", gather="n v, n -> n", reader=None, index="n"):
    b = nc.Builder(nc.types("n v") @ nc.types(index, dtype=nc.INT32))
    L, t = b.inputs
    p = b(nc.softmax("n v", over=over), L)
    y = b(nc.gather(gather), p, t)
    return b.build(y, b(reader, p)) if reader is not None else b.build(y)


def test_a_softmax_read_by_another_reader_too_is_kept():
    """Read by a sum (or an id, whose value is returned): that reader needs the whole SoftMax.  The SoftMax's value
    then reaches the gather through a copy, so the pattern (the SoftMax feeding the gather) does not match; the
    condition ``read_by_the_gather_alone`` guards a netlist that would show a second reader beside the edge."""
    for reader in (nc.reduce("sum", "n v -> n"), nc.elementwise("id", "n v")):
        d = _picked(reader=reader)
        assert not softmax_of_gathered.candidates(d)
        assert not nc.rewrite(d, GATHERED).trace


def test_a_gather_along_a_row_axis_is_not_a_probability():
    """SoftMax over v gathered along n (whole rows picked): the condition names the axis and the legal ones."""
    d = _picked(gather="n v, v -> v", index="v")
    (cand,) = softmax_of_gathered.candidates(d)
    with pytest.raises(nc.RewriteError, match="along_a_reduced_axis"):
        softmax_of_gathered.apply(d, cand)


def test_two_gathers_of_one_softmax_are_left():
    b = nc.Builder(nc.types("n v") @ nc.types("n, n", dtype=nc.INT32))
    L, t, u = b.inputs
    p = b(nc.softmax("n v", over="v"), L)
    d = b.build(b(nc.gather("n v, n -> n"), p, t), b(nc.gather("n v, n -> n"), p, u))
    assert not nc.rewrite(d, GATHERED).trace


def test_the_picked_probability_reads_one_logit_per_row():
    """SoftMax(L)[t] → [0 ≤ t < v]·exp(L[t] − LSE(L)): the exponential on n values, equal to the written form at
    indices outside v (0) and on underflowing and masked logits."""
    d = _picked()
    r = nc.rewrite(d, GATHERED)
    assert [s.rule for s in r.trace] == ["softmax_of_gathered"]
    exps = [b for b in r.diagram.boxes if getattr(b.data, "kind", None) == "exp"]
    assert [[a.name for a in e.dom.inside[0].axes] for e in exps] == [["n"]]
    L = np.array([[0.0, -800.0, 1.0, -np.inf], [3.0, 2.0, -1e4, 0.5], [-np.inf] * 4, [1.0, 1.0, 1.0, 1.0]])
    t = np.array([1, 2, 0, 4])
    with np.errstate(invalid="ignore"):
        got = nc.evaluate(r.diagram, L, t, sizes={"n": 4, "v": 4})
        want = nc.evaluate(d, L, t, sizes={"n": 4, "v": 4})
    assert got[0] == want[0] == 0.0 and got[1] == want[1] == 0.0       # exp(−801.3) and exp(−1e4) underflow alike
    assert np.isnan(got[2]) and np.isnan(want[2])                      # a row all −∞: 0/0 in both
    assert got[3] == want[3] == 0.0                                    # an index outside v reads 0
    assert nc.equivalent(d, r.diagram, trials=6)


def test_an_index_over_an_axis_of_its_own_keeps_the_gather_after_the_maps():
    """Top-k targets (index n k): gathered first, exp would run on n·k values where ``gather_before_maps`` refuses;
    the SoftMax is still written exp(x − LSE) (one pass fewer), the gather after it."""
    b = nc.Builder(nc.types("n v") @ nc.types("n k", dtype=nc.INT32))
    L, t = b.inputs
    d = b.build(b(nc.gather("n v, n k -> n k"), b(nc.softmax("n v", over="v"), L), t))
    r = softmax_of_gathered.apply(d)
    kinds = [getattr(b.data, "kind", None) for b in r.boxes]
    assert "softmax" not in kinds and kinds.count("gather") == 1 and "where" not in kinds
    assert nc.equivalent(d, r, trials=6)
