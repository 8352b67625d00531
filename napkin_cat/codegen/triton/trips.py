"""A stream's trips in Triton: the ranges its mask reaches, the trips its mask allows whole, each trip's variant.

A stream loop is printed as the loops of :mod:`napkin_cat.codegen.trips` (shared with the C printer): the trips its
skip test reaches as ranges of the loop index (:mod:`napkin_cat.codegen.ranges`; causal: ``i_x ≤ i_q``, the loop
``range(0, i_q + 1)``: FlashAttention's causal loop, which the compiler pipelines), and where a mask from positions is
true on every pair of some trips (the plan's :class:`~napkin_cat.plan.skips.FullTrips`) and those are ranges too,
those trips in loops of their own without the mask, the others in loops with it, in trip order, the state carried
through them::

    for i in range(first, start):  body            (partial trips: the mask made and applied)
    for i in range(start, end):    body − made     (whole trips: the mask not made, read as true)
    for i in range(end, stop):     body

(two ranges with a gap, attention sinks beside a window: a whole loop and its partial edges per range).  A ragged
last tile is no exception: its extent ``Min(T, n − T·i)`` in the condition is split, so the last trip runs in a
whole loop where the mask is true on every pair of it, in a partial one otherwise.  Elsewhere (a condition not
linear in the index) each trip tests the condition, and a comment above the loop says why.  The law, on a whole
trip: ``body − made`` computes what ``body`` computes (``where(true, s, −∞) = s``).  A trip by the data's block
mask reads its state from the block table (:meth:`~napkin_cat.codegen.printer.CodePrinter.trip_variants`).

>>> import napkin_cat as nc
>>> d = nc.group(nc.stream(nc.kernel(nc.library.causal_attention()), "x", "s_x"), "q", "g_q")
>>> src = nc.codegen.triton(nc.plan(d, {"q": 32, "x": 32, "d": 16, "g_q": 16, "s_x": 16})).source
>>> for line in [line for line in src.splitlines() if "for i_x in range(" in line][:2]:
...     print(line.split(":   #")[0].strip())
for i_x in range(0, nc_i_x_w1)
for i_x in range(nc_i_x_w1, nc_i_x_r0)
>>> ragged = src.split("def nc_kernel0_ragged(")[1]       # launched where 16 does not divide q or x
>>> [line.split("; ")[-1] for line in ragged.splitlines() if "for i_x in range(" in line]
['the mask is true on every pair: not made, read as true', 'some pairs allowed: the mask made and applied']
"""
from __future__ import annotations

from napkin_cat.codegen.printer import ident
from napkin_cat.codegen.trips import WHAT, TripLoopsMixin, full_of
from napkin_cat.plan.ir import StreamLoop


class TritonTripsMixin(TripLoopsMixin):
    """The loops of the Triton printer and the variants of their trips (see the module docstring)."""

    #: a trip's state in its block table (:meth:`~napkin_cat.codegen.printer.CodePrinter.trip_variants`): Triton has
    #: no ``continue``, so the live trips nest under a test and a none trip runs nothing
    skip_trip = None
    if_live = "if {state} != 0:   {comment} a none trip runs nothing"
    if_full = "if {state} == 2:   {comment} every pair allowed: the mask is not made, read as true"
    otherwise = "elif {state} == 1:   {comment} some pairs allowed: the mask made and applied"
    end_if = ""

    #: a trip on which a mask from positions is true on every pair, where those trips are not ranges of the loop's
    #: index (:meth:`_print_StreamLoop`; a test not linear in it): the body without the mask under a test
    if_positions = "if {condition}:   {comment} the mask is true on every pair of this trip: not made, read as true"
    else_positions = "else:   {comment} some pairs allowed: the mask made and applied"

    def positions_test(self, when) -> str:
        return self.code(self.tidy(self.nominal(when)))

    def block_state(self, table, state: str, depth) -> list[str]:
        """The trip's state: its block table's entry (an ``*i8`` argument; the launcher passes all partial where
        no block mask is given)."""
        return [self.line(depth, f"{state} = tl.load({table.name} + {self.code(table.offset())})   "
                                 f"{self.comment} the block mask here: 0 none, 1 partial, 2 full")]

    def index_condition(self, e):
        """A condition on loop indices at the plan's sizes, a slice of a divided axis its tile (:meth:`tidy`)."""
        return self.tidy(self.nominal(e))

    def _print_StreamLoop(self, s, depth):
        out = []
        if s.head:
            out += [self.line(depth, "# head")] + self._lines(s.head, depth)
        i = ident(s.index.name)
        notes, loops, tested = self.stream_loops(s)
        out += [self.line(depth, f"# {note}") for note in notes]
        out += [self.line(depth, f"{name} = {value}   # a bound of the trips of {i}") for name, value in loops.defs]
        reach = ", the trips the mask reaches" if getattr(s, "skips", False) and not tested else ""
        for lo, hi, kind in loops.loops:
            out.append(self.line(depth, f"for {i} in range({lo}, {hi}):   # {self.loop_comment(s)}{reach}"
                                        f"{WHAT[kind]}"))
            out += self._trip(s, depth + 1, tested=tested, full=full_of(kind, s))
        if s.tail:
            out += [self.line(depth, "# tail")] + self._lines(s.tail, depth)
        return out

    def _print_GridLoop(self, s, depth):
        return [self.line(depth, f"for {ident(s.index.name)} in range(0, {self.code(self.trips(s))}):   "
                                 f"# {self.loop_comment(s)}, in order")] + self._trip(s, depth + 1)

    def _trip(self, s, depth, tested=True, full=None):
        """A trip of loop ``s``: its extent bound, its skip test where ``tested``; ``full``: the
        :class:`~napkin_cat.plan.skips.FullTrips` of a loop over whole trips (the body without the mask), False for
        one over partial trips (as written), None: by the trip's state (:meth:`trip_variants`)."""
        saved = self.extents.get(s.tile)
        bound = self.enter(s)
        lines = [self.line(depth, f"{ident(bound[0].name)} = {self.code(bound[1])}")] if bound else []
        if tested and getattr(s, "skips", False):       # a trip the mask skips runs nothing
            test = self.code(self.tidy(self.nominal(s.when)))
            lines.append(self.line(depth, f"if {test}:   # else the mask is never true here"))
            depth += 1
        if full is not None:
            self.full_trip = full or None
            try:
                body = self._lines(s.body, depth)
            finally:
                self.full_trip = None
        elif isinstance(s, StreamLoop):
            body = self.trip_variants(s, depth, lambda at: self._lines(s.body, at))
        else:
            body = self._lines(s.body, depth)
        self.leave(s, saved)
        return lines + (body or [self.line(depth, "pass")])


__all__ = ["TritonTripsMixin"]
