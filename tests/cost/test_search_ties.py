"""The integer search's answer where the transfers tie: the least transfers, then the least memory, then the
smallest later tiles (``integer_search.best_many``), whatever tiles the transfers do not see.

A symbolic derive's reference search settles many such ties exactly (a tile that no term of ``H`` reads ties every
value of it; 41 memories per kernel): the exact transfers are found once per value of the tiles ``H`` sees
(:func:`~napkin_cat.cost.integer_search.best_many`), and a candidate's memory away from the limit orders as its
float.  Second route: every tiling enumerated in Fractions, ordered by (transfers, memory, later tiles first), its
memory exact; the search's tiles and transfers must be that tiling's, on random posynomials with a tile ``H`` does
not read and one it reads.
"""
from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from napkin_cat.cost.integer_search import best_many, divisors


def _value(poly, g):
    total = Fraction(0)
    for alpha, e in zip(*poly):
        term = Fraction(alpha)
        for t, k in zip(g, e):
            term *= Fraction(t) ** k
        total += term
    return total


def _table(H, cols, values):
    """Per tiling ``(transfers, memory, tiles)``, exact."""
    return [(_value(H, g), max(_value(c, g) for c in cols), g) for g in itertools.product(*values)]


def _first(table, M):
    """The tiling a search must return, by enumeration: least transfers, then least memory, then the later tiles."""
    fits = [(h, peak, g[::-1]) for h, peak, g in table if peak <= M]
    return None if not fits else (min(fits)[0], min(fits)[2][::-1])


def _problem(seed):
    """``H`` reads g₀ and g₂ alike (an even ``seed``: g₀ only) but never g₁; the columns read every tile, g₀ more
    than g₂ (so where two tilings tie, the one with the larger g₂ holds less, and the memory decides the tie before
    the later tiles would)."""
    rng = random.Random(seed)
    a = Fraction(rng.randint(1, 9))
    last = -1 if seed % 2 else 0
    H = ((a, a if seed % 2 else Fraction(rng.randint(1, 9), 2), Fraction(rng.randint(1, 5))),
         ((-1, 0, 0), (0, 0, last), (0, 0, 0)))
    cols = [((Fraction(1), Fraction(rng.randint(2, 4)), Fraction(1)), ((1, 1, 0), (1, 0, 0), (0, 1, 1))),
            ((Fraction(rng.randint(1, 4)),), ((1, 1, 1),))]
    values = [divisors(24), divisors(18), divisors(12)]
    return H, cols, values, [Fraction(2 ** k) for k in range(0, 16)]


@pytest.mark.parametrize("seed", range(6))
def test_ties_of_unseen_tiles_go_to_the_least_memory_then_the_later_tiles(seed):
    H, cols, values, Ms = _problem(seed)
    found, table = best_many(H, cols, values, Ms), _table(H, cols, values)
    assert found == [_first(table, M) for M in Ms]
    assert sum(f is not None for f in found) >= 8, "too few memories fit: the test would check little"
    tied = [sum(h == f[0] and peak <= M for h, peak, _ in table) for f, M in zip(found, Ms) if f is not None]
    assert max(tied) > 1, "no tie at any memory: the order after the transfers would go unchecked"
