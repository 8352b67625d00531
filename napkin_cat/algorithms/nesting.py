"""Nested reducers: a region inside a stream's slice that folds the streamed axis (paper §3.1, §4, §5.2).

In a multi-level algorithm a stream's slice is computed by a region one level down (a level-2
kernel, its Grid, or a sub-loop streaming the slice again).  Such a region reads the slice and folds
the streamed axis away, so the stream must carry what the region accumulates from slice to slice.
The region is then a **nested reducer**: its accumulator is the accumulator of what it contains,
threaded through it.  One trip of the stream *advances* the region on the state::

    Kernel(ℓ)   load the state to ℓ ; advance the inside ; save the state back
    Grid(a, g)  advance each group on its slice of the state
    Stream(b, u) (a sub-loop along the stream's own axis)  advance per sub-slice of u
    a diagram   its head, then its maps and each reducer's accumulator on one slice

and after the last trip the stream finishes the state as the inside would (an online softmax's
division; nothing for a sum).  This is the fusion theorem's accumulator ``B`` read through the
regions: the region's inside is streamable along the axis, so it has an accumulator form, and
relabelling (a Kernel moves data between levels, a Grid splits it) commutes with it.

A :class:`Nest` records, per region, the state at its boundary and how the inside advances; every
functor (numpy, cost, plan) reads it, never the region kinds' internals.

>>> import napkin_cat as nc
>>> tiled = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
>>> two = nc.group(nc.kernel(tiled, level=2), "a", "h_a")
>>> s = two.boxes[0].arg.boxes[0].arg.boxes[0]
>>> (r,) = s.plan.reducers
>>> r.kind, [str(a.array) for a in r.state], r.nest.region.name
('nested', ['a[g_a]×c@1'], 'Grid(axis=a, size=h_a)')
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.algorithms.accumulators import StateArray
from napkin_cat.errors import RewriteError
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty, single
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import transfer
from napkin_cat.syntax.relabel import map_arrays


@dataclass(frozen=True)
class Nest:
    """How ``region`` (or, with ``region`` None, a diagram) advances a stream's state along ``axis``.

    ``state``: the maintained arrays at the boundary, in order (each inner reducer's, concatenated);
    ``finish``: a diagram ``state → outputs`` run once after the last trip (None: the state is the
    output, as for a sum); ``plan``: the streaming analysis of the diagram (a diagram or a sub-loop);
    ``child``: the nest of a Kernel's or a Grid's inside; ``parts``: per reducer of ``plan``, its slice
    of the state.
    """

    region: object
    axis: str
    state: tuple
    finish: object = None
    plan: object = None
    child: "Nest | None" = None
    parts: tuple = ()

    @property
    def kind(self) -> str:
        return "nested"


def state_count(r) -> int:
    """How many state arrays a reducer of a stream plan keeps."""
    return len(r.state)


def nest_of(region, axis: str, analyse) -> Nest:
    """The nest of a region op of a stream along ``axis`` (cached on the region), or RewriteError saying why;
    ``analyse`` is the streaming analysis (:func:`napkin_cat.algorithms.streaming.analyse`) of its inside."""
    cache = region.__dict__.setdefault("_nests", {})
    if axis not in cache:
        cache[axis] = _nest_of(region, axis, analyse)
    return cache[axis]


def _nest_of(region, axis: str, analyse) -> Nest:
    if getattr(region, "region", None) == "stream":
        if region.axis != axis:
            raise RewriteError(f"{region.name} inside the stream along {axis!r} streams another axis; a stream "
                               f"nested in a stream along {axis!r} must be a sub-loop along {axis!r}")
        inner = _of_plan(region.plan, None)
        return Nest(region, axis, inner.state, inner.finish, region.plan, None, inner.parts)
    if getattr(region, "region", None) == "kernel":
        child = nest_of_diagram(region.arg, axis, analyse)
        level = (region.dom.inside or region.cod.inside)[0].level
        fa = lambda a: a.replace(level=level)   # noqa: E731
    elif getattr(region, "region", None) == "grid":
        child = nest_of_diagram(region.arg, axis, analyse)
        full = region.full_size()
        fa = lambda a: a.replace(axes=tuple(Axis(x.name, full) if x.name == region.axis else x  # noqa: E731
                                            for x in a.axes))
    else:
        raise RewriteError(f"{region.name}: a region of kind {region.region!r} cannot fold the streamed axis "
                           f"{axis!r} (a Kernel, a Grid or a sub-loop Stream can)")
    if getattr(region, "region", None) == "grid":
        for s in child.state:
            if region.axis not in s.array.names:
                raise RewriteError(f"{region.name} inside the stream along {axis!r}: its state {s.name!r} "
                                   f"({s.array}) lacks {region.axis!r}, so the groups would share it")
    state = tuple(StateArray(s.name, fa(s.array), s.init) for s in child.state)
    finish = None if child.finish is None else map_arrays(child.finish, fa)
    return Nest(region, axis, state, finish, None, child)


def nest_of_diagram(d: Diagram, axis: str, analyse) -> Nest:
    """The nest of a diagram run on one slice (the inside of a Kernel or a Grid)."""
    return _of_plan(analyse(d, axis), None)


def _of_plan(plan, region) -> Nest:
    """The state of a stream plan's reducers and the finish that turns it into the plan's outputs: each
    reducer's finish, then the tail (its saves are identities at the state's level)."""
    state, parts, monoid_only = [], [], True
    for r in plan.reducers:
        parts.append((len(state), len(state) + len(r.state)))
        state += list(r.state)
        monoid_only = monoid_only and r.finish is None
    b = Builder(Ty(*(s.array for s in state)))
    wire, k = {}, 0
    for r in plan.reducers:
        mine = b.inputs[k:k + len(r.state)]
        k += len(r.state)
        if r.finish is None:
            wire[r.outputs[0]] = mine[0]
        else:
            res = b(r.finish, *mine)
            wire.update(zip(r.outputs, res if isinstance(res, tuple) else (res,)))
    computes = False
    for i in plan.indices("tail"):
        box, ins, outs = plan.ops[i]
        missing = [v for v in ins if v not in wire]
        if missing:
            raise RewriteError(f"{box.name!r} runs after the fold along {plan.axis!r} inside a region nested in the "
                               "stream and reads a value that is not accumulated; compute it outside the region")
        if not isinstance(box, Bubble) and box.data.kind in ("load", "save"):
            wire[outs[0]] = wire[ins[0]]
            continue
        computes = True
        b.apply(single(box), wire, ins, outs)
    for j, v in enumerate(plan.cod):
        if v not in wire:
            raise RewriteError(f"output {j} of a region nested in the stream along {plan.axis!r} is not "
                               "accumulated along it, so the region cannot be advanced slice by slice")
    direct = monoid_only and not computes and [wire[v] for v in plan.cod] == list(b.inputs)
    finish = None if direct else _at_one_level(b.build(*(wire[v] for v in plan.cod)))
    return Nest(region, plan.axis, tuple(state), finish, plan, None, tuple(parts))


def _at_one_level(d: Diagram) -> Diagram:
    """The finish at its state's level (a tail's saves were dropped: the values stay where the state is)."""
    level = d.dom.inside[0].level if d.dom.inside else 0
    return map_arrays(d, lambda a: a.replace(level=level))


def state_moves(arr, level: int, direction: str) -> list:
    """The Load (or Save) boxes that take a state array between its level and ``level``, one level a step."""
    steps, cur = [], arr
    while cur.level < level:
        step = transfer("load", cur).boxes[0]
        steps.append(step)
        cur = step.cod.inside[0]
    if direction == "save":
        steps = [transfer("save", b.cod.inside[0]).boxes[0] for b in reversed(steps)]
    return steps
