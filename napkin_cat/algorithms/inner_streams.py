"""A stream inside a stream's trip along another axis: the 2-D tiled loop (issue 22, item 1).

A kernel streamed along ``b`` computes, per slice of ``b``, its trip.  When that trip reduces another axis
``a`` (a contraction building the slice's tile), the reduction can itself be streamed: per slice of ``b``
a loop along ``a`` reads the ``a``-slices of what it contracts and accumulates the tile, which the trip's
maps and reducers then use as before::

    Stream_b( load X ; load Y ; R(X, Y) ; F )   →   Stream_b( Stream_a( load X ; load Y ; R(X, Y) ) ; F )

where ``R`` is the *reduction cone* of ``a``: the boxes that reduce ``a`` away (an input carries it, no output
does) and the boxes making what they read along ``a`` (the loads of the slices included).  The inner stream is
a map along ``b`` (:func:`~napkin_cat.algorithms.streaming.inner_stream_map`): its outputs are the slice's
tile.  What it costs: an input of ``R`` that lacks ``b`` (loaded once before, in the outer head) is now read
once per ``b``-trip, in ``a``-slices; memory holds ``a``-slices instead of whole rows along ``a``.  For fused
linear cross-entropy ``log Σ_v exp(H Wᵀ) − …`` streamed along ``v``, the logits tile of each vocabulary slice
is built by a loop over the hidden axis ``e``.

>>> import napkin_cat as nc
>>> lce = nc.stream(nc.stream(nc.library.linear_cross_entropy(), "v", "s_v"), "e", "s_e")
>>> outer = lce.boxes[0].arg.boxes[0]
>>> [b.name for b in outer.arg.boxes if isinstance(b, nc.Region)]
['Stream(axis=e, size=s_e)']
>>> import numpy as np
>>> bool(nc.equivalent(nc.library.linear_cross_entropy(), lce))
True
"""
from __future__ import annotations

from napkin_cat.errors import RewriteError
from napkin_cat.syntax.adapter import Bubble, Diagram, single
from napkin_cat.syntax.builder import Builder, build_values
from napkin_cat.syntax.wiring import trace_values


def _has(arr, axis) -> bool:
    return axis in arr.names


def reduction_cone(ops, axis: str) -> list:
    """The indices of the ops that reduce ``axis`` away and of those making, along ``axis``, what they read."""
    made_by = {v: k for k, (_, _, outs) in enumerate(ops) for v in outs}
    arrays = {}
    for box, _, outs in ops:
        arrays.update(zip(outs, box.cod.inside))
    roots = [k for k, (box, _, _) in enumerate(ops)
             if any(_has(a, axis) for a in box.dom.inside) and not any(_has(a, axis) for a in box.cod.inside)]
    cone, todo = set(), list(roots)
    while todo:
        k = todo.pop()
        if k in cone:
            continue
        cone.add(k)
        for v in ops[k][1]:
            if v in made_by and _has(arrays[v], axis):
                todo.append(made_by[v])
    return sorted(cone)


def cone_boundary(ops, dom, cod, arrays: dict, axis: str) -> tuple:
    """``(cone, core_in, core_out)`` of the reduction of ``axis`` among the values ``ops`` (``trace_values`` of a
    trip, ``arrays[v]`` each value's array): the cone's op indices, the values it reads from outside, those it makes
    that are read outside it (or are outputs); a RewriteError where the cone cannot be cut out as one region."""
    cone = reduction_cone(ops, axis)
    if not cone:
        raise RewriteError(f"no box of the stream's trip reduces {axis!r} away, so there is no reduction to stream "
                           f"inside it")
    if any(isinstance(ops[k][0], Bubble) for k in cone):
        raise RewriteError(f"the reduction of {axis!r} inside the stream's trip contains a region; stream along "
                           f"{axis!r} before partitioning inside it")
    inside = set(cone)
    made = {v for k in cone for v in ops[k][2]}
    read_outside = {v for k, (_, ins, _) in enumerate(ops) if k not in inside for v in ins} | set(cod)
    for v in made & read_outside:
        if _has(arrays[v], axis):
            raise RewriteError(f"{arrays[v]} is made along {axis!r} by the reduction of {axis!r} and also read "
                               f"outside it, so the reduction cannot be streamed on its own")
    _check_convex(ops, inside)
    core_in = []
    for k in cone:
        core_in += [v for v in ops[k][1] if v not in made and v not in core_in]
    core_out = [v for k in cone for v in ops[k][2] if v in read_outside]
    return cone, core_in, core_out


def value_arrays(d: Diagram, ops, dom) -> dict:
    """Each value's array: ``d``'s inputs, then what each op of ``trace_values(d)`` makes."""
    arrays = dict(zip(dom, d.dom.inside))
    for box, _, outs in ops:
        arrays.update(zip(outs, box.cod.inside))
    return arrays


