"""sympy's factorisation made deterministic: the same expression factored the same way, in the same time, in every
process, whether factored by ``factor`` itself or inside ``solve`` and ``roots``.

sympy factors a polynomial in several symbols by Wang's algorithm, which maps all but one symbol to random integers
(``sympy.core.random.rng``, seeded from the operating system at import) and lifts the univariate factors back.  The
factors are unique, so the answer does not depend on the points, but the time does: on a transformer block's
symbolic derive, unlucky points made one ``factor`` call of :func:`napkin_cat.cost.lagrange.tidy` take minutes
(sympy's generator seeded 2 or 7: over 60 s and 52 s against 8-9 s for seeds 0, 1, 3, 6, 8, 9), so one run in a
few was 6-30× slower than the next.  :func:`factor` draws the points from a fixed seed and puts sympy's generator
back as it found it::

    factor(e) == sympy.factor(e)        (the same expression: factorisation is unique)

>>> import sympy
>>> from sympy.core.random import rng
>>> a, b = sympy.symbols("a b")
>>> before = rng.getstate()
>>> factor(a**2 * b - b**3)
b*(a - b)*(a + b)
>>> rng.getstate() == before
True

sympy's ``solve`` and ``roots`` factor too (a polynomial whose coefficients are in the sizes, by the same algorithm):
:func:`solve` and :func:`roots` are theirs with the points drawn from :data:`SEED` and the generator given back::

    solve(e, x) == sympy.solve(e, x)        roots(p) == sympy.roots(p)        (the roots do not depend on the points)

Within these calls a polynomial that is irreducible by a linear certificate is not given to Wang's algorithm at all
(:func:`linear_irreducible`): the KKT equations of a tiling program are mostly such polynomials, a few terms in six
or seven symbols, which Wang's algorithm takes 5-10 ms each to find irreducible (its square-free part, the factors
of its leading coefficient, test points).  The answer is the one sympy's ``dmp_zz_factor`` gives such a polynomial,
its content and itself with a positive leading coefficient, so the factors are the same (``tests/cost/
test_lagrange_factor.py`` checks every step against sympy's own)::

    factor(e) == sympy.factor(e)            factor_list(e) == sympy.factor_list(e)
"""
from __future__ import annotations

import contextlib
import math

import sympy
from sympy.core.random import rng
from sympy.polys import factortools
from sympy.polys.densebasic import dmp_degree, dmp_ground_LC, dmp_to_dict, dmp_zero_p
from sympy.polys.densearith import dmp_neg
from sympy.polys.densetools import dmp_ground_primitive

#: the seed of the points Wang's algorithm draws (any fixed number: the factors do not depend on it)
SEED = 0


def linear_irreducible(terms) -> bool:
    """Whether the polynomial ``Σ c·x^e`` (``terms``: ``{e: c}``, ``e`` a tuple of exponents) is certainly
    irreducible over the integers by this law: its coefficients have no common factor and its terms no common
    variable, and it is ``a·x + b`` in one variable ``x`` (degree 1) with ``a`` or ``b`` a single term.

    Proof: a factorisation ``p·q`` has one factor, say ``p``, free of ``x``, so ``p`` divides ``a`` and ``b``;
    ``p`` dividing a single term ``c·m`` is itself ``c'·m'``, and dividing the other part too it divides every term:
    ``c' = ±1`` and ``m' = 1``, so ``p`` is a unit.  ``False`` says nothing (the certificate does not apply).

    >>> linear_irreducible({(1, 1, 0): 1, (0, 0, 2): -3, (0, 1, 1): 2})      # x*y - 3*z**2 + 2*y*z (x: degree 1)
    True
    >>> linear_irreducible({(1, 1): 1, (0, 1): 1})                          # x*y + y = y*(x + 1): common y
    False
    >>> linear_irreducible({(2, 0): 1, (0, 2): -1})                         # x**2 - y**2: no variable of degree 1
    False
    """
    exps = list(terms)
    if len(exps) < 2 or math.gcd(*(int(c) for c in terms.values())) != 1:
        return False
    for i in range(len(exps[0])):
        low = min(e[i] for e in exps)
        if low:
            return False                   # a common variable: x_i divides every term
    for i in range(len(exps[0])):
        if max(e[i] for e in exps) == 1:
            ones = sum(1 for e in exps if e[i] == 1)
            if ones == 1 or ones == len(exps) - 1:
                return True
    return False


def _zz_factor(original):
    """sympy's ``dmp_zz_factor`` (the factors over the integers of a dense polynomial in ``u + 1`` variables),
    answered without Wang's algorithm where :func:`linear_irreducible` certifies the primitive part irreducible:
    then sympy's answer is ``(content, [(primitive part, 1)])``, the part's leading coefficient made positive with
    the sign moved into the content, which is what this returns."""
    def dmp_zz_factor(f, u, K):
        if u and not dmp_zero_p(f, u):
            cont, g = dmp_ground_primitive(f, u, K)
            if dmp_ground_LC(g, u, K) < 0:
                cont, g = -cont, dmp_neg(g, u, K)
            if dmp_degree(g, u) > 0 and linear_irreducible(dmp_to_dict(g, u, K)):
                return cont, [(g, 1)]
        return original(f, u, K)
    return dmp_zz_factor


@contextlib.contextmanager
def seeded_points(seed: int = SEED):
    """sympy's random numbers drawn from ``seed`` within the block, the generator's state restored after it; and
    within it, a polynomial certainly irreducible (:func:`linear_irreducible`) not factored by Wang's algorithm."""
    state = rng.getstate()
    rng.seed(seed)
    original = factortools.dmp_zz_factor
    factortools.dmp_zz_factor = _zz_factor(original)
    try:
        yield
    finally:
        factortools.dmp_zz_factor = original
        rng.setstate(state)


def factor(expr, **hints):
    """``sympy.factor(expr)`` with the evaluation points drawn from :data:`SEED` (see the module)."""
    with seeded_points():
        return sympy.factor(expr, **hints)


def factor_list(expr, **hints):
    """``sympy.factor_list(expr)`` with the evaluation points drawn from :data:`SEED`."""
    with seeded_points():
        return sympy.factor_list(expr, **hints)


def solve(f, *symbols, **flags):
    """``sympy.solve(f, *symbols, **flags)`` with the evaluation points of the factorisations inside drawn from
    :data:`SEED` (see the module).

    >>> import sympy
    >>> from sympy.core.random import rng
    >>> M, a, b = sympy.symbols("M a b", positive=True)
    >>> before = rng.getstate()
    >>> sorted(solve(sympy.expand((M - a * b) * (M - a - b)), M), key=str)
    [a + b, a*b]
    >>> rng.getstate() == before
    True
    """
    with seeded_points():
        return sympy.solve(f, *symbols, **flags)


def roots(f, *gens, **flags):
    """``sympy.roots(f, *gens, **flags)`` with the evaluation points of the factorisations inside drawn from
    :data:`SEED` (see the module).

    >>> import sympy
    >>> u, a, b = sympy.symbols("u a b", positive=True)
    >>> roots(sympy.Poly(sympy.expand((u ** 2 - a * b) * (u - a - b)), u)) == {a + b: 1, sympy.sqrt(a * b): 1,
    ...                                                                        -sympy.sqrt(a * b): 1}
    True
    """
    with seeded_points():
        return sympy.roots(f, *gens, **flags)
