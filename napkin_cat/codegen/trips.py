"""A stream loop's trips as loops over ranges of its index, in order: those its skip test reaches, those on which its
mask from positions is true on every pair (whole) apart from the others (partial).  Read by every kernel printer.

The conditions are read into unions of ranges by :mod:`napkin_cat.codegen.ranges` (``R``: the trips the skip test
``StreamLoop.when`` reaches; ``W``: the whole trips, the plan's :class:`~napkin_cat.plan.skips.FullTrips`).  A union
is printed as a *chain* of bounds, ascending pieces of the loop's trips ``[first, stop)``::

    first ≤ lo₁ ≤ hi₁ ≤ lo₂ ≤ hi₂ ≤ … ≤ stop
    lo_k = min(max(l_k, hi_{k−1}), stop),  hi_k = min(max(h_k, lo_k), stop)

with the ranges ``[l_k, h_k)`` in order of their low bounds (those bounded above alone first, from ``first``; two
bounded below ordered at run time by ``where(l_a ≤ l_b, …)``): the sweep of a union of intervals sorted by start,
so the pieces are disjoint and together exactly the union.  The loops, in trip order::

    W's chain within R's hull [lo₁(R), hi_n(R)):   gap₀ = [lo₁(R), u₁), W₁ = [u₁, v₁), gap₁ = [v₁, u₂), …
    for each gap, for each piece r of R:  for i in [max(gap, r)):  body          (partial: the mask made)
    for each piece W_j:                   for i in W_j:             body − made   (whole: the mask not made)

``W ⊆ R`` (a trip whose every pair the mask allows has a pair it allows), so the whole pieces need no cut by ``R``;
the partial trips are ``R − W``, the gaps cut by ``R``'s pieces.  One range each (causal, a window, a prefix-LM):
three loops, partial, whole, partial; attention sinks beside a window (``R``, ``W`` two ranges each, the sinks
bounded above alone): the sinks' whole loop, its ragged edge, the window's leading edge, its whole loop, its
trailing edge.  No trip tests a condition.  The law: the loops run each trip of ``R`` once, in order, a trip of
``W`` without the mask (``where(true, s, −∞) = s``).  Where a condition is not ranges
(:class:`~napkin_cat.codegen.ranges.Unstated`), the loop falls back to the per-trip test, and says why.

>>> import sympy
>>> from napkin_cat.codegen.ranges import TRITON, index_ranges
>>> i, q = sympy.symbols("i_x i_q", integer=True)
>>> reach = index_ranges((i < 1) | ((q - 2 <= i) & (i <= q + 2)), i, str, "T", TRITON)    # sinks beside a window
>>> whole = index_ranges((i < 1) | ((q - 1 <= i) & (i <= q + 1)), i, str, "T", TRITON)
>>> out = trip_loops(reach, whole, "0", "T", TRITON, "nc_i_x")
>>> [kind for _, _, kind in out.loops]
['whole', 'partial', 'partial', 'whole', 'partial', 'partial']
>>> out.loops[0], out.defs[0]
(('0', 'nc_i_x_w3', 'whole'), ('nc_i_x_r0', 'tl.minimum(tl.maximum(1, 0), T)'))
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.codegen.printer import ident
from napkin_cat.codegen.ranges import Ranges, Spelling, Unstated, index_ranges

#: the most ranges bounded below in a union: their order is decided at run time (a swap), for two
MOST_BELOW = 2


@dataclass(frozen=True)
class TripLoops:
    """The loops of a stream's trips: ``defs`` (name, printed value) to define first, in order; ``loops`` (low,
    high, kind) in trip order, kind ``"whole"`` (the mask not made), ``"partial"`` (made), or ``"any"`` (each trip
    as its state decides: every trip as written, or by its block table or a per-trip test)."""
    defs: tuple
    loops: tuple


class _Chain:
    """Printed bounds, named as they are made (``{name}_{tag}{k}``), with the spelling's max and min simplified
    where the two sides are the same text."""

    def __init__(self, spell: Spelling, name: str):
        self.spell, self.name, self.defs = spell, name, []

    def most(self, a: str, b: str) -> str:
        return a if a == b else self.spell.maximum.format(a, b)

    def least(self, a: str, b: str) -> str:
        return a if a == b else self.spell.minimum.format(a, b)

    def named(self, value: str, tag: str) -> str:
        if value.isidentifier() or value.lstrip("-").isdigit():
            return value
        name = f"{self.name}_{tag}{len(self.defs)}"
        self.defs.append((name, value))
        return name

    def pieces(self, ranges: Ranges, first: str, stop: str, tag: str) -> list:
        """The chain of ``ranges`` within ``[first, stop)`` (module docstring): ``[(lo, hi), …]`` ascending."""
        s = self.spell
        below = [b for b in ranges.parts if not b.lows]
        rest = [b for b in ranges.parts if b.lows]
        if len(rest) > MOST_BELOW:
            raise ValueError(f"{len(rest)} ranges bounded below, more than the {MOST_BELOW} ordered at run time")
        spans = [(first, s.fold([s.fold(b.highs, s.minimum) for b in below], s.maximum))] if below else []
        spans += [(s.fold(b.lows, s.maximum), s.fold(b.highs, s.minimum) if b.highs else stop) for b in rest]
        if len(rest) == 2:           # ordered by their low bounds at run time
            (la, ha), (lb, hb) = [(self.named(lo, tag), self.named(hi, tag)) for lo, hi in spans[-2:]]
            first_a = f"{la} <= {lb}"
            spans[-2:] = [(s.where.format(first_a, la, lb), s.where.format(first_a, ha, hb)),
                          (s.where.format(first_a, lb, la), s.where.format(first_a, hb, ha))]
        out, end = [], first
        for low, high in spans:
            lo = end if low == end else self.named(self.least(self.most(low, end), stop), tag)
            hi = stop if high == stop else self.named(self.least(self.most(high, lo), stop), tag)
            out.append((lo, hi))
            end = hi
        return out


def trip_loops(reach: Ranges | None, whole: Ranges | None, first: str, stop: str, spell: Spelling,
               name: str) -> TripLoops | Unstated:
    """The loops of a stream's trips ``[first, stop)`` (module docstring): ``reach`` the trips its skip test reaches
    (None: every trip), ``whole`` those its mask allows whole (None: no loop of their own); names of the bounds
    start with ``name``.  :class:`~napkin_cat.codegen.ranges.Unstated` where more ranges are bounded below than
    are ordered at run time."""
    if reach is not None and not reach.parts:
        return TripLoops((), ())
    chain = _Chain(spell, name)
    try:
        r = chain.pieces(reach, first, stop, "r") if reach is not None else [(first, stop)]
        if whole is None:
            loops = [(lo, hi, "any") for lo, hi in r]
        else:
            start, end = r[0][0], r[-1][1]
            w = chain.pieces(whole, start, end, "w")
            bounds = [start] + [b for piece in w for b in piece] + [end]
            loops = []
            for j in range(len(w) + 1):
                gap = bounds[2 * j], bounds[2 * j + 1]
                if gap[0] != gap[1]:
                    loops += [(chain.most(gap[0], lo), chain.least(gap[1], hi), "partial") for lo, hi in r] \
                        if len(r) > 1 else [(gap[0], gap[1], "partial")]
                if j < len(w):
                    loops.append((w[j][0], w[j][1], "whole"))
    except ValueError as e:
        return Unstated(str(e))
    return TripLoops(tuple(chain.defs), tuple((lo, hi, kind) for lo, hi, kind in loops if lo != hi))


#: a loop's comment by the kind of its trips
WHAT = {"whole": "; the mask is true on every pair: not made, read as true",
        "partial": "; some pairs allowed: the mask made and applied", "any": ""}


def full_of(kind: str, s):
    """What a printer's trip of kind ``kind`` of the stream ``s`` omits: its :class:`~napkin_cat.plan.skips.FullTrips`
    (a whole trip: the mask not made), False (a partial one: as written), None (by the trip's state)."""
    return {"whole": s.full_trips, "partial": False, "any": None}[kind]


class TripLoopsMixin:
    """A printer's stream loops as :class:`TripLoops` (:meth:`stream_loops`), for every dialect."""

    def index_condition(self, e):
        """A condition on loop indices as the dialect reads it: at the plan's sizes."""
        return self.nominal(e)

    @property
    def whole_loops(self) -> bool:
        """Whether the dialect runs the whole trips without the mask (it has a test for one: ``if_positions``)."""
        return self.if_positions is not None

    def stream_loops(self, s) -> tuple[list, TripLoops, bool]:
        """``(notes, loops, tested)`` of the stream loop ``s``: why a condition falls back to a per-trip test, the
        loops (:func:`trip_loops`: its skip test's ranges, its whole trips' apart where the dialect runs them so and
        no block table or enclosing whole trip decides), and whether each trip tests the skip test."""
        i, trips, spell = ident(s.index.name), self.code(self.trips(s)), Spelling.of(self)
        notes, tested, reach, whole = [], False, None, None
        if getattr(s, "skips", False):
            reach = index_ranges(self.index_condition(s.when), s.index, self.code, trips, spell)
            if isinstance(reach, Unstated):
                notes.append(f"the trips the mask reaches are not ranges of {i} ({reach.reason}): each trip tests it")
                reach, tested = None, True
        if self.whole_loops and s.full_trips is not None and self.full_trip is None and \
                s.index not in self.block_tables:
            whole = index_ranges(self.index_condition(s.full_trips.when), s.index, self.code, trips, spell)
            if isinstance(whole, Unstated):
                notes.append(f"the trips on which the mask is true on every pair are not ranges of {i} "
                             f"({whole.reason}): each trip tests it")
                whole = None
        for r, w in ((reach, whole), (reach, None), (None, None)):
            loops = trip_loops(r, w, "0", trips, spell, f"nc_{i}")
            if not isinstance(loops, Unstated):
                break
            notes.append(f"the trips of {i} are not printed as ranges ({loops.reason}): each trip tests them")
        tested = tested or (r is None and reach is not None)
        return notes, loops, tested


__all__ = ["TripLoops", "TripLoopsMixin", "trip_loops", "full_of", "WHAT", "MOST_BELOW"]
