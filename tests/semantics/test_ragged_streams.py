"""A stream whose slices do not divide its axis computes what the function computes (issue 25, family 1).

A box that reads no slice but makes the streamed axis (a broadcast along it) was run once, in the stream's
head, at the size of a whole slice; a shorter last slice then met a broadcast of the wrong size (numpy
broadcast it: [211, 422] for [111, 222]).  The streaming analysis now makes such a box a map of the trip, run
at each slice's extent, so every functor of the schedule (numpy, costs, plan) runs it there; and
``nc.equivalent`` always tries tiles that truly do not divide their axes, so the wrong answer is caught.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.schedule import schedule_of

X, W = np.array([1., 2.]), np.array([1., 10., 100.])


def broadcast_then_contract(a=3):
    bc = nc.weave(nc.elementwise("id", "e", e=2), "a", inputs=[], **({"a": a} if a else {}))
    return (bc @ nc.Id("a", **({"a": a} if a else {}))) >> nc.einsum("a e, a -> e", e=2, **({"a": a} if a else {}))


def test_a_broadcast_along_the_streamed_axis_is_made_per_slice():
    s = nc.stream(nc.kernel(broadcast_then_contract()), "a", "s_a")
    stream = s.boxes[0].arg.boxes[0]
    def makes_a(op):
        return any("a" in arr.names for arr in op.box.cod.inside)
    schedule = schedule_of(stream)
    assert not [op for op in schedule.head if makes_a(op)]
    assert [op.box.name for op in schedule.trip if hasattr(op, "box") and makes_a(op)] == ["load", "id"]
    want = X * W.sum()
    np.testing.assert_allclose(nc.evaluate(s, X, W, sizes={"s_a": 2}), want)        # slices 2 + 1
    y, counted = nc.plan(s, {"s_a": 2}).run(X, W)
    np.testing.assert_allclose(y, want)
    assert counted.flops == nc.cost(s, sizes={"s_a": 2}).flops


@pytest.mark.parametrize("trials", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", range(3))
def test_every_check_tries_a_tile_that_does_not_divide(trials, seed):
    d = broadcast_then_contract()
    verdict = nc.equivalent(d, nc.stream(nc.kernel(d), "a", "s_a"), trials=trials, seed=seed)
    assert verdict
    assert any(3 % t["sizes"]["s_a"] for t in verdict.tried), verdict.tried


def test_a_symbolic_axis_is_compared_on_ragged_slices():
    d = broadcast_then_contract(a=None)
    verdict = nc.equivalent(d, nc.stream(nc.kernel(d), "a", "s_a"), trials=2)
    assert verdict and any(t["sizes"]["a"] % t["sizes"]["s_a"] for t in verdict.tried)


def test_the_wrong_stream_is_caught(monkeypatch):
    """The old meaning (the broadcast made once, in the head, at a whole slice's size) is found wrong."""
    from napkin_cat.algorithms import streaming
    monkeypatch.setattr(streaming, "broadcast_role", lambda box, axis: "head")
    d = broadcast_then_contract()
    old = nc.stream(nc.kernel(d), "a", "s_a")
    assert not nc.equivalent(d, old, trials=1, seed=0)


def test_a_box_that_makes_the_axis_without_weaving_it_is_refused():
    d = (nc.renaming("b -> a", b=3) @ nc.Id("a", a=3)) >> nc.einsum("a, a -> ", a=3)
    with pytest.raises(nc.RewriteError, match=r"'rename' makes the streamed axis 'a' from inputs that do not carry "
                                              r"it, and it is not weaved over 'a'"):
        nc.stream(nc.kernel(d), "a", "s_a")
