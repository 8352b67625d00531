"""The device level: a program split over ``P`` devices (issue 37), a Grid one level above global memory.

``Shard(axis, devices=P)`` is a group partition whose groups are devices: the inside runs once per device, on the
device's shard of ``axis`` (``np.array_split``'s cut: ``⌊a/P⌋`` or one more values,
:func:`~napkin_cat.syntax.collectives.shard_bounds`; with more devices than values the last ones are idle), an input
without the axis replicated on every device::

    weave_a(F) ≡ split_a ; (F ⊗ … ⊗ F) ; join_a        (P copies of F, one per device)

Its inside sees the axis with the size of a shard: ``a/P`` symbolically, ``⌈a/P⌉`` at concrete sizes (a shorter
shard is the inside relabelled to its size, as a Grid's last, shorter group).  An input whose array inside keeps the
axis at that size is sharded, any other input replicated; an output is sharded (the devices' shards joined) where
the inside's array has the shard's size, else it is *replicated*: every device holds the same value (made so by an
all-reduce or an all-gather: :mod:`napkin_cat.syntax.collectives`), and a numpy run checks that they agree.

``order`` (``params["order"]``, :mod:`~napkin_cat.algorithms.orders`) says which pieces of each sharded axis a
device holds: contiguous (the default, ``np.array_split``'s shards) or zigzag (chunks ``p`` and ``2P − 1 − p`` of
``2P``, a causal mask's work balanced); a device then runs its inside on its pieces joined, each index at its
piece's position (:attr:`~napkin_cat.semantics.env.Env.maps`), which needs every box that sees the axis woven over
it and no collective inside but a ring's exchanges.

The region registers its schedule (:data:`~napkin_cat.algorithms.schedule.SCHEDULES`, a :class:`ShardSchedule`
whose handler each algebra names ``shard``): the numpy run folds the inside on every device in lockstep, so that a
collective sees every device's values; the cost counts one device's work, its level-0 memory and the values it
sends and receives over the link.

>>> import napkin_cat as nc
>>> s = shard(nc.library.matmul(), "a", devices=4)
>>> box = s.boxes[0]
>>> box.region, box.axis, box.size, box.devices, box.trips
('shard', 'a', a/4, 4, 4)
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from napkin_cat.algorithms.bubbles import REGIONS, Partition, Region, Stream
from napkin_cat.algorithms.partitions import relabel_axis, single
from napkin_cat.algorithms.schedule import SCHEDULES
from napkin_cat.algorithms.splits import MERGES
from napkin_cat.algorithms.accumulators import StateArray, build_state_diagrams
from napkin_cat.algorithms.orders import CONTIGUOUS, Pieces, check_chunks, device_pieces, extent, order_of
from napkin_cat.errors import AxisError, DeviceError, RewriteError
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty, is_structural, layers
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.collectives import as_devices, shard_size
from napkin_cat.syntax.construct import elementwise
from napkin_cat.syntax.primitive import KINDS
from napkin_cat.syntax.relabel import map_arrays, tile_relabel


class Shard(Partition):
    """A device partition: the inside once per device on its shard of ``axis`` (``size``: a shard's size, ``a/P`` or
    ``⌈a/P⌉``), ``params["devices"]`` devices (an int or a size symbol)."""

    region = "shard"
    carrier = "cod"

    def __init__(self, arg: Diagram, dom, cod, params: dict):
        if "devices" not in params:
            raise AxisError(f"a Shard needs params axis, size and devices; got {dict(params)}")
        params = {**params, "devices": as_devices(params["devices"])}
        super().__init__(arg, dom, cod, params)

    @property
    def devices(self):
        return self.params["devices"]

    @property
    def order(self) -> str:
        """The order of the devices' shards (:mod:`~napkin_cat.algorithms.orders`), of every axis the region shards:
        ``params["order"]``, contiguous where none is given."""
        return self.params.get("order", CONTIGUOUS)

    def full_size(self):
        """The axis's size on the region's boundary (an output, else an input that carries it)."""
        for arr in (*self.cod.inside, *self.dom.inside):
            if self.axis in arr.names:
                return arr.axis(self.axis).size
        raise AxisError(f"{self.name}: neither an input nor an output carries {self.axis!r}")

    def size_parts(self) -> tuple:
        return (self.size, self.devices), (self.arg,)

    @property
    def trips(self):
        """How many devices run the inside: ``P``."""
        return sympy.sympify(self.devices)

    def sharded(self, side: str) -> tuple:
        """For each input (``side='dom'``) or output (``'cod'``), the axis it is sharded along (its array inside
        carries that axis at a shard's size, not the size it has outside), or None: it is replicated, whole on every
        device.  Besides the region's axis, an input may arrive sharded along another axis (*co-sharded*: device
        ``p`` holds shard ``p`` of each; an all-gather inside makes it whole), as K and V along the keys where the
        region shards the queries."""
        outer = self.dom.inside if side == "dom" else self.cod.inside
        inner = self.arg.dom.inside if side == "dom" else self.arg.cod.inside
        out = []
        for o, i in zip(outer, inner):
            cut = [a.name for a, b in zip(o.axes, i.axes) if a.size != b.size]
            if len(cut) > 1:
                raise AxisError(f"{self.name}: the array {o} is sharded along {cut}; an array is sharded along one "
                                f"axis at most")
            out.append(cut[0] if cut else None)
        return tuple(out)

    def sharded_axes(self) -> dict:
        """Axis → ``(shard size, full size)`` of every axis the region shards: its own, and any an input or output
        is sharded along (:meth:`sharded`)."""
        found = {self.axis: (self.size, self.full_size())}
        for side in ("dom", "cod"):
            outer = self.dom.inside if side == "dom" else self.cod.inside
            inner = self.arg.dom.inside if side == "dom" else self.arg.cod.inside
            for name, o, i in zip(self.sharded(side), outer, inner):
                if name is not None:
                    found.setdefault(name, (i.axis(name).size, o.axis(name).size))
        return found


REGIONS[Shard.region] = Shard


@dataclass(frozen=True, eq=False)
class ShardSchedule:
    """A device partition: the inside once per device, ``devices`` of them, on shards of ``axis`` (``full`` values,
    shards of ``tile``); ``sharded_in``/``sharded_out``: the axis each input and output is sharded along (None:
    replicated); ``axes``: every sharded axis → ``(shard size, full size)``."""

    region: object
    axis: str
    devices: object
    tile: object
    full: object
    inside: object
    sharded_in: tuple
    sharded_out: tuple
    axes: dict
    order: str = CONTIGUOUS
    kind = "shard"


def _unroll_shard(box: Shard) -> ShardSchedule:
    return ShardSchedule(box, box.axis, box.devices, box.size, box.full_size(), box.arg, box.sharded("dom"),
                         box.sharded("cod"), box.sharded_axes(), box.order)


SCHEDULES[Shard.region] = _unroll_shard


def _not_woven(d: Diagram, axis: str) -> str | None:
    """None if every box that sees ``axis`` is woven over it (so the devices' shards are independent), else why."""
    for _, box in layers(d):
        if is_structural(box) is not None:
            continue
        if isinstance(box, Shard):
            return f"{box.name} is a device region already: a program has one device level"
        if isinstance(box, Stream) and box.axis == axis:
            return f"{axis!r} is streamed inside {box.name}"
        if isinstance(box, Region):
            why = _not_woven(box.arg, axis)
            if why:
                return why
            continue
        if any(axis in a.names for a in (*box.dom.inside, *box.cod.inside)) and axis not in box.data.weave_names:
            return (f"{box.name!r} has {axis!r} in its item-level core (it is not woven over {axis!r}), so the "
                    f"devices' shards would not be independent")
    return None


def shard(diagram: Diagram, axis: str, devices, order=None) -> Diagram:
    """The program run on ``devices`` devices, each on its shard of ``axis`` (a :class:`Shard` around it): legal where
    every box that sees ``axis`` is woven over it (the group partition's condition), else RewriteError naming the box;
    inputs without the axis are replicated on every device.  ``order``: which pieces of the axis each device holds
    (:mod:`~napkin_cat.algorithms.orders`: ``"contiguous"``, the default, or ``"zigzag"``).

    >>> import numpy as np, napkin_cat as nc
    >>> d = shard(nc.library.attention(), "q", devices=3)
    >>> Q, K, V = np.random.rand(7, 4), np.random.rand(5, 4), np.random.rand(5, 4)
    >>> np.allclose(nc.evaluate(d, Q, K, V), nc.evaluate(nc.library.attention(), Q, K, V))
    True
    """
    if not isinstance(diagram, Diagram):
        raise RewriteError(f"shard takes a Diagram, got {type(diagram).__name__}")
    P = as_devices(devices)
    carriers = [a for a in (*diagram.cod.inside, *diagram.dom.inside) if axis in a.names]
    if not carriers:
        raise AxisError(f"cannot shard along {axis!r}: no input or output carries it; the axes are "
                        f"{sorted({n for a in (*diagram.dom.inside, *diagram.cod.inside) for n in a.names})}")
    why = _not_woven(diagram, axis)
    if why:
        raise RewriteError(f"cannot shard along {axis!r} over {P} devices: {why}")
    full = carriers[0].axis(axis).size
    check_chunks(full, P, order, axis)
    size = shard_size(full, P)
    inside = relabel_axis(diagram, axis, size, full=full)
    return single(Shard(inside, diagram.dom, diagram.cod, {"axis": axis, "size": size, "devices": P,
                                                           **ordered(order)}))


def ordered(order) -> dict:
    """The params that record ``order`` on a region: none for the contiguous order (every region made before orders
    existed is one), ``{"order": name}`` else."""
    name = order_of(order).name
    return {} if name == CONTIGUOUS else {"order": name}


def device_region(inside: Diagram, axis: str, devices, full, *, also: dict | None = None, order=None) -> Diagram:
    """A device region around ``inside``, a program written for one device's shard (its arrays carry ``axis`` at a
    shard's size, :func:`~napkin_cat.syntax.collectives.shard_size` of ``full`` over ``devices``; collectives
    inside): its boundary is the inside's with every shard whole.  ``also``: co-sharded axes → their full sizes
    (an input sharded along one arrives so: shard ``p`` of it on device ``p``).

    >>> import napkin_cat as nc
    >>> h = nc.symbol("h")
    >>> one = nc.einsum("n h, h e -> n e", h=h / 2) >> nc.all_reduce("n e", devices=2)
    >>> device_region(one, "h", 2, h).dom
    Ty(Array(n×h), Array(h×e))
    """
    P = as_devices(devices)
    size = shard_size(full, P)
    if order_of(order).name != CONTIGUOUS:
        for a, f in {axis: full, **(also or {})}.items():
            check_chunks(f, P, order, a)
        why = _not_woven(inside, axis) or next((f"the collective {b.name!r} inside assumes contiguous shards"
                                                for _, b in layers(inside) if is_structural(b) is None
                                                and not isinstance(b, Bubble)
                                                and KINDS[b.data.kind].collective is not None), None)
        if why:
            raise RewriteError(f"no device region along {axis!r} in the {order_of(order).name} order: {why}; a "
                               f"device runs its pieces of {axis!r} apart, so every box that sees it is woven over "
                               f"it (rings are the only exchange such a region has)")
    wholes = [tile_relabel(a, f, shard_size(f, P)) for a, f in {axis: full, **(also or {})}.items()]

    def whole(arr):
        for fa in wholes:
            arr = fa(arr)
        return arr
    return single(Shard(inside, Ty(*map(whole, inside.dom.inside)), Ty(*map(whole, inside.cod.inside)),
                        {"axis": axis, "size": size, "devices": P, **ordered(order)}))


def device_shards(node, value) -> list:
    """Each device's shard of every sharded axis, ``{axis: (start, stop)}`` (``np.array_split``'s cuts), or None for
    an idle device (an empty shard of the region's axis: more devices than values); ``value(expr)``: a size as an
    int.  A co-sharded axis with fewer values than devices leaves some devices an empty shard of it: they hold none
    of the inputs sharded along it (and send none of them).  Under a non-contiguous order (``node.order``) a shard is
    its :class:`~napkin_cat.algorithms.orders.Pieces`, ``((start, stop), …)``."""
    P = value(node.devices)
    contiguous = order_of(node.order).name == CONTIGUOUS
    cuts = {}
    for a, (_, full) in node.axes.items():
        n = value(full)
        check_chunks(n, P, node.order, a)
        cuts[a] = device_pieces(n, P, node.order)
    out = []
    for p in range(P):
        mine = {a: (b[p][0] if contiguous else Pieces(b[p])) for a, b in cuts.items()}
        out.append(None if extent(mine[node.axis]) == 0 else mine)
    return out


def device_inside(node, shards: dict):
    """The inside a device runs on its shards (``{axis: (start, stop)}``): every sharded axis at its shard's size
    (kept on the region per extents); an empty shard of a co-sharded axis leaves that axis as it is (no box but the
    all-gather reads it, which reads the device's values themselves)."""
    box = node.region
    extents = tuple(sorted((a, extent(s)) for a, s in shards.items() if extent(s) > 0))   # an empty co-shard: kept
    if all(isinstance(node.axes[a][0], int) and n == node.axes[a][0] for a, n in extents):
        return node.inside
    cache = box.__dict__.setdefault("_device_insides", {})
    if extents not in cache:
        sizes = {a: (node.axes[a][0], n) for a, n in extents}

        def fa(arr):
            return arr.replace(axes=tuple(x.relabel(sizes[x.name][1]) if x.name in sizes and x.size == sizes[x.name][0]
                                          else x for x in arr.axes))
        cache[extents] = map_arrays(box.arg, fa)
    return cache[extents]


# ------------------------------------------------------------------------------------------------ merges
def _sig(arr) -> str:
    return " ".join(arr.names) or "()"


def merge_diagram(box) -> Diagram:
    """The merge ``⊕`` of a reducing collective (``state ⊗ state → state``) from its ``merge`` parameter: an
    elementwise kind of two operands applied to each array, or a stream reducer's merge
    (:data:`~napkin_cat.algorithms.splits.MERGES`: online softmax's ``(μ, z, o)``), kept on the box.

    >>> import napkin_cat as nc
    >>> from napkin_cat.syntax.collectives import all_reduce
    >>> [b.name for b in merge_diagram(all_reduce("q d", devices=2, merge="max").boxes[0]).boxes]
    ['max']
    """
    found = box.__dict__.get("_merge_diagram")
    if found is not None:
        return found
    merge, arrays = box.data.param("merge"), list(box.dom.inside)
    if merge in MERGES:
        state = [StateArray(f"s{i}", a, 0.0) for i, a in enumerate(arrays)]
        d, _ = build_state_diagrams(f"{merge} merge", state, arrays,
                                    lambda b, st, *other: MERGES[merge](b, list(st), list(other)),
                                    lambda b, st: st[:1], arrays[:1])
    elif merge in KINDS and KINDS[merge].arity == 2:
        b = Builder(box.dom @ box.dom)
        k = len(arrays)
        outs = [b(elementwise(merge, f"{_sig(a)}, {_sig(a)} -> {_sig(a)}", level=a.level, dtype=a.dtype,
                              sizes={x.name: x.size for x in a.axes}), b.inputs[i], b.inputs[k + i])
                for i, a in enumerate(arrays)]
        d = b.build(*outs)
    else:
        raise DeviceError(f"{box.name}: its merge {merge!r} is neither an elementwise kind of two operands (such as "
                          f"'add', 'max') nor a reducer's merge ({sorted(MERGES)})")
    box.__dict__["_merge_diagram"] = d
    return d


def collective_cuts(node) -> dict:
    """``(axis, shard size) → full size`` of every axis a collective at the top of the device region's inside cuts
    into shards that are not the region's own (a reduce-scatter's axis, an all-to-all's scatter axis, an all-gather's
    axis read sharded): device ``p`` holds shard ``p`` of it, cut as ``np.array_split`` cuts among the devices that
    hold a shard of the region, not the shard size the box declares (``⌈n/P⌉``) on every device.

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.schedule import schedule_of
    >>> one = nc.einsum("n h, h e -> n e", h=3, n=7) >> nc.reduce_scatter("n e", axis="n", devices=3, n=7)
    >>> collective_cuts(schedule_of(device_region(one, "h", 3, 9).boxes[0]))
    {('n', 3): 7}
    """
    out = {}

    def cut(axis, part, whole):
        if axis in node.axes and node.axes[axis][0] == part.axis(axis).size:
            return                                          # the region's own shard (or co-shard) of the axis
        out.setdefault((axis, part.axis(axis).size), whole.axis(axis).size)
    for _, box in layers(node.inside):
        if isinstance(box, Bubble) or is_structural(box) is not None or KINDS[box.data.kind].collective is None:
            continue
        kind, pairs = box.data.kind, list(zip(box.dom.inside, box.cod.inside))
        for a, c in pairs:
            if kind == "all_gather":
                cut(box.data.param("axis"), a, c)
            elif kind == "reducescatter":
                cut(box.data.param("axis"), c, a)
            elif kind == "all_to_all":
                cut(box.data.param("gather"), a, c)
                cut(box.data.param("scatter"), c, a)
    return out


def collectives_within(d: Diagram) -> list:
    """The collective boxes in ``d``'s regions (nested below its top level), which the lockstep run does not reach."""
    out = []
    for _, box in layers(d):
        if isinstance(box, Bubble):
            out += [b for _, b in layers(box.arg) if not isinstance(b, Bubble) and is_structural(b) is None
                    and KINDS[b.data.kind].collective is not None] + collectives_within(box.arg)
    return out


__all__ = ["Shard", "ShardSchedule", "shard", "ordered", "device_region", "device_shards", "device_inside",
           "merge_diagram", "collective_cuts", "collectives_within"]
