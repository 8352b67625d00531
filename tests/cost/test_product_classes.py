"""The exact integer search settles a tiling once per product of its tile classes (cost-35).

The law (:mod:`napkin_cat.cost.tied_tiles`, the search's settling memo): tiles whose exponents are equal in every
term of the transfers (or of every memory column) enter each monomial through their product, so the exact transfers
(the exact peak) of a tiling are a function of the products of each such class; tilings that tie there are evaluated
once.
A symbolic transformer block's fused kernel reads ``g_d g_m g_h`` and ``g_e g_n`` alike in its transfers and columns:
its 5-tile grid of 569,184 tilings settled thousands of tilings of few products one by one.

Second routes: the search that settles every tiling on its own (``whole_blocks``, test_stairs: the exact evaluators
called directly), and the least over every tiling by brute force.  The work saved is checked: no two tilings of equal
class products are evaluated.
"""
from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from napkin_cat.cost import integer_search, stairs
from napkin_cat.cost.integer_search import divisors
from stair_routes import brute, fresh, memories_of, whole_blocks

F = Fraction


K = F(3, 2)
#: the block's kernel in small: K (1/(g0 g1 g2) + 1/(g3 g4) + 1), columns g3 g4 + g0 g1 g2 and g0 g1 g2 g3 g4
HB = ((K, K, K), ((-1, -1, -1, 0, 0), (0, 0, 0, -1, -1), (0, 0, 0, 0, 0)))
CB = [((F(1), F(1)), ((0, 0, 0, 1, 1), (1, 1, 1, 0, 0))), ((F(1),), ((1, 1, 1, 1, 1),))]


def cases():
    rng = random.Random(3535)
    out = [(HB, CB, [divisors(12), divisors(8), divisors(6), divisors(12), divisors(8)]),
           # the same program with its tiles in another order (a class's tiles apart: g0, g3, g1, g4, g2)
           (tuple([HB[0], tuple(tuple(e[i] for i in (0, 3, 1, 4, 2)) for e in HB[1])]),
            [(c[0], tuple(tuple(e[i] for i in (0, 3, 1, 4, 2)) for e in c[1])) for c in CB],
            [divisors(12), divisors(12), divisors(8), divisors(8), divisors(6)])]
    for _ in range(4):      # random posynomials over four tiles: the third a copy of the first (one class), one unseen
        hx = [tuple(rng.choice((-2, -1, -1, 0)) for _ in range(2)) for _ in range(3)]
        cx = [tuple(rng.choice((0, 1, 1, 2)) for _ in range(2)) for _ in range(3)]
        H = (tuple(F(rng.randint(1, 9), rng.randint(1, 4)) for _ in range(3)), tuple(e + (e[0], 0) for e in hx))
        C = [(tuple(F(rng.randint(1, 5)) for _ in range(3)), tuple(e + (e[0], 0) for e in cx))]
        out.append((H, C, [divisors(rng.choice((12, 16, 30, 36))) for _ in range(2)] + [divisors(12), divisors(4)]))
    return out


def test_a_ragged_count_reads_each_tile():
    """With a shorter last tile each trip factor ``n/g`` counts ``⌈n/g⌉`` trips, a function of each tile, not of a
    class's product (``⌈13/2⌉·⌈8/2⌉ = 28``, ``⌈13/4⌉·⌈8/1⌉ = 32``; the column ``3 g0 + g1`` reaches them at different
    memories): the answer is the every-tiling route's."""
    H = ((F(1), F(3)), ((-1, -1), (0, 0)))
    C = [((F(3), F(1)), ((1, 0), (0, 1)))]
    values, fulls = [integer_search.ragged_values(13), integer_search.ragged_values(8)], (13, 8)
    ms = list(range(1, 49))
    assert fresh(H, C, values, ms, fulls=fulls) == whole_blocks(H, C, values, ms, fulls)


def class_products(polys, combo):
    """The products of the tiles of each class (equal exponents in every term of ``polys``), the unseen left out."""
    exps = [e for p in polys for e in p[1]]
    classes: dict = {}
    for i in range(len(combo)):
        column = tuple(e[i] for e in exps)
        if any(column):
            classes.setdefault(column, []).append(i)
    return tuple(math.prod(combo[i] for i in g) for g in classes.values())


@pytest.mark.parametrize("n", range(6))
def test_settled_once_per_class_product_and_the_same_answer(n, monkeypatch):
    H, C, values = cases()[n]
    ms = memories_of(H, C, values, {})
    expected = whole_blocks(H, C, values, ms)         # every tiling evaluated on its own
    calls = []
    real = integer_search.exact_at

    def counting(poly):
        at = real(poly)
        return lambda combo: calls.append((poly, combo)) or at(combo)
    monkeypatch.setattr(integer_search, "exact_at", counting)
    got = fresh(H, C, values, ms)
    assert got == expected
    assert any(e is None for e in expected) and any(e is not None for e in expected)
    step = max(1, len(ms) // 8)     # the second route: the least transfers over every tiling that fits
    assert [e and e[0] for e in expected[::step]] == [brute(H, C, values, m) for m in ms[::step]]
    # the work saved: H's evaluator and the peak's (every column at once) each read one tiling per class product
    on_H = [combo for poly, combo in calls if poly is H]
    assert len(on_H) == len({class_products([H], c) for c in on_H})
    on_C = [combo for poly, combo in calls if poly is C[0]]
    assert len(on_C) == len({class_products(C, c) for c in on_C})
    # and there were ties to save: more tilings share a class product than were evaluated
    grid = list(itertools.product(*values))
    assert len({class_products([H], c) for c in grid}) < len(grid)


@pytest.mark.parametrize("seed", range(4))
def test_a_short_prefix_read_in_lists_as_in_numpy(seed, monkeypatch):
    """A staircase's prefix of at most ``SHORT`` tilings is read in Python lists (cost-35): the same tilings settled
    first, in the same order, as numpy reads them (``SHORT = 0``), at every prefix; transfers that tie within
    rounding (more than ``NEAR`` at once)."""
    rng = np.random.default_rng(seed)
    n = 600
    peak = rng.random(n)
    scores = (np.round(rng.random(n), 2) + (0.01 if seed % 2 else 0)) * (1 + rng.choice([-1e-13, 0, 1e-13], n))
    if seed >= 2:      # every transfer one of three: ties past NEAR
        scores = rng.choice([1.0, 1.0 + 1e-12, 2.0], n)
    block = rng.integers(1, 9, size=(n, 3)).astype(float)
    capped = rng.random(n) < 0.9
    fast = stairs.Stair(block, peak, scores, capped)
    counts = range(1, len(fast.peaks) + 1)
    got = [fast.near(c) for c in counts]
    monkeypatch.setattr(stairs, "SHORT", 0)
    slow = stairs.Stair(block, peak, scores, capped)
    assert got == [slow.near(c) for c in counts]
    assert any(len(rows) > 1 for rows, _ in got)
