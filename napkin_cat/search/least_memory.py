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

The least memory of a whole form (:func:`least_fitting_memory`, what a numeric derive's refusal names) reads each
block's partitions by this bound first (:func:`least_need`), costing none whose bound reaches the least found.
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


def least_fitting_memory(space, search, sizes):
    """The least memory at which some kernel split fits (a bottleneck shortest path over the down-sets).

    An edge whose source already needs as much as the best way into its target improves nothing and is not read;
    a block's partitions are read in the order of their uncosted lower bound (:meth:`~.curves.Curve.least`
    ``≤ smallest``), and those whose bound reaches the least found (or the best way in) are not costed: the answer
    is the bottleneck path's over every partition (``tests/search/test_least_fitting.py``)."""
    best = {0: 0}
    for b in space.downs[1:]:
        best[b] = math.inf
        for a, block in space.into[b]:
            if best.get(a, math.inf) >= best[b]:    # max(best[a], need) ≥ best[a]: nothing better through a
                continue
            best[b] = min(best[b], max(best[a], least_need(search.choice(space.graph, block).options, sizes,
                                                            best[b])))
    return best[space.full]


def least_need(options, sizes, above) -> float:
    """``min(int(c.smallest(sizes)))`` over the partitions ``options`` where it is below ``above``, else ``above``
    or more: the partitions read by their lower bound ``least`` first, none costed whose bound reaches the least
    found so far (``least ≤ smallest``, and the least found is an integer).

    >>> class Part:                          # a partition: its uncosted bound and its least memory (costed)
    ...     def __init__(self, least, smallest): self._least, self._smallest, self.costed = least, smallest, False
    ...     def least(self, sizes): return self._least
    ...     def smallest(self, sizes): self.costed = True; return self._smallest
    >>> parts = [Part(0, 40), Part(9, 12), Part(30, 31)]
    >>> least_need([(None, p) for p in parts], {}, float("inf")), [p.costed for p in parts]
    (12, [True, True, False])
    """
    need = above
    for bound, c in sorted(((c.least(sizes), c) for _, c in options), key=lambda bc: bc[0]):
        if bound >= need:
            break
        need = min(need, int(c.smallest(sizes)))
    return need


__all__ = ["least_held", "least_fitting_memory", "least_need"]
