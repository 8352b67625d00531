"""The schedule of a region: its program unrolled once, and the one fold that every functor runs over it.

A region is a program (paper Figs. weaved_algorithm, streamed_algorithm_loop).  It is read off the
diagram once, into an immutable value:

==================  ================================================================================
region              schedule
==================  ================================================================================
``Kernel(ℓ)``       :class:`KernelSchedule`: the inside, run at level ℓ
``Grid(a, g)``      :class:`GridSchedule`: the inside, once per group of ``g`` along ``a``
``Stream(b, s)``    :class:`StreamSchedule`: ``head``; each reducer's state set to its empty value;
                    per slice of ``s`` the ``trip`` (the maps, and each reducer's accumulate, in the
                    order of the ops); each reducer's ``finish``; ``tail``; and ``skip``: the masks on
                    which a trip is neutral, so skipped (:mod:`.skipping`; None: every trip runs)
==================  ================================================================================

A reducer (:class:`Reducer`) accumulates in one of three ways: a ``monoid`` folds its box's result into
the state, a ``step`` runs its accumulator form's diagram ``B`` on the state, a ``nested`` region advances
on the state (:mod:`.nesting`): :class:`AdvanceKernel` (the state loaded to the kernel's level, the inside
advanced, the state saved back), :class:`AdvanceGrid` (each group on its slice of the state),
:class:`AdvanceLoop` (a sub-loop's head and trips, or a diagram's head and one trip).

Every functor out of a region (numpy, the symbolic cost, the cost at sizes, the memory columns, the
plan) is an **algebra** for :func:`fold`: an object with one handler per kind of node,

========================================  ========================================================
handler                                   is asked for
========================================  ========================================================
``kernel/grid(node, ins, ctx, dests)``    a region's outputs (the algebra folds ``node.inside``)
``stream(node, ins, ctx, dests, run)``    a stream's outputs; ``run`` (:class:`Phases`) runs its
                                          head, init, trip (as often as the algebra wants), finish
                                          and tail on the algebra's values
``op(op, ins, ctx, dests)``               a box of a phase (a primitive, or a region: fold it)
``init(r, ctx, dests)``                   a reducer's empty state
``monoid/step(r, state, ins, ctx)``       one trip of a reducer: its new state
``finish(r, state, ctx, dests)``          a reducer's outputs from its final state
``advance_kernel/grid(node, state, …)``   one trip of a nested region (it advances ``node.child``
                                          with :func:`advance`)
``advance_loop(node, state, ins, ctx,     one trip of a nested sub-loop or diagram
run)``
========================================  ========================================================

The fold dispatches, and :class:`Phases` threads a stream's values (value id → the algebra's value:
an array, a ref, a name, nothing) through its phases, so no functor re-derives which op runs when, on
which values, or how a reducer accumulates.  ``ctx`` is the algebra's own (sizes, a list of statements
or of costs); ``dests`` where a value should be written, for an algebra that passes destinations.
A new region kind registers its unrolling in :data:`SCHEDULES` (a node whose ``kind`` names its handler)
and each algebra adds one handler.  The law of the fold is that of the functor it implements::

    fold(schedule_of(R), A, xs, ctx) == A's meaning of R on xs

>>> import napkin_cat as nc
>>> s = schedule_of(nc.stream(nc.library.attention(), "x", "s_x").boxes[0].arg.boxes[0])
>>> s.axis, [op.box.name for op in s.head], [i.box.name if isinstance(i, Op) else i.kind for i in s.trip]
('x', ['load'], ['load', 'load', '·', 'step'])
>>> class Names:          # an algebra: what each phase runs, by name
...     def op(self, op, ins, ctx, dests): ctx.append(op.box.name); return [None] * len(op.outs)
...     def init(self, r, ctx, dests): return [None] * len(r.state)
...     def step(self, r, state, ins, ctx): ctx.append(f"B({r.name})"); return state
...     def finish(self, r, state, ctx, dests): ctx.append("finish"); return [None] * len(r.outputs)
...     def stream(self, node, ins, ctx, dests, run):
...         vals = run.head(ins, ctx); states, _ = run.trip(vals, run.init(ctx), ctx)
...         return run.tail(run.finish(vals, states, ctx), ctx)
>>> seen = []; _ = fold(s, Names(), [None] * 3, seen); seen
['load', 'load', 'load', '·', 'B(softmax_contraction_to_unscaled)', 'finish', 'save']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from napkin_cat.algorithms.nesting import nest_of_diagram
from napkin_cat.algorithms.skipping import skip_of
from napkin_cat.algorithms.streaming import StreamPlan, analyse
from napkin_cat.errors import NapkinError
from napkin_cat.syntax.relabel import map_arrays
from napkin_cat.algorithms.splits import merge_of


@dataclass(frozen=True, eq=False)
class Op:
    """A box of a phase (a primitive or a region) on value ids; ``index`` is its place among the ops."""

    index: int
    box: object
    ins: tuple
    outs: tuple


@dataclass(frozen=True, eq=False)
class Reducer:
    """One reducer of a stream as the fold runs it: ``kind`` is ``'monoid'`` (``op`` folded into the state
    with ``accumulator``), ``'step'`` (the diagram ``step`` on ``state ⊗ inputs``) or ``'nested'`` (``advance``
    run on the state); ``finish`` (a diagram, or None: the state is the output) makes ``outputs``."""

    k: int
    kind: str
    name: str
    ops: tuple
    inputs: tuple
    outputs: tuple
    state: tuple
    finish: object = None
    op: Op | None = None
    accumulator: object = None
    step: object = None
    advance: object = None
    form: object = None


@dataclass(frozen=True, eq=False)
class StreamSchedule:
    """A stream's program: ``head`` ops, ``reducers``, the ``trip`` (ops and reducers in op order), ``tail`` ops.

    ``dom``/``cod``: the value ids of the inside's inputs and outputs; ``streamed``: the input ids sliced per
    trip; ``sliced``: the output ids made slice by slice (a sliced stream); ``arrays``: id → Array (read-only).
    ``region`` is the Stream (None for a diagram run on one slice, inside a nested region).
    """

    region: object
    axis: str
    dom: tuple
    cod: tuple
    arrays: MappingProxyType = field(repr=False)
    streamed: tuple
    sliced: tuple
    head: tuple
    reducers: tuple
    trip: tuple
    tail: tuple
    kind = "stream"

    def position(self, v) -> int:
        """Where the streamed axis sits in value ``v``'s array."""
        return self.arrays[v].names.index(self.axis)

    @property
    def parts(self):
        """How many parallel parts the stream is split into (:mod:`.splits`), or None: one block runs it."""
        return None if self.region is None else self.region.params.get("parts")

    @cached_property
    def merges(self) -> tuple:
        """Each reducer's merge ``state ⊗ state → state`` (a split stream's combine, :mod:`.splits`)."""
        return tuple(merge_of(r) for r in self.reducers)

    @cached_property
    def skip(self):
        """The masks that let a trip be skipped (:mod:`.skipping`), or None: every trip runs."""
        return skip_of(self)

    def reads(self) -> dict:
        """Value id → the phases (``'head'``, ``'body'``, ``'tail'``) that read it."""
        out: dict = {}
        for phase, items in (("head", self.head), ("body", self.trip), ("tail", self.tail)):
            for it in items:
                for v in (it.ins if isinstance(it, Op) else it.inputs):
                    out.setdefault(v, set()).add(phase)
        return out


