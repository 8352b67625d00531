"""The memory ``M`` of a cost: the largest of its columns, as a sympy ``Max`` that substitutes in linear time.

sympy's ``Max`` re-simplifies itself after every substitution: ``expr.subs({a: 64, b: 65, …})`` replaces one
symbol at a time, and each partly numeric ``Max`` compares its arguments pairwise under the symbols'
assumptions.  A chain of 20 matrix products has a 20-column ``M`` whose ``subs`` took 11-16 s (over 120 s
at 50).  :class:`Max` is sympy's ``Max`` (same arguments, same printing, equal to and hashed as the plain
``Max`` of the same arguments), except that a substitution leaves it unsimplified until every column is a
number, when it becomes the number::

    column_max(cols).subs(sizes) == sympy.Max(*cols).subs(sizes)        (any sizes, in one linear pass)

>>> import sympy
>>> from napkin_cat.syntax.axis import symbol
>>> a, b, c = symbol("a"), symbol("b"), symbol("c")
>>> m = column_max([a * b, b * c, a * c])
>>> m, m == sympy.Max(a * b, b * c, a * c)
(Max(a*b, a*c, b*c), True)
>>> m.subs({a: 2, b: 3, c: 5})
15
"""
from __future__ import annotations

import sympy


class Max(sympy.Max):
    """sympy's ``Max`` whose substitutions are lazy until every argument is a number (module docstring)."""

    def _eval_subs(self, old, new):
        return _lazy([a._subs(old, new) for a in self.args])

    def subs(self, *args, **kwargs):
        """Symbols to numbers (the usual sizes) are put in at once (``xreplace``); anything else as sympy does."""
        mapping = _numbers(args)
        if mapping is None or kwargs:
            return super().subs(*args, **kwargs)
        return _lazy([a.xreplace(mapping) for a in self.args])

    def __eq__(self, other):
        if isinstance(other, sympy.Max) and type(other) is not type(self):
            return set(self.args) == set(other.args)
        return super().__eq__(other)

    __hash__ = sympy.Max.__hash__   # the class is called Max: the same hash as sympy's Max of the same arguments


def _numbers(args):
    """``{symbol: number}`` when ``subs``'s arguments map symbols to numbers, else None."""
    if len(args) == 2:
        pairs = [args]
    elif len(args) == 1 and isinstance(args[0], dict):
        pairs = list(args[0].items())
    elif len(args) == 1 and isinstance(args[0], (list, tuple)):
        pairs = list(args[0])
    else:
        return None
    try:
        out = {sympy.sympify(k): sympy.sympify(v) for k, v in pairs}
    except (sympy.SympifyError, TypeError, ValueError):
        return None
    return out if all(k.is_Symbol and v.is_number for k, v in out.items()) else None


def _lazy(args):
    if all(a.is_number for a in args):
        return sympy.Max(*args)
    args = list(dict.fromkeys(args))
    return args[0] if len(args) == 1 else Max(*args, evaluate=False)


#: past this many columns left after the fast pruning, sympy's own simplification is skipped (it is quadratic
#: with a slow comparison, 6 s for 20 columns)
SIMPLIFY_AT_MOST = 8


def _terms(expr):
    """``{monomial: coefficient}`` of ``expr`` when every monomial is positive (sizes are positive), else None."""
    out = sympy.expand(expr).as_coefficients_dict()
    return out if all(k == 1 or k.is_positive for k in out) else None


def _dominated(b, a) -> bool:
    """``b ≤ a`` for all positive sizes, shown monomial by monomial (every coefficient of ``a − b`` ≥ 0)."""
    if a is None or b is None:
        return False
    return all(a.get(m, 0) - b.get(m, 0) >= 0 for m in set(a) | set(b))


def column_max(columns, *, exact: bool = True):
    """The largest of ``columns`` (sympy expressions): a number, one column, or a :class:`Max` over them.

    A few columns (at most :data:`SIMPLIFY_AT_MOST`) go through sympy's ``Max``, so the result is the ``Max``
    sympy makes.  Of more, the columns that another column bounds coefficient by coefficient are dropped first
    (a linear pass per column), and what is left goes through sympy's ``Max`` only if it is a few.  With
    ``exact=False`` sympy's ``Max`` is never asked (its comparisons of expressions take up to 10 ms each): the
    columns left after the pruning are the arguments."""
    flat = []
    for c in map(sympy.sympify, columns):
        flat += list(c.args) if isinstance(c, sympy.Max) else [c]     # a Max of Maxes is one Max
    cols = list(dict.fromkeys(flat))
    if not cols:
        return sympy.Integer(0)
    if all(c.is_number for c in cols) or (exact and len(cols) <= SIMPLIFY_AT_MOST):
        m = sympy.Max(*cols)     # a few columns: exactly the Max sympy makes
        return Max(*m.args, evaluate=False) if isinstance(m, sympy.Max) else m
    terms = [_terms(c) for c in cols]
    keep = []
    for i, (c, t) in enumerate(zip(cols, terms)):
        if any(j != i and _dominated(t, terms[j]) and (not _dominated(terms[j], t) or j < i)
               for j in range(len(cols))):
            continue
        keep.append(c)
    if exact and len(keep) <= SIMPLIFY_AT_MOST:
        m = sympy.Max(*keep)
        if not isinstance(m, sympy.Max):
            return m
        keep = list(m.args)
    return keep[0] if len(keep) == 1 else Max(*keep, evaluate=False)
