"""One schedule value per region and one fold over it, of which every functor out of a region is an algebra.

The schedule is unrolled once (cached, immutable); the five functors that read regions (numpy, symbolic cost,
cost at sizes, memory columns, plan) reach a region's structure only through the fold: none dispatches on a
reducer's fields or re-derives the phases (checked on their source), and each gives a handler for every kind
of node.  A new region kind is registered once (its unrolling) and gets one handler per functor; an algebra
without it is refused naming the handler.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import re

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms import schedule as sch
from napkin_cat.errors import NapkinError

ALGEBRAS = {
    "napkin_cat.semantics.regions": "Numpy",
    "napkin_cat.cost.iocost": "Symbolic",
    "napkin_cat.cost.numeric": "Concrete",
    "napkin_cat.cost.columns": "Columns",
    "napkin_cat.plan.expand": "Expander",
}
#: the modules of the algebras' device handlers (a device region's and a ring's), each algebra's base class
DEVICE_HANDLERS = ("napkin_cat.cost.devices", "napkin_cat.cost.devices_at")
STREAM_KINDS = ("op", "init", "monoid", "step", "finish", "advance_kernel", "advance_grid", "advance_loop", "stream")


def flash():
    return nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")


def two_level():
    tiled = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
    return nc.stream(nc.group(nc.kernel(tiled, level=2), "a", "h_a"), "b", "u_b")


def _streams(d):
    for box in d.boxes:
        if isinstance(box, nc.Region):
            if isinstance(box, nc.Stream):
                yield box
            yield from _streams(box.arg)


def test_a_region_is_unrolled_once_into_an_immutable_value():
    (s,) = _streams(flash())
    node = sch.schedule_of(s)
    assert sch.schedule_of(s) is node
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.head = ()
    assert [r.kind for r in node.reducers] == ["step"] and node.trip[-1] is node.reducers[0]


def test_nested_reducers_unroll_into_advances():
    kinds = set()

    def walk(node):
        kinds.add(node.kind)
        for r in getattr(node, "reducers", ()):
            if r.kind == "nested":
                walk(r.advance)
        for child in (getattr(node, "child", None), getattr(node, "schedule", None)):
            if child is not None:
                walk(child)
    for s in _streams(two_level()):
        walk(sch.schedule_of(s))
    assert {"stream", "advance_grid", "advance_kernel", "advance_loop"} <= kinds


@pytest.mark.parametrize("module, name", sorted(ALGEBRAS.items()))
def test_every_functor_is_an_algebra_of_the_fold(module, name):
    algebra = getattr(importlib.import_module(module), name)
    kinds = STREAM_KINDS + (() if name == "Columns" else ("kernel", "grid"))
    assert all(callable(getattr(algebra, k, None)) for k in kinds), [k for k in kinds if not hasattr(algebra, k)]


@pytest.mark.parametrize("module", sorted(ALGEBRAS) + list(DEVICE_HANDLERS))
def test_no_functor_dispatches_on_the_structure_itself(module):
    """What each of the five walks did before the schedule: test a reducer's fields, scan the roles, name kinds."""
    source = inspect.getsource(importlib.import_module(module))
    for pattern in (r"\.nest is not None", r"\.step is None", r"\.step is not None", r"indices\(\"", r"ops_in\(",
                    r"kind == \"kernel\"", r"kind == \"grid\"", r"\.plan\.reducers", r"\.plan\.role"):
        assert not re.search(pattern, source), f"{module} matches {pattern!r}"


class Tagged(nc.Region):
    """A region kind of a user's: it runs its inside twice (a toy)."""

    region = "test_twice"


@dataclasses.dataclass(frozen=True, eq=False)
class Twice:
    region: object
    inside: object
    kind = "twice"


def test_a_new_region_kind_is_one_registration_and_one_handler(monkeypatch):
    monkeypatch.setitem(sch.SCHEDULES, Tagged.region, lambda box: Twice(box, box.arg))
    f = nc.elementwise("exp", "q")
    box = Tagged(f, f.dom, f.cod, {})

    class Numpy:
        def twice(self, node, xs, env, dests):
            return nc.evaluate(node.inside, nc.evaluate(node.inside, *xs)),

    (y,) = sch.fold_region(box, Numpy(), [np.zeros(2)], None)
    np.testing.assert_allclose(y, np.exp(np.exp(np.zeros(2))))
    with pytest.raises(NapkinError, match=r"Symbolic has no handler 'twice' for Tagged"):
        sch.fold_region(box, importlib.import_module("napkin_cat.cost.iocost").SYMBOLIC, [None], [])


def test_an_unregistered_region_kind_is_refused_naming_the_registry():
    f = nc.elementwise("exp", "q")
    with pytest.raises(NapkinError, match=r"no schedule is registered for regions of kind 'test_twice'.*SCHEDULES"):
        sch.schedule_of(Tagged(f, f.dom, f.cod, {}))


def test_the_phases_run_in_the_order_of_the_program():
    """An algebra that records what runs: head, the state's init, the trip, the finish, the tail."""
    class Trace:
        def op(self, op, ins, ctx, dests):
            ctx.append(("op", op.box.name))
            return [None] * len(op.outs)

        def init(self, r, ctx, dests):
            ctx.append(("init", r.name))
            return [None] * len(r.state)

        def step(self, r, state, ins, ctx):
            ctx.append(("step", r.name))
            return state

        def finish(self, r, state, ctx, dests):
            ctx.append(("finish", r.name))
            return [None] * len(r.outputs)

        def stream(self, node, ins, ctx, dests, run):
            vals = run.head(ins, ctx)
            states = run.init(ctx)
            for _ in range(2):
                states, _ = run.trip(vals, states, ctx)
            return run.tail(run.finish(vals, states, ctx), ctx)

    (s,) = _streams(flash())
    seen = []
    sch.fold_region(s, Trace(), [None] * 3, seen)
    form = "softmax_contraction_to_unscaled"
    trip = [("op", "load"), ("op", "load"), ("op", "·"), ("step", form)]
    assert seen == [("op", "load"), ("init", form)] + trip * 2 + [("finish", form), ("op", "save")]
