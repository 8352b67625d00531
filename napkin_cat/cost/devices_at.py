"""The device level of the cost at concrete sizes: what a device region and a ring cost on each device.

At sizes the devices need not divide an axis: device ``p`` of ``P`` holds its shard of the region's axis as
``np.array_split`` cuts it (:func:`~napkin_cat.algorithms.device_shards.device_shards`; an empty shard is an idle
device), and its inside is counted on that shard apart.  A device region's record holds the busiest device's H and
FLOPs and one link count per device (:class:`~napkin_cat.cost.record.Link`, each field a tuple over the devices)::

    H[ℓ], flops[p] = max_devices (the inside on the device's shard)
    link.sent[p]   = Σ_collectives moves on device p + its rings' sends      (received, messages alike)
    link.held[p]   = max(level-0 columns of the inside at p's shard, each ring's held at the sizes)

A ring on device ``p`` folds, at step ``t``, the shard of device ``(p − t) mod P``, and sends on and receives one
shard per streamed input at each step but the last (:func:`~napkin_cat.algorithms.ring.ring_link`).  The handlers
are :class:`DevicesAt`, the device part of the algebra at sizes (:class:`~napkin_cat.cost.numeric.Concrete`); the
symbolic counts, the same law at shards of ``n/P``, are :mod:`napkin_cat.cost.devices`'s.

>>> import napkin_cat as nc
>>> d = nc.ring(nc.shard(nc.library.attention(), "q", devices=2), "x")
>>> link = nc.cost(d, sizes={"q": 4, "x": 5, "d": 3}).link
>>> link.sent, link.received, link.messages     # x = 5 cut 3 | 2: device 0 sends its 3·3 of K and of V
((18, 12), (12, 18), (2, 2))
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.device_wires import read_whole, wire_marks
from napkin_cat.algorithms.devices import Shard
from napkin_cat.algorithms.device_shards import (cut_extents, cut_spans, device_inside, device_shards,
                                                 largest_shard, shard_keys)
from napkin_cat.algorithms.orders import Pieces
from napkin_cat.algorithms.orders import extent as span_extent
from napkin_cat.algorithms.ring import Ring, ring_extents, ring_link, ring_pieces, ring_shard
from napkin_cat.algorithms.schedule import Phases, fold_region, relabelled, schedule_of
from napkin_cat.cost.at_sizes import At, add, integer, reads_positions_inside, running_area, running_slices
from napkin_cat.cost.devices import box_link
from napkin_cat.cost.iocost import cost, region_cost
from napkin_cat.cost.record import Cost, Link
from napkin_cat.errors import DeviceError
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.flat import from_layers, layers
from napkin_cat.syntax.collectives import whole_axes
from napkin_cat.syntax.primitive import kind_of

__all__ = ["DevicesAt", "collective_link", "empty_symbol", "held_columns", "lanes", "largest_shards", "ring_held"]


def collective_link(box, ctx: At):
    """The link a collective ``box`` counts on the device ``ctx`` counts (its arrays at the device's extents, those
    it holds whole at their sizes); None for a box that is not a collective.  DeviceError outside a device region."""
    if kind_of(box.data.kind).collective is None:
        return None
    if ctx.device is None:
        raise DeviceError(f"{box.name}: a collective moves values between devices; it runs inside a device "
                          f"region (nc.shard) only")
    env = ctx.env
    device, active, extents = ctx.device[:3]
    whole = whole_axes(box)       # an array held whole on its side: not the device's extent of its axis

    def numel(a, side="dom"):
        return integer(sympy.Mul(*[x.size if x.name in whole[side] else extents.get((x.name, x.size), x.size)
                                   for x in a.axes]), env)
    link = box_link(box, device, numel, active)
    return Link(integer(box.data.param("devices"), env), link.sent, link.received, link.messages, None,
                link.sent_bytes, link.received_bytes)


class DevicesAt:
    """The device handlers of the cost algebra at sizes (:class:`~napkin_cat.cost.numeric.Concrete` is one): a
    device region's inside counted on each device's shard with the algebra's :meth:`diagram`, a ring's steps folded
    with its stream's ``run`` (``self.block_mask``: the data's, which decides the masks read from data).

    ``ring_tiles`` (axis → tile size, or None): the tiles a device's algorithm runs a ring's fold in.  Given, a fold a
    mask allows in part is charged in ``Link.work`` by the blocks of those tiles it runs (:func:`~napkin_cat.cost.
    at_sizes.running_area`: its FLOPs times the area of the blocks that run over its whole area); without, whole."""

    ring_tiles = None

    def shard(self, node, ins, ctx, dests):
        """Each device's inside on its shard, counted apart: the record's H and FLOPs are the busiest device's (per
        level and pipeline), its link one count per device (sent, received, messages, the rings' ``trips`` and
        ``work`` per step, and ``held``: the device's level-0 memory, its inside's largest level-0 column at its
        shard's size).  Under a non-contiguous order a device counts its inside once per piece of the region's axis
        (its *lanes*: each at its own positions, where a mask decides the folds), its rings' exchanges once."""
        env = ctx.env
        P = integer(node.devices, env)
        shards = device_shards(node, lambda e: integer(e, env))
        active = sum(d is not None for d in shards)         # an idle device (an empty shard) counts 0
        marks = wire_marks(node.region, shard_keys(node))
        per, held = [], []
        for mine in shards:
            empty = {(a, node.axes[a][0]): 0 for a, s in (mine or {}).items() if span_extent(s) == 0}   # no co-shard
            p = len(per)
            mycuts = cut_extents(node, lambda e: integer(e, env), p, active) if mine is not None else {}
            empty.update(mycuts)        # its shard of an axis a collective cuts inside: np.array_split's, not ⌈n/P⌉
            total = Cost()
            d = None if mine is None else device_inside(node, mine, mycuts)
            spans = cut_spans(node, lambda e: integer(e, env), p, active) if mine is not None else {}
            nil = {}                # an empty shard: its axis at a symbol of its own, 0 on this device
            for lane, part in enumerate(lanes(node, mine)):
                tiles = {**ctx.tiles, **{a: (s[0], s[1] - s[0]) for a, s in part.items() if not isinstance(s, Pieces)}}
                inside = device_inside(node, part, mycuts, lambda key: nil.setdefault(key, empty_symbol(key)))
                at = At({**env, **{x: 0 for x in nil.values()}}, {}, 1, (p, active, empty, lane), ctx.view)
                self.device_boxes(node, inside, marks, tiles, spans, at, total)
            per.append(total)
            rings = [] if d is None else [ring_held(b, env) for _, b in layers(d) if isinstance(b, Ring)]
            held.append(0 if d is None else max([integer(c, env) for c in held_columns(node, mine, mycuts)]
                                                 + rings + [0]))
        out = Cost()
        for name in ("H", "H_bytes", "flops"):
            keys = {k for c in per for k in getattr(c, name)}
            setattr(out, name, {k: max(getattr(c, name).get(k, 0) for c in per) for k in keys})
        links = [c.link or Link(P, 0, 0, 0) for c in per]
        ringed = any(x.trips is not None for x in links)
        out.link = Link(P, tuple(x.sent for x in links), tuple(x.received for x in links),
                        tuple(x.messages for x in links), tuple(held), tuple(x.sent_bytes for x in links),
                        tuple(x.received_bytes for x in links),
                        tuple(x.trips or () for x in links) if ringed else None,
                        tuple(x.work or () for x in links) if ringed else None)
        add(ctx.total, out, ctx.count)
        return dests

    def device_boxes(self, node, inside, marks, tiles: dict, spans: dict, ctx: At, total: Cost):
        """A device's ``inside`` counted box by box into ``total`` (``ctx``: its sizes and device), each box at the
        tiles the record gives it (``marks``, :func:`~napkin_cat.algorithms.device_wires.wire_marks`): ``tiles``
        (the device's shards) less each sharded axis it carries whole (a gathered axis: positions from 0), with its
        shard of each axis a collective cuts (``spans``); a box making an empty shard is idle (counts 0)."""
        empty = {key for key, n in ctx.device[2].items() if n == 0}
        own = {(a, node.axes[a][0]) for a in node.axes}
        for (_, box), (_, made, seen) in zip(layers(inside), marks):
            if seen is None or (any(m & empty for m in made) and (isinstance(box, Bubble)
                                                                  or kind_of(box.data.kind).collective is None)):
                continue                # wiring, or a box making no value (a collective still exchanges: counted)
            mine = {a: t for a, t in tiles.items() if a not in read_whole(box, seen, node.axes)}
            for a, size in seen - own:
                lo, hi = spans[a, size]
                mine[a] = (mine.get(a, (0, None))[0] + lo, hi - lo)
            inner = At(ctx.env, mine, 1, ctx.device, ctx.view)
            if isinstance(box, Bubble):
                fold_region(box, self, [None] * len(box.dom), inner)
            else:
                self.box(box, inner)
            add(total, inner.total)

    def ring(self, node, ins, ctx, dests, run):
        """A ring on the device (and lane) ``ctx`` counts (:mod:`napkin_cat.algorithms.ring`): the head, at each step
        ``t`` a fold per piece of the shard ``(p − t) mod P`` at the piece's size and positions, skipped where the
        stream's masks are never true there (:attr:`~napkin_cat.algorithms.ring.RingSchedule.masks`), a nested
        stream's tiles where its own are, the finish and the tail; its steps' folds that do work and their FLOPs
        (``Link.trips``, ``Link.work``: by the blocks of :attr:`ring_tiles` where given); the link (once per device,
        on its first lane): the shards it sends on and receives, one message per streamed input and exchange, and its
        ``held`` (:func:`ring_held`)."""
        if ctx.device is None:
            raise DeviceError(f"{node.region.name}: a ring passes shards between devices; it runs inside a device "
                              f"region only")
        box, env = node.region, ctx.env
        extents = ring_extents(box, lambda e: integer(e, env))
        pieces = ring_pieces(box, lambda e: integer(e, env))
        P, device = len(extents), ctx.device[0]
        lane = ctx.device[3] if len(ctx.device) > 3 else 0
        masks = node.masks if node.masks is not None and node.masks.active(self.block_mask) else None
        positions = masks is not None or reads_positions_inside(box, self.block_mask is not None)
        base = At(env, {a: t for a, t in ctx.tiles.items() if a != box.axis}, ctx.count, ctx.device, ctx.view)
        vals = run.head(ins, ctx)
        states = run.init(ctx)
        trips, work = [], []
        for t in range(P):
            runs = flops = 0
            for lo, hi in pieces[ring_shard(device, t, P)]:
                n = hi - lo
                if n == 0:
                    continue
                r = run if n == box.size else Phases(schedule_of(relabelled(box, n)), self)
                if masks is not None:        # the piece at its own positions, against this lane's
                    inner = running_slices(masks, base, box, n, range(lo, lo + 1), positions, self.block_mask)
                else:
                    inner = base.bound(box, n, range(lo, lo + 1) if positions else None)
                if not inner.count:
                    continue
                r.trip(vals, states, inner)
                add(ctx.total, inner.total, 1)
                done = sum(inner.total.flops.values())      # 0: a mask inside skipped every tile of it
                if done and masks is not None and self.ring_tiles:     # run as an algorithm of those tiles
                    part, whole = running_area(masks, inner, self.ring_tiles, self.block_mask)
                    done = done * part // whole
                runs, flops = runs + (inner.count if done else 0), flops + done
            trips.append(runs)
            work.append(flops)
        outs = run.tail(run.finish(vals, states, ctx), ctx)

        def numel_at(a, n):
            return integer(sympy.Mul(*[n if x.name == box.axis else x.size for x in a.axes]), env)
        if lane == 0:
            sent, received, messages = ring_link(box, numel_at, device=device, extents=extents)
            sb, rb, _ = ring_link(box, numel_at, lambda a: a.dtype.bytes, device=device, extents=extents)
        else:                        # another piece of the same device: its exchanges are counted once
            sent = received = messages = sb = rb = 0
        add(ctx.total, Cost(link=Link(len(extents), sent, received, messages, ring_held(box, env), sb, rb,
                                      tuple(trips), tuple(work))), ctx.count)
        return outs


def held_columns(node, mine: dict, cuts: dict) -> list:
    """The level-0 columns of the inside on the device's shards ``mine`` (and ``cuts``), symbolic in the sizes but
    those: an empty co-shard holds nothing (its axis carried at a symbol set to 0, apart from the axis's whole size
    that a gathered array holds, :func:`~napkin_cat.algorithms.device_shards.device_inside`).

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.devices import device_region
    >>> from napkin_cat.algorithms.schedule import schedule_of
    >>> x = nc.symbol("x")
    >>> g = nc.all_gather("x", axis="x", devices=4, x=x) >> nc.elementwise("exp", "x", x=x)
    >>> node = schedule_of(device_region(g, "x", 4, x, sharded_out=(None,)).boxes[0])
    >>> held_columns(node, {"x": (3, 3)}, {}), held_columns(node, {"x": (0, 1)}, {})   # its shard, then x whole
    ([0, x], [1, x])
    """
    nil = {}

    def empty(key):
        return nil.setdefault(key, empty_symbol(key))
    columns = cost(device_inside(node, mine, cuts, empty)).columns.get(0, [])
    return [c.subs({s: 0 for s in nil.values()}) for c in columns] if nil else columns


def empty_symbol(key) -> sympy.Symbol:
    """The size an empty shard ``key = (axis, shard size)`` is carried at on a device that holds none of it: a symbol
    of its own (set to 0 where the device is counted), apart from the axis's whole size and its other shards, so
    that no sum of sizes mixes them (``x/4`` and ``x`` in one sum are ``5·x/4``, which no substitution of ``x/4``
    parts), and a box that reads the shard and makes none of it (a sum over it) reads 0 values.

    >>> empty_symbol(("x", 3))
    empty shard of x[3]
    """
    return sympy.Symbol(f"empty shard of {key[0]}[{key[1]}]")


def lanes(node, mine) -> list:
    """A device's shard ``mine`` as the parts its inside is counted on: itself under the contiguous order, else one
    per piece of the region's axis (each a ``(start, stop)``, the co-sharded axes kept whole as their pieces); none
    for an idle device."""
    if mine is None:
        return []
    own = mine[node.axis]
    if not isinstance(own, Pieces):
        return [mine]
    return [{**mine, node.axis: (lo, hi)} for lo, hi in own if hi > lo]


def ring_held(box, env) -> int:
    """A ring's level-0 memory on a device at ``env``: its columns with the slice in use at its widest (the largest
    shard, which every device folds at some step) and the slot an incoming shard arrives in."""
    extents = ring_extents(box, lambda e: integer(e, env))

    def numel_at(a, n):
        return integer(sympy.Mul(*[n if x.name == box.axis else x.size for x in a.axes]), env)
    slot = sum(numel_at(box.dom.inside[i], max(extents)) for i in box.streamed())
    widest = box if box.size == max(extents) else relabelled(box, max(extents))
    return max([integer(c, env) for c in region_cost(widest).columns.get(0, [])] + [0]) + slot


def largest_shards(diagram: Diagram, env: dict) -> Diagram:
    """``diagram`` with each device region's inside at its largest shard's size (an int): the memory its
    columns count at ``env``, where a shard ``a/P`` need not be an integer."""
    items, changed = [], False
    for layer in diagram.inside:
        left, box, right = layer.boxes_or_types[:3]
        if isinstance(box, Shard):
            node = schedule_of(box)
            mine, mycuts = largest_shard(node, lambda e: integer(e, env))
            inside = device_inside(node, mine, mycuts)
            if inside is not node.inside:
                size = span_extent(mine[box.axis])
                box, changed = Shard(inside, box.dom, box.cod, {**box.params, "size": size}), True
        items.append((left, box, right))
    return from_layers(diagram.dom, diagram.cod, items) if changed else diagram
