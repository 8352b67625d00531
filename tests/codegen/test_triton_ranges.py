"""``codegen/ranges.index_ranges``: the printed bounds, evaluated as Triton and C evaluate them (``//`` truncating
towards 0) and clamped to the loop's trips, select exactly the trips on which the condition holds (a union of ranges:
the trips of any part); ``codegen/trips.trip_loops``: the loops printed from them run each trip the skip test reaches
once, in ascending order, those the whole test allows whole.

Second route: the condition evaluated by sympy on every trip ``0 ≤ i < ⌈n/T⌉``, for seeded random conditions built
from the forms the plan writes (a relation linear in the index, a tile's ragged extent ``Min(T, n − T·i)`` in it, a
relation free of the index, conjunctions and disjunctions of them) at every value of the outer index and the size
in a grid that includes ragged sizes and negative quotients.

Mutations caught: a union cut to its first part (``merged[:1]`` in ``_Reader.union``); the run-time order of two
ranges bounded below dropped (``trips._Chain.pieces``: the sweep loses the part of the later range); a piece's low
not clamped to the end of the one before (``_Chain.pieces``: overlapping pieces run a trip twice); the gaps between
whole pieces not cut by the reached ranges (``trip_loops``: trips outside the reach run); the free part of a
disjunction dropped (``tl.where(c, stop, H)`` → ``H``); a ``Min`` split as a conjunction where it is a disjunction
(``isinstance(m, sympy.Max) == (k > 0)`` → ``!=``); a low bound's ceiling off by one (``rest − a − 1`` →
``rest − a`` in ``_Reader.relation``); a high bound printed as the truncated quotient plus one (``(a − rest) // a`` →
``(−rest) // a + 1``: wrong where ``−rest`` is negative).
"""
from __future__ import annotations

import functools
import itertools

import numpy as np
import sympy
from sympy.printing.str import StrPrinter

from napkin_cat.codegen.ranges import TRITON, Bounds, Ranges, Unstated, index_bounds, index_ranges
from napkin_cat.codegen.trips import trip_loops

I, U, N = sympy.symbols("i u n", integer=True)
TILE = 4


class Int:
    """An int whose ``//`` truncates towards 0, as Triton's (and C's) does on int32."""

    def __init__(self, v):
        self.v = v.v if isinstance(v, Int) else int(v)

    def __add__(self, o):
        return Int(self.v + Int(o).v)

    def __radd__(self, o):
        return Int(Int(o).v + self.v)

    def __sub__(self, o):
        return Int(self.v - Int(o).v)

    def __rsub__(self, o):
        return Int(Int(o).v - self.v)

    def __mul__(self, o):
        return Int(self.v * Int(o).v)

    def __rmul__(self, o):
        return Int(Int(o).v * self.v)

    def __neg__(self):
        return Int(-self.v)

    def __floordiv__(self, o):
        q, d = abs(self.v) // abs(Int(o).v), Int(o).v
        return Int(q if (self.v >= 0) == (d > 0) else -q)

    def __le__(self, o):
        return self.v <= Int(o).v

    def __lt__(self, o):
        return self.v < Int(o).v

    def __ge__(self, o):
        return self.v >= Int(o).v

    def __gt__(self, o):
        return self.v > Int(o).v


class TritonLike(StrPrinter):
    """Integers as :class:`Int`, ``Min``/``Max`` as ``tl.minimum``/``tl.maximum``, ``&``/``|`` as Python's."""

    def _print_Integer(self, e):
        return f"Int({int(e)})"

    def _print_Min(self, e):
        out, *rest = [self._print(a) for a in e.args]
        for a in rest:
            out = f"tl.minimum({out}, {a})"
        return out

    def _print_Max(self, e):
        out, *rest = [self._print(a) for a in e.args]
        for a in rest:
            out = f"tl.maximum({out}, {a})"
        return out

    def _print_And(self, e):
        return "(" + " and ".join(self._print(a) for a in e.args) + ")"

    def _print_Or(self, e):
        return "(" + " or ".join(self._print(a) for a in e.args) + ")"

    def _print_Relational(self, e):
        return f"({self._print(e.lhs)} {e.rel_op} {self._print(e.rhs)})"


class tl:
    minimum = staticmethod(lambda a, b: Int(a) if Int(a).v <= Int(b).v else Int(b))
    maximum = staticmethod(lambda a, b: Int(a) if Int(a).v >= Int(b).v else Int(b))
    where = staticmethod(lambda c, a, b: Int(a) if c else Int(b))


def code(e) -> str:
    return TritonLike().doprint(e)


@functools.lru_cache(maxsize=None)
def compiled(source: str):
    """A printed bound or loop limit compiled once: the grids below evaluate each at ~300 points (compiling the text
    at every point was half of this file's CPU)."""
    return compile(source, "<printed>", "eval")


