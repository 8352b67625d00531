"""The numpy meaning of a device region: every device's copy of the inside run in lockstep (SPMD).

A :class:`~napkin_cat.algorithms.devices.Shard` over ``P`` devices runs its inside once per device, on the device's
shard of the axis (``np.array_split``'s cut; a shorter shard is the inside relabelled to its size) and on the whole
of every replicated input.  The devices advance together, box by box, over the one walk of the inside
(:func:`~napkin_cat.syntax.wiring.traverse`, whose values here are one array per device): a box of one device runs on
that device's values, a collective (:mod:`napkin_cat.syntax.collectives`) on every device's values at once, its
merge ``⊕`` run as a diagram; a device without a value of the axis (more devices than values) is idle.  The outputs:
a sharded one is the devices' shards joined, a replicated one the value every device holds (a
:class:`~napkin_cat.errors.DeviceError` names one on which the devices disagree: a partial left unreduced).  The law::

    evaluate(shard(f, a, P), xs) == evaluate(f, xs)          (f woven over a; any P)

>>> import numpy as np, napkin_cat as nc
>>> f = nc.shard(nc.einsum("n d, d h -> n h") >> nc.elementwise("relu", "n h"), "h", devices=3)
>>> x, w = np.random.rand(2, 4), np.random.rand(4, 7)
>>> np.allclose(nc.evaluate(f, x, w), np.maximum(x @ w, 0))
True
"""
from __future__ import annotations

import numpy as np

from napkin_cat.algorithms.devices import (Shard, collectives_within, cut_extents, device_inside, device_shards,
                                           largest_shard, merge_diagram)
from napkin_cat.algorithms.orders import Pieces, cut
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.errors import DeviceError, NapkinError
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.syntax.adapter import Bubble, layers
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.wiring import traverse


def run_devices(node, xs: list, env, interpret, run_region, run_ring=None) -> list:
    """The outputs of the device region of schedule ``node`` on ``xs`` (``env``: the sizes; ``interpret`` runs a
    diagram, ``run_region`` a region nested in the inside on one device's values, ``run_ring(box, p, ins, env)``
    device ``p``'s part of a ring (:mod:`napkin_cat.algorithms.ring`) given every device's inputs ``ins``)."""
    box = node.region
    nested = collectives_within(node.inside)
    if nested:
        raise DeviceError(f"{box.name}: the collective {nested[0].name!r} sits in a region nested in the device "
                          f"region; the devices run in lockstep over the device region's own boxes only: place it "
                          f"there")
    value = lambda e: env.size(e, f"a size of {box.name}")    # noqa: E731
    shards = [d for d in device_shards(node, value) if d is not None]
    P = len(shards)                    # an idle device (an empty shard) computes nothing and exchanges nothing
    insides = [device_inside(node, d, cut_extents(node, value, p, P)) for p, d in enumerate(shards)]
    steps = [[b for _, b in layers(d)] for d in insides]
    envs = [device_env(node, env, mine) for mine in shards]
    placed = [place_inputs(node, xs, mine) for mine in shards]
    values = [tuple(p[i] for p in placed) for i in range(len(xs))]

    def merge_for(b):
        return lambda u, v: list(interpret(merge_diagram(b), list(u) + list(v), env))

    def on_box(step):
        first = step.box
        if getattr(first, "region", None) == "ring":
            if P != env.size(node.devices, f"the devices of {box.name}") or run_ring is None:
                raise DeviceError(f"{box.name}: the ring {first.name} passes shards through every device, but only "
                                  f"{P} of {node.devices} hold a shard of {node.axis!r}; shard an axis of at least "
                                  f"as many values as devices")
            per_device = [[v[p] for v in step.ins] for p in range(P)]
            made = [run_ring(steps[p][step.index], p, per_device, envs[p]) for p in range(P)]
            return [tuple(made[p][j] for p in range(P)) for j in range(len(first.cod))]
        if not isinstance(first, Bubble) and kind_of(first.data.kind).collective is not None:
            per_device = [[v[p] for v in step.ins] for p in range(P)]
            made = kind_of(first.data.kind).collective.run(first, per_device, merge_for(first))
            return [tuple(made[p][j] for p in range(P)) for j in range(len(first.cod))]
        made = []
        for p in range(P):
            b, ins = steps[p][step.index], [v[p] for v in step.ins]
            made.append(run_region(b, ins, envs[p]) if isinstance(b, Bubble) else run_primitive(b, ins, envs[p]))
        return [tuple(made[p][j] for p in range(P)) for j in range(len(first.cod))]

    outs = traverse(insides[0], values, on_box)
    return join_outputs(node, [[ys[p] for ys in outs] for p in range(P)], shards)


