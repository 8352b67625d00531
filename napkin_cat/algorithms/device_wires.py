"""A device's inside wire by wire (issue 37): which wires of a device region's inside carry a device's shard.

A device region (:class:`~napkin_cat.algorithms.devices.Shard`) records, for each input and output, the axis it is
sharded along (``sharded_in``/``sharded_out``).  A device runs the inside with each wire that carries its shard of an
axis at its extent of it; which wires those are is followed from the record, box by box, never read off the sizes (an
array of a shard's size may be a part made otherwise, a split's; a shard of a one-value axis is as large as the
whole)::

    a wire carries the shard (a, s)  ⇔  an input the record shards along a carries it, and every box between keeps
                                         a at s; or a collective cuts it (a reduce-scatter, an all-to-all's scatter);
                                         or a box woven over a makes it where no input carries a (a broadcast)
    an all-gather of a (an all-to-all's gather of a) ends it; a rename a ↦ b carries it on as (b, s) where the
    region shards b (a ring of the renamed shards: :mod:`~napkin_cat.algorithms.ring_gathered`)

:func:`retyped` is that walk; :func:`not_woven` is the group partition's condition (what a device region needs of its
inside, :func:`~napkin_cat.algorithms.devices.shard`), which the walk reads for a region's broadcast.

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.devices import shard
>>> box = shard(nc.library.attention(q=7), "q", devices=2).boxes[0]      # shards of 4 and 3 queries
>>> retyped(box, {("q", 4): 3}).dom                          # device 1's inside: 3 queries, the keys whole
Ty(Array(q[3]×d), Array(x×d), Array(x×d))
"""
from __future__ import annotations

from napkin_cat.algorithms.bubbles import Region, Stream
from napkin_cat.syntax.adapter import Bubble, Diagram, Ty
from napkin_cat.syntax.flat import from_layers, is_structural, layers
from napkin_cat.syntax.primitive import KINDS
from napkin_cat.syntax.relabel import map_box
from napkin_cat.syntax.wiring import computes, retype, route

#: the region name of the device level (:attr:`Shard.region <napkin_cat.algorithms.devices.Shard>`): a program has one
DEVICE_LEVEL = "shard"


def not_woven(d: Diagram, axis: str) -> str | None:
    """None if every box that sees ``axis`` is woven over it (so the devices' shards are independent), else why: the
    group partition's condition, ``weave_a(F) ≡ split_a ; (F ⊗ … ⊗ F) ; join_a``, box by box.

    >>> import napkin_cat as nc
    >>> not_woven(nc.library.attention(), "q") is None       # every box runs alike on each query
    True
    >>> not_woven(nc.library.attention(), "x").startswith("'SoftMax' has 'x' in its item-level core")
    True
    """
    for _, box in layers(d):
        if is_structural(box) is not None:
            continue
        if isinstance(box, Region) and box.region == DEVICE_LEVEL:
            return f"{box.name} is a device region already: a program has one device level"
        if isinstance(box, Stream) and box.axis == axis:
            return f"{axis!r} is streamed inside {box.name}"
        if isinstance(box, Region):
            why = not_woven(box.arg, axis)
            if why:
                return why
            continue
        if any(axis in a.names for a in (*box.dom.inside, *box.cod.inside)) and axis not in box.data.weave_names:
            return (f"{box.name!r} has {axis!r} in its item-level core (it is not woven over {axis!r}), so the "
                    f"devices' shards would not be independent")
    return None


def _collective_marks(b, marks: set, sizes: dict) -> set:
    """The shards a collective's outputs carry, given those its inputs carry (``(axis, shard size)`` pairs)."""
    kind, param = b.data.kind, b.data.param
    cut = {"all_gather": (param("axis"), None), "reducescatter": (None, param("axis")),
           "all_to_all": (param("gather"), param("scatter"))}.get(kind, (None, None))
    out = {m for m in marks if m[0] != cut[0]}
    if cut[1] is not None:
        out |= {(cut[1], c.axis(cut[1]).size) for c in b.cod.inside} & set(sizes)
    return out


def woven_over(box, axis: str) -> bool:
    """Whether ``box`` (a primitive, or a region: every box in it) is woven over ``axis``: runs alike on each of its
    positions, as on each device's shard of it."""
    return axis in box.data.weave_names if not isinstance(box, Bubble) else not_woven(box.arg, axis) is None


def _carried(arr, marks) -> frozenset:
    return frozenset((x.name, x.size) for x in arr.axes if (x.name, x.size) in marks)