def selected(found, u: int, n: int) -> set:
    """The trips ``max(0, lows) ≤ i < min(stop, highs)`` of each part (:class:`Bounds` or :class:`Ranges`) with the
    printed bounds evaluated at ``u``, ``n``."""
    stop = -(-n // TILE)
    env = {"Int": Int, "tl": tl, "u": Int(u), "n": Int(n), "stop": Int(stop)}
    out = set()
    for bounds in (found.parts if isinstance(found, Ranges) else (found,)):
        lo = max([0] + [Int(eval(compiled(b), env)).v for b in bounds.lows])
        hi = min([stop] + [Int(eval(compiled(b), env)).v for b in bounds.highs])
        out |= set(range(lo, hi))
    return out


def looped(loops, u: int, n: int) -> list:
    """The trips the loops of :func:`trip_loops` run, in order, each with its kind, at ``u``, ``n``."""
    stop = -(-n // TILE)
    env = {"Int": Int, "tl": tl, "u": Int(u), "n": Int(n), "stop": Int(stop)}
    for name, value in loops.defs:
        env[name] = Int(eval(compiled(value), env))
    return [(i, kind) for lo, hi, kind in loops.loops
            for i in range(Int(eval(compiled(lo), env)).v, Int(eval(compiled(hi), env)).v)]


def truth(condition):
    """``(u, n) ↦`` the trips ``0 ≤ i < ⌈n/T⌉`` on which ``condition`` holds."""
    f = sympy.lambdify((I, U, N), condition, modules=[{"Min": min, "Max": max}, "math"])
    return lambda u, n: {i for i in range(-(-n // TILE)) if f(i, u, n)}


def relation(rng):
    """A relation of the plan's forms: ``a·T·i (+ the tile's extent) + b·u + c ≤ 0``, or one free of ``i``."""
    a = int(rng.choice([-2, -1, 1, 2]))
    extent = sympy.Min(TILE, N - TILE * I) if rng.random() < 0.5 else 0
    e = a * TILE * I + (int(rng.choice([-1, 1])) * extent if extent != 0 else 0) + int(rng.integers(-2, 3)) * U + \
        int(rng.integers(-9, 10))
    if rng.random() < 0.2:
        e = N - TILE * U + int(rng.integers(-6, 7))
    return rng.choice([sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt])(e, 0)


def condition(rng, depth=2):
    if depth == 0 or rng.random() < 0.3:
        return relation(rng)
    parts = [condition(rng, depth - 1) for _ in range(int(rng.integers(2, 4)))]
    return (sympy.And if rng.random() < 0.5 else sympy.Or)(*parts)


GRID = list(itertools.product(range(-3, 9), range(1, 27)))      # u (an outer index, or a negative offset), n


def test_the_printed_bounds_select_exactly_the_trips_where_the_condition_holds():
    rng = np.random.default_rng(36)
    stated = with_extent = with_free = unions = 0
    for _ in range(300):
        c = condition(rng)
        found = index_ranges(c, I, code, "stop", TRITON)
        if isinstance(found, Unstated):
            assert "more than the 3 printed" in found.reason or "not" in found.reason, found
            continue
        stated += 1
        unions += len(found.parts) > 1
        with_extent += c.has(sympy.Min)
        with_free += any("tl.where" in b for p in found.parts for b in p.lows + p.highs)
        holds = truth(c)
        for u, n in GRID:
            assert selected(found, u, n) == holds(u, n), (c, found, u, n)
    assert stated >= 150 and with_extent >= 50 and with_free >= 30 and unions >= 20, \
        (stated, with_extent, with_free, unions)


def test_a_ragged_causal_tile_is_one_range_and_a_gap_is_unstated_with_the_reason():
    causal = TILE * I + sympy.Min(TILE, N - TILE * I) - 1 <= TILE * U      # every key of trip i at or before u·T
    found = index_bounds(causal, I, code, "stop", TRITON)
    assert isinstance(found, Bounds) and not found.lows and len(found.highs) == 1
    holds = truth(causal)
    for u, n in GRID:
        assert selected(found, u, n) == holds(u, n)
    gap = index_bounds((I <= U) | (I >= U + 3), I, code, "stop", TRITON)
    assert gap == Unstated("a union of 2 ranges of i bounded on both sides, which may have a gap")
    union = index_ranges((I <= U) | (I >= U + 3), I, code, "stop", TRITON)
    assert isinstance(union, Ranges) and len(union.parts) == 2
    for u, n in GRID:
        assert selected(union, u, n) == truth((I <= U) | (I >= U + 3))(u, n)
    assert isinstance(index_ranges(sympy.Eq(I, U), I, code, "stop", TRITON), Unstated)
    assert isinstance(index_ranges(I * U <= 3, I, code, "stop", TRITON), Unstated)


def test_the_loops_run_the_reached_trips_once_in_order_the_whole_ones_whole():
    """Random pairs (reach, whole ⊆ reach: ``whole ∧ reach``), unions of up to three ranges included: the loops of
    :func:`trip_loops` run exactly the reached trips, ascending, each once, whole exactly where the whole test holds
    (numpy's route: the conditions evaluated by sympy on every trip)."""
    rng = np.random.default_rng(37)
    checked = gaps = 0
    for _ in range(200):
        reach_c = condition(rng)
        whole_c = sympy.And(condition(rng), reach_c)
        reach = index_ranges(reach_c, I, code, "stop", TRITON)
        whole = index_ranges(whole_c, I, code, "stop", TRITON)
        if isinstance(reach, Unstated) or isinstance(whole, Unstated):
            continue
        loops = trip_loops(reach, whole, "0", "stop", TRITON, "nc_i")
        if isinstance(loops, Unstated):
            assert "ordered at run time" in loops.reason
            continue
        checked += 1
        gaps += len(reach.parts) > 1 or len(whole.parts) > 1
        reached, whole_at = truth(reach_c), truth(whole_c)
        for u, n in GRID[::4]:
            ran = looped(loops, u, n)
            trips = [i for i, _ in ran]
            assert trips == sorted(reached(u, n)), (reach_c, whole_c, u, n, ran)
            assert {i for i, kind in ran if kind == "whole"} == whole_at(u, n), (reach_c, whole_c, u, n, ran)
    assert checked >= 70 and gaps >= 20, (checked, gaps)
