"""The ring (issue 37): a Stream over the devices, its slices the devices' shards, each trip's slice received from the
neighbour while the current one is used.

Ring attention is the online-softmax stream theorem one level up.  Inside a device region (``Shard``) sharding ``a``
(the queries), an input co-sharded along ``b`` (K and V along the keys: device ``p`` holds shard ``p``) is not
all-gathered: the inside is streamed along ``b`` in ``P`` trips whose slices are the shards, passed round the ring::

    Shard_{a,P; b}(all-gather_b(K, V) ; F)  ≡  Shard_{a,P; b}(Ring_{b,P}(F[b ↦ b/P]))     (F streamable along b)

At trip ``t`` device ``p`` uses shard ``(p − t) mod P`` (its own at ``t = 0``) and, unless ``t = P − 1``, sends it to
device ``p + 1`` while receiving shard ``(p − t − 1) mod P`` from device ``p − 1``.  So over the ``P − 1`` exchanges
device ``p`` sends every shard but ``(p + 1) mod P``'s and receives every shard but its own::

    sent_p = Σ_x |x| − |x_{p+1}|      received_p = Σ_x |x| − |x_p|      messages = (P − 1) per streamed input

(``|x_q|``: the values of shard ``q`` of a streamed input ``x``, cut as ``np.array_split`` cuts; symbolically
``(P − 1)·|x|/P`` each way, the same as an all-gather's).  It holds its own shard (the slice in use) and one incoming
slice (``slot``: the largest shard), never the whole of ``x``: the all-gather holds ``|x|``.

Under a non-contiguous order (``params["order"]``, its device region's: :mod:`~napkin_cat.algorithms.orders`) a
shard is pieces of the axis, device ``p``'s zigzag shard chunks ``p`` and ``2P − 1 − p`` of ``2P``: it travels as one
slice, its pieces joined, and a trip folds them one by one, each at its own positions (:func:`ring_pieces`); the
counts above hold with ``|x_q|`` the size of device ``q``'s pieces.

The region is a :class:`~napkin_cat.algorithms.bubbles.Stream` (its plan, its reducers, its merges) with
``params``: ``devices``, ``full`` (the axis's whole size, which no boundary array carries: they hold shards) and
``slot``; its schedule is a :class:`RingSchedule` (kind ``ring``) whose handlers are the stream's, run on the ring's
order, with the ring's link counts added.

>>> import napkin_cat as nc
>>> d = ring(nc.shard(nc.library.attention(), "q", devices=4), "x")
>>> r = d.boxes[0].arg.boxes[0]
>>> r.region, r.axis, r.size, r.devices, r.trips
('ring', 'x', x/4, 4, 4)
>>> [ring_shard(p, 1, 4) for p in range(4)]          # trip 1: each device holds its left neighbour's shard
[3, 0, 1, 2]
"""
from __future__ import annotations

from dataclasses import fields

import sympy

from napkin_cat.algorithms.bubbles import REGIONS, Stream
from napkin_cat.algorithms.devices import Shard, device_region, ordered
from napkin_cat.algorithms.orders import CONTIGUOUS, device_extents, device_pieces, order_of
from napkin_cat.algorithms.partitions import relabel_axis, single
from napkin_cat.algorithms.schedule import SCHEDULES, StreamSchedule, stream_schedule
from napkin_cat.algorithms.skipping import skip_of
from napkin_cat.errors import AxisError, RewriteError
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty
from napkin_cat.syntax.flat import is_structural, layers
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.collectives import as_devices, shard_size
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.wiring import trace_values


def ring_shard(p: int, t: int, devices: int) -> int:
    """The shard device ``p`` uses at trip ``t`` of a ring over ``devices``: ``(p − t) mod P`` (received from device
    ``p − 1``).

    >>> [ring_shard(0, t, 3) for t in range(3)]
    [0, 2, 1]
    """
    return (p - t) % devices


