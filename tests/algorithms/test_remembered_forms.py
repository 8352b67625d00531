"""An accumulator form's state, step and finish are remembered on the box it matched (issue 35).

The search analyses the same boxes in many candidate regions; a form builds its diagrams once per box and what
else they read (the axis, the contraction after a normaliser and its port).  Checked here against diagrams built
afresh from equal boxes that are other objects (so nothing is remembered for them): the same values, and another
contraction after the same normaliser gets its own.
"""
from __future__ import annotations

import napkin_cat as nc
from rewrites.softmax import softmax_contraction_to_unscaled
from napkin_cat.algorithms.streaming import analyse
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.relabel import at_level


def _softmax_then(contraction: str, box=None):
    """SoftMax over x (``box``, or a new one) followed by ``contraction`` (its second operand an input), at level 1."""
    att = at_level(nc.library.attention(), 1)
    sm = att.boxes[1] if box is None else box
    c = at_level(nc.einsum(contraction), 1).boxes[0]
    return (sm @ Diagram.id(Ty(c.dom.inside[1]))) >> c, sm


def test_the_same_box_gets_the_same_diagrams():
    att = at_level(nc.library.attention(), 1)
    first, again = analyse(att, "x").reducers[0], analyse(att, "x").reducers[0]
    assert first.step is again.step and first.finish is again.finish and first.state == again.state
    fresh = analyse(at_level(nc.library.attention(), 1), "x").reducers[0]     # equal boxes, other objects
    assert fresh.step is not first.step
    assert (fresh.step, fresh.finish, fresh.state) == (first.step, first.finish, first.state)


def test_what_a_form_reads_besides_its_box_tells_its_diagrams_apart():
    d, sm = _softmax_then("q x, x d -> q d")
    e, _ = _softmax_then("q x, x e -> q e", box=sm)            # the same SoftMax object, another contraction
    mine, theirs = analyse(d, "x").reducers[0], analyse(e, "x").reducers[0]
    ref, _ = _softmax_then("q x, x e -> q e")                   # built afresh
    expected = analyse(ref, "x").reducers[0]
    assert theirs.step != mine.step
    assert (theirs.step, theirs.finish, theirs.state) == (expected.step, expected.finish, expected.state)
    assert theirs.step.cod.inside[-1].names == ("q", "e")


def _variance():
    """``(mean, variance)`` of X over d (the moments form matches the whole chain)."""
    b = Builder(nc.types("n d"))
    (x,) = b.inputs
    mu = b(nc.reduce("mean", "n d -> n"), x)
    centred = b(nc.elementwise("sub", "n d, n -> n d"), x, mu)
    return b.build(mu, b(nc.reduce("mean", "n d -> n"), b(nc.elementwise("square", "n d"), centred)))


def test_the_moments_and_logsumexp_forms_remember_theirs():
    for build, axis in ((lambda: nc.reduce("mean", "q x -> q"), "x"), (_variance, "d"),
                        (lambda: nc.reduce("logsumexp", "q x -> q"), "x")):
        f = at_level(build(), 1)
        first, again = analyse(f, axis).reducers, analyse(f, axis).reducers
        fresh = analyse(at_level(build(), 1), axis).reducers
        assert {r.form.name for r in first if r.form is not None}
        assert [r.step for r in again] == [r.step for r in first] == [r.step for r in fresh]
        assert all(r.step is s.step for r, s in zip(again, first) if r.form is not None)
        assert all(r.step is not s.step for r, s in zip(fresh, first) if r.form is not None)


def _unscaled_then(contraction: str, boxes=None):
    """Initialize ; SoftMax₁ (``boxes``, or new ones read off the rule's output) ; ``contraction``, at level 1."""
    if boxes is None:
        flash = at_level(softmax_contraction_to_unscaled.apply(nc.library.attention()), 1)
        boxes = tuple(b for b in flash.boxes if b.name in ("Initialize", "SoftMax₁"))
    init, s1 = boxes
    c = at_level(nc.einsum(contraction), 1)
    b = Builder(Ty(s1.dom.inside[0], c.dom.inside[1]))
    scores, v = b.inputs
    mu0, z0 = b(Diagram.id(init.dom).then(init), scores)
    s, mu, _delta, z = b(Diagram.id(s1.dom).then(s1), scores, mu0, z0)
    return b.build(b(c, s, v), z, mu), boxes


def test_the_unscaled_form_tells_its_contractions_apart():
    d, boxes = _unscaled_then("q x, x d -> q d")
    e, _ = _unscaled_then("q x, x e -> q e", boxes)            # the same SoftMax₁, another contraction
    mine, theirs = analyse(d, "x").reducers[0], analyse(e, "x").reducers[0]
    expected = analyse(_unscaled_then("q x, x e -> q e")[0], "x").reducers[0]
    assert type(theirs.form).__name__ == "UnscaledForm" and theirs.step != mine.step
    assert (theirs.step, theirs.finish, theirs.state) == (expected.step, expected.finish, expected.state)
    assert analyse(d, "x").reducers[0].step is mine.step
