"""The cost of one primitive box run once: its transfers, bytes and FLOPs, read off the box alone (paper §2.2-2.4).

A box's cost does not depend on where it sits: a load or save moves the values of its array into or out of the
deeper of its two levels, every box does its item FLOPs times the sizes it weaves::

    H[max(ℓ_src, ℓ_dst)] = numel(array)                     (a load or save)
    flops[p] = item_flops(core)[p] · Π weave sizes           (any box)

so the pieces are read once per box (and per relabelling it is seen through, and per arithmetic), kept on the box
and by value (:data:`PIECES`: the same operation in another candidate's kernel is costed once).  The cost functor
(:mod:`napkin_cat.cost.iocost`) sums them over a diagram's boxes.

>>> import napkin_cat as nc
>>> mm = nc.library.matmul().boxes[0]
>>> box_cost(mm).flops, box_cost(mm).H
({'tensor': 2*a*b*c}, {})
"""
from __future__ import annotations

import itertools

from napkin_cat.cost.by_value import ByValue
from napkin_cat.cost.devices import box_link
from napkin_cat.cost.polynomial import SYMPY
from napkin_cat.cost.record import ONE, Cost, OpCost
from napkin_cat.syntax.adapter import Ty
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.relabel import PLAIN, Relabelling
from napkin_cat.syntax.weave import core_of

__all__ = ["box_cost", "box_pieces", "PIECES"]


def box_cost(box, view: Relabelling = PLAIN, arithmetic=SYMPY, *, ops: bool = True) -> Cost:
    """The cost of one primitive box run once: its :func:`box_pieces` (in ``arithmetic``,
    :mod:`napkin_cat.cost.polynomial`), its op records numbered as a fresh occurrence (each call is one more
    occurrence of the box in a walk); none with ``ops=False`` (a record read for its transfers, memory and FLOPs
    alone: the search's)."""
    H, H_bytes, flops, records = box_pieces(box, view, arithmetic)
    if not ops:
        return Cost(dict(H), dict(H_bytes), {}, dict(flops), link=box_link(box))
    occurrence = next(_OCCURRENCES)
    return Cost(dict(H), dict(H_bytes), {}, dict(flops),
                ops=[OpCost(o.label, o.kind, o.pipeline, o.flops, o.trips, dtype=o.dtype, operands=o.operands,
                            index=occurrence, arrays=o.arrays) for o in records], link=box_link(box))


def box_pieces(box, view: Relabelling = PLAIN, arithmetic=SYMPY) -> tuple:
    """``(H, H_bytes, flops, ops)`` of one primitive box run once, as ``(key, value)`` pairs and op records
    (index unset): read off the box alone, so read once and kept on it (a box is immutable; the cost functor
    and the cost at sizes meet one box in every candidate and at every tiling that holds it).  ``view``: the box
    seen through a relabelling (inside partition records): the pieces of its image, read off the relabelled
    arrays without building the image, kept on the box per image.  ``arithmetic``: what the values are
    (:mod:`napkin_cat.cost.polynomial`; kept per arithmetic).

    >>> import napkin_cat as nc
    >>> mm = nc.library.matmul().boxes[0]
    >>> box_pieces(mm)[2], box_pieces(mm) is box_pieces(mm)
    ((('tensor', 2*a*b*c),), True)
    >>> c, c2 = box_cost(mm), box_cost(mm)
    >>> c.flops == dict(box_pieces(mm)[2]) and c.ops[0].index != c2.ops[0].index
    True
    """
    dom, cod = box.dom.inside, box.cod.inside
    key = ()
    if view:      # the images are kept with the box's arrays (remembered on them): their ids name them
        images = tuple(map(view.array, dom)), tuple(map(view.array, cod))
        if any(x is not y for x, y in zip((*images[0], *images[1]), (*dom, *cod))):
            (dom, cod), key = images, tuple(map(id, (*images[0], *images[1])))
    seen = box.__dict__.setdefault("_cost_pieces", {})
    if arithmetic.name != SYMPY.name:
        key = (key, arithmetic.name)
    cached = seen.get(key)
    if cached is not None:
        return cached
    # an equal box seen through equal images (the same operation in another candidate's kernel) has equal pieces
    whole = (box.name, box.data, box.dom.inside, box.cod.inside, dom, cod, arithmetic.name)   # (arrays hash fast)
    cached = PIECES.get(whole)
    if cached is not None:
        seen[key] = cached
        return cached
    H, H_bytes, flops, ops = {}, {}, {}, []
    spec = box.data
    kind = kind_of(spec.kind)
    per_item = kind.item_flops(core_of(spec, Ty(*dom), Ty(*cod)) if key else core_of(spec, box.dom, box.cod))
    weave = arithmetic.product([next((arr.axis(w).size for arr in cod if w in arr.names), ONE)
                                for w in spec.weave_names])
    out = (cod or dom)[0] if (cod or dom) else None
    dtype, operands = (out.dtype.name if out else ""), tuple(a.dtype.name for a in dom)
    for p, f in per_item.items():    # the pipelines of one box are distinct: each is set once
        f = arithmetic.of(f) * weave
        flops[p] = f
        ops.append(OpCost(box.name, spec.kind, p, f, arithmetic.one, dtype=dtype, operands=operands,
                          arrays=(tuple(dom), tuple(cod))))
    if spec.kind in ("load", "save"):
        src, dst = dom[0], cod[0]
        lvl, n = max(src.level, dst.level), arithmetic.numel(src)
        H[lvl] = n
        H_bytes[lvl] = n * max(src.dtype.bytes, dst.dtype.bytes) if src.dtype == dst.dtype else n * dst.dtype.bytes
    cached = seen[key] = PIECES.put(whole, (tuple(H.items()), tuple(H_bytes.items()), tuple(flops.items()), tuple(ops)))
    return cached


#: box pieces by value (:mod:`.by_value`): the same operation in another candidate's kernel is costed once
PIECES = ByValue()
_OCCURRENCES = itertools.count()
