"""The device level: a program split over ``P`` devices (issue 37), a Grid one level above global memory.

``Shard(axis, devices=P)`` is a group partition whose groups are devices: the inside runs once per device, on the
device's shard of ``axis`` (``np.array_split``'s cut: ``⌊a/P⌋`` or one more values,
:func:`~napkin_cat.syntax.collectives.shard_bounds`; with more devices than values the last ones are idle), an input
without the axis replicated on every device::

    weave_a(F) ≡ split_a ; (F ⊗ … ⊗ F) ; join_a        (P copies of F, one per device)

Its inside sees the axis with the size of a shard: ``a/P`` symbolically, ``⌈a/P⌉`` at concrete sizes (a shorter
shard is the inside relabelled to its size, as a Grid's last, shorter group).  The region records, for each input
and output, the axis it is sharded along or None (:data:`RECORD`): a sharded input arrives cut, a replicated one
whole on every device; a sharded output is the devices' shards joined, a replicated one the value every device holds
(made so by an all-reduce or an all-gather: :mod:`napkin_cat.syntax.collectives`), and a numpy run checks that they
agree.  The record is read, never the sizes: a shard of an axis of one value is as large as the whole.

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

from napkin_cat.algorithms.bubbles import REGIONS, Partition
from napkin_cat.algorithms.partitions import relabel_axis, single
from napkin_cat.algorithms.schedule import SCHEDULES
from napkin_cat.algorithms.device_wires import DEVICE_LEVEL, not_woven, retyped
from napkin_cat.algorithms.orders import CONTIGUOUS, Pieces, check_chunks, device_pieces, extent, order_of
from napkin_cat.errors import AxisError, RewriteError
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty
from napkin_cat.syntax.flat import is_structural, layers
from napkin_cat.syntax.collectives import as_devices, shard_bounds, shard_size
from napkin_cat.syntax.primitive import KINDS
from napkin_cat.syntax.relabel import tile_relabel


#: the params of a :class:`Shard` that record, for each input and each output, the axis it is sharded along (None:
#: replicated): what every reader of the region takes (:meth:`Shard.sharded`), never guessed from sizes again
RECORD = ("sharded_in", "sharded_out")
#: the param of the axes a rename inside gives a sharded axis, ``((new, old), …)``: each device holds its shard of
#: ``old`` under the name ``new``, cut alike (:mod:`~napkin_cat.algorithms.ring_gathered`: a ring of renamed shards)
RENAMED = "renamed"


class Shard(Partition):
    """A device partition: the inside once per device on its shard of ``axis`` (``size``: a shard's size, ``a/P`` or
    ``⌈a/P⌉``), ``params["devices"]`` devices (an int or a size symbol).

    ``params["sharded_in"]`` and ``params["sharded_out"]`` (:data:`RECORD`): for each input and output, the axis it
    is sharded along, or None (replicated, whole on every device).  :func:`shard` and :func:`device_region` give them;
    a region built without them (a document of an earlier version, a hand-built one) has them read off the sizes once,
    here (an array whose inside carries an axis at another size than outside is sharded along it).  Each entry names
    an axis its array carries (else AxisError).  The sizes cannot tell a shard of a one-value axis (as large as the
    whole) from the whole, nor a replicated array that carries a sharded axis at a shard's size from a shard; the
    record does, and a device's inside follows it wire by wire
    (:func:`~napkin_cat.algorithms.device_wires.retyped`).

    >>> import napkin_cat as nc
    >>> box = shard(nc.library.attention(q=1), "q", devices=2).boxes[0]
    >>> box.sharded("dom"), box.sharded("cod"), box.name
    (('q', None, None), ('q',), 'Shard(axis=q, size=1, devices=2)')
    """

    region = DEVICE_LEVEL
    carrier = "cod"

    def __init__(self, arg: Diagram, dom, cod, params: dict):
        if "devices" not in params:
            raise AxisError(f"a Shard needs params axis, size and devices; got {dict(params)}")
        params = {**params, "devices": as_devices(params["devices"])}
        if isinstance(params.get("axis"), str):
            params.update(_record(arg, dom, cod, params))
            _check_order(arg, params["axis"], params.get("order"))
        super().__init__(arg, dom, cod, params)

    @classmethod
    def title(cls, params) -> str:
        """The region's name: its axis, size and devices (the record is in its params, not its name)."""
        return super().title({k: v for k, v in params.items() if k not in RECORD and k != RENAMED})

    def mapped_params(self, fa, fname) -> dict:
        out = super().mapped_params(fa, fname)
        for key in RECORD:
            out[key] = tuple(None if a is None else fname(a) for a in self.params[key])
        if RENAMED in self.params:
            out[RENAMED] = tuple((fname(b), fname(a)) for b, a in self.params[RENAMED])
        return out

    @property
    def devices(self):
        return self.params["devices"]

    @property
    def order(self) -> str:
        """The order of the devices' shards (:mod:`~napkin_cat.algorithms.orders`), of every axis the region shards:
        ``params["order"]``, contiguous where none is given."""
        return self.params.get("order", CONTIGUOUS)

    def full_size(self):
        """The axis's size on the region's boundary: an output's, else an input's sharded along it (the record), else
        an array's whose shards are the region's (a replicated array may carry the axis at another size: a part)."""
        found = _full(self.axis, self.size, self.devices, self.dom, self.cod, self.params)
        if found is None:
            raise AxisError(f"{self.name}: no input or output carries {self.axis!r} at a size its shards cut")
        return found

    def size_parts(self) -> tuple:
        return (self.size, self.devices), (self.arg,)

    @property
    def trips(self):
        """How many devices run the inside: ``P``."""
        return sympy.sympify(self.devices)

    def sharded(self, side: str) -> tuple:
        """For each input (``side='dom'``) or output (``'cod'``), the axis it is sharded along, or None: it is
        replicated, whole on every device (the record, :data:`RECORD`).  Besides the region's axis, an input may
        arrive sharded along another axis (*co-sharded*: device ``p`` holds shard ``p`` of each; an all-gather inside
        makes it whole), as K and V along the keys where the region shards the queries."""
        return self.params["sharded_in" if side == "dom" else "sharded_out"]

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
        for b, a in self.params.get(RENAMED, ()):       # a sharded axis renamed inside: cut as the axis it renames
            if a in found:
                found.setdefault(b, found[a])
        return found