@dataclass(frozen=True, eq=False)
class KernelSchedule:
    """A kernel: its inside runs at ``level``."""

    region: object
    level: int
    inside: object
    kind = "kernel"


@dataclass(frozen=True, eq=False)
class GridSchedule:
    """A group partition: the inside once per group of ``tile`` along ``axis`` (of size ``full``)."""

    region: object
    axis: str
    tile: object
    full: object
    inside: object
    kind = "grid"


@dataclass(frozen=True, eq=False)
class AdvanceKernel:
    """A nested kernel's trip: ``state`` loaded to ``level``, ``child`` advanced, the state saved back."""

    region: object
    level: int
    state: tuple
    child: object
    kind = "advance_kernel"


@dataclass(frozen=True, eq=False)
class AdvanceGrid:
    """A nested Grid's trip: ``child`` advanced on each group's slice of ``state`` (streaming ``axis``)."""

    region: object
    axis: str
    state: tuple
    child: object
    kind = "advance_grid"

    def short_child(self, n: int):
        """The child of a last, shorter group of ``n`` (a concrete group size: the inside relabelled)."""
        if not isinstance(self.region.size, int) or n == self.region.size:
            return self.child
        return advance_of(nest_of_diagram(relabelled(self.region, n).arg, self.axis, analyse))


