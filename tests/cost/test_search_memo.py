"""The integer search remembered by value (issue 35 item 3): its key holds everything its answer depends on.

``best_many`` without a counting objective is a pure function of the posynomials, the tiles' legal values, the
memories, a ragged search's axis sizes and the caps, and is kept by all of them: here one problem is searched, then
each of those inputs is changed alone, and every answer is checked against an enumeration in Fractions (a second
route, computed from scratch), so an answer read back under a key that misses a field fails.
"""
from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from napkin_cat.cost.integer_search import best_many, divisors, ragged_values
from napkin_cat.errors import AxisError


def _value(poly, g, fulls=None):
    total = Fraction(0)
    for alpha, e in zip(*poly):
        term = Fraction(alpha)
        for i, (t, k) in enumerate(zip(g, e)):
            if fulls is not None and k == -1:
                term *= Fraction(-(-fulls[i] // t), fulls[i])     # a trip factor n/g counts ⌈n/g⌉ trips
            else:
                term *= Fraction(t) ** k
        total += term
    return total


def _least(H, cols, values, M, fulls=None, caps=()):
    """The least transfers of a tiling within memory (and the caps), by enumeration."""
    found = None
    for g in itertools.product(*values):
        trips = g if fulls is None else tuple(Fraction(n, -(-n // t)) for t, n in zip(g, fulls))
        if any(_value(c, trips) > 1 for c in caps):
            continue
        if max((_value(c, g) for c in cols), default=Fraction(0)) <= M:
            h = _value(H, g, fulls)
            found = h if found is None or h < found else found
    return found


def _problem(seed):
    rng = random.Random(seed)
    H = ((Fraction(rng.randint(1, 9)), Fraction(rng.randint(1, 9), 2), Fraction(rng.randint(1, 5))),
         ((-1, 0), (0, -1), (-1, -1)))
    cols = [((Fraction(1), Fraction(rng.randint(1, 3)), Fraction(1)), ((1, 1), (1, 0), (0, 1)))]
    values = [divisors(24), divisors(36)]
    return H, cols, values, [Fraction(m) for m in (40, 150, 600, 2000)]


def _H(found):
    return [None if f is None else f[0] for f in found]


@pytest.mark.parametrize("seed", range(3))
def test_each_input_of_the_search_is_part_of_its_key(seed):
    H, cols, values, Ms = _problem(seed)
    first = best_many(H, cols, values, Ms)
    assert _H(first) == [_least(H, cols, values, M) for M in Ms]
    H2 = ((H[0][0] + 5,) + H[0][1:], H[1])
    cols2 = [(cols[0][0], ((1, 1), (2, 0), (0, 1)))]
    values2 = [divisors(12), divisors(36)]
    Ms2 = [Fraction(m) for m in (45, 160, 610, 1990)]
    fulls = (24, 36)
    caps = [((Fraction(1, 4),), ((1, 0),))]          # g_0 ≤ 4
    variants = [(H2, cols, values, Ms, None, ()), (H, cols2, values, Ms, None, ()),
                (H, cols, values2, Ms, None, ()), (H, cols, values, Ms2, None, ()),
                (H, cols, values, Ms[::-1], None, ()), (H, cols, values, Ms, None, caps)]
    for h, c, v, m, f, cap in variants:
        assert _H(best_many(h, c, v, m, fulls=f, caps=cap)) == [_least(h, c, v, M, caps=cap) for M in m]
    # a ragged search (tiles need not divide; ⌈n/g⌉ trips) over the same numbers is its own problem
    rag = [ragged_values(24), ragged_values(36)]
    assert _H(best_many(H, cols, rag, Ms, fulls=fulls)) == [_least(H, cols, rag, M, fulls) for M in Ms]
    assert _H(best_many(H, cols, rag, Ms)) == [_least(H, cols, rag, M) for M in Ms]
    assert best_many(H, cols, values, Ms) == first


def test_an_answer_read_back_is_the_callers_own():
    H, cols, values, Ms = _problem(7)
    first = best_many(H, cols, values, Ms)
    kept = list(first)
    first.clear()
    again = best_many(H, cols, values, Ms)
    assert again == kept and again is not first


def test_a_grid_too_large_is_refused_naming_each_calls_tiles():
    H = ((Fraction(1),), ((-1, -1, -1),))
    cols = [((Fraction(1),), ((1, 1, 1),))]
    for names in (["g_a", "g_b", "g_c"], ["t_x", "t_y", "t_z"]):
        with pytest.raises(AxisError, match=f"{names[0]}: 4096 values"):
            best_many(H, cols, [range(1, 4097)] * 3, [Fraction(10)], names=names)
