"""The data live on a diagram's wires, per level, as the cost functor walks it layer by layer (paper §2.3, columns).

A column of a diagram is the data on its wires between two layers; ``M[ℓ]`` is the largest column at
level ℓ.  :class:`Live` keeps the current column up to date as layers consume and make values, so
that reading it costs the number of distinct monomials of the sizes, not the number of wires.

>>> import napkin_cat as nc
>>> q, d = nc.symbol("q"), nc.symbol("d")
>>> (a, b) = nc.types("q d, q").inside
>>> live = Live()
>>> live.put([(0, a), (1, b), (0, a)])      # value 0 on two wires (a copy): counted once
>>> live.column()
{0: d*q + q}
>>> live.take([(0, a)]); live.column(without=[(0, a)])
{0: q}
"""
from __future__ import annotations

from functools import lru_cache

import sympy

from napkin_cat.syntax.adapter import Array


def numel(arr: Array):
    """The number of values of ``arr``: the product of its axes' sizes."""
    n = sympy.Integer(1)
    for a in arr.axes:
        n = n * a.size
    return n


#: the most arrays whose expanded size :func:`_expanded` keeps (a process that costs many diagrams does not grow)
EXPANDED_LIMIT = 2 ** 16


@lru_cache(maxsize=EXPANDED_LIMIT)
def _expanded(arr: Array) -> tuple:
    """``numel(arr)`` expanded, as ``(monomial, coefficient)`` pairs (computed once per equal arrays, the least
    recently used forgotten past :data:`EXPANDED_LIMIT`; an array also keeps its own, :func:`_terms`)."""
    return tuple((m, int(c) if c.is_Integer else c) for m, c in sympy.expand(numel(arr)).as_coefficients_dict().items())


def _terms(arr: Array) -> tuple:
    """:func:`_expanded`, memoised on the array itself (immutable): a wire's array is met at every layer it
    crosses, and looking it up by equality hashes its axes each time."""
    found = arr.__dict__.get("_numel_terms")
    if found is None:
        found = arr.__dict__["_numel_terms"] = _expanded(arr)
    return found


def _sum(terms: dict):
    """The polynomial ``Σ c·m`` (a coefficient 1 leaves its monomial as it is)."""
    return sympy.Add(*(m if c == 1 else c * m for m, c in terms.items() if c))


class Live:
    """The data live on a diagram's wires, per level, kept up to date layer by layer.

    A value copied onto several wires is one variable: it is counted once, while any wire carries it.
    Each level's total is a polynomial held as monomial → coefficient, so a layer changes only the
    terms of the values it consumes and makes, and reading a column costs the number of distinct
    monomials, not the number of wires (the weights of later blocks riding beside a transformer
    block cost nothing per layer).
    """

    def __init__(self, terms_of=None, total=None):
        self.wires = {}     # value id -> number of wires carrying it
        self.terms = {}     # level -> {monomial: coefficient}
        self._sums = {}     # level -> its total as a sympy expression, while its terms are unchanged
        # the arithmetic of the totals (:mod:`napkin_cat.cost.polynomial`): an array's terms, a total of terms
        self._terms_of, self._total = terms_of or _terms, total or _sum

    def _shift(self, arr: Array, sign: int, terms=None):
        if terms is None:
            terms = self.terms
            self._sums.pop(arr.level, None)
        level = terms.setdefault(arr.level, {})
        for m, c in self._terms_of(arr):
            level[m] = level.get(m, 0) + sign * c

    def put(self, values):
        for vid, arr in values:
            n = self.wires.get(vid, 0)
            self.wires[vid] = n + 1
            if n == 0:
                self._shift(arr, 1)

    def take(self, values):
        for vid, arr in values:
            n = self.wires[vid] - 1
            self.wires[vid] = n
            if n == 0:
                del self.wires[vid]
                self._shift(arr, -1)

    def column(self, without=()) -> dict:
        """Level → live data (expanded); ``without``: values on wires about to be consumed, left out."""
        terms = self.terms
        if without:
            terms = {l: dict(t) for l, t in terms.items()}
            on_them = {}
            for vid, arr in without:
                on_them[vid] = on_them.get(vid, 0) + 1
            for vid, arr in dict(without).items():
                if self.wires[vid] == on_them[vid]:
                    self._shift(arr, -1, terms)
            return {l: self._total(t) for l, t in terms.items() if any(t.values())}
        out = {}
        for l, t in terms.items():   # a level no layer touched since the last column: its sum as it was
            if l not in self._sums:
                self._sums[l] = self._total(t) if any(t.values()) else None
            if self._sums[l] is not None:
                out[l] = self._sums[l]
        return out
