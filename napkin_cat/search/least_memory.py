"""The least memory a partition of a kernel can run in, read off the function before the candidate is costed.

A candidate kernel ``K = kernel(f, level)`` partitioned along the axes ``P`` (its stream, a stream inside it, its
groups: :class:`~napkin_cat.search.variants.Variant`) loads each input of ``f`` to ``level`` as a tile: the input
seen through the partitions, each axis of ``P`` it carries read as its tile (at least 1), every other axis whole.
A loaded tile is live from its load until its last reader has run (an input no box reads is dead as it is loaded,
never held), so before a box runs every input of ``f`` it reads is held at once.  Hence, at any tiles (divisors or
not) and for any partition along ``P``::

    least_held(f, P, sizes) <= max over the columns of cost(K partitioned).M[level]
    least_held(f, P, sizes) = max_box Σ_{x input of f read by box} tile₁(x)

where each input ``x`` is counted once per box and ``tile₁(x)`` is ``x``'s values with every axis of ``P`` at 1.
A candidate whose ``least_held`` passes the memory fits at no tiling: the search answers "does not fit" for it
without costing it (:meth:`~napkin_cat.search.curves.Curve.at_all`), exactly as the integer search over its tiles
would.  (Only what the function shows is claimed: its intermediate values, held too, are left out.)  The cost
functor's columns are the second route (``tests/search/test_least_memory.py``: the bound is at most
:meth:`~napkin_cat.search.curves.Curve.smallest`, and a candidate it rules out has no fitting tiling in
:func:`~napkin_cat.cost.sized_optimum.optimum_values`).

>>> import napkin_cat as nc
>>> att = nc.library.attention()                  # Q (q d), K (x d), V (x d) -> O (q d)
>>> sizes = {"q": 4096, "x": 4096, "d": 128}
>>> least_held(att, {"q"}, sizes)                 # a sweep along q: K and V stay whole, Q·Kᵀ reads K and a row of Q
524416
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


def _reads(function: Diagram) -> tuple:
    """Per computing box, the distinct inputs of ``function`` it reads (indices into ``function.dom``), boxes reading
    none left out.  Read off the diagram alone: kept on it (immutable)."""
    found = function.__dict__.get("_input_reads")
    if found is None:
        ops, dom, _ = trace_values(function)
        inputs = set(dom)
        found = tuple(sorted(set(ins) & inputs) for _, ins, _ in ops if set(ins) & inputs)
        function.__dict__["_input_reads"] = found
    return found


def least_held(function: Diagram, partitioned, sizes, level: int = 1) -> int:
    """A lower bound of the memory at ``level`` of ``kernel(function, level)`` partitioned along the axes
    ``partitioned`` (names), at any tiles, at ``sizes`` (names or symbols to ints); 0 where a size is missing
    (nothing is claimed).  Inputs already at ``level`` or below it are not loaded there and are not counted."""
    env = Sizes(sizes).env if not isinstance(sizes, Sizes) else sizes.env
    cut = set(partitioned)
    tiles = []
    try:
        for arr in function.dom.inside:
            loaded = arr.level < level
            tiles.append(math.prod(int(value(ax.size, env)) for ax in arr.axes if ax.name not in cut)
                         if loaded else 0)
    except (NapkinError, TypeError, ValueError):
        return 0
    return max((sum(tiles[i] for i in reads) for reads in _reads(function)), default=0)


__all__ = ["least_held"]