class Ring(Stream):
    """A stream over the devices along ``axis``: ``P`` trips, trip ``t`` on device ``p`` over shard
    :func:`ring_shard` ``(p, t, P)``; ``size``: a shard's (the inside's) size, ``full``: the axis's whole size,
    ``slot``: the incoming slice's size (the largest shard), ``devices``: ``P``."""

    region = "ring"
    carrier = "dom"
    size_params = ("size", "full", "slot")

    def __init__(self, arg: Diagram, dom, cod, params: dict):
        missing = [k for k in ("devices", "full") if k not in params]
        if missing:
            raise AxisError(f"a Ring needs params axis, size, devices and full; {missing} missing in {dict(params)}")
        params = {**params, "devices": as_devices(params["devices"])}
        params.setdefault("slot", params.get("size"))
        super().__init__(arg, dom, cod, params)

    @property
    def devices(self):
        return self.params["devices"]

    @property
    def order(self) -> str:
        """The order of the shards that travel (:mod:`~napkin_cat.algorithms.orders`): its device region's."""
        return self.params.get("order", CONTIGUOUS)

    def full_size(self):
        """The axis's whole size (its boundary arrays carry a shard of it)."""
        return self.params["full"]

    @property
    def trips(self):
        """One trip per device: ``P``."""
        return sympy.sympify(self.devices)

    def streamed(self) -> list:
        """The positions of the inputs that travel round the ring (those that carry the axis)."""
        return [i for i, a in enumerate(self.dom.inside) if self.axis in a.names]


REGIONS[Ring.region] = Ring


class RingSchedule(StreamSchedule):
    """A stream's schedule run as a ring (kind ``ring``): the algebras' ``ring`` handlers fold it as a stream on the
    ring's slices and count the ring's link traffic."""

    kind = "ring"

    @property
    def skip(self):
        """None: the numpy run folds every shard on every device (a trip a mask leaves neutral changes nothing);
        the cost at sizes skips, per piece, the folds whose masks are never true (:attr:`masks`)."""
        return None

    @property
    def masks(self):
        """The stream's :class:`~napkin_cat.algorithms.skipping.Skip` (None: no mask lets a fold be skipped): what
        the cost at sizes decides each (query piece, travelling piece) fold by."""
        return skip_of(self)


def _unroll_ring(box: Ring) -> RingSchedule:
    s = stream_schedule(box.plan, box)
    return RingSchedule(**{f.name: getattr(s, f.name) for f in fields(s)})


SCHEDULES[Ring.region] = _unroll_ring


# ------------------------------------------------------------------------------------------------ counts
def ring_link(box: Ring, numel, weight=None, device=None, extents=None) -> tuple:
    """``(sent, received, messages)`` of ``box``'s exchanges: symbolically (``device`` None, ``numel(array)`` a
    sympy expression of an array at the slot's size: ``(P − 1)·|x|/P`` each way), or on device ``device`` with
    ``extents`` the ``P`` shard sizes (``numel(array, n)``: the array's values with the axis at ``n``); each value
    counted ``weight(array)`` times (bytes per value), else once.

    >>> import napkin_cat as nc
    >>> r = ring(nc.shard(nc.library.attention(), "q", devices=3), "x").boxes[0].arg.boxes[0]
    >>> ring_link(r, lambda a, n: n * 4, device=0, extents=[3, 2, 2])      # 7 keys, K and V of 4 features
    (40, 32, 4)
    """
    P = box.devices
    arrays = [box.dom.inside[i] for i in box.streamed()]
    w = (lambda a: 1) if weight is None else weight
    if device is None:
        each = sum((numel(a) * w(a) for a in arrays), sympy.Integer(0))
        return (sympy.sympify(P) - 1) * each, (sympy.sympify(P) - 1) * each, (sympy.sympify(P) - 1) * len(arrays)
    P, full = len(extents), sum(extents)          # the devices at sizes: a symbolic P is bound there
    sent = sum(w(a) * (numel(a, full) - numel(a, extents[(device + 1) % P])) for a in arrays)
    received = sum(w(a) * (numel(a, full) - numel(a, extents[device])) for a in arrays)
    return sent, received, (P - 1) * len(arrays)


