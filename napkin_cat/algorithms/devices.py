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
from napkin_cat.algorithms.device_wires import DEVICE_LEVEL, not_woven
from napkin_cat.algorithms.orders import CONTIGUOUS, check_chunks, order_of
from napkin_cat.errors import AxisError, RewriteError
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty
from napkin_cat.syntax.flat import is_structural, layers
from napkin_cat.syntax.collectives import as_devices, shard_size
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


__all__ = ["RECORD", "RENAMED", "Shard", "ShardSchedule", "shard", "ordered", "device_region"]
