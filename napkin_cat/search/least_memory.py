"""The least memory a partition of a kernel can run in, read off the function before the candidate is costed.

A candidate kernel ``K = kernel(f, level)`` partitioned along the axes ``P`` (its stream, a stream inside it, its
groups: :class:`~napkin_cat.search.variants.Variant`) holds each value of ``f`` at ``level`` as a tile: the value
seen through the partitions, each axis of ``P`` it carries read as its tile (at least 1), every other axis whole.
An input is live from its load, a value a box makes from that box, until its last reader has run (a value no box
reads and ``f`` does not output is dead as it is made, never held); an output from where it is made until the kernel
writes it out.  Hence, at any tiles (divisors or not) and for any partition along ``P``::

    least_held(f, P, sizes) <= max over the columns of cost(K partitioned).M[level]
    least_held(f, P, sizes) = max(max_box Σ_{x read by box} tile₁(x),  max_{y output made in f} tile₁(y))

where each value (an input of ``f`` or one a box makes) is counted once per box, and ``tile₁(x)`` is ``x``'s values
with every axis of ``P`` at 1: before a box runs every value it reads is held at once, whatever order the partition
runs the boxes in (a stream's head, trip and tail), and an output is held once made.  Not all outputs at once (a
stream writes what its head makes before its trips run), nor what a box makes beside a value a later box reads (a
sweep reorders them): only these two are claimed, not a stream's running state.  A candidate whose ``least_held``
passes the memory fits at no tiling: the search answers "does not fit" for it without costing it
(:meth:`~napkin_cat.search.curves.Curve.at_all`), exactly as the integer search over its tiles would.  The cost
functor's columns are the second route (``tests/search/test_least_memory.py``, ``test_least_held_values.py``: the
bound is at most :meth:`~napkin_cat.search.curves.Curve.smallest` on every partition of every block a search costs,
and a candidate it rules out has no fitting tiling in :func:`~napkin_cat.cost.sized_optimum.optimum_values`).

>>> import napkin_cat as nc
>>> att = nc.library.attention()                  # Q (q d), K (x d), V (x d) -> O (q d)
>>> sizes = {"q": 4096, "x": 4096, "d": 128}
>>> least_held(att, {"q"}, sizes)                 # a sweep along q: K and V stay whole, P·V reads V and a row of P
528384
>>> least_held(att, {"q", "x"}, sizes)            # grouped along q, streamed along x: slices of d values
256
"""
from __future__ import annotations

import math

from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.errors import NapkinError
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.sizes import Sizes
from napkin_cat.syntax.wiring import trace_values


def _held(function: Diagram) -> tuple:
    """``(arrays, sets)``: the array of each value of ``function`` (by id: its inputs, then each box's outputs) and
    the sets of values held at once (ids, each set sorted): per box (computing or merging), the distinct values it
    reads, then each output made inside (none of them an input) alone.  Read off the diagram alone: kept on it
    (immutable)."""
    found = function.__dict__.get("_held_sets")
    if found is None:
        ops, dom, cod = trace_values(function)
        arrays = dict(zip(dom, function.dom.inside))
        for box, _, outs in ops:
            arrays.update(zip(outs, box.cod.inside))
        inputs = set(dom)
        sets = {tuple(sorted(set(ins))) for _, ins, _ in ops if ins}
        sets.update((v,) for v in set(cod) - inputs)
        found = (arrays, tuple(sorted(sets)))
        function.__dict__["_held_sets"] = found
    return found


def least_held(function: Diagram, partitioned, sizes, level: int = 1) -> int:
    """A lower bound of the memory at ``level`` of ``kernel(function, level)`` partitioned along the axes
    ``partitioned`` (names), at any tiles, at ``sizes`` (names or symbols to ints).  A value whose size is not a
    number at ``sizes`` (a size missing) counts 0: nothing is claimed for it.  Values whose arrays lie at ``level``
    or deeper are not loaded there by the kernel and are not counted."""
    env = Sizes(sizes).env if not isinstance(sizes, Sizes) else sizes.env
    cut = set(partitioned)
    arrays, sets = _held(function)
    tiles = {}
    for vid, arr in arrays.items():
        if arr.level >= level:
            tiles[vid] = 0
            continue
        try:
            tiles[vid] = math.prod(int(value(ax.size, env)) for ax in arr.axes if ax.name not in cut)
        except (NapkinError, TypeError, ValueError):
            tiles[vid] = 0
    return max((sum(tiles[v] for v in held) for held in sets), default=0)


__all__ = ["least_held"]
