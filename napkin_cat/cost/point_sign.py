"""A value certainly positive at one point: sympy's ``is_positive`` cannot answer ``False`` for it.

The bounded elimination of :mod:`~napkin_cat.cost.lagrange` drops a candidate value (a root, a tile, a multiplier)
where sympy reads it as never positive (``value.is_positive is False``); sympy answers ``None`` on most radical
values after a long search of its assumptions.  ``False`` claims the value is not positive for *every* value of
its symbols their assumptions allow, so one admissible point where the value is certainly positive refutes it::

    positive_somewhere(v)  ⇒  v.is_positive is not False        (sympy's assumptions are sound)

:func:`positive_somewhere` evaluates ``v`` at a fixed point (each symbol a positive integer, admissible for the
positive integer sizes and the positive multipliers) in interval arithmetic on floats, every operation's result
widened outwards by one unit in the last place (round-to-nearest errs by half of one), so the interval holds the
exact value; ``True`` only where its lower end is above zero.  ``False`` says nothing (sympy decides).

>>> import sympy
>>> M, d = sympy.symbols("M d", positive=True, integer=True)
>>> positive_somewhere((-d + sympy.sqrt(2 * M + d ** 2)) / 2), positive_somewhere(d - M, M)
(True, False)
"""
from __future__ import annotations

import functools
import math

import sympy

_UP, _DOWN = math.inf, -math.inf
_HALF = sympy.Rational(1, 2)
#: the facts a symbol may carry for the point's positive integers to be admissible values of it
_ADMISSIBLE = frozenset(sympy.Symbol("t", positive=True, integer=True).assumptions0.items())
#: the point: the i-th symbol (in name order) is the i-th of these, a memory (the largest name order) far past
#: the sizes so that the point is one a tiling program's optimum is read at
_VALUES = (11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)


class _Unread(Exception):
    """An interval past the floats (an infinite end, a rational too large): the value is not read."""


def _finite(lo: float, hi: float) -> tuple:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise _Unread
    return lo, hi


def _num(q) -> tuple:
    """The interval of a rational ``q`` (its quotient correctly rounded, widened by one unit each way)."""
    try:
        x = q.p / q.q
    except OverflowError:
        raise _Unread from None
    return _finite(math.nextafter(x, _DOWN), math.nextafter(x, _UP))


def _add(a, b) -> tuple:
    return _finite(math.nextafter(a[0] + b[0], _DOWN), math.nextafter(a[1] + b[1], _UP))


def _mul(a, b) -> tuple:
    ends = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])     # (finite ends: no 0·∞)
    return _finite(math.nextafter(min(ends), _DOWN), math.nextafter(max(ends), _UP))


def _inverse(a):
    if a[0] <= 0 <= a[1]:
        return None
    return _finite(math.nextafter(1 / a[1], _DOWN), math.nextafter(1 / a[0], _UP))


def _power(a, n: int):
    out = (1.0, 1.0)
    for _ in range(abs(n)):
        out = _mul(out, a)
    return out if n >= 0 else _inverse(out)


def _interval(e, at: dict):
    """``e``'s interval at the point ``at`` (symbol → float), or None where it is not read (a function, a power
    other than an integer one or a square root's, a division by an interval holding 0); :class:`_Unread` past the
    floats."""
    if e.is_Symbol:
        v = at.get(e)
        return None if v is None else (v, v)
    if e.is_Rational:
        return _num(e)
    if e.is_Add or e.is_Mul:
        step = _add if e.is_Add else _mul
        out = None
        for arg in e.args:
            part = _interval(arg, at)
            if part is None:
                return None
            out = part if out is None else step(out, part)
        return out
    if e.is_Pow:
        base = _interval(e.base, at)
        if base is None:
            return None
        exp = e.exp
        if exp.is_Integer:
            if abs(int(exp)) > 64:
                return None
            out = _power(base, int(exp))
        elif exp.is_Rational and exp.q == 2:
            if base[0] < 0 or abs(exp.p) > 64:
                return None
            root = (max(math.nextafter(math.sqrt(base[0]), _DOWN), 0.0), math.nextafter(math.sqrt(base[1]), _UP))
            out = _power(root, int(exp.p))
        else:
            return None
        return out
    return None


@functools.lru_cache(maxsize=64)
def _point(symbols: frozenset, large):
    """The point of :data:`_VALUES` for ``symbols`` (in name order), ``large`` (a memory) set to ``2**24``; None
    where a symbol's assumptions do not admit every positive integer (then the point might not be one of its
    values) or there are too many symbols."""
    names = sorted(symbols, key=lambda s: (s.name, sympy.default_sort_key(s)))
    if len(names) > len(_VALUES):
        return None
    if any(not frozenset(s.assumptions0.items()) <= _ADMISSIBLE or s.is_positive is not True for s in names):
        return None
    at = {s: float(v) for s, v in zip(names, _VALUES)}
    if large in at:
        at[large] = float(2 ** 24)
    return at


def point_interval(value, large=None):
    """``(ends, at)``: the interval ``(lo, hi)`` holding ``value`` at the point ``at`` (symbol → float) of
    :func:`_point`; ``ends`` None where it is not read (no admissible point, or an operation the interval does not
    follow).  ``large``: a symbol read far past the others (the memory).

    >>> import sympy
    >>> d = sympy.Symbol("d", positive=True, integer=True)
    >>> ends, at = point_interval(d / 3 - 1)
    >>> ends[0] < 11 / 3 - 1 < ends[1], at
    (True, {d: 11.0})
    """
    value = sympy.sympify(value)
    at = _point(frozenset(value.free_symbols), large)
    if at is None:
        return None, None
    try:
        return _interval(value, at), at
    except (_Unread, RecursionError):
        return None, at


def positive_somewhere(value, large=None) -> bool:
    """Whether ``value`` is certainly positive at the point of :func:`point_interval` (so ``value.is_positive``
    is not ``False``); ``False`` where that is not shown."""
    ends, _ = point_interval(value, large)
    return ends is not None and ends[0] > 0


def not_positive(value, large=None) -> bool:
    """``value.is_positive is False``, sympy's answer, not asked where :func:`positive_somewhere` refutes it.

    >>> import sympy
    >>> M, d = sympy.symbols("M d", positive=True, integer=True)
    >>> not_positive(-M - d), not_positive(sympy.sqrt(M) - d, M)
    (True, False)
    """
    if positive_somewhere(value, large):
        return False
    return value.is_positive is False
