"""Intervals and truths: what a kind's *interval image* (``declare(..., interval=…)``) is written with.

An :class:`Interval` bounds every value of an array on a tile, a :class:`Truth` says of a mask on a tile
whether it is *always* true and whether it is *possibly* true.  Their ends are Python numbers (one tile),
numpy arrays (many tiles at once, element by element) or sympy expressions in loop indices and sizes (a
comparison is then a sympy condition): the helpers here (:func:`lo_of`, :func:`le`, :func:`all_of`, …) take
all three.  ``None`` stands for an input nothing is known of.

A kind's interval image is a rule ``interval(ins, box, tile_of) -> Interval | Truth | None``: ``ins`` the
inputs' intervals (or truths, or None), ``box`` the box (its parameters: ``box.data.param(key)``),
``tile_of(axis, size)`` the tile ``(start, extent)`` an axis is in (what a position reads; maps of values
ignore it).  :func:`image` and :func:`increasing` build the usual ones.  The law a rule keeps (checked in
``proofs/test_skipping.py`` for the built-in kinds, in ``tests/algorithms/test_user_kinds.py`` for a user's)::

    lo(v) ≤ e ≤ hi(v)          always(m) ⟹ m[e]          m[e] ⟹ possibly(m)      for each element e on the tile

>>> sub(Interval(4, 7), Interval(0, 3)), less_equal(Interval(8, 9), Interval(0, 7))
(Interval(lo=1, hi=7), Truth(always=False, possibly=False))
>>> import sympy
>>> i = sympy.Symbol("i", integer=True, nonnegative=True)
>>> less_equal(Interval(4 * i, 4 * i + 3), Interval(0, 5)).possibly
4*i <= 5
>>> import numpy as np
>>> less_equal(Interval(np.array([0, 4, 8]), np.array([3, 7, 11])), Interval(0, 5)).possibly
array([ True,  True, False])
>>> increasing(lambda x, c=0: x + c)([Interval(0, 3)], None, None)        # a shift by c (0 without a box)
Interval(lo=0, hi=3)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

import numpy as np
import sympy

INF = math.inf


def _symbolic(*xs) -> bool:
    return any(isinstance(x, sympy.Basic) for x in xs)


def _arrays(*xs) -> bool:
    return any(isinstance(x, np.ndarray) for x in xs)


def lo_of(*xs):
    """The least of ``xs`` (a number, an array element by element, or a sympy ``Min``)."""
    if _symbolic(*xs):
        return sympy.Min(*xs)
    return reduce(np.minimum, xs) if _arrays(*xs) else min(xs)


def hi_of(*xs):
    """The greatest of ``xs``."""
    if _symbolic(*xs):
        return sympy.Max(*xs)
    return reduce(np.maximum, xs) if _arrays(*xs) else max(xs)


def le(a, b):
    """``a ≤ b`` as a bool (an array of them), or a sympy condition with the ``Max``/``Min`` of either side
    unfolded (so that a condition on affine ends stays a conjunction or disjunction of linear inequalities)."""
    if not _symbolic(a, b):
        return a <= b
    if isinstance(a, sympy.Max):
        return all_of(*(le(x, b) for x in a.args))
    if isinstance(a, sympy.Min):
        return any_of(*(le(x, b) for x in a.args))
    if isinstance(b, sympy.Min):
        return all_of(*(le(a, x) for x in b.args))
    if isinstance(b, sympy.Max):
        return any_of(*(le(a, x) for x in b.args))
    return sympy.Le(a, b)


def lt(a, b):
    """``a < b`` (on integer positions: ``a ≤ b − 1`` is the same; kept strict for real values)."""
    if not _symbolic(a, b):
        return a < b
    if isinstance(a, sympy.Max):
        return all_of(*(lt(x, b) for x in a.args))
    if isinstance(a, sympy.Min):
        return any_of(*(lt(x, b) for x in a.args))
    if isinstance(b, sympy.Min):
        return all_of(*(lt(a, x) for x in b.args))
    if isinstance(b, sympy.Max):
        return any_of(*(lt(a, x) for x in b.args))
    return sympy.Lt(a, b)


def all_of(*cs):
    """Every condition of ``cs`` (numbers, numpy arrays element by element, or a sympy ``And``).

    >>> all_of(True, False), all_of(np.array([True, True]), np.array([True, False])).tolist()
    (False, [True, False])
    """
    if _symbolic(*cs):
        return sympy.And(*cs)
    return reduce(np.logical_and, cs) if _arrays(*cs) else all(cs)


def any_of(*cs):
    """Some condition of ``cs`` (numbers, numpy arrays element by element, or a sympy ``Or``)."""
    if _symbolic(*cs):
        return sympy.Or(*cs)
    return reduce(np.logical_or, cs) if _arrays(*cs) else any(cs)


def negate(c):
    """The condition ``c`` negated (a number, a numpy array element by element, or a sympy ``Not``)."""
    if _symbolic(c):
        return sympy.Not(c)
    return np.logical_not(c) if _arrays(c) else not c


def times(x, c):
    """``x · c`` for an end ``x`` and a constant ``c``, with ``±∞ · 0 = 0`` (an unknown end times a zero scale is
    the zero it makes)."""
    if isinstance(x, np.ndarray):
        infinite = np.isinf(x)
        if not infinite.any():
            return x * c
        return np.where(infinite, x if c > 0 else (-x if c < 0 else 0.0), np.where(infinite, 0.0, x) * c)
    if x in (INF, -INF) or (isinstance(x, sympy.Basic) and x.is_infinite):
        return x if c > 0 else (-x if c < 0 else 0)
    return x * c


def exp_end(x):
    """``exp`` of an end (``exp(−∞) = 0``; numbers past 700 saturate rather than overflow)."""
    if _symbolic(x):
        return sympy.exp(x)
    if _arrays(x):
        return np.where(x == INF, INF, np.exp(np.minimum(x, 700.0)))
    return 0.0 if x == -INF else math.exp(min(x, 700.0)) if x != INF else INF


def log_end(x):
    """``log`` of an end (``log x = −∞`` for ``x ≤ 0``: the least a logarithm of a nonnegative value can be)."""
    if _symbolic(x):
        return sympy.log(x)
    if _arrays(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x <= 0, -INF, np.log(np.maximum(x, np.finfo(float).tiny)))
    return -INF if x <= 0 else math.log(x) if x != INF else INF


def erf_end(x):
    """``erf`` of an end (``erf(±∞) = ±1``)."""
    if _symbolic(x):
        return sympy.erf(x)
    if _arrays(x):
        return np.frompyfunc(math.erf, 1, 1)(np.asarray(x, dtype=float)).astype(float)
    return math.erf(x)


@dataclass(frozen=True)
class Interval:
    """Every value lies in ``[lo, hi]`` (ends numbers, arrays or sympy expressions; ±∞ when unknown)."""

    lo: object
    hi: object


@dataclass(frozen=True)
class Truth:
    """A mask on a tile: ``always`` every element is true, ``possibly`` some element may be."""

    always: object
    possibly: object


UNKNOWN = Interval(-INF, INF)
MAYBE = Truth(False, True)


def point(c) -> Interval:
    """The interval of a constant."""
    return Interval(c, c)


def tile(start, extent) -> Interval:
    """The positions of a tile ``(start, extent)``: ``[start, start + extent − 1]``."""
    return Interval(start, start + extent - 1)


# ---------------------------------------------------------------------------------------------- rules
def image(f):
    """The rule of a kind whose image is ``f(*intervals of its inputs)`` (no parameter, no tile read)."""
    def rule(ins, box, tile_of):
        return f(*ins)
    return rule


def increasing(f):
    """The rule of a nondecreasing map of one input: ``[f(lo), f(hi)]``, ``f(end, **params)`` called with the
    box's parameters by name (``increasing(lambda x, alpha: …)`` for a kind with a parameter ``alpha``)."""
    def rule(ins, box, tile_of):
        (a,) = ins
        if not isinstance(a, Interval):
            return None
        params = dict(box.data.params) if box is not None else {}
        return Interval(f(a.lo, **params), f(a.hi, **params))
    return rule