def ring_extents(box: Ring, value) -> list:
    """The ``P`` shard sizes of the ring's axis at sizes (``value(expr)``: an int), cut by the ring's order
    (``np.array_split``'s under the contiguous one)."""
    return device_extents(value(box.full_size()), value(box.devices), box.order)


def ring_pieces(box: Ring, value) -> list:
    """Per device, the pieces ``((start, stop), …)`` of the ring's axis its shard holds (one under the contiguous
    order), in the order the shard joins them: a trip folds them one by one, each at its own positions."""
    return device_pieces(value(box.full_size()), value(box.devices), box.order)


def incoming(box: Ring) -> list:
    """The arrays of the slot an incoming slice is received into: each streamed input at the slot's size."""
    out = []
    for i in box.streamed():
        a = box.dom.inside[i]
        out.append(a.replace(axes=tuple(x.relabel(box.params["slot"]) if x.name == box.axis else x for x in a.axes)))
    return out


# ------------------------------------------------------------------------------------------------ the rewrite
def _collective(box) -> bool:
    return is_structural(box) is None and not hasattr(box, "arg") and kind_of(box.data.kind).collective is not None


def _tiles_along(d: Diagram, axis: str) -> list:
    """The concrete tiles of the partitions of ``axis`` in ``d`` (its regions searched through)."""
    out = []
    for _, b in layers(d):
        if isinstance(b, Bubble):
            if getattr(b, "params", {}).get("axis") == axis and isinstance(b.params.get("size"), int):
                out.append(b.params["size"])
            out += _tiles_along(b.arg, axis)
    return out


def ring_over(whole: Diagram, axis: str, P, full, order, region: str) -> Ring:
    """The Ring of ``whole`` (the inside at the axis's whole size ``full``) along ``axis`` over ``P`` devices in
    ``order``: its inside relabelled to a shard, its plan checked; a RewriteError naming the device region
    ``region`` where a partition inside cuts ``axis`` in tiles larger than the smallest piece, or no ring plans.

    >>> import napkin_cat as nc
    >>> ring_over(nc.library.attention(), "x", 2, 7, "contiguous", "Shard(q)").params["slot"]
    4
    """
    size = shard_size(full, P)
    if isinstance(full, int) and isinstance(P, int):
        smallest = full // order_of(order).chunks(P)      # a piece: a shard under the contiguous order
        for tile in _tiles_along(whole, axis):
            if tile > smallest:
                raise RewriteError(f"{region}: a partition inside cuts {axis!r} in tiles of {tile}, more than the "
                                   f"smallest of its pieces over {P} devices in the {order} order ({smallest} of "
                                   f"{full}); legal tiles are 1 … {smallest}")
    inside = relabel_axis(whole, axis, size, full=full)
    try:
        r = Ring(inside, inside.dom, inside.cod, {"axis": axis, "size": size, "devices": P, "full": full,
                                                   "slot": size, **ordered(order)})
        r.plan
    except RewriteError as e:
        raise RewriteError(f"{region}: no ring along {axis!r}: {e}") from None
    return r


def sole_device_region(diagram, what: str) -> Shard:
    """The one device region (:class:`~napkin_cat.algorithms.devices.Shard`) ``diagram`` holds beside wiring, which
    the transformation ``what`` rewrites; a RewriteError naming what it holds instead.

    >>> import napkin_cat as nc
    >>> sole_device_region(nc.shard(nc.library.attention(), "q", devices=2), "ring").axis
    'q'
    >>> sole_device_region(nc.library.attention(), "ring")
    Traceback (most recent call last):
    ...
    napkin_cat.errors.RewriteError: ring takes one device region (nc.shard(...)), got the boxes ['·', 'SoftMax', '·']
    """
    if not isinstance(diagram, Diagram):
        raise RewriteError(f"{what} takes a Diagram (a device region: nc.shard(...)), got {type(diagram).__name__}")
    boxes = [b for _, b in layers(diagram) if is_structural(b) is None]
    if len(boxes) != 1 or not isinstance(boxes[0], Shard):
        raise RewriteError(f"{what} takes one device region (nc.shard(...)), got the boxes {[b.name for b in boxes]}")
    return boxes[0]