def _read_off_sizes(o, i, what: str):
    """The axis the boundary array ``o`` is sharded along, read off its inside's array ``i``: the one whose size
    differs, or None (a region built without a record)."""
    cut = [a.name for a, b in zip(o.axes, i.axes) if a.size != b.size]
    if len(cut) > 1:
        raise AxisError(f"{what} ({o}) is sharded along {cut}; an array is sharded along one axis at most")
    return cut[0] if cut else None


def _full(axis: str, size, devices, dom, cod, record: dict):
    """The size of the axis a device region cuts: an output's, else an input's, sharded along it (the record), else
    an array's that carries it at a size whose shards are ``size``; None if none does."""
    sharded = [a for arrays, cuts in ((cod.inside, record["sharded_out"]), (dom.inside, record["sharded_in"]))
               for a, cut in zip(arrays, cuts) if cut == axis]
    if sharded:
        return sharded[0].axis(axis).size
    for arr in (*cod.inside, *dom.inside):        # a size whose shards are not ``size`` (as far as sizes tell): a part
        if axis in arr.names and not (sympy.sympify(shard_size(arr.axis(axis).size, devices)) -
                                      sympy.sympify(size)).is_nonzero:
            return arr.axis(axis).size
    return None


def _record(arg: Diagram, dom, cod, params: dict) -> dict:
    """The region's :data:`RECORD`, given or read off the sizes, checked against the types (see :class:`Shard`)."""
    axis, out = params["axis"], {}
    sides = (("sharded_in", dom.inside, arg.dom.inside, "input"), ("sharded_out", cod.inside, arg.cod.inside, "output"))
    for key, outer, inner, what in sides:
        given = params.get(key)
        if given is None:
            given = [_read_off_sizes(o, i, f"{what} {j}") for j, (o, i) in enumerate(zip(outer, inner))]
        given = tuple(given) if isinstance(given, (tuple, list)) else given
        if not isinstance(given, tuple) or len(given) != len(outer) or len(outer) != len(inner):
            raise AxisError(f"a Shard's {key} names, for each of its {len(outer)} {what}s, the axis it is sharded "
                            f"along or None; got {given!r}")
        for j, (cut, o, i) in enumerate(zip(given, outer, inner)):
            if cut is not None and not (isinstance(cut, str) and cut in o.names and cut in i.names):
                raise AxisError(f"{what} {j} of the Shard along {axis!r} ({o} outside, {i} inside) is recorded "
                                f"sharded along {cut!r} ({key}[{j}]), an axis it does not carry; the record names "
                                f"an axis of the array, or None (replicated)")
        out[key] = given
    if _full(axis, params.get("size"), params["devices"], dom, cod, out) is None:
        raise AxisError(f"a Shard along {axis!r} (shards of {params.get('size')} over {params['devices']} devices): no "
                        f"input or output is sharded along it, nor carries it at a size those are shards of (its "
                        f"inputs {[str(a) for a in dom.inside]}, outputs {[str(a) for a in cod.inside]}); a device "
                        f"region cuts an axis of its boundary")
    return out


