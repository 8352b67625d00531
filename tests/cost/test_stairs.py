"""The exact integer search reads each block of its grid through the block's staircase (cost/stairs, sel-35).

The law (:mod:`napkin_cat.cost.stairs`): ordered by peak, the tilings that fit a memory are a prefix, and a tiling is
settled first at some memory only where its transfers are within rounding of the least before it; so the search of a
block at any memory reads its staircase alone and answers as the search of the whole block (the tilings that fit,
those within rounding of the least settled exactly, dropped where refused, until one fits).

Second routes: the whole-block search at each memory (``_in_block``: what every memory read before sel-35), and the
least over every tiling that fits, by brute force.  The work saved is counted: the tilings a staircase holds, and the
rows settled when a grid is asked again at other memories.
"""
from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from napkin_cat.cost import grid_scores, integer_search, stairs
from napkin_cat.cost.integer_search import best_many, divisors, ragged_values
from napkin_cat.cost.stairs import Stair

from stair_routes import brute, fresh, memories_of, whole_blocks

F = Fraction


#: H = 1/g0 + 1/g1 + 1/(g0 g1): ties between g0 and g1 swapped; a third tile H does not see (every value ties)
H3 = ((F(1), F(1), F(1)), ((-1, 0, 0), (0, -1, 0), (-1, -1, 0)))
C3 = [((F(1), F(1), F(1)), ((1, 1, 0), (1, 0, 0), (0, 1, 1)))]
#: a product of tiles H sees only as a product (g0 g1): every factorisation of a product ties
HP = ((F(7),), ((-1, -1),))
CP = [((F(1), F(1)), ((1, 1), (1, 0)))]
CAP = ((F(1, 12),), ((1, 1),))


#: a memory column one half above the tiles' product: at m = g0 g1 ≥ 2^39 its float is within rounding of m but the
#: tiling does not fit (settled exactly and refused: the search goes past the tilings it settled first)
HB = ((F(1), F(1)), ((-1, 0), (0, -1)))
CB = [((F(1), F(1, 2)), ((1, 1), (0, 0)))]


def cases():
    rng = random.Random(35)
    out = [(HB, CB, [divisors(2 ** 20), divisors(2 ** 20)], {}),
           (H3, C3, [divisors(12), divisors(18), divisors(8)], {}),
           (HP, CP, [divisors(64), divisors(64)], {}),          # 49 tilings tie at each product: past NEAR? no, 7
           (HP, CP, [tuple(range(1, 97)), tuple(range(1, 97))], {}),    # many ties (more than NEAR) per product
           (H3[:1] + ((( -1, 0), (0, -1), (-1, -1)),), [((F(1), F(1), F(1)), ((1, 1), (1, 0), (0, 1)))],
            [ragged_values(11), ragged_values(11)], {"fulls": (11, 11)}),
           ((H3[0], ((-1, 0), (0, -1), (-1, -1))), [((F(1), F(1), F(1)), ((1, 1), (1, 0), (0, 1)))],
            [divisors(12), divisors(12)], {"caps": [CAP]})]
    for _ in range(4):     # random posynomials over three tiles, coefficients with denominators
        H = (tuple(F(rng.randint(1, 9), rng.randint(1, 4)) for _ in range(3)),
             tuple(tuple(rng.choice((-2, -1, -1, 0)) for _ in range(3)) for _ in range(3)))
        C = [(tuple(F(rng.randint(1, 5)) for _ in range(3)), tuple(tuple(rng.choice((0, 1, 1, 2)) for _ in range(3))
                                                                 for _ in range(3)))]
        out.append((H, C, [divisors(rng.choice((12, 16, 30, 36))) for _ in range(3)], {}))
    return out


