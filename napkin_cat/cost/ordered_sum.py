"""A sympy sum kept in sympy's own order as its terms change: a column's total without sorting every term again.

``sympy.Add(*terms)`` sorts its arguments (``Basic.compare``, a Python comparison of expression trees) every time it
is built, so a column of ``k`` distinct monomials costs ``k log k`` comparisons however few of them a layer changed,
and a diagram whose columns each hold most of its wires (a deep MLP whose every layer has its own width, a tree of
products) costs the square of its length (issue 35, item 4).  :class:`OrderedSum` keeps the terms sorted as
they come and go (a changed term is taken out and put in by bisection: ``log k`` comparisons), and its
:meth:`~OrderedSum.total` is the ``Add`` of its terms in that order, built without sorting::

    s.total() == sympy.Add(*terms)          (the same arguments in the same order: equal, and hashed equal)

>>> from napkin_cat.syntax.axis import symbol
>>> a, b, c = symbol("a"), symbol("b"), symbol("c")
>>> s = OrderedSum()
>>> for m, k in ((a * b, 2), (c, 1), (sympy.Integer(1), 3), (a, 1)):
...     s.set(m, k)
>>> s.total(), s.total().args == sympy.Add(2 * a * b, c, 3, a).args
(2*a*b + a + c + 3, True)
>>> s.set(a * b, 0); s.set(c, 5); s.total()
a + 5*c + 3
"""
from __future__ import annotations

from bisect import bisect_left
from functools import cmp_to_key

import sympy
from sympy.core.basic import Basic

#: the order sympy's ``Add`` sorts its terms in (``sympy.core.add._args_sortkey``: ``Basic.compare``)
ORDER = cmp_to_key(Basic.compare)


def term(monomial, coefficient):
    """``coefficient · monomial`` as a term of a sympy sum (a coefficient 1 leaves the monomial as it is)."""
    return monomial if coefficient == 1 else coefficient * monomial


class OrderedSum:
    """The terms of a sympy sum of distinct monomials, in the order ``sympy.Add`` keeps them (module docstring).

    ``of``: monomial → its term; ``terms``: the terms that are not a number, sorted by :data:`ORDER`; ``number``:
    the constant term (``Add`` puts it first), or None.  :attr:`placed` counts the terms taken out or put in (the
    work of :meth:`set`, what a column costs)."""

    __slots__ = ("of", "terms", "number", "placed")

    def __init__(self):
        self.of, self.terms, self.number, self.placed = {}, [], None, 0

    def set(self, monomial, coefficient) -> None:
        """The term of ``monomial`` now has ``coefficient`` (0: the term is gone)."""
        old = self.of.pop(monomial, None)
        if old is not None:
            self.placed += 1
            if old.is_Number:
                self.number = None
            else:
                i = bisect_left(self.terms, ORDER(old), key=ORDER)
                assert self.terms[i] == old, (old, self.terms[i])
                del self.terms[i]
        if not coefficient:
            return
        new = self.of[monomial] = term(monomial, coefficient)
        self.placed += 1
        if new.is_Number:
            self.number = new
        else:
            self.terms.insert(bisect_left(self.terms, ORDER(new), key=ORDER), new)

    def copy(self) -> "OrderedSum":
        """Another ordered sum of the same terms (their lists copied, in C), to change apart."""
        out = OrderedSum()
        out.of, out.terms, out.number = dict(self.of), list(self.terms), self.number
        return out

    def total(self):
        """The sum of the terms (``sympy.Add`` of them, unsorted: they are in its order), or None where none is
        left."""
        args = self.terms if self.number is None else [self.number] + self.terms
        if not args:
            return None
        return args[0] if len(args) == 1 else sympy.Add._from_args(args, True)