def ring(diagram: Diagram, axis: str, order=None) -> Diagram:
    """A device region whose inputs carrying ``axis`` are replicated, or arrive co-sharded along it and are
    all-gathered on entry (:func:`~rewrites.devices.device_gather`'s result), made a ring: those inputs arrive
    sharded and travel round the devices, the inside streamed along ``axis`` with the shards as slices.  RewriteError
    where the diagram is not one device region, an all-gather of ``axis`` reads anything but an input, another
    collective sits inside, or the inside is not streamable along ``axis`` (the stream's reason).  ``order``
    (:mod:`~napkin_cat.algorithms.orders`): the order of the region's shards and the ring's, both axes cut alike
    (None: the region's own); ``"zigzag"`` balances a causal mask's work.

    >>> import numpy as np, napkin_cat as nc
    >>> d = ring(nc.shard(nc.library.attention(), "q", devices=3), "x")
    >>> Q, K, V = np.random.rand(5, 4), np.random.rand(7, 4), np.random.rand(7, 4)
    >>> np.allclose(nc.evaluate(d, Q, K, V), nc.evaluate(nc.library.attention(), Q, K, V))
    True
    """
    k = sole_device_region(diagram, "ring")
    if axis == k.axis:
        raise RewriteError(f"{k.name} shards {axis!r} itself; a ring streams another axis, one its inputs are "
                           f"co-sharded along (the keys where the queries are sharded)")
    P = k.devices
    if isinstance(P, int) and isinstance(k.full_size(), int) and k.full_size() < P:
        raise RewriteError(f"{k.name}: a ring passes shards through every one of its {P} devices, but {k.axis!r} has "
                           f"{k.full_size()} values: {P - k.full_size()} devices would hold no shard")
    order = order_of(k.order if order is None else order).name
    ops, dom, cod = trace_values(k.arg)
    types = list(k.arg.dom.inside)
    skip, alias = set(), {}
    for i, (box, ins, outs) in enumerate(ops):
        if not _collective(box):
            continue
        if box.data.kind == "all_gather" and box.data.param("axis") == axis and ins[0] in dom:
            skip.add(i)
            alias[outs[0]] = ins[0]
            types[dom.index(ins[0])] = box.cod.inside[0]
            continue
        raise RewriteError(f"{k.name}: the collective {box.name!r} inside is not an all-gather of {axis!r} on an "
                           f"input; the ring streams the inside on each device alone")
    for a, cut in zip(k.dom.inside, k.sharded("dom")):
        if axis in a.names and cut not in (None, axis):
            raise RewriteError(f"{k.name}: the input {a} is sharded along {cut!r}; a shard that travels round the "
                               f"ring is cut along {axis!r} alone (an input carrying it is replicated or co-sharded "
                               f"along it)")
    full = next((a.axis(axis).size for a in types if axis in a.names), None)
    if full is None:
        raise RewriteError(f"{k.name}: no input carries {axis!r} (its inputs {[str(a) for a in k.arg.dom.inside]})")
    bld = Builder(Ty(*types))
    wires = dict(zip(dom, bld.inputs))
    for i, (box, ins, outs) in enumerate(ops):
        if i in skip:
            wires[outs[0]] = wires[alias[outs[0]]]
            continue
        made = bld(single(box), *(wires[v] for v in ins))
        wires.update(zip(outs, made if isinstance(made, tuple) else (made,)))
    whole = bld.build(*(wires[v] for v in cod))
    r = ring_over(whole, axis, P, full, order, k.name)
    also = {a: f for a, (_, f) in k.sharded_axes().items() if a not in (k.axis, axis)}
    ins = tuple(axis if axis in a.names else cut for a, cut in zip(k.dom.inside, k.sharded("dom")))   # travelling
    return device_region(single(r), k.axis, P, k.full_size(), also={**also, axis: full}, sharded_in=ins,
                         sharded_out=k.sharded("cod"), order=order)


__all__ = ["Ring", "RingSchedule", "ring", "ring_shard", "ring_link", "ring_extents", "ring_pieces", "incoming"]
