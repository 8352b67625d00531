"""The device level of the cost functor, symbolic: what a device region and a ring cost per device.

A device region (:class:`~napkin_cat.algorithms.devices.Shard`, ``nc.shard``) runs its inside once on each of
``P`` devices, each on its shard of the region's axis: the record's H and FLOPs are one device's (the inside once at
the shard's size ``n/P``, not ``P`` times), and its :class:`~napkin_cat.cost.record.Link` counts what crosses the
link, per device::

    sent, received = Σ_collectives moves(box)                    (:mod:`napkin_cat.syntax.collectives`)
    held           = max(level-0 columns of the inside, each ring's held)

A ring (``nc.ring``, :mod:`napkin_cat.algorithms.ring`) is a stream of ``P`` trips whose slices are the shards
passed round the devices: per streamed input ``x`` each device sends and receives ``(P − 1)·|x|/P`` values in
``P − 1`` messages, and holds its level-0 columns plus the slot an incoming shard arrives in.  The handlers are
:class:`Devices`, the device part of the symbolic algebra (:class:`~napkin_cat.cost.iocost.Symbolic`); at concrete
sizes, per device, they are :mod:`napkin_cat.cost.devices_at`'s.

>>> import napkin_cat as nc
>>> link = nc.cost(nc.ring(nc.shard(nc.library.attention(), "q", devices=nc.symbol("P")), "x")).link
>>> sympy.factor(link.sent), link.messages                 # K and V: (P − 1)·x·d/P each, P − 1 messages each
(2*d*x*(P - 1)/P, 2*P - 2)
"""
from __future__ import annotations

from dataclasses import replace

import sympy

from napkin_cat.algorithms.orders import order_of
from napkin_cat.algorithms.ring import incoming, ring_link
from napkin_cat.cost.live import numel
from napkin_cat.cost.maxima import column_max
from napkin_cat.cost.record import ZERO, Link
from napkin_cat.syntax.primitive import kind_of

__all__ = ["Devices", "box_link", "bytes_per_value"]


def bytes_per_value(array) -> int:
    """The bytes one value of ``array`` takes (its dtype's): the weight of a link count in bytes."""
    return array.dtype.bytes


def box_link(box, device=None, numel_of=None, devices=None):
    """The values a collective box sends and receives over the link (:class:`~napkin_cat.cost.record.Link`), on
    any device (``device`` None: symbolic, shards of ``n/P``) or on device ``device`` of ``devices`` (``numel_of(array,
    side)``: the values of an array of the box's side ``"dom"`` or ``"cod"`` as an int, at sizes); None for a box that
    is not a collective
    (:mod:`napkin_cat.syntax.collectives`).

    >>> import napkin_cat as nc
    >>> l = box_link(nc.all_gather("n h", axis="h", devices=nc.symbol("P")).boxes[0])
    >>> sympy.factor(l.sent), sympy.factor(l.received), l.messages
    (h*n*(P - 1)/P, h*n*(P - 1)/P, P - 1)
    """
    collective = kind_of(box.data.kind).collective
    if collective is None:
        return None
    P = box.data.param("devices")
    if device is None:
        def numel_of(a, side="dom"):
            return sympy.Mul(*[x.size for x in a.axes])
        sent, received, messages = collective.moves(box, numel_of, None, sympy.sympify(P))
        sb, rb, _ = collective.moves(box, numel_of, None, sympy.sympify(P), bytes_per_value)
        return Link(P, sent, received, messages, None, sb, rb)
    sent, received, messages = collective.moves(box, numel_of, device, devices)
    sb, rb, _ = collective.moves(box, numel_of, device, devices, bytes_per_value)
    return Link(devices, int(sent), int(received), int(messages), None, int(sb), int(rb))


class Devices:
    """The device handlers of the symbolic cost algebra (:class:`~napkin_cat.cost.iocost.Symbolic` is one): a device
    region's cost is its inside's as a kernel's (:meth:`kernel`) with its link record, a ring's is its stream's
    (:meth:`stream`) with the ring's exchanges.  ``sink`` is the algebra's context, the list of parts: each
    handler completes the part that the kernel's or the stream's handler appended last."""

    def shard(self, node, ins, sink, dests):
        """One device's cost (the inside once, on a shard: FLOPs and transfers per device, not times ``P``), with its
        link record: the collectives' values sent and received, and ``held``, its level-0 memory (the inside's
        largest level-0 column: shards of the sharded arrays, the replicated ones whole)."""
        self.kernel(node, ins, sink, dests)       # the inside once, as a kernel's: its part is the last
        inner = sink[-1]
        inner.ops = [replace(o, region=(("shard", node.axis),) + o.region) for o in inner.ops]
        link = inner.link or Link(node.devices, ZERO, ZERO, ZERO)
        cols = inner.columns.get(0) or [ZERO]
        held = cols[0] if len(cols) == 1 else column_max(cols)
        inner.link = Link(node.devices, link.sent, link.received, link.messages,
                          held if link.held is None else sympy.Max(held, link.held), link.sent_bytes,
                          link.received_bytes, link.trips, link.work)
        return dests

    def ring(self, node, ins, sink, dests, run):
        """A ring (:mod:`napkin_cat.algorithms.ring`): the stream's cost, ``P`` trips of a shard, with the ring's
        exchanges on the link (``(P − 1)·|x|/P`` each way per streamed input ``x``, ``P − 1`` messages each) and its
        ``held``: its level-0 columns (the slice in use among them) with the slot an incoming slice is received into
        (the device region takes the larger of it and its own columns)."""
        self.stream(node, ins, sink, dests, run)
        c = sink[-1]
        box = node.region
        slot = sum((numel(a) for a in incoming(box)), sympy.Integer(0))
        cols = [sympy.sympify(col) + slot for col in c.columns.get(0) or [sympy.Integer(0)]]
        held = cols[0] if len(cols) == 1 else column_max(cols)     # the ring's own level-0 memory, its slot in
        sent, received, messages = ring_link(box, numel)
        sb, rb, _ = ring_link(box, numel, bytes_per_value)
        k = sympy.sympify(order_of(box.order).chunks(box.trips)) / box.trips        # pieces per shard
        trips = None if node.masks is not None else box.trips * k ** 2     # a mask: each device's own count
        mine = Link(box.devices, sent, received, messages, held, sb, rb, trips)
        c.link = mine if c.link is None else c.link.then(mine)
        return dests
