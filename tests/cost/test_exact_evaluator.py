"""The integer search's exact evaluator of a posynomial, and ``optima``'s answers per memory (issue 35 item 3).

``exact_at(poly)`` is what the search calls at every tiling it settles: checked here against sympy's exact
rational arithmetic on random posynomials (negative exponents, coefficients over several denominators, so that the
running denominator is not always a multiple of a term's).  ``optima`` makes an answer found at several memories
into sympy numbers once: each memory's optimum is checked against ``optimal`` at that memory alone (the
single-memory search, :func:`~napkin_cat.cost.integer_search.best`) and owns its dicts.
"""
from __future__ import annotations

import random
from fractions import Fraction

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import MemoryLimitError
from napkin_cat.cost.integer_search import exact_at
from napkin_cat.cost.optimum import optima, optimal


def _random_poly(rng, n):
    terms = rng.randint(1, 5)
    coeffs = tuple(Fraction(rng.randint(1, 40), rng.choice([1, 2, 3, 5, 6, 7, 12])) for _ in range(terms))
    exps = tuple(tuple(rng.randint(-3, 3) for _ in range(n)) for _ in range(terms))
    return coeffs, exps


def _by_sympy(poly, combo):
    total = sympy.Integer(0)
    for alpha, e in zip(*poly):
        term = sympy.Rational(alpha.numerator, alpha.denominator)
        for g, k in zip(combo, e):
            term *= sympy.Integer(g) ** k
        total += term
    return Fraction(int(total.p), int(total.q))


@pytest.mark.parametrize("seed", range(6))
def test_exact_evaluator_equals_rational_arithmetic(seed):
    rng = random.Random(seed)
    for _ in range(40):
        n = rng.randint(1, 4)
        poly = _random_poly(rng, n)
        at = exact_at(poly)
        for _ in range(5):
            combo = tuple(rng.choice([1, 2, 3, 4, 6, 7, 9, 16, 25, 1024]) for _ in range(n))
            assert at(combo) == _by_sympy(poly, combo), (poly, combo)


def _tiled_matmul():
    mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    return nc.cost(mm)


def test_optima_per_memory_equal_the_single_memory_search_and_own_their_dicts():
    """Memories below the least, in the middle and past the largest peak (every tiling fits: one answer met at
    several memories), in no order: each answer is ``optimal`` at that memory alone, and each optimum's dicts are
    its own (a caller that edits one leaves the others as found)."""
    c = _tiled_matmul()
    sizes = {"a": 48, "b": 40, "c": 36}
    memories = [2 ** 20, 2, 700, 2 ** 24, 96, 2 ** 20, 5000]
    found = optima(c, memories, sizes=sizes)
    assert found[1] is None
    for m, o in zip(memories, found):
        if o is None:
            with pytest.raises(MemoryLimitError):
                optimal(c, memory=m, sizes=sizes)
            continue
        alone = optimal(c, memory=m, sizes=sizes)
        assert o.H == alone.H and o.memory == m
        assert {str(k): v for k, v in o.exact_sizes.items()} == \
            {str(k): v for k, v in alone.sizes.items() if str(k) in {"g_a", "g_c"}}
    saturated = [o for m, o in zip(memories, found) if m >= 2 ** 20]
    assert len(saturated) == 3 and len({o.H for o in saturated}) == 1
    first, *others = saturated
    first.sizes[nc.symbol("g_a")] = -1
    first.exact_sizes.clear()
    first.notes.append("edited")
    assert all(o.sizes[nc.symbol("g_a")] > 0 and o.exact_sizes and "edited" not in o.notes for o in others)