# ---------------------------------------------------------------------------------------------- images
def _known(*xs) -> bool:
    return all(isinstance(x, Interval) for x in xs)


def same(a):
    """The identity's image (an interval or a truth passes through)."""
    return a


def add(a, b):
    """``a + b``: ``[a.lo + b.lo, a.hi + b.hi]`` (None where either is unknown).

    >>> add(Interval(1, 2), Interval(10, 20)), add(Interval(1, 2), None)
    (Interval(lo=11, hi=22), None)
    """
    return Interval(a.lo + b.lo, a.hi + b.hi) if _known(a, b) else None


def sub(a, b):
    """``a − b``: ``[a.lo − b.hi, a.hi − b.lo]`` (None where either is unknown)."""
    return Interval(a.lo - b.hi, a.hi - b.lo) if _known(a, b) else None


def neg(a):
    """``−a``: ``[−a.hi, −a.lo]`` (None where unknown)."""
    return Interval(-a.hi, -a.lo) if _known(a) else None


def absolute(a):
    """``|a|``: from ``max(a.lo, −a.hi, 0)`` to ``max(−a.lo, a.hi)`` (None where unknown).

    >>> absolute(Interval(-3, 2)), absolute(Interval(2, 5))
    (Interval(lo=0, hi=3), Interval(lo=2, hi=5))
    """
    return Interval(hi_of(a.lo, -a.hi, 0), hi_of(-a.lo, a.hi)) if _known(a) else None


