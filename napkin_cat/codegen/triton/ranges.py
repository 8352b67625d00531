"""The trips of a loop on which a condition holds, as one range of the loop's index, printed for Triton.

A condition on a loop index ``i`` (and on sizes and outer indices, free of ``i``) is stated as bounds
``every low ≤ i < every high`` (:class:`Bounds`) by structure:

* a relation ``a·i + b ≤ 0`` (``a`` a nonzero integer, ``b`` free of ``i``) bounds one side:
  ``i < ⌊(a − b)/a⌋`` for ``a > 0``, ``i ≥ ⌈b/|a|⌉`` for ``a < 0``;
* a ``Min`` or ``Max`` term is split into its arguments (``k·Min(u, v) + r ≤ 0 ⟺ k·u + r ≤ 0 ∨ k·v + r ≤ 0`` for
  ``k > 0``, ``∧`` for ``Max``, the two swapped for ``k < 0``): a ragged last tile's extent
  ``Min(T, n − T·i)`` in a condition is no longer an obstacle;
* a relation free of ``i`` (``c``) holds on every trip or on none: in a conjunction the high bound
  ``where(c, stop, 0)``; in a disjunction ``c ∨ [L, H) = [where(c, 0, L), where(c, stop, H))``;
* a conjunction is every bound; a disjunction of bounds all on one side is the loosest of them
  (``i < h₁ ∨ i < h₂ ⟺ i < max(h₁, h₂)``), or the one range where there is one.

Anything else (an equation, a term not linear in ``i``, a union of ranges bounded on both sides, which may have a
gap) is :class:`Unstated`, with the reason, which the printer writes beside the per-trip test it falls back to.
Triton's ``//`` truncates towards 0: each quotient is printed so that it is exact where it is positive and at most
0 where the exact bound is (``i ≤ ⌊m/a⌋ ⟺ i < ⌊(m + a)/a⌋``), so clamped to the loop's trips (from 0, to ``stop``)
every bound is exact.

>>> import sympy
>>> i, q, x = sympy.symbols("i_x i_q x", integer=True)
>>> index_bounds(8*i + sympy.Min(8, x - 8*i) - 1 <= 8*q, i, str, "T")      # causal, the last key tile ragged
Bounds(lows=(), highs=('tl.where(x <= 8*i_q + 1, T, (8*i_q + 1) // 8)',))
>>> index_bounds((i <= 2) | (i >= 5), i, str, "T").reason
'a union of ranges of i_x bounded on both sides, which may have a gap'
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy


@dataclass(frozen=True)
class Bounds:
    """``condition ⟺ every low ≤ i < every high`` on the trips ``0 ≤ i < stop``: printed expressions."""
    lows: tuple = ()
    highs: tuple = ()


@dataclass(frozen=True)
class Unstated:
    """A condition :func:`index_bounds` cannot state as one range of the index, and why."""
    reason: str


class _Unstated(Exception):
    pass


@dataclass(frozen=True)
class _Free:
    """A condition free of the index (printed): true on every trip or on none."""
    text: str


def fold(xs, f: str) -> str:
    """``f(x₀, f(x₁, …))`` of the printed expressions ``xs`` (``x₀`` alone).

    >>> fold(["a", "b", "c"], "tl.maximum")
    'tl.maximum(a, tl.maximum(b, c))'
    """
    xs = list(xs)
    return xs[0] if len(xs) == 1 else f"{f}({xs[0]}, {fold(xs[1:], f)})"


def quotient(n: str, a: int) -> str:
    """``n // a`` printed (``n`` alone where ``a`` is 1): Triton's quotient, truncated towards 0.

    >>> quotient("8*i_q + 1", 8), quotient("i_q", 1)
    ('(8*i_q + 1) // 8', 'i_q')
    """
    return n if a == 1 else f"({n}) // {a}"


def index_bounds(condition, index, code, stop: str) -> Bounds | Unstated:
    """``condition`` as :class:`Bounds` on the trips ``0 ≤ index < stop`` (the module's rules; ``code`` prints a
    sympy expression, ``stop`` is printed), or :class:`Unstated` with the reason it is not one range."""
    try:
        found = _bounds(sympy.sympify(condition), index, code, stop)
    except _Unstated as e:
        return Unstated(str(e))
    return _everywhere_or_nowhere(found, stop)


def _everywhere_or_nowhere(found, stop: str) -> Bounds:
    """A free condition as the bound ``i < where(c, stop, 0)``; bounds as they are."""
    return Bounds((), (f"tl.where({found.text}, {stop}, 0)",)) if isinstance(found, _Free) else found


def _bounds(c, i, code, stop):
    if c is sympy.true:
        return Bounds()
    if c is sympy.false:
        return Bounds((), ("0",))
    if not c.has(i):
        return _Free(code(c))
    if isinstance(c, sympy.And):
        return _conjunction([_bounds(a, i, code, stop) for a in c.args], stop)
    if isinstance(c, sympy.Or):
        return _union([_bounds(a, i, code, stop) for a in c.args], i, stop)
    if isinstance(c, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)):
        e = c.lhs - c.rhs if isinstance(c, (sympy.Le, sympy.Lt)) else c.rhs - c.lhs
        return _relation(sympy.expand(e + (1 if isinstance(c, (sympy.Lt, sympy.Gt)) else 0)), i, code, stop)
    raise _Unstated(f"{type(c).__name__} in {i} ({c}) is not a bound on one side")


def _join(texts, op: str) -> str:
    return texts[0] if len(texts) == 1 else "(" + f" {op} ".join(texts) + ")"


def _conjunction(parts, stop):
    """Every part: their bounds together, the free ones as one high bound ``where(c, stop, 0)``."""
    free = [p.text for p in parts if isinstance(p, _Free)]
    ranges = [p for p in parts if isinstance(p, Bounds)]
    if not ranges:
        return _Free(_join(free, "&"))
    if free:
        ranges.append(_everywhere_or_nowhere(_Free(_join(free, "&")), stop))
    return Bounds(sum((r.lows for r in ranges), ()), sum((r.highs for r in ranges), ()))


def _union(parts, i, stop):
    """Some part: one range where the bounded parts are on one side or one alone, a free one widening it."""
    free = [p.text for p in parts if isinstance(p, _Free)]
    ranges = [p for p in parts if isinstance(p, Bounds)]
    if not ranges:
        return _Free(_join(free, "|"))
    if any(not r.lows and not r.highs for r in ranges):
        return Bounds()
    if len(ranges) == 1:
        (r,) = ranges
    elif all(not r.lows for r in ranges):
        r = Bounds((), (fold([fold(r.highs, "tl.minimum") for r in ranges], "tl.maximum"),))
    elif all(not r.highs for r in ranges):
        r = Bounds((fold([fold(r.lows, "tl.maximum") for r in ranges], "tl.minimum"),), ())
    else:
        raise _Unstated(f"a union of ranges of {i} bounded on both sides, which may have a gap")
    if not free:
        return r
    c = _join(free, "|")        # c ∨ [L, H) = [where(c, 0, L), where(c, stop, H))
    lows = (f"tl.where({c}, 0, {fold(r.lows, 'tl.maximum')})",) if r.lows else ()
    highs = (f"tl.where({c}, {stop}, {fold(r.highs, 'tl.minimum')})",) if r.highs else ()
    return Bounds(lows, highs)


def _relation(e, i, code, stop):
    """``e ≤ 0`` (``e`` integer-valued, expanded) as bounds on ``i``."""
    for term in sympy.Add.make_args(e):
        k, m = term.as_coeff_Mul()
        if isinstance(m, (sympy.Min, sympy.Max)) and m.has(i):
            rest = e - term
            parts = [_relation(sympy.expand(k * a + rest), i, code, stop) for a in m.args]
            if isinstance(m, sympy.Max) == (k > 0):    # k·Max ≤ 0 (k > 0), k·Min ≤ 0 (k < 0): every argument
                return _conjunction(parts, stop)
            return _union(parts, i, stop)
    if not e.has(i):
        pos = sympy.Add(*[t for t in sympy.Add.make_args(e) if t.could_extract_minus_sign() is False])
        rel = sympy.Le(pos, pos - e)
        return Bounds() if rel is sympy.true else Bounds((), ("0",)) if rel is sympy.false else _Free(code(rel))
    a = e.coeff(i)
    rest = sympy.expand(e - a * i)
    if not a.is_Integer or a == 0 or rest.has(i):
        raise _Unstated(f"{e} ≤ 0 is not linear in {i} with an integer coefficient")
    if a > 0:        # i ≤ ⌊−rest/a⌋ ⟺ i < ⌊(a − rest)/a⌋
        return Bounds((), (quotient(code(sympy.expand(a - rest)), int(a)),))
    return Bounds((quotient(code(sympy.expand(rest - a - 1)), int(-a)),), ())    # i ≥ ⌊(rest + |a| − 1)/|a|⌋


__all__ = ["Bounds", "Unstated", "fold", "index_bounds", "quotient"]
