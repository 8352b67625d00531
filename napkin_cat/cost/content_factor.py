"""``sympy.factor`` of a sum of monomials read off its terms where the part left after its content is irreducible
for a reason seen at once: the power terms' coefficients of a KKT point (:func:`~.optimum_record.power_terms`),
``3·d·e·h + 3·d·h·n = 3·d·h·(e + n)``, which ``sympy.factor`` takes ~1 ms each to find by Wang's algorithm.

**Law.** Let ``α = Σ c_t·m_t`` be a sum of at least two terms, ``c_t`` positive integers and ``m_t`` products of
symbols to positive integer powers; ``g`` the gcd of the ``c_t``, ``μ`` the product of each symbol to its least power
over the terms (the content ``g·μ``), and ``P = α / (g·μ)``, primitive.  If ``P`` has degree 1 in a symbol ``x``,
``P = A·x + B``, with ``A`` or ``B`` a single term, ``P`` is irreducible: a factor free of ``x`` divides ``A`` and
``B``, so it divides a monomial, is a monomial, divides every term of ``P`` and is a unit (``P`` is primitive); a
factor of degree 1 in ``x`` leaves a cofactor free of ``x``, a unit by the same step.  ``sympy.factor`` then returns
the content's factors and ``P`` with its positive leading coefficient, built as sympy builds them (``_keep_coeff``:
the integer in front of the product, an unevaluated ``g·P`` where ``μ = 1``)::

    factored(α) == sympy.factor(α)            (the same tree: srepr equal, tests/cost/test_content_factor.py)

Anything else (a negative or fractional coefficient or power, a radical, a ``P`` without such a symbol) goes to
sympy's factor whole (:func:`~.seeded.factor`).

>>> import sympy
>>> d, e, h, n = sympy.symbols("d e h n", positive=True)
>>> factored(3 * d * e * h + 3 * d * h * n), factored(2 * e + 2 * n), factored(e * n + e + n + 1)
(3*d*h*(e + n), 2*(e + n), (e + 1)*(n + 1))
"""
from __future__ import annotations

import math

import sympy

from napkin_cat.cost.seeded import factor

__all__ = ["factored", "read_off"]


def factored(expr):
    """``sympy.factor(expr)`` (module docstring): :func:`read_off` where it answers, else the seeded factor."""
    found = read_off(expr)
    return factor(expr) if found is None else found


def read_off(expr):
    """``sympy.factor(expr)`` read off the terms of ``expr`` where the module's law applies, else None.

    >>> import sympy
    >>> a, b = sympy.symbols("a b", positive=True)
    >>> read_off(2 * a ** 2 * b + 4 * a * b ** 3), read_off(a ** 2 + 2 * a * b + b ** 2), read_off(a - b)
    (2*a*b*(a + 2*b**2), None, None)
    """
    if not expr.is_Add:
        return None
    terms = []
    for t in expr.args:
        c, m = t.as_coeff_Mul()
        if not (c.is_Integer and c > 0):
            return None
        powers = {}
        for f in sympy.Mul.make_args(m):
            if f.is_Symbol:
                powers[f] = 1
            elif f.is_Pow and f.base.is_Symbol and f.exp.is_Integer and f.exp > 0:
                powers[f.base] = int(f.exp)
            else:
                return None
        terms.append((int(c), powers))
    g = math.gcd(*(c for c, _ in terms))
    least = {x: min(p.get(x, 0) for _, p in terms) for x in terms[0][1]}
    least = {x: k for x, k in least.items() if k}
    rest = [(c // g, {x: k - least.get(x, 0) for x, k in p.items() if k != least.get(x, 0)}) for c, p in terms]
    if not _linear_with_a_single_side(rest):
        return None
    P = sympy.Add(*[c * sympy.Mul(*[x ** k for x, k in p.items()]) for c, p in rest])
    content = sympy.Mul(*[x ** k for x, k in least.items()])
    if g == 1:
        return sympy.Mul(content, P)
    if content is sympy.S.One:
        return sympy.Mul(sympy.Integer(g), P, evaluate=False)
    return sympy.Mul(sympy.Integer(g), content, P)


def _linear_with_a_single_side(terms) -> bool:
    """Whether some symbol has degree 1 in the terms (``P = A·x + B``) with ``A`` or ``B`` a single term."""
    symbols = {x for _, p in terms for x in p}
    for x in symbols:
        degrees = [p.get(x, 0) for _, p in terms]
        if max(degrees) == 1:
            with_x = sum(degrees)
            if with_x == 1 or with_x == len(terms) - 1:
                return True
    return False
