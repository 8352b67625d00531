"""What each device of a device region holds (issue 37): its shards of the region's sharded axes and of the axes a
collective inside cuts, and the inside at their sizes.

A region :class:`~napkin_cat.algorithms.devices.Shard` along ``a`` over ``P`` devices gives device ``p`` its shard
of ``a`` as ``np.array_split`` cuts it (:func:`device_shards`; an empty shard: an idle device), of each co-sharded
axis and each axis a collective cuts (:func:`collective_cuts`) among the devices that hold a shard of ``a``
(:func:`cut_extents`, :func:`cut_spans`); :func:`device_inside` is the inside a device runs at those extents, its
wires retyped from the region's record (:func:`~napkin_cat.algorithms.device_wires.retyped`).  What the numpy run,
the cost at sizes and the torch.distributed runner read per device.

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.schedule import schedule_of
>>> node = schedule_of(nc.shard(nc.library.attention(), "q", devices=3).boxes[0])
>>> [m["q"] for m in device_shards(node, lambda e: int(e.subs(nc.symbol("q"), 7)) if hasattr(e, "subs") else e)]
[(0, 3), (3, 5), (5, 7)]
"""
from __future__ import annotations


from napkin_cat.algorithms.devices import RENAMED
from napkin_cat.algorithms.device_wires import retyped
from napkin_cat.algorithms.orders import CONTIGUOUS, Pieces, check_chunks, device_pieces, extent, order_of
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.flat import is_structural, layers
from napkin_cat.syntax.collectives import check_devices, shard_bounds
from napkin_cat.syntax.primitive import KINDS


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
    >>> from napkin_cat.algorithms.devices import device_region
    >>> node = schedule_of(device_region(one, "q", 2, 1, also={"x": 4}, sharded_in=("q", "x")).boxes[0])
    >>> device_shards(node, int)        # one query: device 1 idle, device 0 holds every key
    [{'q': (0, 1), 'x': (0, 4)}, None]
    """
    P = check_devices(value(node.devices), f"{node.devices}" if not isinstance(node.devices, int) else "devices")
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
    >>> from napkin_cat.algorithms.devices import device_region
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
    >>> node = schedule_of(nc.shard(nc.library.attention(q=13), "q", 4, order="zigzag").boxes[0])
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
    followed from the region's record (:data:`~napkin_cat.algorithms.devices.RECORD`) box by box
    (:func:`~napkin_cat.algorithms.device_wires.retyped`), never read off the sizes: an array of a shard's size may
    be a part made otherwise (a split's).  An empty shard
    leaves its axis as it is (no box but a collective reads it, which reads the device's values themselves), or, given
    ``empty`` (``(axis, shard size) →`` a symbol), carries an empty shard at that symbol: a count of what the device
    holds sets it to 0, kept apart from the axis's whole size (``x/4`` and ``x`` in one sum are ``5·x/4``, which no
    substitution of ``x/4`` parts), whether the shard's size is a symbol or a number; but for a shard as large as
    its whole (an axis of one value: ``⌈1/P⌉ = 1``), which the sizes cannot tell from the whole arrays of that axis
    a box also reads, left as it is.

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
        fulls = {**{(a, part): whole for a, (part, whole) in node.axes.items()}, **collective_cuts(node)}
        gone = [(a, node.axes[a][0]) for a, s in shards.items() if extent(s) == 0]
        gone += [key for key, n in (cuts or {}).items() if n == 0]
        sizes.update({key: empty(key) for key in gone if str(key[1]) != str(fulls.get(key))})
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
    >>> from napkin_cat.algorithms.devices import device_region
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
    for b, a in node.region.params.get(RENAMED, ()):    # a cut axis renamed inside: its shard cut alike
        out.update({(b, size): full for (name, size), full in list(out.items()) if name == a})
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


__all__ = ["device_shards", "cut_extents", "cut_spans", "largest_shard", "device_inside", "collective_cuts",
           "shard_keys", "collectives_within"]