def scaled(a, c):
    """``a · c`` for a constant ``c`` (a number or a sympy expression; of unknown sign: nothing is known)."""
    if not _known(a):
        return None
    c = sympy.sympify(c) if isinstance(c, sympy.Basic) else c
    positive = c.is_nonnegative if isinstance(c, sympy.Basic) else c >= 0
    if positive is None:
        return UNKNOWN
    lo, hi = times(a.lo, c), times(a.hi, c)
    return Interval(lo, hi) if positive else Interval(hi, lo)


def sine(a, phase=0.0):
    """``sin(x + phase)`` on ``[lo, hi]``: the sines of the ends, widened to 1 where a crest ``π/2 + 2πk`` lies in the
    interval and to −1 where a trough ``−π/2 + 2πk`` does (exact: between crests and troughs the sine is monotone);
    ``[−1, 1]`` for an infinite or a sympy end.  ``cos`` is ``phase = π/2``."""
    if not _known(a):
        return None
    if _symbolic(a.lo, a.hi):
        return Interval(-1, 1)
    lo, hi = np.asarray(a.lo, dtype=float) + phase, np.asarray(a.hi, dtype=float) + phase
    finite = np.isfinite(lo) & np.isfinite(hi)
    lo, hi = np.where(finite, lo, 0.0), np.where(finite, hi, 0.0)
    turn = 2 * math.pi

    def reaches(at):            # some at + 2πk in [lo, hi]
        return ~finite | (np.ceil((lo - at) / turn) <= np.floor((hi - at) / turn))
    ends = np.sin(lo), np.sin(hi)
    low = np.where(reaches(-math.pi / 2), -1.0, np.minimum(*ends))
    high = np.where(reaches(math.pi / 2), 1.0, np.maximum(*ends))
    return Interval(low, high) if _arrays(a.lo, a.hi) else Interval(float(low), float(high))


