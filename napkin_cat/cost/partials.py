"""The partial buffers of split streams: the values they hold in global memory (:mod:`napkin_cat.algorithms.splits`).

A stream split into ``P`` parts (``nc.stream(..., parts=P)``) runs its parts side by side, each writing its
reducers' state to a buffer in global memory that the combine merges; those buffers are held, beside what the
region reads, while the parts and the combine run: the cost functor adds them to the region's level-0 column
(:mod:`napkin_cat.cost.iocost`)::

    partials = Σ_split P · Σ_state Π_axes whole(a)        whole(a): the outermost partition's full size of a

>>> import napkin_cat as nc
>>> partial_values(nc.stream(nc.library.matmul(), "b", "s_b", parts=3))
3*a*c
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost.record import ZERO
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.cost.expanded import expand

__all__ = ["partial_values"]


def partial_values(region) -> sympy.Expr:
    """The values the partial buffers of the split streams in ``region`` (a diagram or a region) hold in global
    memory while their parts and combine run (:mod:`napkin_cat.algorithms.splits`): per split stream, ``P`` times
    each reducer's state, an axis that the partitions around the stream cut spanning its whole size, as the plan
    allocates them (:func:`napkin_cat.plan.partials.split_stream`)::

        partials = Σ_split P · Σ_state Π_axes whole(a)        whole(a): the outermost partition's full size of a

    >>> import napkin_cat as nc
    >>> partial_values(nc.group(nc.stream(nc.library.attention(), "x", "s_x", parts="P"), "q", "g_q"))
    P*d*q + 2*P*q
    """
    if isinstance(region, Region):     # a region is immutable: its partials are read once and kept on it (a
        #                                region is a Diagram too: a box is the diagram of itself)
        found = region.__dict__.get("_partial_values")
        if found is None:
            found = region.__dict__["_partial_values"] = partial_values(Diagram.id(region.dom) >> region) \
                if _splits(region) else ZERO
        return found
    total = sympy.Integer(0)

    def visit(d, whole):
        nonlocal total
        for _, box in layers(d):
            if not isinstance(box, Region):
                continue
            inner = dict(whole)
            if isinstance(box, (Grid, Stream)):
                inner.setdefault(box.axis, sympy.sympify(box.full_size()))
            if isinstance(box, Stream) and box.params.get("parts") is not None:
                parts = sympy.sympify(box.params["parts"])
                for r in schedule_of(box).reducers:
                    for s in r.state:
                        total += parts * sympy.Mul(*[inner.get(a.name, sympy.sympify(a.size)) for a in s.array.axes])
            visit(box.arg, inner)
    visit(region, {})
    return expand(total)


def _splits(region) -> bool:
    """Whether a split stream is ``region`` or inside it (kept on each region: it is immutable)."""
    found = region.__dict__.get("_has_splits")
    if found is None:
        split = isinstance(region, Stream) and region.params.get("parts") is not None
        found = region.__dict__["_has_splits"] = split or any(_splits(b) for _, b in layers(region.arg)
                                                              if isinstance(b, Region))
    return found
