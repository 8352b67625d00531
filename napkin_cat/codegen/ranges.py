"""The trips of a loop on which a condition holds, as a union of ranges of the loop's index, printed in a dialect.

A condition on a loop index ``i`` (and on sizes and outer indices, free of ``i``) is stated as a union of ranges
(:class:`Ranges`), each ``every low ≤ i < every high`` (:class:`Bounds`), by structure:

* a relation ``a·i + b ≤ 0`` (``a`` a nonzero integer, ``b`` free of ``i``) bounds one side:
  ``i < ⌊(a − b)/a⌋`` for ``a > 0``, ``i ≥ ⌈b/|a|⌉`` for ``a < 0``;
* a ``Min`` or ``Max`` term is split into its arguments (``k·Min(u, v) + r ≤ 0 ⟺ k·u + r ≤ 0 ∨ k·v + r ≤ 0`` for
  ``k > 0``, ``∧`` for ``Max``, the two swapped for ``k < 0``): a ragged last tile's extent
  ``Min(T, n − T·i)`` in a condition is no longer an obstacle;
* a relation free of ``i`` (``c``) holds on every trip or on none: in a conjunction the high bound
  ``where(c, stop, 0)``; in a disjunction ``c ∨ [L, H) ∪ … = [where(c, 0, L), where(c, stop, H)) ∪ …``;
* a conjunction distributes over the unions (``(A ∪ B) ∩ C = (A ∩ C) ∪ (B ∩ C)``), each part every bound;
* a disjunction is the union of its parts, those bounded on one side merged (``i < h₁ ∨ i < h₂ ⟺
  i < max(h₁, h₂)``, ``i ≥ l₁ ∨ i ≥ l₂ ⟺ i ≥ min(l₁, l₂)``): attention sinks beside a sliding window are two
  ranges with a gap, ``[0, s) ∪ [L(q), H(q))``.

Anything else (an equation, a term not linear in ``i``, a union of more than :data:`MOST_PARTS` ranges) is
:class:`Unstated`, with the reason, which a printer writes beside the per-trip test it falls back to.  A dialect's
``//`` (``/`` in C) may truncate towards 0 (C, compiled Triton) or floor (Triton's interpreter): each quotient is
printed so that it is exact where it is positive and at most 0 where the exact bound is (``i ≤ ⌊m/a⌋ ⟺
i < ⌊(m + a)/a⌋``), so clamped to the loop's trips (from 0, to ``stop``) every bound is exact either way.  The
operations are printed by a :class:`Spelling` (a printer's templates: :meth:`Spelling.of`).

>>> import sympy
>>> i, q, x = sympy.symbols("i_x i_q x", integer=True)
>>> index_bounds(8*i + sympy.Min(8, x - 8*i) - 1 <= 8*q, i, str, "T", TRITON)      # causal, the last key tile ragged
Bounds(lows=(), highs=('tl.where(x <= 8*i_q + 1, T, (8*i_q + 1) // 8)',))
>>> index_ranges((i <= 2) | (i >= 5), i, str, "T", TRITON).parts                    # a gap: two ranges
(Bounds(lows=(), highs=('3',)), Bounds(lows=('5',), highs=()))
>>> index_ranges(sympy.Eq(i, q), i, str, "T", TRITON).reason
'Equality in i_x (Eq(i_x, i_q)) is not a bound on one side'
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import sympy

#: the most ranges a union is printed as (each one loop, or a few: :mod:`napkin_cat.codegen.trips`)
MOST_PARTS = 3


@dataclass(frozen=True)
class Spelling:
    """How a dialect prints the operations of bounds on scalars: templates over ``{0}``, ``{1}`` (``{2}``)."""
    minimum: str
    maximum: str
    divide: str
    where: str
    both: str
    either: str

    @classmethod
    def of(cls, printer) -> "Spelling":
        """A printer's spelling: its ``min_template``, ``max_template``, ``div_template``, ``where_template``,
        ``and_template``, ``or_template``."""
        return cls(printer.min_template, printer.max_template, printer.div_template, printer.where_template,
                   printer.and_template, printer.or_template)

    def fold(self, xs, template: str) -> str:
        """``f(x₀, f(x₁, …))`` of the printed expressions ``xs`` (``x₀`` alone) by ``template``.

        >>> TRITON.fold(["a", "b", "c"], TRITON.maximum)
        'tl.maximum(a, tl.maximum(b, c))'
        """
        xs = list(xs)
        return xs[0] if len(xs) == 1 else template.format(xs[0], self.fold(xs[1:], template))

    def quotient(self, n: str, a: int) -> str:
        """``n // a`` printed (``n`` alone where ``a`` is 1): the dialect's quotient.

        >>> TRITON.quotient("8*i_q + 1", 8), C.quotient("i_q", 1)
        ('(8*i_q + 1) // 8', 'i_q')
        """
        return n if a == 1 else self.divide.format(f"({n})", a)


#: Triton's and C's spellings (their printers' templates; doctests and tests of this module read them)
TRITON = Spelling("tl.minimum({0}, {1})", "tl.maximum({0}, {1})", "{0} // {1}", "tl.where({0}, {1}, {2})",
                  "({0} & {1})", "({0} | {1})")
C = Spelling("NC_MIN({0}, {1})", "NC_MAX({0}, {1})", "{0} / {1}", "(({0}) ? ({1}) : ({2}))", "({0} && {1})",
             "({0} || {1})")


@dataclass(frozen=True)
class Bounds:
    """``condition ⟺ every low ≤ i < every high`` on the trips ``0 ≤ i < stop``: printed expressions."""
    lows: tuple = ()
    highs: tuple = ()


@dataclass(frozen=True)
class Ranges:
    """``condition ⟺ i in one of the parts`` (each :class:`Bounds`; none: on no trip)."""
    parts: tuple = (Bounds(),)


@dataclass(frozen=True)
class Unstated:
    """A condition :func:`index_ranges` cannot state as ranges of the index, and why."""
    reason: str


class _Unstated(Exception):
    pass


@dataclass(frozen=True)
class _Free:
    """A condition free of the index (printed): true on every trip or on none."""
    text: str


def index_ranges(condition, index, code, stop: str, spell: Spelling) -> Ranges | Unstated:
    """``condition`` as :class:`Ranges` on the trips ``0 ≤ index < stop`` (the module's rules; ``code`` prints a
    sympy expression, ``stop`` is printed, ``spell`` the dialect's), or :class:`Unstated` with the reason."""
    try:
        found = _Reader(index, code, stop, spell).ranges(sympy.sympify(condition))
    except _Unstated as e:
        return Unstated(str(e))
    return _Reader(index, code, stop, spell).everywhere_or_nowhere(found)


def index_bounds(condition, index, code, stop: str, spell: Spelling) -> Bounds | Unstated:
    """``condition`` as one range (:func:`index_ranges` with one part), or :class:`Unstated` with the reason."""
    found = index_ranges(condition, index, code, stop, spell)
    if isinstance(found, Unstated) or len(found.parts) == 1:
        return found if isinstance(found, Unstated) else found.parts[0]
    if not found.parts:
        return Bounds((), ("0",))
    return Unstated(f"a union of {len(found.parts)} ranges of {index} bounded on both sides, which may have a gap")


class _Reader:
    """The rules of the module for one index, printer and stop."""

    def __init__(self, i, code, stop, spell):
        self.i, self.code, self.stop, self.spell = i, code, stop, spell

    def everywhere_or_nowhere(self, found) -> Ranges:
        """A free condition as the bound ``i < where(c, stop, 0)``; ranges as they are."""
        if isinstance(found, _Free):
            return Ranges((Bounds((), (self.spell.where.format(found.text, self.stop, 0),)),))
        return found

    def ranges(self, c):
        i = self.i
        if c is sympy.true:
            return Ranges()
        if c is sympy.false:
            return Ranges(())
        if not c.has(i):
            return _Free(self.code(c))
        if isinstance(c, sympy.And):
            return self.conjunction([self.ranges(a) for a in c.args])
        if isinstance(c, sympy.Or):
            return self.union([self.ranges(a) for a in c.args])
        if isinstance(c, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)):
            e = c.lhs - c.rhs if isinstance(c, (sympy.Le, sympy.Lt)) else c.rhs - c.lhs
            return self.relation(sympy.expand(e + (1 if isinstance(c, (sympy.Lt, sympy.Gt)) else 0)))
        raise _Unstated(f"{type(c).__name__} in {i} ({c}) is not a bound on one side")

    def join(self, texts, template: str) -> str:
        return self.spell.fold(texts, template)

    def conjunction(self, parts):
        """Every part: the unions distributed, each part's bounds together, the free ones as one high bound
        ``where(c, stop, 0)``."""
        free = [p.text for p in parts if isinstance(p, _Free)]
        unions = [p for p in parts if isinstance(p, Ranges)]
        if not unions:
            return _Free(self.join(free, self.spell.both))
        if free:
            unions.append(self.everywhere_or_nowhere(_Free(self.join(free, self.spell.both))))
        out = tuple(Bounds(sum((b.lows for b in pick), ()), sum((b.highs for b in pick), ()))
                    for pick in product(*(u.parts for u in unions)))
        return self.capped(out)

    def capped(self, parts: tuple) -> Ranges:
        if len(parts) > MOST_PARTS:
            raise _Unstated(f"a union of {len(parts)} ranges of {self.i}, more than the {MOST_PARTS} printed")
        return Ranges(parts)

    def union(self, parts):
        """Some part: the ranges of every part, those bounded on one side merged, a free one widening the first."""
        s = self.spell
        free = [p.text for p in parts if isinstance(p, _Free)]
        bounds = [b for p in parts if isinstance(p, Ranges) for b in p.parts if b.highs != ("0",)]
        if not any(isinstance(p, Ranges) for p in parts):
            return _Free(self.join(free, s.either))
        if any(not b.lows and not b.highs for b in bounds):
            return Ranges()
        below = [b for b in bounds if not b.lows]      # i < h₁ ∨ i < h₂ ⟺ i < max(h₁, h₂)
        above = [b for b in bounds if not b.highs]     # i ≥ l₁ ∨ i ≥ l₂ ⟺ i ≥ min(l₁, l₂)
        merged = ([Bounds((), (s.fold([s.fold(b.highs, s.minimum) for b in below], s.maximum),))] if below else []) + \
            [b for b in bounds if b.lows and b.highs] + \
            ([Bounds((s.fold([s.fold(b.lows, s.maximum) for b in above], s.minimum),), ())] if above else [])
        if not merged:
            return _Free(self.join(free, s.either)) if free else Ranges(())
        if free:                  # c ∨ [L, H) = [where(c, 0, L), where(c, stop, H))
            c, r = self.join(free, s.either), merged[0]
            lows = (s.where.format(c, 0, s.fold(r.lows, s.maximum)),) if r.lows else ()
            highs = (s.where.format(c, self.stop, s.fold(r.highs, s.minimum)),) if r.highs else ()
            merged[0] = Bounds(lows, highs)
        return self.capped(tuple(merged))

    def relation(self, e):
        """``e ≤ 0`` (``e`` integer-valued, expanded) as ranges of ``i``."""
        i, s = self.i, self.spell
        for term in sympy.Add.make_args(e):
            k, m = term.as_coeff_Mul()
            if isinstance(m, (sympy.Min, sympy.Max)) and m.has(i):
                rest = e - term
                parts = [self.relation(sympy.expand(k * a + rest)) for a in m.args]
                if isinstance(m, sympy.Max) == (k > 0):    # k·Max ≤ 0 (k > 0), k·Min ≤ 0 (k < 0): every argument
                    return self.conjunction(parts)
                return self.union(parts)
        if not e.has(i):
            pos = sympy.Add(*[t for t in sympy.Add.make_args(e) if t.could_extract_minus_sign() is False])
            rel = sympy.Le(pos, pos - e)
            return Ranges() if rel is sympy.true else Ranges(()) if rel is sympy.false else _Free(self.code(rel))
        a = e.coeff(i)
        rest = sympy.expand(e - a * i)
        if not a.is_Integer or a == 0 or rest.has(i):
            raise _Unstated(f"{e} ≤ 0 is not linear in {i} with an integer coefficient")
        if a > 0:        # i ≤ ⌊−rest/a⌋ ⟺ i < ⌊(a − rest)/a⌋
            return Ranges((Bounds((), (s.quotient(self.code(sympy.expand(a - rest)), int(a)),)),))
        # i ≥ ⌊(rest + |a| − 1)/|a|⌋
        return Ranges((Bounds((s.quotient(self.code(sympy.expand(rest - a - 1)), int(-a)),), ()),))


__all__ = ["Bounds", "Ranges", "Spelling", "Unstated", "index_bounds", "index_ranges", "MOST_PARTS", "TRITON", "C"]