@dataclass(frozen=True, eq=False)
class AdvanceLoop:
    """A nested sub-loop (``region`` a Stream) or diagram (``region`` None): its ``schedule``'s head, then its
    trips (one for a diagram) on the state, whose ``parts`` are each reducer's slice of it."""

    region: object
    schedule: StreamSchedule
    parts: tuple
    kind = "advance_loop"

    def split(self, state) -> list:
        return [list(state[a:b]) for a, b in self.parts]

    @staticmethod
    def join(parts) -> list:
        return [x for part in parts for x in part]


# ---------------------------------------------------------------------------------------------- unrolling
def stream_schedule(plan: StreamPlan, region=None) -> StreamSchedule:
    """The schedule of a streaming analysis (:func:`~napkin_cat.algorithms.streaming.analyse`)."""
    ops = [Op(i, box, tuple(ins), tuple(outs)) for i, (box, ins, outs) in enumerate(plan.ops)]
    reducers, last = [], {}
    for k, r in enumerate(plan.reducers):
        common = dict(k=k, name=r.kind, ops=tuple(r.ops), inputs=tuple(r.inputs), outputs=tuple(r.outputs),
                      state=tuple(r.state), finish=r.finish)
        if r.nest is not None:
            red = Reducer(kind="nested", advance=advance_of(r.nest), **common)
        elif r.step is not None:
            red = Reducer(kind="step", step=r.step, form=r.form, **common)
        else:
            red = Reducer(kind="monoid", op=ops[r.op], accumulator=r.accumulator, **common)
        reducers.append(red)
        last[max(r.ops)] = red
    covered = {i for r in plan.reducers for i in r.ops}
    trip = tuple(last[i] if i in last else ops[i] for i in plan.indices("body") if i in last or i not in covered)
    return StreamSchedule(region, plan.axis, tuple(plan.dom), tuple(plan.cod), MappingProxyType(dict(plan.arrays)),
                          tuple(plan.dom[k] for k in plan.streamed_inputs), tuple(plan.sliced_values),
                          tuple(ops[i] for i in plan.indices("head")), tuple(reducers), trip,
                          tuple(ops[i] for i in plan.indices("tail")))


def advance_of(nest):
    """The schedule of a nested reducer's trip (:class:`~napkin_cat.algorithms.nesting.Nest`)."""
    kind = getattr(nest.region, "region", None)
    if kind == "kernel":
        return AdvanceKernel(nest.region, nest.region.params["level"], nest.state, advance_of(nest.child))
    if kind == "grid":
        return AdvanceGrid(nest.region, nest.axis, nest.state, advance_of(nest.child))
    return AdvanceLoop(nest.region, stream_schedule(nest.plan, nest.region), tuple(nest.parts))


def _unroll_kernel(box) -> KernelSchedule:
    return KernelSchedule(box, box.params["level"], box.arg)


def _unroll_grid(box) -> GridSchedule:
    return GridSchedule(box, box.axis, box.size, box.full_size(), box.arg)


def _unroll_stream(box) -> StreamSchedule:
    return stream_schedule(box.plan, box)


#: region kind → its unrolling ``box -> schedule node``; a new region kind registers here (the node's
#: ``kind`` names the handler each algebra gives it)
SCHEDULES = {"kernel": _unroll_kernel, "grid": _unroll_grid, "stream": _unroll_stream}


def schedule_of(box):
    """The schedule of a region (unrolled once, then cached on it), or NapkinError naming the registry."""
    cached = box.__dict__.get("_schedule")
    if cached is None:
        unroll = SCHEDULES.get(getattr(box, "region", None))
        if unroll is None:
            raise NapkinError(f"{box.name}: no schedule is registered for regions of kind "
                              f"{getattr(box, 'region', None)!r}; register box -> node in "
                              f"napkin_cat.algorithms.schedule.SCHEDULES (known: {sorted(SCHEDULES)})")
        cached = box.__dict__["_schedule"] = unroll(box)
    return cached


def relabelled(region, n: int):
    """A partition with a concrete tile read as ``n`` (its last, shorter tile): the inside relabelled, cached."""
    cache = region.__dict__.setdefault("_short", {})
    if n not in cache:
        def fa(arr):
            return arr.replace(axes=tuple(a.relabel(n) if a.name == region.axis and a.size == region.size else a
                                          for a in arr.axes))
        cache[n] = type(region).rebuild(map_arrays(region.arg, fa), region.dom, region.cod,
                                        {**region.params, "size": n})
    return cache[n]