def refused_outer(ops, dom, arrays: dict, boundary: tuple, inner: str, outer: str) -> str | None:
    """Why a stream along ``outer`` refuses the trip whose reduction cone of ``inner`` (``boundary``, from
    :func:`cone_boundary`) is cut out as an inner stream, read off the cone before it is cut; None where it may
    accept it (the streaming analysis of the cut trip decides).  The law, a necessary condition of
    :func:`~napkin_cat.algorithms.streaming.analyse` on the cut trip:

        the cone reads an input of the trip carrying ``outer``  ⇒  the inner stream is advanced per trip, a map
        (:func:`~napkin_cat.algorithms.streaming.inner_stream_map`: an output of the cone carries ``outer`` and
        every box of the cone that sees ``outer``, loads and saves aside, is weaved over it), or refused

    since a region reading a slice is either such a map or a nested reducer, and an inner stream along another
    axis is never a nested reducer (:mod:`~napkin_cat.algorithms.nesting`).

    >>> import napkin_cat as nc
    >>> from napkin_cat.syntax.wiring import trace_values
    >>> inside = nc.kernel(nc.library.linear_cross_entropy()).boxes[0].arg
    >>> ops, dom, cod = trace_values(inside)
    >>> arrays = value_arrays(inside, ops, dom)
    >>> refused_outer(ops, dom, arrays, cone_boundary(ops, dom, cod, arrays, "e"), "e", "v") is None
    True
    >>> refused_outer(ops, dom, arrays, cone_boundary(ops, dom, cod, arrays, "v"), "v", "e")[:70]
    "the reduction of 'v' reads inputs carrying 'e' and makes no output car"
    """
    cone, core_in, core_out = boundary
    if not any(v in dom and _has(arrays[v], outer) for v in core_in):
        return None
    if not any(_has(arrays[v], outer) for v in core_out):
        return (f"the reduction of {inner!r} reads inputs carrying {outer!r} and makes no output carrying it, so "
                f"it cannot run per trip of a stream along {outer!r}")
    for k in cone:
        box = ops[k][0]
        if any(_has(a, outer) for a in (*box.dom.inside, *box.cod.inside)) and outer not in box.data.weave_names \
                and box.data.kind not in ("load", "save"):
            return (f"the reduction of {inner!r} reads inputs carrying {outer!r} and {box.name!r} in it does not "
                    f"map over {outer!r}, so it cannot run per trip of a stream along {outer!r}")
    return None


def nest_reduction(d: Diagram, axis: str, wrap, traced=None) -> Diagram:
    """``d`` (a stream's inside, one slice) with its reduction cone of ``axis`` made one region ``wrap(cone)``
    (see the module docstring), or RewriteError saying why the cone cannot be cut out.  ``traced``:
    ``(ops, dom, cod, arrays, boundary)`` of ``d`` and ``axis`` already made (:func:`cone_boundary`)."""
    if traced is None:
        ops, dom, cod = trace_values(d)
        arrays = value_arrays(d, ops, dom)
        boundary = cone_boundary(ops, dom, cod, arrays, axis)
    else:
        ops, dom, cod, arrays, boundary = traced
    cone, core_in, core_out = boundary
    inside, made = set(cone), {v for k in cone for v in ops[k][2]}
    region = wrap(build_values([ops[k] for k in cone], core_in, core_out, arrays))
    outer = Builder(d.dom)
    wire = dict(zip(dom, outer.inputs))
    placed = False
    for k, (box, ins, outs) in enumerate(ops):
        if not placed and all(v in wire for v in core_in):
            outer.apply(region, wire, core_in, core_out)
            placed = True
        if k in inside:
            continue
        if not placed and any(v in made for v in ins):
            raise RewriteError(f"{box.name!r} reads the reduction of {axis!r} before all of it is made")
        outer.apply(single(box), wire, ins, outs)
    if not placed:
        outer.apply(region, wire, core_in, core_out)
    return outer.build(*(wire[v] for v in cod))


def _check_convex(ops, inside: set):
    """No path leaves the cone and comes back into it (else it is not one region)."""
    made_by = {v: k for k, (_, _, outs) in enumerate(ops) for v in outs}
    reach = {}
    for k, (box, ins, _) in enumerate(ops):    # ops are in a topological order
        after = set()
        for v in ins:
            j = made_by.get(v)
            if j is None:
                continue
            if j in inside and k not in inside:
                after.add(True)
            elif j not in inside and reach.get(j):
                after.add(True)
        reach[k] = bool(after)
        if k in inside and reach[k]:
            raise RewriteError(f"{box.name!r} in the reduction reads a value made from the reduction outside it: "
                               f"the reduction is not one region")


__all__ = ["reduction_cone", "cone_boundary", "value_arrays", "refused_outer", "nest_reduction"]