def _check_order(inside: Diagram, axis: str, order) -> None:
    """RewriteError where a region in a non-contiguous order holds what a device cannot run on its pieces apart: a
    box that sees ``axis`` not woven over it, or a collective (whose shards are contiguous; a ring's exchanges are
    no collective box)."""
    if order_of(order).name == CONTIGUOUS:
        return
    why = not_woven(inside, axis) or next((f"the collective {b.name!r} inside assumes contiguous shards"
                                           for _, b in layers(inside) if is_structural(b) is None
                                           and not isinstance(b, Bubble) and KINDS[b.data.kind].collective is not None),
                                          None)
    if why:
        raise RewriteError(f"no device region along {axis!r} in the {order_of(order).name} order: {why}; a device "
                           f"runs its pieces of {axis!r} apart, so every box that sees it is woven over it (rings are "
                           f"the only exchange such a region has)")


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
    why = not_woven(diagram, axis)
    if why:
        raise RewriteError(f"cannot shard along {axis!r} over {P} devices: {why}")
    full = carriers[0].axis(axis).size
    check_chunks(full, P, order, axis)
    size = shard_size(full, P)
    inside = relabel_axis(diagram, axis, size, full=full)

    def cut(arrays):        # sharded: every array that carries the axis whole (relabel_axis made it a shard inside)
        return tuple(axis if axis in a.names and a.axis(axis).size == full else None for a in arrays)
    return single(Shard(inside, diagram.dom, diagram.cod, {"axis": axis, "size": size, "devices": P,
                                                           "sharded_in": cut(diagram.dom.inside),
                                                           "sharded_out": cut(diagram.cod.inside),
                                                           **ordered(order)}))


def ordered(order) -> dict:
    """The params that record ``order`` on a region: none for the contiguous order (every region made before orders
    existed is one), ``{"order": name}`` else."""
    name = order_of(order).name
    return {} if name == CONTIGUOUS else {"order": name}


def device_region(inside: Diagram, axis: str, devices, full, *, also: dict | None = None, sharded_in=None,
                  sharded_out=None, order=None, renamed=None) -> Diagram:
    """A device region around ``inside``, a program written for one device's shard (its arrays carry ``axis`` at a
    shard's size, :func:`~napkin_cat.syntax.collectives.shard_size` of ``full`` over ``devices``; collectives
    inside): its boundary is the inside's with every shard whole.  ``also``: co-sharded axes → their full sizes
    (an input sharded along one arrives so: shard ``p`` of it on device ``p``).  ``sharded_in``/``sharded_out``:
    the axis each input/output is sharded along, or None (the region's record, :data:`RECORD`); by default each
    array inside that carries a sharded axis at a shard's size is sharded along it, where an axis whose shard is its
    whole (one value) counts only when no other does, the region's own first (a rule that knows says).  ``order``:
    the order of the devices' shards (:mod:`~napkin_cat.algorithms.orders`, recorded by :func:`ordered`);
    ``renamed``: new name → sharded axis, for a shard renamed inside (:data:`RENAMED`); a
    non-contiguous one needs every box that sees ``axis`` woven over it and no collective inside, else RewriteError.

    >>> import napkin_cat as nc
    >>> h = nc.symbol("h")
    >>> one = nc.einsum("n h, h e -> n e", h=h / 2) >> nc.all_reduce("n e", devices=2)
    >>> device_region(one, "h", 2, h).dom
    Ty(Array(n×h), Array(h×e))
    """
    P = as_devices(devices)
    size = shard_size(full, P)
    fulls = {axis: full, **(also or {})}
    parts = {a: shard_size(f, P) for a, f in fulls.items()}
    for a, f in fulls.items():
        check_chunks(f, P, order, a)

    def cut(arr):           # the sharded axis an array inside carries at a shard's size
        found = [n for n in arr.names if n in parts and arr.axis(n).size == parts[n]]
        if len(found) > 1:      # a one-value axis (its shard its whole) gives way to another, the region's first
            found = [n for n in found if parts[n] != fulls[n]] or sorted(found, key=lambda n: n != axis)[:1]
        if len(found) > 1:
            raise AxisError(f"the array {arr} inside a device region along {axis!r} carries {found} at a shard's "
                            f"size; an array is sharded along one axis at most")
        return found[0] if found else None

    def whole(arr, n, what):
        if n is None:
            return arr
        if n not in fulls or n not in arr.names or arr.axis(n).size != parts[n]:
            raise AxisError(f"{what} ({arr}) of a device region along {axis!r} is recorded sharded along {n!r}, but "
                            f"it carries no shard of it (the sharded axes and their shards: {parts})")
        return tile_relabel(n, fulls[n], parts[n])(arr)

    def record(given, arrays, what):
        made = tuple(map(cut, arrays)) if given is None else tuple(given)
        if len(made) != len(arrays):
            raise AxisError(f"device_region: {len(made)} {what}s recorded, the inside has {len(arrays)}")
        return made, Ty(*(whole(a, n, f"{what} {j}") for j, (a, n) in enumerate(zip(arrays, made))))
    ins, dom = record(sharded_in, inside.dom.inside, "input")
    outs, cod = record(sharded_out, inside.cod.inside, "output")
    return single(Shard(inside, dom, cod, {"axis": axis, "size": size, "devices": P, "sharded_in": ins,
                                           "sharded_out": outs, **ordered(order),
                                           **({RENAMED: tuple(sorted(renamed.items()))} if renamed else {})}))


