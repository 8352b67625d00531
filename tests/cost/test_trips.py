"""The running trips of a masked stream (:mod:`napkin_cat.cost.trips`): the count at numbers is the symbolic count
substituted, and both are the count of the active positions taken tile by tile (a second route, in the test).

Masks are random conjunctions of bounds on the key position ``X`` that are affine in the query tile's start
``g·i`` (causal, a window, an offset band, a reversed band, a constant).  Where the band lies inside the axis on
every tile (the estimate's assumption: it leaves out the clamps it cannot decide), the trips per tile are exactly

    (1 / (s · q/g)) · Σ_i #{X ∈ [0, x) : mask(X, i)}

which the test counts position by position in fractions, from its own Python copy of each bound.
"""
from __future__ import annotations

import random
from fractions import Fraction

import sympy

from napkin_cat.cost.trips import POINT, averaged, mean_over, per_tile
from napkin_cat.syntax.axis import symbol

X = POINT
I = sympy.Symbol("i_q", integer=True, nonnegative=True)
G, S, Q, XS, W = (symbol(n) for n in ("g_q", "s_x", "q", "x", "w"))


def _bound(rng):
    """A bound affine in the tile's start, as a sympy expression and as a Python function of (i, g, x, w)."""
    a, k = rng.randint(0, 2), rng.randint(0, 6)
    return rng.choice([
        (G * I, lambda i, g, x, w: g * i),
        (G * I + G - 1, lambda i, g, x, w: g * i + g - 1),
        (G * I - W, lambda i, g, x, w: g * i - w),
        (G * I + G - 1 + W, lambda i, g, x, w: g * i + g - 1 + w),
        (a * G * I + k, lambda i, g, x, w: a * g * i + k),
        (XS - 1 - G * I, lambda i, g, x, w: x - 1 - g * i),
        (sympy.Integer(k), lambda i, g, x, w: k),
    ])


def _mask(rng):
    """``(condition on X, [(lower?, bound function)])``: a conjunction of one or two bounds."""
    parts, fns = [], []
    for _ in range(rng.randint(1, 2)):
        (b, f), lower, strict = _bound(rng), rng.random() < 0.5, rng.random() < 0.3
        if lower:
            parts.append(sympy.Gt(X, b) if strict else sympy.Ge(X, b))
            fns.append((True, (lambda f: lambda *a: f(*a) + 1)(f) if strict else f))
        else:
            parts.append(sympy.Lt(X, b) if strict else sympy.Le(X, b))
            fns.append((False, (lambda f: lambda *a: f(*a) - 1)(f) if strict else f))
    return sympy.And(*parts), fns


def _counted(fns, g, s, q, x, w):
    """The trips per tile counted position by position, or None where the band leaves the axis on some tile."""
    total = 0
    for i in range(q // g):
        lo = max([f(i, g, x, w) for low, f in fns if low], default=0)
        hi = min([f(i, g, x, w) for low, f in fns if not low], default=x - 1)
        if lo < 0 or hi > x - 1 or lo > hi:
            return None                       # the band leaves the axis (or is empty): the estimate's clamps
        total += sum(1 for p in range(x) if lo <= p <= hi)
    return Fraction(total, s * (q // g))


def test_the_trips_at_numbers_are_the_symbolic_count_substituted_and_the_positions_counted():
    rng, checked = random.Random(20261129), 0
    for _ in range(60):
        cond, fns = _mask(rng)
        g, s, q, w = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4]), rng.choice([16, 32]), rng.randint(0, 4)
        x = rng.choice([q, 2 * q])
        numbers = {G: g, S: s, Q: q, XS: x, W: w}
        symbolic = per_tile(cond, X, S, (0, XS))
        if symbolic is None:                  # bounds sympy cannot order: every trip runs (no count to compare)
            continue
        symbolic = averaged(symbolic, [(I, Q / G)]).subs(numbers)
        at_numbers = per_tile(cond.subs(numbers), X, s, (0, x))
        at_numbers = averaged(at_numbers, [(I, sympy.Integer(q) / g)])
        counted = _counted(fns, g, s, q, x, w)
        if counted is None:
            continue
        assert at_numbers.is_Rational and at_numbers == symbolic, (cond, numbers)
        assert Fraction(int(at_numbers.p), int(at_numbers.q)) == counted, (cond, numbers, at_numbers, counted)
        checked += 1
    assert checked >= 20, checked             # the draws reach bands inside the axis often enough to mean something


def test_the_mean_over_a_tile_index_is_the_mean_of_its_values():
    """The closed form (Faulhaber's sums) against the values summed one by one, for polynomials of degree 0-3."""
    rng = random.Random(7)
    for _ in range(20):
        coeffs = [rng.randint(-5, 5) for _ in range(rng.randint(1, 4))]
        n = rng.randint(1, 12)
        poly = sum(c * I ** k for k, c in enumerate(coeffs))
        assert mean_over(poly, I, n) == sympy.Rational(sum(poly.subs(I, v) for v in range(n)), n), (poly, n)
    n = sympy.Symbol("n", positive=True, integer=True)
    assert sympy.expand(mean_over(G * (I + 1) / S, I, n) - G * (n + 1) / (2 * S)) == 0    # causal: (1+…+n)/n
