"""A stream's trips in Triton: the range its mask reaches, the trips its mask allows whole, each trip's variant.

A stream loop whose trips a mask skips runs over the trips its test allows: where the test is one range of the loop
index (:meth:`~TritonTripsMixin.index_bounds`; causal: ``i_x ≤ i_q``), the loop's range (``range(0, i_q + 1)``:
FlashAttention's causal loop, which the compiler pipelines); otherwise every trip, each under the test.

Where a mask from positions is true on every pair of some trips (the plan's
:class:`~napkin_cat.plan.skips.FullTrips`) and those trips are one range ``[start, end)`` of the index, the stream is
up to three loops, the state carried through them::

    for i in range(first, start):  body            (partial trips: the mask made and applied)
    for i in range(start, end):    body − made     (whole trips: the mask not made, read as true)
    for i in range(end, stop):     body

with ``first ≤ start ≤ end ≤ stop`` (clamped), so the trips run, in order, are those of one loop; elsewhere (a ragged
last tile in the condition) each trip tests the condition.  The law, on a whole trip: ``body − made`` computes what
``body`` computes (``where(true, s, −∞) = s``).  A trip by the data's block mask reads its state from the block table
(:meth:`~napkin_cat.codegen.printer.CodePrinter.trip_variants`).

>>> import napkin_cat as nc
>>> d = nc.group(nc.stream(nc.kernel(nc.library.causal_attention()), "x", "s_x"), "q", "g_q")
>>> src = nc.codegen.triton(nc.plan(d, {"q": 32, "x": 32, "d": 16, "g_q": 16, "s_x": 16})).source
>>> for line in [line for line in src.splitlines() if "for i_x in range(" in line][:2]:
...     print(line.split(":   #")[0].strip())
for i_x in range(0, nc_partial_i_x)
for i_x in range(nc_partial_i_x, tl.minimum((x + 15) // 16, (16*i_q + 31) // 16))
"""
from __future__ import annotations

import sympy

from napkin_cat.codegen.printer import ident
from napkin_cat.plan.ir import StreamLoop


def _fold(xs: list, f: str) -> str:
    """``f(x₀, f(x₁, …))`` of the printed expressions ``xs`` (``x₀`` alone)."""
    return xs[0] if len(xs) == 1 else f"{f}({xs[0]}, {_fold(xs[1:], f)})"


def _quotient(n: str, a: int) -> str:
    """``n // a`` printed (``n`` alone where ``a`` is 1)."""
    return n if a == 1 else f"({n}) // {a}"


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
    #: index (:meth:`_print_StreamLoop`; a ragged last tile in the test): the body without the mask under a test
    if_positions = "if {condition}:   {comment} the mask is true on every pair of this trip: not made, read as true"
    else_positions = "else:   {comment} some pairs allowed: the mask made and applied"

    def positions_test(self, when) -> str:
        return self.code(self.tidy(self.nominal(when)))

    def block_state(self, table, state: str, depth) -> list[str]:
        """The trip's state: its block table's entry (an ``*i8`` argument; the launcher passes all partial where
        no block mask is given)."""
        return [self.line(depth, f"{state} = tl.load({table.name} + {self.code(table.offset())})   "
                                 f"{self.comment} the block mask here: 0 none, 1 partial, 2 full")]

    def index_bounds(self, condition, loop):
        """``(lows, highs)``, printed expressions with ``condition`` ⟺ ``every low ≤ i < every high`` on the trips of
        ``loop`` (index ``i``, from 0), or None where it is not one range of ``i``.  A relation ``a·i + b ≤ 0`` (``a``
        a nonzero integer, ``b`` free of ``i``) bounds ``i`` on one side; a conjunction is every bound; a
        disjunction of bounds all on one side is the loosest of them (``i < h₁ ∨ i < h₂ ⟺ i < max(h₁, h₂)``).
        Triton's ``//`` truncates towards 0: each bound is printed as a quotient that is exact where it is
        positive and at most 0 where the exact bound is (``i ≤ ⌊m/a⌋ ⟺ i < ⌊(m + a)/a⌋``), so clamped to the
        loop's trips (from 0) it is exact."""
        i = loop.index
        if condition is sympy.true:
            return [], []
        if isinstance(condition, sympy.Or):
            parts = [self.index_bounds(c, loop) for c in condition.args]
            if any(p is None for p in parts) or any(not lo and not hi for lo, hi in parts):
                return None
            if all(not lo for lo, _ in parts):
                return [], [_fold([_fold(hi, "tl.minimum") for _, hi in parts], "tl.maximum")]
            if all(not hi for _, hi in parts):
                return [_fold([_fold(lo, "tl.maximum") for lo, _ in parts], "tl.minimum")], []
            return None
        lows, highs = [], []
        for rel in (condition.args if isinstance(condition, sympy.And) else (condition,)):
            if not isinstance(rel, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)):
                return None
            e = rel.lhs - rel.rhs if isinstance(rel, (sympy.Le, sympy.Lt)) else rel.rhs - rel.lhs
            e = sympy.expand(e + (1 if isinstance(rel, (sympy.Lt, sympy.Gt)) else 0))    # integers: a < b ⟺ a + 1 ≤ b
            a = e.coeff(i)
            rest = sympy.expand(e - a * i)
            if not a.is_Integer or a == 0 or rest.has(i):
                return None
            if a > 0:        # i ≤ ⌊−rest/a⌋ ⟺ i < ⌊(a − rest)/a⌋
                highs.append(_quotient(self.code(sympy.expand(a - rest)), int(a)))
            else:            # i ≥ ⌈rest/|a|⌉ = ⌊(rest + |a| − 1)/|a|⌋
                lows.append(_quotient(self.code(sympy.expand(rest - a - 1)), int(-a)))
        return lows, highs

    def trip_range(self, loop):
        """``(first, stop)`` of the trips a skipping loop runs, as printed expressions, or None when its test is
        not one range of its index (:meth:`index_bounds`)."""
        found = self.index_bounds(self.tidy(self.nominal(loop.when)), loop)
        if found is None:
            return None
        lows, highs = found
        return _fold(["0"] + lows, "tl.maximum"), _fold([self.code(self.trips(loop))] + highs, "tl.minimum")

    def whole_range(self, loop, first: str, stop: str):
        """``(start, end)``: printed bounds of the trips of ``loop`` in ``range(first, stop)`` on which its mask from
        positions is true on every pair (its ``full_trips.when``, :meth:`index_bounds`), clamped so that
        ``[first, start)``, ``[start, end)``, ``[end, stop)`` partition the trips; ``start`` is ``first`` where no
        low bound holds, ``end`` is ``stop`` where no high bound does; None where they are not one range."""
        found = self.index_bounds(self.tidy(self.nominal(loop.full_trips.when)), loop)
        if found is None:
            return None
        lows, highs = found
        start = f"tl.minimum({_fold([first] + lows, 'tl.maximum')}, {stop})" if lows else first
        end = f"tl.minimum({_fold(highs + [start], 'tl.maximum')}, {stop})" if highs else stop
        return start, end

    def _print_StreamLoop(self, s, depth):
        out = []
        if s.head:
            out += [self.line(depth, "# head")] + self._lines(s.head, depth)
        bounds = self.trip_range(s) if getattr(s, "skips", False) else None
        first, stop = bounds or ("0", self.code(self.trips(s)))
        reach = ", the trips the mask reaches" if bounds else ""
        i = ident(s.index.name)
        whole = None
        if s.full_trips is not None and self.full_trip is None and s.index not in self.block_tables:
            whole = self.whole_range(s, first, stop)
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