def device_shards(node, value) -> list:
    """Each device's shard of every sharded axis, ``{axis: (start, stop)}`` (``np.array_split``'s cuts), or None for
    an idle device (an empty shard of the region's axis: more devices than values); ``value(expr)``: a size as an
    int.  A co-sharded axis is cut among the devices that hold a shard of the region's axis (the others are idle:
    they hold nothing), as a collective inside cuts (:func:`collective_cuts`); with fewer values than those devices,
    the last ones hold an empty shard of it: none of the inputs sharded along it (and send none of them).  Under a
    non-contiguous order (``node.order``) a shard is its :class:`~napkin_cat.algorithms.orders.Pieces`,
    ``((start, stop), …)``, of every sharded axis (the order gives every device a value of each: no device is idle).

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.schedule import schedule_of
    >>> one = nc.einsum("q d, x d -> q d", q=1, x=2, d=2)
    >>> node = schedule_of(device_region(one, "q", 2, 1, also={"x": 4}, sharded_in=("q", "x")).boxes[0])
    >>> device_shards(node, int)        # one query: device 1 idle, device 0 holds every key
    [{'q': (0, 1), 'x': (0, 4)}, None]
    """
    P = value(node.devices)
    for a, (_, full) in node.axes.items():
        check_chunks(value(full), P, node.order, a)
    own = device_pieces(value(node.axes[node.axis][1]), P, node.order)
    holds = [sum(hi - lo for lo, hi in ps) > 0 for ps in own]
    active = sum(holds)                 # the first ones: np.array_split gives the larger shards first
    cuts = {a: own if a == node.axis else device_pieces(value(full), active, node.order)
            for a, (_, full) in node.axes.items()}
    contiguous = order_of(node.order).name == CONTIGUOUS
    return [{a: (b[p][0] if contiguous else Pieces(b[p])) for a, b in cuts.items()} if holds[p] else None
            for p in range(P)]


def cut_extents(node, value, p: int, active: int) -> dict:
    """``(axis, shard size) → extent`` of device ``p``'s shard of every axis a collective inside cuts
    (:func:`collective_cuts`), cut as ``np.array_split`` cuts among the ``active`` devices that hold a shard.  It
    needs no pieces: a region in another order than the contiguous one holds no collective (:class:`Shard` refuses
    one; a ring's exchanges are no collective box), so it has no such cut."""
    return {key: hi - lo for key, (lo, hi) in cut_spans(node, value, p, active).items()}


def cut_spans(node, value, p: int, active: int) -> dict:
    """``(axis, shard size) → (start, stop)``: device ``p``'s shard of every axis a collective inside cuts
    (:func:`collective_cuts`), ``np.array_split``'s among the ``active`` devices that hold a shard (where its
    positions start: what a position read on the shard reads).

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.schedule import schedule_of
    >>> one = nc.einsum("n h, h e -> n e", h=3, n=7) >> nc.reduce_scatter("n e", axis="n", devices=3, n=7)
    >>> cut_spans(schedule_of(device_region(one, "h", 3, 9).boxes[0]), int, 2, 3)
    {('n', 3): (5, 7)}
    """
    out = {}
    for key, full in collective_cuts(node).items():
        b = shard_bounds(value(full), active)
        out[key] = (b[p], b[p + 1])
    return out


