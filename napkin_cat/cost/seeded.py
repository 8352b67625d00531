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
"""
from __future__ import annotations

import contextlib

import sympy
from sympy.core.random import rng

#: the seed of the points Wang's algorithm draws (any fixed number: the factors do not depend on it)
SEED = 0


@contextlib.contextmanager
def seeded_points(seed: int = SEED):
    """sympy's random numbers drawn from ``seed`` within the block, the generator's state restored after it."""
    state = rng.getstate()
    rng.seed(seed)
    try:
        yield
    finally:
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