# ---------------------------------------------------------------------------------------------- the fold
def _handler(algebra, node):
    fn = getattr(algebra, node.kind, None)
    if fn is None:
        name = getattr(getattr(node, "region", None), "name", node.kind)
        raise NapkinError(f"{type(algebra).__name__} has no handler {node.kind!r} for {name}: an algebra of the "
                          f"schedule fold gives one per kind of node (napkin_cat.algorithms.schedule)")
    return fn


def fold(node, algebra, ins: list, ctx, dests=None) -> list:
    """The region's outputs under ``algebra``: its handler for ``node.kind`` (``dests``: one per output)."""
    dests = list(dests) if dests is not None else [None] * len(node.region.cod)
    if isinstance(node, StreamSchedule):
        return _handler(algebra, node)(node, ins, ctx, dests, Phases(node, algebra))
    return _handler(algebra, node)(node, ins, ctx, dests)


def fold_region(box, algebra, ins: list, ctx, dests=None) -> list:
    """:func:`fold` over the schedule of the region ``box``."""
    return fold(schedule_of(box), algebra, ins, ctx, dests)


def advance(node, algebra, state: list, ins: list, ctx) -> list:
    """One trip of a nested reducer under ``algebra``: the new state."""
    if isinstance(node, AdvanceLoop):
        return _handler(algebra, node)(node, state, ins, ctx, Phases(node.schedule, algebra))
    return _handler(algebra, node)(node, state, ins, ctx)


class Phases:
    """A stream's phases run on an algebra's values: the value plumbing of every fold over a stream.

    ``head(ins)`` binds the inputs and runs the head ops; ``init()`` is each reducer's empty state;
    ``trip(vals, states)`` runs the maps and accumulates every reducer once (on ``vals``: the caller puts
    a trip's slices there); ``finish(vals, states)`` adds the reducers' outputs; ``tail(vals)`` runs the
    tail ops and returns the outputs.  ``dests`` (value id → destination) go to the ops that make them.
    """

    def __init__(self, schedule: StreamSchedule, algebra):
        self.schedule, self.algebra = schedule, algebra

    def _run(self, op: Op, vals: dict, ctx, dests):
        dests = dests or {}
        outs = self.algebra.op(op, [vals[v] for v in op.ins], ctx, [dests.get(v) for v in op.outs])
        vals.update(zip(op.outs, outs))

    def head(self, ins: list, ctx, dests=None) -> dict:
        vals = dict(zip(self.schedule.dom, ins))
        for op in self.schedule.head:
            self._run(op, vals, ctx, dests)
        return vals

    def init(self, ctx, dests=None) -> list:
        dests = dests or {}
        return [self.algebra.init(r, ctx, [dests.get(v) for v in r.outputs]) for r in self.schedule.reducers]

    def trip(self, vals: dict, states: list, ctx, dests=None) -> tuple[list, dict]:
        vals, states = dict(vals), list(states)
        for item in self.schedule.trip:
            if isinstance(item, Op):
                self._run(item, vals, ctx, dests)
                continue
            ins = [vals[v] for v in item.inputs]
            states[item.k] = (advance(item.advance, self.algebra, states[item.k], ins, ctx) if item.kind == "nested"
                              else getattr(self.algebra, item.kind)(item, states[item.k], ins, ctx))
        return states, vals

    def finish(self, vals: dict, states: list, ctx, dests=None) -> dict:
        vals, dests = dict(vals), dests or {}
        for r, state in zip(self.schedule.reducers, states):
            outs = state if r.finish is None else \
                self.algebra.finish(r, state, ctx, [dests.get(v) for v in r.outputs])
            vals.update(zip(r.outputs, outs))
        return vals

    def merge(self, states: list, other: list, ctx) -> list:
        """Each reducer's state merged with another part's (``algebra.merge(r, diagram, s₁, s₂, ctx)``)."""
        return [self.algebra.merge(r, d, a, b, ctx)
                for r, d, a, b in zip(self.schedule.reducers, self.schedule.merges, states, other)]

    def tail(self, vals: dict, ctx, dests=None) -> list:
        vals = dict(vals)
        for op in self.schedule.tail:
            self._run(op, vals, ctx, dests)
        return [vals[v] for v in self.schedule.cod]


__all__ = ["Op", "Reducer", "StreamSchedule", "KernelSchedule", "GridSchedule", "AdvanceKernel", "AdvanceGrid",
           "AdvanceLoop", "SCHEDULES", "schedule_of", "stream_schedule", "advance_of", "relabelled", "fold",
           "fold_region", "advance", "Phases"]
