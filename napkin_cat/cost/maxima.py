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

from bisect import bisect_right
from fractions import Fraction

import sympy
from napkin_cat.cost.expanded import expand


class Max(sympy.Max):
    """sympy's ``Max`` whose substitutions are lazy until every argument is a number (module docstring)."""

    def __new__(cls, *args, evaluate=True, **assumptions):
        """Made as sympy's ``Max`` makes it (a number where every argument is one), kept of this class where a ``Max``
        is left; ``evaluate=False``: the arguments as they are.  sympy's own comparison of the arguments names
        ``Max`` and ``Min`` by identity, so made for a subclass it kept the first of two numbers (``Max(3, 4)`` was
        3, and ``xreplace``, ``evalf(subs=…)`` and unpickling, which rebuild through here, read a peak too small):

        >>> from napkin_cat.syntax.axis import symbol
        >>> d = symbol("d")
        >>> peak = column_max([3 * d + 5, 4 * d + 3], exact=False)
        >>> Max(3, 4, 2), peak.xreplace({d: 1088}), peak.evalf(subs={d: 1088}), peak.subs({d: 1088})
        (4, 4355, 4355.00000000000, 4355)
        """
        if not evaluate:
            return super().__new__(cls, *args, evaluate=False, **assumptions)
        made = sympy.Max(*args, **assumptions)
        return super().__new__(cls, *made.args, evaluate=False) if isinstance(made, sympy.Max) else made

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
    return numbers_for(pairs)


def numbers_for(pairs):
    """``{symbol: number}`` (sympy objects) of ``pairs`` (a dict or ``(key, value)`` pairs) when every key is a symbol
    and every value a number, else None.  Then ``expr.subs(pairs)`` is ``expr.xreplace(numbers_for(pairs))``, every
    symbol replaced at once: ``subs`` puts in one at a time and makes each partly numeric form again (a ``Max`` of
    columns, seconds; a quartic crossing's ``Piecewise`` of 9,000 characters, 0.7 s against 0.1).

    >>> n = sympy.Symbol("n")
    >>> numbers_for({n: 3}), numbers_for({n: sympy.Symbol("m")})
    ({n: 3}, None)
    """
    if isinstance(pairs, dict):
        pairs = pairs.items()
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


def _is_monomial(x) -> bool:
    """Whether ``x`` is a number times powers of symbols (a term ``expand`` leaves as it is)."""
    if x.is_Mul:
        return all(f.is_Number or f.is_Symbol or (f.is_Pow and f.base.is_Symbol and f.exp.is_Integer) for f in x.args)
    return x.is_Symbol or x.is_Number or (x.is_Pow and x.base.is_Symbol and x.exp.is_Integer)


def _exact(c):
    """A sympy rational coefficient as a Python number (compared in C, not through sympy's ``__ge__``)."""
    if c.is_Integer:
        return int(c)
    if c.is_Rational:
        return Fraction(int(c.p), int(c.q))
    return c


def _terms(expr):
    """``{monomial: coefficient}`` of ``expr`` expanded, when every monomial is positive (sizes are positive), else
    None.  A sum of monomials is its own expansion (a cost's columns are held expanded): read without ``expand``."""
    flat = all(map(_is_monomial, expr.args)) if expr.is_Add else _is_monomial(expr)
    out = (expr if flat else expand(expr)).as_coefficients_dict()
    if not all(k == 1 or k.is_positive for k in out):
        return None
    return {k: _exact(c) for k, c in out.items()}


def dominated(b, a) -> bool:
    """``b ≤ a`` for all positive sizes, shown monomial by monomial (every coefficient of ``a − b`` ≥ 0); never where
    either is None (a column with a monomial not known positive).

    >>> dominated({"x": 1}, {"x": 2, "y": 1}), dominated({"x": 1, "z": 1}, {"x": 2}), dominated({"x": 1}, None)
    (True, False, False)
    """
    if a is None or b is None:
        return False
    for m, c in b.items():
        if not a.get(m, 0) >= c:
            return False
    return all(c >= 0 for m, c in a.items() if m not in b)


