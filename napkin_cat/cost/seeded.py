"""sympy's factorisation made deterministic: the same expression factored the same way, in the same time, in every
process.

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