def first_device_insides(diagram, env) -> list:
    """The inside of each device region of ``diagram`` (at its top level, where a program holds them) as the device
    with the largest shard runs it (:func:`~napkin_cat.algorithms.devices.largest_shard`: device 0 under the
    contiguous order), at ``env``, for the checks made before a run; a region whose sizes ``env`` does not bind is
    left out (its run says what is missing)."""
    out = []
    for _, box in layers(diagram):
        if isinstance(box, Shard):
            node = schedule_of(box)
            try:
                value = lambda e: env.size(e, f"a size of {box.name}")    # noqa: E731
                out.append(device_inside(node, *largest_shard(node, value)))
            except NapkinError:
                continue
    return out


def device_env(node, env, mine: dict):
    """The sizes and tiles a device runs its inside under: ``env`` within its shards ``mine`` (``{axis: (start,
    stop)}``), a shard's size symbol bound to its extent; a shard of pieces (a non-contiguous order) maps its
    indices to its pieces' positions (``Env.maps``: what a position or a mask reads)."""
    e = env.child()
    for a, span in mine.items():
        if isinstance(span, Pieces):
            e = e.within(a, 0, span.extent)
            e.maps = {**e.maps, a: span.positions()}
            n = span.extent
        else:
            lo, hi = span
            e, n = e.within(a, lo, hi - lo), hi - lo
        tile = node.axes[a][0]
        if not isinstance(tile, int) and tile.is_Symbol:
            e[tile] = n
    return e


def place_inputs(node, xs: list, mine: dict) -> list:
    """A device's inputs: its shard of each sharded input (``mine``: its ``{axis: (start, stop)}``), each replicated
    input whole."""
    out = []
    for x, arr, axis in zip(xs, node.region.dom.inside, node.sharded_in):
        out.append(x if axis is None else cut(x, arr.names.index(axis), mine[axis]))
    return out


def join_outputs(node, ys: list, shards: list | None = None) -> list:
    """The region's outputs from ``ys[p]``, the outputs of its ``p``-th device that holds a shard (in device order):
    a sharded output is the shards joined (each at its pieces' positions where ``shards``, the devices' shards,
    are pieces: a non-contiguous order), a replicated one the value every device holds, else a DeviceError
    naming the output and the first device that disagrees (a partial left unreduced).

    >>> import numpy as np, napkin_cat as nc
    >>> from napkin_cat.algorithms.schedule import schedule_of
    >>> node = schedule_of(nc.shard(nc.elementwise("exp", "n"), "n", devices=2).boxes[0])
    >>> join_outputs(node, [[np.ones(2)], [np.zeros(1)]])[0].tolist()
    [1.0, 1.0, 0.0]
    """
    box, result = node.region, []
    for j, (arr, axis) in enumerate(zip(box.cod.inside, node.sharded_out)):
        if axis is not None:
            joined = np.concatenate([np.asarray(y[j]) for y in ys], axis=arr.names.index(axis))
            spans = [m[axis] for m in (shards or []) if m is not None]
            if spans and isinstance(spans[0], Pieces):       # the devices' pieces back at their positions
                where = np.concatenate([s.positions() for s in spans])
                joined = np.take(joined, np.argsort(where, kind="stable"), axis=arr.names.index(axis))
            result.append(joined)
            continue
        first = np.asarray(ys[0][j])
        for p, y in enumerate(ys[1:], 1):
            y = np.asarray(y[j])
            if y.shape != first.shape or not np.array_equal(y, first, equal_nan=np.issubdtype(first.dtype, np.inexact)):
                raise DeviceError(f"{box.name}: output {j} ({arr}) is replicated (its array inside has no shard of "
                                  f"{node.axis!r}) but device {p} holds another value than device 0: a partial "
                                  f"result left unreduced; reduce it across the devices (an all-reduce) or keep the "
                                  f"axis")
        result.append(first)
    return result


__all__ = ["run_devices", "first_device_insides", "device_env", "place_inputs", "join_outputs"]
