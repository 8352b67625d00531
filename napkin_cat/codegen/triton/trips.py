"""A stream's trips in Triton: the range its mask reaches, the trips its mask allows whole, each trip's variant.

A stream loop whose trips a mask skips runs over the trips its test allows: where the test is one range of the loop
index (:meth:`~TritonTripsMixin.index_bounds`, :mod:`.ranges`; causal: ``i_x ≤ i_q``), the loop's range
(``range(0, i_q + 1)``: FlashAttention's causal loop, which the compiler pipelines); otherwise every trip, each under
the test, and a comment in the source says why.

Where a mask from positions is true on every pair of some trips (the plan's
:class:`~napkin_cat.plan.skips.FullTrips`) and those trips are one range ``[start, end)`` of the index, the stream is
up to three loops, the state carried through them::

    for i in range(first, start):  body            (partial trips: the mask made and applied)
    for i in range(start, end):    body − made     (whole trips: the mask not made, read as true)
    for i in range(end, stop):     body

with ``first ≤ start ≤ end ≤ stop`` (clamped), so the trips run, in order, are those of one loop.  A ragged last
tile is no exception: its extent ``Min(T, n − T·i)`` in the condition is split (:mod:`.ranges`), so the last trip
runs in the whole loop where the mask is true on every pair of it, in a partial one otherwise.  Elsewhere (the whole
trips two ranges with a gap between, a condition not linear in the index) each trip tests the condition, and a
comment above the loop says why.  The law, on a whole trip: ``body − made`` computes what ``body`` computes
(``where(true, s, −∞) = s``).  A trip by the data's block mask reads its state from the block table
(:meth:`~napkin_cat.codegen.printer.CodePrinter.trip_variants`).

>>> import napkin_cat as nc
>>> d = nc.group(nc.stream(nc.kernel(nc.library.causal_attention()), "x", "s_x"), "q", "g_q")
>>> src = nc.codegen.triton(nc.plan(d, {"q": 32, "x": 32, "d": 16, "g_q": 16, "s_x": 16})).source
>>> for line in [line for line in src.splitlines() if "for i_x in range(" in line][:2]:
...     print(line.split(":   #")[0].strip())
for i_x in range(0, nc_partial_i_x)
for i_x in range(nc_partial_i_x, tl.minimum((x + 15) // 16, (16*i_q + 31) // 16))
>>> ragged = src.split("def nc_kernel0_ragged(")[1]       # launched where 16 does not divide q or x
>>> [line.split("; ")[-1] for line in ragged.splitlines() if "for i_x in range(" in line]
['the mask is true on every pair: not made, read as true', 'some pairs allowed: the mask made and applied']
"""
from __future__ import annotations

from napkin_cat.codegen.printer import ident
from napkin_cat.codegen.triton.ranges import Bounds, Unstated, fold, index_bounds
from napkin_cat.plan.ir import StreamLoop


