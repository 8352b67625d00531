"""An optimum's record: ``H``, the tiles, ``H`` as power terms ``Σ α_t M^-β_t`` and the exact optimum beside it
(:func:`napkin_cat.cost.optimum.optimal` returns one; the integer search at concrete sizes too,
:mod:`napkin_cat.cost.sized_optimum`).

>>> import napkin_cat as nc
>>> M, a = nc.symbol("M"), nc.symbol("a")
>>> Optimum(a + a / M, {}, power_terms(a + a / M, M), M).terms
[(a, 0), (a, 1)]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import sympy

from napkin_cat.cost.exact import ExactOptimum
from napkin_cat.errors import NapkinError
from napkin_cat.syntax.axis import symbol
from napkin_cat.cost.content_factor import factored
from napkin_cat.cost.expanded import expand


class _PowerTerms:
    """The field ``terms``: a list of ``(α_t, β_t)``, or a :class:`NapkinError` on reading it when ``H`` has none.

    A descriptor keeps ``terms`` a dataclass field (``dataclasses.replace(o, terms=...)`` works) while a
    consumer of power terms (hierarchies, quantization) gets a typed error instead of iterating ``None``.
    """

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return None                    # the field's default
        value = obj.__dict__.get(self.slot)
        if value is None:
            raise NapkinError(f"the large-M optimum H* = {obj.H} is not a sum of powers of {obj.memory}: "
                              f"it has no power terms (the exact optimum is o.exact)")
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = None if isinstance(value, _PowerTerms) else value   # the default: none


class Deferred:
    """A field's value worked out when first read (``make()``, called once): :attr:`Optimum.constraint` of a large-M
    form, which nothing on the search's path reads.

    >>> o = Optimum(None, {}, constraint=Deferred(lambda: 7))
    >>> o.__dict__["_constraint"].__class__.__name__, o.constraint, o.__dict__["_constraint"]
    ('Deferred', 7, 7)
    """

    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


class _Deferrable:
    """A dataclass field whose value may be given as a :class:`Deferred`: made on the first read, then kept."""

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return None                    # the field's default
        value = obj.__dict__.get(self.slot)
        if isinstance(value, Deferred):
            value = obj.__dict__[self.slot] = value.make()
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = None if isinstance(value, _Deferrable) else value


@dataclass
class Optimum:
    """``H`` (large-M form), ``sizes``, ``terms`` [(α_t, β_t)], and the exact optimum (``exact``).

    ``sizes``: the tiles as expressions (symbols → expressions in the memory and the axes), or at concrete sizes
    a :class:`~napkin_cat.syntax.sizes.Sizes` of the axes, tiles and streams (what ``nc.plan`` takes)."""

    H: sympy.Expr | None
    sizes: dict
    terms: list | None = field(default=_PowerTerms(), repr=False, compare=False)
    memory: sympy.Expr | None = None
    exact_H: sympy.Expr | None = None
    exact_sizes: dict | None = None
    constraint: sympy.Expr | None = field(default=_Deferrable())
    exact_constraint: sympy.Expr | None = None
    notes: list = field(default_factory=list)
    exact: ExactOptimum | None = None

    @property
    def has_power_terms(self) -> bool:
        return self.__dict__.get("_terms") is not None

    def __str__(self):
        lines = [f"H* (paper's large-M form) = {self.H}   with {self.sizes}"]
        if self.has_power_terms:
            terms = " + ".join(f"({a})·M^-{b}" for a, b in self.terms)
            lines.append(f"   as power terms Σ α_t M^-β_t: {terms}")
        if self.exact_H is not None and self.exact_constraint is not None:
            lines.append(f"H* (exact, memory {self.exact_constraint} ≤ {self.memory}) = {self.exact_H}"
                         f"   with {self.exact_sizes}")
        lines += [f"   note: {n}" for n in self.notes]
        return "\n".join(lines)

    def at(self, **values):
        """``H`` with sizes and memory substituted (numbers)."""
        subs = {symbol(k): v for k, v in values.items()}
        return self.H.subs(subs)


def power_terms(expr, M) -> list:
    """``[(α_t, β_t)]`` with ``expr = Σ α_t M^-β_t`` (β_t ≥ 0, zero-exponent terms included), each ``α_t`` factored
    (``sympy.factor``'s tree; a content times an evidently irreducible sum read off its terms,
    :func:`~napkin_cat.cost.content_factor.factored`).

    A pure function of ``(expr, M)`` (sympy expressions compare by structure), so the process keeps its answers
    (:func:`_terms_of`, bounded): the same large-M form is read again by each candidate that shares a kernel and
    by the crossings of the envelope.  Where ``expr`` is not such a sum the :class:`NapkinError` names it; its
    message is printed only when read (printing a large form cost more than reading it off, issue 35).

    >>> import napkin_cat as nc
    >>> M, a, c = nc.symbol("M"), nc.symbol("a"), nc.symbol("c")
    >>> power_terms(a * c + 2 * a * c / M + c / M, M)
    [(a*c, 0), (c*(2*a + 1), 1)]
    >>> try:
    ...     power_terms(sympy.sqrt(M + a), M)
    ... except NapkinError as e:
    ...     print(e)
    sqrt(M + a) is not a sum of powers of M
    """
    expr = sympy.sympify(expr)
    terms = _terms_of(expr, M)
    if terms is None:
        raise NapkinError(Printed(lambda: f"{expr} is not a sum of powers of {M}"))
    return list(terms)


class Printed:
    """A message made when first printed (``make()``, called once): an error whose text prints a large expression
    is raised and caught on the search's path far more often than it is read.

    >>> import pickle
    >>> m = Printed(lambda: "made")
    >>> str(m), repr(m), str(NapkinError(m)), pickle.loads(pickle.dumps(NapkinError(m))).args
    ('made', "'made'", 'made', ('made',))
    """

    __slots__ = ("make", "text")

    def __init__(self, make):
        self.make, self.text = make, None

    def __str__(self):
        if self.text is None:
            self.text, self.make = self.make(), None
        return self.text

    def __repr__(self):
        return repr(str(self))

    def __reduce__(self):          # pickled (an error sent between processes) as its text
        return str, (str(self),)


@lru_cache(maxsize=4096)
def _terms_of(expr, M):
    """:func:`power_terms` of ``expr`` as a tuple, or None where ``expr`` is not a sum of powers of ``M``."""
    out = {}
    for term in sympy.Add.make_args(expand(expr)):
        coeff, exp = term.as_coeff_exponent(M)
        if coeff.has(M):
            return None
        beta = -exp if exp.is_Rational else sympy.nsimplify(-exp)
        out[beta] = out.get(beta, 0) + coeff
    return tuple(sorted(((a if is_monomial(a) else factored(a), b) for b, a in out.items()), key=lambda t: t[1]))


def is_monomial(expr) -> bool:
    """Whether ``expr`` is a rational number times powers of symbols with rational exponents: ``sympy.factor``
    returns such an expression as it is, so it is not factored (``tests/cost/test_power_terms.py``).

    >>> import napkin_cat as nc
    >>> d, e = nc.symbol("d"), nc.symbol("e")
    >>> is_monomial(-3 * sympy.sqrt(d) * e / 2), is_monomial(d * (e + 1)), is_monomial(sympy.sqrt(2) * d)
    (True, False, False)
    """
    def atom(x):
        return x.is_Rational or x.is_Symbol or (x.is_Pow and x.base.is_Symbol and x.exp.is_Rational)
    return atom(expr) or (expr.is_Mul and all(atom(x) for x in expr.args))