def floor_quotient(x, c):
    """``⌊x / c⌋`` of an end ``x`` and a nonzero constant ``c`` (±∞ keeps its sign times ``c``'s; a sympy end gives a
    ``floor``).  Exact on integers: Python's and numpy's ``//``, never a rounded float quotient."""
    if _symbolic(x, c):
        return sympy.floor(sympy.sympify(x) / c)
    if _arrays(x):
        x = np.asarray(x)
        infinite = np.isinf(x) if np.issubdtype(x.dtype, np.floating) else np.zeros(x.shape, bool)
        with np.errstate(invalid="ignore"):
            return np.where(infinite, x * np.sign(c), np.floor_divide(np.where(infinite, 0, x), c))
    if x in (INF, -INF):
        return x if c > 0 else -x
    return x // c


def floor_divided(a, c):
    """``a // c`` for a nonzero constant ``c``: ``⌊x/c⌋`` is nondecreasing in ``x`` for ``c > 0`` (nonincreasing for
    ``c < 0``), so its image is read off the ends."""
    if not _known(a):
        return None
    lo, hi = floor_quotient(a.lo, c), floor_quotient(a.hi, c)
    return Interval(lo, hi) if c > 0 else Interval(hi, lo)


def remainder(a, c, *, integer: bool):
    """``a mod c`` (Python's: the sign of ``c``) for a nonzero constant ``c``.  Within one period (``⌊lo/c⌋ =
    ⌊hi/c⌋ = k``) it is ``x − c·k``, increasing: exactly ``[lo − c·k, hi − c·k]``; else every residue, ``[0, c − 1]``
    for integers (``[c + 1, 0]`` for ``c < 0``), ``[0, c]`` for reals (closed: ``[0, c)`` holds them).  A sympy end
    is exact where sympy decides the period is one, else every residue."""
    if not _known(a):
        return None
    whole = ((0, c - 1) if c > 0 else (c + 1, 0)) if integer else ((0, c) if c > 0 else (c, 0))
    k, k_hi = floor_quotient(a.lo, c), floor_quotient(a.hi, c)
    if _symbolic(a.lo, a.hi, c):
        # t = 0 within one period, 1 across periods (⌊hi/c⌋ − ⌊lo/c⌋ has c's sign): the image is decided, exactly,
        # once the loop indices are numbers, and prints as integer arithmetic (no Piecewise)
        t = sympy.Min(sympy.sign(c) * (k_hi - k), 1)
        return Interval((a.lo - c * k) * (1 - t) + whole[0] * t, (a.hi - c * k) * (1 - t) + whole[1] * t)
    elif _arrays(a.lo, a.hi):
        same = np.isfinite(a.lo) & np.isfinite(a.hi) & (k == k_hi)
        if same.any():
            shift = c * np.where(same, k, 0)
            with np.errstate(invalid="ignore"):
                return Interval(np.where(same, a.lo - shift, whole[0]), np.where(same, a.hi - shift, whole[1]))
        same = False
    else:
        same = a.lo not in (INF, -INF) and a.hi not in (INF, -INF) and k == k_hi
    return Interval(a.lo - c * k, a.hi - c * k) if same else Interval(*whole)


def _divisors(b):
    """A divisor interval's ends as numbers when they are finite and of one sign (0 excluded), else None."""
    if not _known(b) or _symbolic(b.lo, b.hi) or _arrays(b.lo, b.hi):
        return None
    return (b.lo, b.hi) if 0 < b.lo <= b.hi < INF or -INF < b.lo <= b.hi < 0 else None


def floor_divided_by(a, b):
    """``a // b`` for an interval ``b`` of divisors on one side of 0: ``x/y`` is monotone in each of ``x`` and ``y``
    there, so the extremes are at the corners, the hull of the images by ``b``'s ends; else unknown."""
    ends = _divisors(b)
    if ends is None or not _known(a):
        return None
    return hull(*(floor_divided(a, c) for c in ends))


