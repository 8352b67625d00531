"""Item 8: streamability comes from accumulator forms in a registry, not from a built-in SoftMax case.

A normaliser N over an axis followed by a contraction over it streams when a registered form gives
its state (with init), its step B(state, chunk) → state and its finish; SoftMax's form is registered by
the rule library (``rewrites/softmax.py``).  A user's own normaliser streams with its own form and is
refused, with the reason and the remedy, without one.
"""
import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.accumulators import NormaliserForm, StateArray, register, unregister

EXPNORM = "expnorm_test"


def _kw(arr):
    return dict(level=arr.level, dtype=arr.dtype, **{a.name: a.size for a in arr.axes})


def _sig(arr):
    return " ".join(arr.names)


def _expnorm_impl(xs, core):
    e = np.exp(xs[0])
    return [e / np.sum(e, axis=tuple(range(-len(core.inputs[0]), 0)), keepdims=True)]


def _state(scores, out, axis):
    rows = scores.replace(axes=tuple(a for a in scores.axes if a.name != axis))
    return [StateArray("z", rows, 0.0), StateArray("o", out, 0.0)]


def _step(b, state, scores, contract, axis, box):
    """z ← z′ + Σ exp(x),  o ← o′ + exp(x)·v   (no running max: a plain sum of exponentials)."""
    z_prev, o_prev = state
    e = b(nc.elementwise("exp", _sig(scores.array), **_kw(scores.array)), scores)
    rows = z_prev.array
    zc = b(nc.reduce("sum", f"{_sig(scores.array)} -> {_sig(rows)}", **_kw(scores.array)), e)
    z = b(nc.elementwise("add", _sig(rows), **_kw(rows)), z_prev, zc)
    o = b(nc.elementwise("add", _sig(o_prev.array), **_kw(o_prev.array)), o_prev, contract(e))
    return [z, o]


def _finish(b, state):
    z, o = state
    return b(nc.elementwise("div", f"{_sig(o.array)}, {_sig(z.array)} -> {_sig(o.array)}", **_kw(o.array)), o, z)


@pytest.fixture
def expnorm():
    nc.declare(EXPNORM, _expnorm_impl, flops=lambda core: {"special": 1, "general": 2}, label="ExpNorm")
    try:
        b = nc.Builder(nc.types("q x, x d"))
        S, V = b.inputs
        P = b(nc.apply(EXPNORM, "q x -> q x", core=["x"]), S)
        yield b.build(b(nc.einsum("q x, x d -> q d"), P, V))
    finally:
        del nc.engine.KINDS[EXPNORM]


def test_a_users_normaliser_without_a_form_is_refused_with_the_remedy(expnorm):
    with pytest.raises(nc.RewriteError, match=rf"'ExpNorm'.*not streamable along 'x'.*no accumulator form.*"
                                              rf"{EXPNORM}.*register"):
        nc.stream(expnorm, "x", "s_x")


def test_a_users_normaliser_with_its_online_form_streams(expnorm):
    form = register(NormaliserForm("expnorm_online", EXPNORM, _state, _step, _finish))
    try:
        flash_like = nc.group(nc.stream(expnorm, "x", "s_x"), "q", "g_q")
        assert nc.equivalent(expnorm, flash_like, trials=5)
        (grid,) = flash_like.boxes
        (stream,) = grid.arg.boxes[0].arg.boxes
        (reducer,) = stream.plan.reducers
        assert reducer.form is form and [s.name for s in reducer.state] == ["z", "o"]
        # the step's FLOPs are the user's boxes, once per trip: exp + sum + 2 adds per score/row
        c = nc.cost(flash_like)
        q, x, d, s_x = (nc.symbol(n) for n in ("q", "x", "d", "s_x"))
        assert (c.flops["special"] - q * x).expand() == 0
    finally:
        unregister("expnorm_online")
    with pytest.raises(nc.RewriteError, match="no accumulator form"):
        nc.stream(expnorm, "x", "s_x")


def test_softmax_streams_by_the_form_the_rule_library_registers():
    from napkin_cat.algorithms.accumulators import forms_for
    names = {f.name for f in forms_for("softmax")}
    assert "softmax_contraction_to_unscaled" in names
    flash = nc.stream(nc.kernel(nc.library.attention()), "x", "s_x")
    (stream,) = flash.boxes[0].arg.boxes
    (reducer,) = stream.plan.reducers
    assert reducer.form.name == "softmax_contraction_to_unscaled"
    assert [s.name for s in reducer.state] == ["μ", "z", "o"]
    assert [s.init for s in reducer.state] == [-np.inf, 0.0, 0.0]


def test_forms_are_found_through_the_entry_point_group(monkeypatch, request, expnorm):
    """A plugin declares its forms under ``napkin_cat.accumulators``; the analysis loads them lazily."""
    import napkin_cat.algorithms.accumulators as acc
    form = NormaliserForm("expnorm_plugin", EXPNORM, _state, _step, _finish)

    class EntryPoint:
        name, value = "plugin", "plugin:FORMS"

        def load(self):
            return (form,)
    acc.load_entry_points.cache_clear()                        # not loaded yet, as in a fresh process
    request.addfinalizer(acc.load_entry_points.cache_clear)     # the real plugins load again after
    monkeypatch.setattr(acc, "FORMS", {})
    monkeypatch.setattr(acc, "entry_points", lambda group: [EntryPoint()] if group == acc.GROUP else [])
    assert acc.forms_for(EXPNORM) == [form]
    assert nc.equivalent(expnorm, nc.stream(expnorm, "x", "s_x"), trials=3)


def test_a_form_whose_step_has_the_wrong_type_is_refused(expnorm):
    """A form's step must map the state (and the chunk) back to the state: the error says both types."""
    def bad_step(b, state, scores, contract, axis, box):
        return state[:1]
    register(NormaliserForm("expnorm_bad", EXPNORM, _state, bad_step, _finish))
    try:
        with pytest.raises(nc.RewriteError, match=r"form 'expnorm_bad': its step goes .* but the stream needs"):
            nc.stream(expnorm, "x", "s_x")
    finally:
        unregister("expnorm_bad")
