"""The numpy meaning of a device region: every device's copy of the inside run in lockstep (SPMD).

A :class:`~napkin_cat.algorithms.devices.Shard` over ``P`` devices runs its inside once per device, on the device's
shard of the axis (``np.array_split``'s cut; a shorter shard is the inside relabelled to its size) and on the whole
of every replicated input.  The devices advance together, box by box, over the one walk of the inside
(:func:`~napkin_cat.syntax.wiring.traverse`, whose values here are one array per device): a box of one device runs on
that device's values, a collective (:mod:`napkin_cat.syntax.collectives`) on every device's values at once, its
merge ``⊕`` run as a diagram; a device without a value of the axis (more devices than values) is idle.  What a box
of one device reads follows the region's record wire by wire (:class:`OnDevice`): the positions of a shard it carries
from the shard's start, of an axis it carries whole (gathered) from 0; a box making an empty shard (a collective's cut
of fewer values than devices) is idle.  The outputs:
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

from napkin_cat.algorithms.device_wires import read_whole, wire_marks
from napkin_cat.algorithms.devices import Shard
from napkin_cat.algorithms.device_shards import (collectives_within, cut_spans, device_inside, device_shards,
                                                 largest_shard, shard_keys)
from napkin_cat.algorithms.collective_merges import merge_diagram
from napkin_cat.algorithms.orders import Pieces, cut, extent
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.errors import DeviceError, NapkinError
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.syntax.adapter import Bubble
from napkin_cat.syntax.flat import layers
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
    marks = wire_marks(box, shard_keys(node))
    devices = [OnDevice(node, env, mine, cut_spans(node, value, p, P), marks) for p, mine in enumerate(shards)]
    steps = [d.steps for d in devices]
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
            made = [run_ring(steps[p][step.index], p, per_device, devices[p].env(step.index)) for p in range(P)]
            return [tuple(made[p][j] for p in range(P)) for j in range(len(first.cod))]
        if not isinstance(first, Bubble) and kind_of(first.data.kind).collective is not None:
            per_device = [[v[p] for v in step.ins] for p in range(P)]
            made = kind_of(first.data.kind).collective.run(first, per_device, merge_for(first))
            return [tuple(made[p][j] for p in range(P)) for j in range(len(first.cod))]
        made = []
        for p in range(P):
            b, ins, on = steps[p][step.index], [v[p] for v in step.ins], devices[p]
            e = on.env(step.index)
            made.append(on.idle(step.index, e) if on.idles(step.index) else
                        run_region(b, ins, e) if isinstance(b, Bubble) else run_primitive(b, ins, e))
        return [tuple(made[p][j] for p in range(P)) for j in range(len(first.cod))]

    outs = traverse(devices[0].inside, values, on_box)
    return join_outputs(node, [[ys[p] for ys in outs] for p in range(P)], shards)


def first_device_insides(diagram, env) -> list:
    """The inside of each device region of ``diagram`` (at its top level, where a program holds them) as the device
    with the largest shard runs it (:func:`~napkin_cat.algorithms.device_shards.largest_shard`: device 0 under the
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


class OnDevice:
    """A device's run of the inside of the device region of schedule ``node``, box by box, as the record says
    (:func:`~napkin_cat.algorithms.device_wires.wire_marks`, ``marks``): its inside at its extents
    (:func:`~napkin_cat.algorithms.device_shards.device_inside`), and for each box the positions it reads and whether it
    runs::

        a box carrying the device's shard of a   reads a's positions from the shard's start (its pieces' positions)
        a box carrying a whole (gathered)        reads a's positions from 0: offset 0 over the whole axis
        a box making an empty shard              runs on no value of it: idle, its outputs empty along it

    ``mine``: its shards of the region's sharded axes (``{axis: (start, stop)}`` or pieces); ``spans``: its shards
    of each axis a collective cuts (:func:`~napkin_cat.algorithms.device_shards.cut_spans`; an empty one where the axis
    has fewer values than devices: the device then idles between the collectives, as it idles on an empty shard of
    the region's axis)."""

    def __init__(self, node, env, mine: dict, spans: dict, marks: list):
        self.node, self.marks = node, marks
        self.spans = {**{(a, node.axes[a][0]): s for a, s in mine.items()}, **spans}
        self.empty = {key for key, s in self.spans.items() if extent(s) == 0}
        self.inside = device_inside(node, mine, {key: extent(s) for key, s in spans.items()})
        self.steps = [b for _, b in layers(self.inside)]
        self.written = [b for _, b in layers(node.inside)]          # the inside as written: what the marks name
        self.base = device_env(node, env, mine)
        self._envs = {}

    def env(self, i: int):
        """The sizes and tiles the box of layer ``i`` runs under: the device's, less the tile of each sharded axis
        the box carries whole, with the tile of each collective's cut it carries."""
        got = self._envs.get(i)
        if got is None:
            seen = self.marks[i][2] or frozenset()
            whole = read_whole(self.steps[i], seen, self.node.axes)
            got = self.base.child()
            got.tiles = {a: t for a, t in self.base.tiles.items() if a not in whole}
            got.maps = {a: m for a, m in self.base.maps.items() if a not in whole}
            for (a, size) in sorted(seen - {(a, self.node.axes[a][0]) for a in self.node.axes}, key=str):
                lo, hi = self.spans[a, size]
                got = got.within(a, lo, hi - lo)
            self._envs[i] = got
        return got

    def idles(self, i: int) -> bool:
        """Whether an output of the box of layer ``i`` carries an empty shard of the device's (it computes nothing)."""
        return any(m & self.empty for m in self.marks[i][1])

    def idle(self, i: int, env) -> list:
        """The outputs of the idle box of layer ``i``: empty along the empty shard each carries; DeviceError where an
        output carries none (a box making an empty shard and another value)."""
        box, made = self.steps[i], self.marks[i][1]
        outs = []
        for j, (arr, marked) in enumerate(zip(self.written[i].cod.inside, made)):
            gone = marked & self.empty
            if not gone:
                raise DeviceError(f"{box.name!r} makes an empty shard of {sorted(self.marks[i][2] & self.empty)} "
                                  f"(fewer values than devices) but its output {j} ({arr}) does not carry it: the "
                                  f"device cannot idle on it; shard an axis of at least as many values as devices")
            outs.append(np.zeros(tuple(0 if (x.name, x.size) in gone else env.size(y.size, f"axis {y.name!r}")
                                       for x, y in zip(arr.axes, box.cod.inside[j].axes)),
                                 dtype={"bool": bool, "int": np.int64}.get(arr.dtype.family, np.float64)))
        return outs


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


__all__ = ["run_devices", "first_device_insides", "OnDevice", "device_env", "place_inputs",
           "join_outputs"]