def wire_marks(region, keys) -> list:
    """The walk of :func:`retyped` on the inside of the device region ``region``: per layer, ``(held, made, marks)``:
    the shards ``(axis, shard size)`` among ``keys`` each input of its box carries, those each output carries, and
    (a computing box) every shard it sees, the ones it makes included; a wiring box moves the marks by
    :func:`~napkin_cat.syntax.wiring.route` (its ``marks`` None).  The walk reads the record, never the sizes of a
    device: every device runs the same walk.

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.devices import shard
    >>> box = shard(nc.library.attention(q=7), "q", devices=2).boxes[0]
    >>> [sorted(m) for _, _, m in wire_marks(box, {("q", 4)})][:2]      # the scores and their softmax: q sharded
    [[('q', 4)], [('q', 4)]]
    """
    d, keys = region.arg, set(keys)
    own = {(a, s) for (a, s) in keys if a in region.sharded_axes() and region.sharded_axes()[a][0] == s}
    marks = [_carried(a, {(cut, a.axis(cut).size)} & keys) if cut else frozenset()
             for a, cut in zip(d.dom.inside, region.sharded("dom"))]
    out_layers = []
    for layer in d.inside:
        left, b, _ = layer.boxes_or_types[:3]
        k, n = len(left), len(b.dom)
        held = tuple(marks[k:k + n])
        if not computes(b):             # wiring: the marks move with the values (a merge is refused by route)
            seen, out = None, route(b, list(held))
        else:
            names = {x for a in b.dom.inside for x in a.names}      # an axis no input carries: a broadcast along it
            got = set().union(*held) | {m for c in b.cod.inside for m in _carried(c, own)
                                        if m[0] not in names and woven_over(b, m[0])}
            cod_marks = _collective_marks(b, got, keys) if not isinstance(b, Bubble) and \
                KINDS[b.data.kind].collective is not None else got
            if not isinstance(b, Bubble) and KINDS[b.data.kind].renames:     # a rename carries the shard renamed
                names = dict(zip(b.dom.inside[0].names, b.cod.inside[0].names))
                cod_marks = cod_marks | ({(names.get(a, a), s) for a, s in got} & keys)
            seen, out = frozenset(got | cod_marks), [_carried(c, cod_marks) for c in b.cod.inside]
        out_layers.append((held, tuple(out), seen))
        marks[k:k + n] = out
    return out_layers


def read_whole(box, seen, sharded) -> set:
    """The sharded axes (``sharded``: their names) that ``box`` carries whole: none of the shards it sees (``seen``,
    its marks from :func:`wire_marks`) is of them.  A gathered axis: the box reads it at its global positions (from
    0), where a box that carries a device's shard reads the shard's positions.

    >>> import napkin_cat as nc
    >>> box = nc.einsum("q d, x d -> q x").boxes[0]
    >>> sorted(read_whole(box, {("q", 4)}, ("q", "x")))     # the queries a shard, the keys gathered whole
    ['x']
    """
    names = {x for a in (*box.dom.inside, *box.cod.inside) for x in a.names}
    return (names & set(sharded)) - {a for a, _ in (seen or ())}


def retyped(region, sizes: dict) -> Diagram:
    """The inside of the device region ``region`` with each wire that carries a device's shard ``(axis, shard size)``
    (a key of ``sizes``) carrying it at ``sizes[axis, shard size]``: from the inputs the record says are sharded,
    through every box that keeps the axis at that size, until a collective gathers it (an all-gather, an
    all-to-all's gather); a reduce-scatter's and an all-to-all's outputs carry the shard they cut.  A box woven over
    a sharded axis makes its shard where its output carries the axis at a shard's size though no input does (a
    broadcast along it).  The walk is :func:`wire_marks`."""
    d = region.arg

    def fa_of(marks):
        def fa(arr):
            return arr.replace(axes=tuple(x.relabel(sizes[x.name, x.size]) if (x.name, x.size) in marks else x
                                          for x in arr.axes))
        return fa
    marks = [_carried(a, {(cut, a.axis(cut).size)} & set(sizes)) if cut else frozenset()
             for a, cut in zip(d.dom.inside, region.sharded("dom"))]
    types = [fa_of(m)(a) for a, m in zip(d.dom.inside, marks)]
    dom, items = Ty(*types), []
    for layer, (held, out, seen) in zip(d.inside, wire_marks(region, sizes)):
        left, b, _ = layer.boxes_or_types[:3]
        k, n = len(left), len(b.dom)
        new = retype(b, types[k:k + n]) if seen is None else map_box(b, fa_of(seen), lambda name: name)
        items.append((Ty(*types[:k]), new, Ty(*types[k + n:])))
        types[k:k + n] = list(new.cod.inside)
    return from_layers(dom, Ty(*types), items)


__all__ = ["DEVICE_LEVEL", "not_woven", "woven_over", "wire_marks", "read_whole", "retyped"]