def undominated(terms: list, counter=None) -> list:
    """The indices of the columns (``{monomial: coefficient}``, or None: never compared) that no other column bounds
    coefficient by coefficient, the first of equal ones, in order::

        i kept  ⇔  no j ≠ i with terms[i] ≤ terms[j] and (terms[j] ≰ terms[i] or j < i)

    Each column is compared with the current maxima only, and only with those that could bound it (hold its rarest
    positive monomial among the maxima) or that it could bound (whose positive monomial held by the fewest later
    columns it holds): a column meets a few, so the work is the columns' terms, not their pairs (``counter``, a
    list: its first entry counts the comparisons).

    >>> a, b, c = {"x": 1}, {"x": 2, "y": 1}, {"z": 1}
    >>> undominated([a, b, c, dict(b), None])
    [1, 2, 4]
    """
    holders: dict = {}     # monomial -> the columns with a positive coefficient of it, in order
    for i, t in enumerate(terms):
        for m, c in (t or {}).items():
            if c > 0:
                holders.setdefault(m, []).append(i)
    maxima: dict = {}      # index -> its terms, the columns no column seen yet bounds
    posting: dict = {}     # monomial -> the maxima with a positive coefficient of it
    bucket: dict = {}      # a maximum's rarest positive monomial (None: it has none) -> those maxima
    rarest: dict = {}      # index of a maximum -> its key in ``bucket``
    compared = 0
    for i, t in enumerate(terms):
        if t is None:
            continue
        pos = [m for m, c in t.items() if c > 0]
        if pos:     # a maximum that bounds t holds each of t's positive monomials: look among its rarest's holders
            above = posting.get(min(pos, key=lambda m: len(posting.get(m, ()))), ())
        else:
            above = list(maxima)
        bounded = False
        for j in above:
            compared += 1
            if dominated(t, maxima[j]):
                bounded = True
                break
        if bounded:
            continue
        below = set(bucket.get(None, ()))
        for m in pos:
            below.update(bucket.get(m, ()))
        compared += len(below)
        for j in below:
            if dominated(maxima[j], t):       # (strictly: no maximum bounds t)
                for m, c in maxima.pop(j).items():
                    if c > 0:
                        posting[m].discard(j)
                bucket[rarest.pop(j)].discard(j)
        maxima[i] = t
        for m in pos:
            posting.setdefault(m, set()).add(i)
        # (the columns after i look for the maxima they bound by their positive monomials: i is filed under the one
        # the fewest of them hold)
        key = rarest[i] = min(pos, key=lambda m: len(holders[m]) - bisect_right(holders[m], i)) if pos else None
        bucket.setdefault(key, set()).add(i)
    if counter is not None:
        counter[0] += compared
    return [i for i, t in enumerate(terms) if t is None or i in maxima]


def column_max(columns, *, exact: bool = True):
    """The largest of ``columns`` (sympy expressions): a number, one column, or a :class:`Max` over them.

    A few columns (at most :data:`SIMPLIFY_AT_MOST`) go through sympy's ``Max``, so the result is the ``Max``
    sympy makes.  Of more, the columns that another column bounds coefficient by coefficient are dropped first
    (:func:`undominated`: each against the few maxima that could bound it or that it could bound), and what is
    left goes through sympy's ``Max`` only if it is a few.  With ``exact=False`` sympy's ``Max`` is never asked
    (its comparisons of expressions take up to 10 ms each): the columns left after the pruning are the arguments."""
    flat = []
    for c in map(sympy.sympify, columns):
        flat += list(c.args) if isinstance(c, sympy.Max) else [c]     # a Max of Maxes is one Max
    cols = list(dict.fromkeys(flat))
    if not cols:
        return sympy.Integer(0)
    if all(c.is_number for c in cols) or (exact and len(cols) <= SIMPLIFY_AT_MOST):
        m = sympy.Max(*cols)     # a few columns: exactly the Max sympy makes
        return Max(*m.args, evaluate=False) if isinstance(m, sympy.Max) else m
    keep = [cols[i] for i in undominated([_terms(c) for c in cols])]
    if exact and len(keep) <= SIMPLIFY_AT_MOST:
        m = sympy.Max(*keep)
        if not isinstance(m, sympy.Max):
            return m
        keep = list(m.args)
    return keep[0] if len(keep) == 1 else Max(*keep, evaluate=False)