def remainder_by(a, b, *, integer: bool):
    """``a mod b`` for an interval ``b`` of divisors on one side of 0: exact by a point, else every residue of the
    largest divisor (``x mod y`` is not monotone in ``y``: 7 mod 3 = 1, 7 mod 4 = 3, 7 mod 5 = 2)."""
    ends = _divisors(b)
    if ends is None or not _known(a):
        return None
    lo, hi = ends
    if lo == hi:
        return remainder(a, lo, integer=integer)
    return remainder(UNKNOWN, hi if hi > 0 else lo, integer=integer)


def maximum(a, b):
    """``max(a, b)`` element by element: the maxima of the ends (None where either is unknown)."""
    return Interval(hi_of(a.lo, b.lo), hi_of(a.hi, b.hi)) if _known(a, b) else None


def minimum(a, b):
    """``min(a, b)`` element by element: the minima of the ends (None where either is unknown)."""
    return Interval(lo_of(a.lo, b.lo), lo_of(a.hi, b.hi)) if _known(a, b) else None


def hull(*xs):
    """The least interval holding every one of ``xs`` (None if one is unknown)."""
    if not _known(*xs):
        return None
    return Interval(lo_of(*(v.lo for v in xs)), hi_of(*(v.hi for v in xs)))


def less_equal(a, b) -> Truth | None:
    """``a ≤ b``: always where ``hi(a) ≤ lo(b)``, possibly where ``lo(a) ≤ hi(b)`` (None: an input is unknown)."""
    return Truth(le(a.hi, b.lo), le(a.lo, b.hi)) if _known(a, b) else None


def less(a, b) -> Truth | None:
    """The truth of ``a < b``: always where ``a.hi < b.lo``, possibly where ``a.lo < b.hi`` (None where unknown)."""
    return Truth(lt(a.hi, b.lo), lt(a.lo, b.hi)) if _known(a, b) else None


def equal(a, b) -> Truth | None:
    """``a = b``: always where both are one and the same point, possibly where they overlap."""
    return Truth(_point(a, b), _overlap(a, b)) if _known(a, b) else None


def not_equal(a, b) -> Truth | None:
    """The truth of ``a ≠ b``: always where the intervals do not overlap, possibly unless both are the same point."""
    return Truth(negate(_overlap(a, b)), negate(_point(a, b))) if _known(a, b) else None


def _overlap(a, b):
    return all_of(le(a.lo, b.hi), le(b.lo, a.hi))


def _point(a, b):
    return all_of(le(a.hi, a.lo), le(b.hi, b.lo), le(a.lo, b.lo), le(b.lo, a.lo))


def _truth(x) -> Truth:
    """A mask nothing is known of may be true or false anywhere."""
    return x if isinstance(x, Truth) else MAYBE


def conjunction(a, b) -> Truth:
    """The truth of ``a ∧ b``: always where both always are, possibly where both possibly are."""
    a, b = _truth(a), _truth(b)
    return Truth(all_of(a.always, b.always), all_of(a.possibly, b.possibly))


def disjunction(a, b) -> Truth:
    """The truth of ``a ∨ b``: always where either always is, possibly where either possibly is."""
    a, b = _truth(a), _truth(b)
    return Truth(any_of(a.always, b.always), any_of(a.possibly, b.possibly))


def complement(a) -> Truth:
    """The truth of ``¬a``: always where ``a`` is never true, possibly where it is not always.

    >>> complement(Truth(always=False, possibly=True))
    Truth(always=False, possibly=True)
    """
    a = _truth(a)
    return Truth(negate(a.possibly), negate(a.always))


__all__ = ["Interval", "Truth", "UNKNOWN", "MAYBE", "INF", "lo_of", "hi_of", "le", "lt", "all_of", "any_of",
           "negate", "times", "exp_end", "log_end", "erf_end", "sine", "point", "tile", "image", "increasing", "same",
           "add", "sub",
           "neg", "absolute", "scaled", "floor_quotient", "floor_divided", "remainder",
           "floor_divided_by", "remainder_by", "maximum", "minimum", "hull", "less_equal", "less", "equal", "not_equal",
           "conjunction", "disjunction", "complement"]