def largest_shard(node, value) -> tuple:
    """The shards of the first device whose shard of the region's axis is the largest, and their
    :func:`cut_extents`: what the memory at sizes and the checks before a run read (device 0's under the contiguous
    order, ``np.array_split`` giving the longer shards first; not so under zigzag, whose chunks pair a long and a
    short one).

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.schedule import schedule_of
    >>> node = schedule_of(shard(nc.library.attention(q=13), "q", 4, order="zigzag").boxes[0])
    >>> largest_shard(node, int)[0]["q"]        # chunks of 2, 2, 2, 2, 2, 1, 1, 1: device 3 holds 3 and 4
    ((6, 8), (8, 10))
    """
    held = [m for m in device_shards(node, value) if m is not None]
    p = max(range(len(held)), key=lambda q: extent(held[q][node.axis]))
    return held[p], cut_extents(node, value, p, len(held))


def device_inside(node, shards: dict, cuts: dict | None = None, empty=None):
    """The inside a device runs on its shards (``{axis: (start, stop)}``, or its
    :class:`~napkin_cat.algorithms.orders.Pieces` under another order: their extent counts): each wire that carries
    the device's shard of a sharded axis at the device's extent of it, and each that carries its shard of an axis a
    collective cuts (``cuts``, :func:`cut_extents`), kept on the region per extents.  Which wires carry a shard is
    followed from the region's record (:data:`RECORD`) box by box (:func:`~napkin_cat.algorithms.device_wires.retyped`),
    never read off the sizes: an array of a shard's size may be a part made otherwise (a split's).  An empty shard
    leaves its axis as it is (no box but a collective reads it, which reads the device's values themselves), or, given
    ``empty`` (``(axis, shard size) →`` a symbol), carries an empty shard of a symbolic size at that symbol: a count of
    what the device holds sets it to 0, kept apart from the axis's whole size (``x/4`` and ``x`` in one sum are
    ``5·x/4``, which no substitution of ``x/4`` parts).

    >>> import napkin_cat as nc, sympy
    >>> from napkin_cat.algorithms.schedule import schedule_of
    >>> node = schedule_of(nc.shard(nc.elementwise("exp", "n e"), "n", devices=4).boxes[0])
    >>> device_inside(node, {"n": (3, 3)}, empty=lambda key: sympy.Symbol("none_" + key[0])).dom
    Ty(Array(n[none_n]×e))
    """
    box = node.region
    sizes = {(a, node.axes[a][0]): extent(s) for a, s in shards.items() if extent(s) > 0}   # an empty co-shard: kept
    sizes.update({key: n for key, n in (cuts or {}).items() if n > 0})
    if empty is not None:
        gone = [(a, node.axes[a][0]) for a, s in shards.items() if extent(s) == 0]
        gone += [key for key, n in (cuts or {}).items() if n == 0]
        sizes.update({key: empty(key) for key in gone if not sympy.sympify(key[1]).is_number})
    if all(isinstance(size, int) and n == size for (_, size), n in sizes.items()):
        return node.inside
    key = tuple(sorted((a, str(size), n) for (a, size), n in sizes.items()))
    cache = box.__dict__.setdefault("_device_insides", {})
    if key not in cache:
        cache[key] = retyped(box, sizes)
    return cache[key]


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


def shard_keys(node) -> set:
    """Every shard ``(axis, shard size)`` a device of the region of schedule ``node`` may carry: of each sharded axis
    of the record, and of each axis a collective inside cuts (:func:`collective_cuts`)."""
    return {(a, node.axes[a][0]) for a in node.axes} | set(collective_cuts(node))


def collectives_within(d: Diagram) -> list:
    """The collective boxes in ``d``'s regions (nested below its top level), which the lockstep run does not reach."""
    out = []
    for _, box in layers(d):
        if isinstance(box, Bubble):
            out += [b for _, b in layers(box.arg) if not isinstance(b, Bubble) and is_structural(b) is None
                    and KINDS[b.data.kind].collective is not None] + collectives_within(box.arg)
    return out


__all__ = ["RECORD", "RENAMED", "Shard", "ShardSchedule", "shard", "ordered", "device_region", "device_shards",
           "cut_extents", "cut_spans", "largest_shard", "device_inside", "collective_cuts", "shard_keys",
           "collectives_within"]