class TritonTripsMixin:
    """The loops of the Triton printer and the variants of their trips (see the module docstring)."""

    #: a trip's state in its block table (:meth:`~napkin_cat.codegen.printer.CodePrinter.trip_variants`): Triton has
    #: no ``continue``, so the live trips nest under a test and a none trip runs nothing
    skip_trip = None
    if_live = "if {state} != 0:   {comment} a none trip runs nothing"
    if_full = "if {state} == 2:   {comment} every pair allowed: the mask is not made, read as true"
    otherwise = "elif {state} == 1:   {comment} some pairs allowed: the mask made and applied"
    end_if = ""

    #: a trip on which a mask from positions is true on every pair, where those trips are not one range of the loop's
    #: index (:meth:`_print_StreamLoop`; two ranges with a gap, a test not linear in it): the body without the mask
    #: under a test
    if_positions = "if {condition}:   {comment} the mask is true on every pair of this trip: not made, read as true"
    else_positions = "else:   {comment} some pairs allowed: the mask made and applied"

    def positions_test(self, when) -> str:
        return self.code(self.tidy(self.nominal(when)))

    def block_state(self, table, state: str, depth) -> list[str]:
        """The trip's state: its block table's entry (an ``*i8`` argument; the launcher passes all partial where
        no block mask is given)."""
        return [self.line(depth, f"{state} = tl.load({table.name} + {self.code(table.offset())})   "
                                 f"{self.comment} the block mask here: 0 none, 1 partial, 2 full")]

    def index_bounds(self, condition, loop) -> Bounds | Unstated:
        """``condition`` on the trips of ``loop`` as one range of its index (:func:`.ranges.index_bounds`: linear
        bounds, a tile's ragged extent split, a relation free of the index as every trip or none), or
        :class:`~.ranges.Unstated` with the reason."""
        return index_bounds(self.tidy(self.nominal(condition)), loop.index, self.code, self.code(self.trips(loop)))

    def trip_range(self, loop) -> tuple | Unstated:
        """``(first, stop)`` of the trips a skipping loop runs, as printed expressions, or why its test is not one
        range of its index (:meth:`index_bounds`)."""
        found = self.index_bounds(loop.when, loop)
        if isinstance(found, Unstated):
            return found
        return fold(("0",) + found.lows, "tl.maximum"), fold((self.code(self.trips(loop)),) + found.highs,
                                                             "tl.minimum")

    def whole_range(self, loop, first: str, stop: str) -> tuple | Unstated:
        """``(start, end)``: printed bounds of the trips of ``loop`` in ``range(first, stop)`` on which its mask from
        positions is true on every pair (its ``full_trips.when``, :meth:`index_bounds`), clamped so that
        ``[first, start)``, ``[start, end)``, ``[end, stop)`` partition the trips; ``start`` is ``first`` where no
        low bound holds, ``end`` is ``stop`` where no high bound does; or why they are not one range."""
        found = self.index_bounds(loop.full_trips.when, loop)
        if isinstance(found, Unstated):
            return found
        lows, highs = found.lows, found.highs
        start = f"tl.minimum({fold((first,) + lows, 'tl.maximum')}, {stop})" if lows else first
        end = f"tl.minimum({fold(highs + (start,), 'tl.maximum')}, {stop})" if highs else stop
        return start, end

    def _print_StreamLoop(self, s, depth):
        out = []
        if s.head:
            out += [self.line(depth, "# head")] + self._lines(s.head, depth)
        i = ident(s.index.name)
        bounds = self.trip_range(s) if getattr(s, "skips", False) else None
        if isinstance(bounds, Unstated):
            out.append(self.line(depth, f"# the trips the mask reaches are not one range of {i} ({bounds.reason}): "
                                        "each trip tests it"))
            bounds = None
        first, stop = bounds or ("0", self.code(self.trips(s)))
        reach = ", the trips the mask reaches" if bounds else ""
        whole = None
        if s.full_trips is not None and self.full_trip is None and s.index not in self.block_tables:
            whole = self.whole_range(s, first, stop)
            if isinstance(whole, Unstated):
                out.append(self.line(depth, f"# the trips on which the mask is true on every pair are not one range "
                                            f"of {i} ({whole.reason}): each trip tests it"))
                whole = None
        if whole is None:      # every trip in one loop (each under a test where a mask from positions may be whole)
            out.append(self.line(depth, f"for {i} in range({first}, {stop}):   # {self.loop_comment(s)}{reach}"))
            out += self._trip(s, depth + 1, tested=bounds is None)
        else:                  # the trips the mask allows whole, a range of the index: a loop of their own without it
            start = first if whole[0] == first else f"nc_whole_{i}"
            end = stop if whole[1] == stop else f"nc_partial_{i}"
            out += [self.line(depth, f"{name} = {e}   # the trips on which the mask is true on every pair: "
                                     f"[{start}, {end})") for name, e in ((start, whole[0]), (end, whole[1]))
                    if name != e]
            for lo, hi, full, what in ((first, start, False, "some pairs allowed: the mask made and applied"),
                                       (start, end, True, "the mask is true on every pair: not made, read as true"),
                                       (end, stop, False, "some pairs allowed: the mask made and applied")):
                if lo == hi:
                    continue
                out.append(self.line(depth, f"for {i} in range({lo}, {hi}):   # {self.loop_comment(s)}{reach}; "
                                            f"{what}"))
                out += self._trip(s, depth + 1, tested=bounds is None, full=s.full_trips if full else False)
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