@pytest.mark.parametrize("n", range(10))
def test_the_staircase_answers_as_the_whole_block(n):
    H, C, values, kw = cases()[n]
    ms = memories_of(H, C, values, kw)
    expected = whole_blocks(H, C, values, ms, kw.get("fulls"), kw.get("caps", ()))
    assert fresh(H, C, values, ms, **kw) == expected
    assert any(e is None for e in expected) and any(e is not None for e in expected)    # below and above the least
    integer_search.searched.cache_clear()       # asked again, a memory at a time, in another order: the kept stairs
    assert [best_many(H, C, values, [m], **kw)[0] for m in reversed(ms)] == expected[::-1]
    if 0 < n < 6:      # the second route for the small grids: the least over every tiling that fits
        step = max(1, len(ms) // 12)
        assert [e and e[0] for e in expected[::step]] == [brute(H, C, values, m, kw.get("fulls"), kw.get("caps", ()))
                                                            for m in ms[::step]]


def test_a_tiling_refused_near_the_memory_is_passed():
    """At ``m = 2^40`` the tiling ``(2^20, 2^20)`` fits in floats (its peak ``2^40 + 1/2``) and is refused exactly: the
    answer is the next best, and one value more of memory fits it."""
    values = [divisors(2 ** 20), divisors(2 ** 20)]
    got = fresh(HB, CB, values, [2 ** 40 + 1, 2 ** 40])
    assert got[0] == (F(2, 2 ** 20), (2 ** 20, 2 ** 20))
    assert got[1] == (F(3, 2 ** 20), (2 ** 20, 2 ** 19))      # (of equal H and peak, the later tile smaller)
    integer_search.searched.cache_clear()      # asked again the other way round: a kept answer is no answer here
    assert best_many(HB, CB, values, [2 ** 40]) == got[1:] and best_many(HB, CB, values, [2 ** 40 + 1]) == got[:1]


def test_a_staircase_holds_few_of_its_tilings_and_every_first_settled():
    """Counted: a 96 × 96 grid of 9,216 tilings whose transfers read only the product ``g0 g1`` (every factorisation
    ties) keeps its ties on its staircase and little else; a random one keeps a few dozen."""
    key = (HP, tuple(CP), (tuple(range(1, 97)),) * 2, None, ())
    (block, peak, scores, capped, _, _), = grid_scores.scored(*key)
    stair = Stair(block, peak, scores, capped)
    assert len(stair.rows) < len(block) // 4
    rng = np.random.default_rng(35)
    peak, scores = rng.random(4096), rng.random(4096)
    stair = Stair(np.arange(4096.0)[:, None], peak, scores, np.ones(4096, dtype=bool))
    assert len(stair.rows) < 40
    # transfers that tie within rounding (1 to 2 in steps of 1/100, each moved by 10⁻¹³ of itself up, down or not)
    scores = (1 + np.round(rng.random(4096), 2)) * (1 + rng.choice([-1e-13, 0, 1e-13], 4096))
    stair = Stair(np.arange(4096.0)[:, None], peak, scores, np.ones(4096, dtype=bool))
    for m in np.linspace(0.01, 1, 50):      # every tiling settled first at a memory is on the staircase
        fits = peak <= m * (1 + 1e-12)
        first = set(np.flatnonzero(fits & (scores <= scores[fits].min() * (1 + 1e-9))).tolist())
        assert first == {row for row, _, _ in stair.near(stair.fitting(m * (1 + 1e-12)))[0]}


def test_asked_again_no_row_is_settled_twice(monkeypatch):
    """A grid asked at other memories reads its kept staircases: the exact settlings of the first search are not
    done again (the exact transfers are counted)."""
    H, C, values, _ = cases()[1]
    ms = memories_of(H, C, values, {})
    calls = []
    real = integer_search.exact_at

    def counting(poly):
        at = real(poly)
        return lambda combo: calls.append(combo) or at(combo)
    monkeypatch.setattr(integer_search, "exact_at", counting)
    first = fresh(H, C, values, ms[::2])
    settled = len(calls)
    assert settled > 0
    integer_search.searched.cache_clear()
    again = best_many(H, C, values, ms[::2])       # the same memories again, the search's memo cleared
    assert again == first and len(calls) == settled


@pytest.mark.parametrize("short", [0, stairs.SHORT])
def test_negative_scores_keep_their_least_near(monkeypatch, short):
    """Where the least transfers of a prefix are negative (a column of negative coefficients, never a posynomial's
    but a valid float), ``least * (1 + 1e-9)`` lies below the least: :meth:`Stair.near` reads the least's tilings
    within ``max(least, least (1 + 1e-9))``, as the staircase itself is cut (the Python-list and numpy paths alike)."""
    monkeypatch.setattr(stairs, "SHORT", short)
    block = np.array([[1, 1], [1, 2], [2, 2]])
    stair = Stair(block, np.array([1.0, 2.0, 4.0]), np.array([-1.0, -2.0, -3.0]), np.array([True, True, True]))
    for count, least in ((1, (1, 1)), (2, (1, 2)), (3, (2, 2))):
        rows, peak = stair.near(count)
        assert [t for _, t, _ in rows] == [least], count
