"""A tiling grid's scores are kept between searches (cost/grid_scores.kept_scores, symbwd2-35; since sel-35 as each
block's staircase, cost/stairs.kept_stairs): the symbolic derive's probes ask the same kernels again at other memories,
and each grid is scored once.

The law: a search at memories asked one call at a time, after others, answers as one fresh search over all of
them (the scores are a pure function of the posynomials, the legal values, the axis sizes of a ragged search and
the caps; the memory is applied after).  The second route is :func:`best_many` with every memo cleared.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

from napkin_cat.cost import grid_scores, integer_search, stairs
from napkin_cat.cost.integer_search import best_many, divisors, ragged_values

F = Fraction
#: H = 1/g0 + 1/g1 + 1/(g0 g1), memory g0 g1 + g0 + g1: the same programs, tiles dividing or ragged, with a cap
H = ((F(1), F(1), F(1)), ((-1, 0), (0, -1), (-1, -1)))
C = [((F(1), F(1), F(1)), ((1, 1), (1, 0), (0, 1)))]
CAP = ((F(1, 12),), ((1, 1),))
#: another transfer count over the same tiles and memory: 4/g0 + 1/g1
H2 = ((F(4), F(1)), ((-1, 0), (0, -1)))
MEMORIES = [3, 20, 45, 99, 100, 150, 500]


def fresh(values, memories, h=H, **kw):
    integer_search.searched.cache_clear()
    grid_scores.kept_scores.cache_clear()
    stairs.kept_stairs.cache_clear()
    return best_many(h, C, values, memories, **kw)


def brute(h, values, memory, fulls=None, caps=()):
    """The least ``h`` over every tiling that fits ``memory`` (the second route: no search, no memo); with
    ``fulls`` a tile ``g`` is read as ``n/⌈n/g⌉`` in ``h`` and the caps (``⌈n/g⌉`` trips)."""
    def at(poly, tiles):
        out = F(0)
        for a, e in zip(*poly):
            term = F(a)
            for t, k in zip(tiles, e):
                term *= F(t) ** k
            out += term
        return out
    best = None
    for combo in itertools.product(*values):
        read = combo if fulls is None else tuple(F(n, -(-n // g)) for g, n in zip(combo, fulls))
        if at(C[0], combo) > memory or any(at(cap, read) > 1 for cap in caps):
            continue
        v = at(h, read)
        best = v if best is None or v < best else best
    return best


def test_one_memory_at_a_time_answers_as_one_fresh_search():
    cases = [([ragged_values(11), ragged_values(11)], {}),     # the same values, trips not rounded up
             ([ragged_values(11), ragged_values(11)], {"fulls": (11, 11)}),
             ([divisors(11), divisors(11)], {"caps": [CAP]}),
             ([ragged_values(11), ragged_values(11)], {"fulls": (11, 11), "caps": [CAP]}),
             ([divisors(12), divisors(12)], {}), ([divisors(12), divisors(12)], {"h": H2})]
    expected = [fresh(values, MEMORIES, **kw) for values, kw in cases]
    assert len({tuple(e) for e in expected}) == 6          # the six programs differ: a shared score would show
    integer_search.searched.cache_clear()
    grid_scores.kept_scores.cache_clear()
    stairs.kept_stairs.cache_clear()
    for m in reversed(MEMORIES):             # every case asked in turn, one memory a call: the scores kept
        for (values, kw), e in zip(cases, expected):
            rest = {k: v for k, v in kw.items() if k != "h"}
            assert best_many(kw.get("h", H), C, values, [m], **rest) == [e[MEMORIES.index(m)]]
    assert stairs.kept_stairs.cache_info().hits > 0
    for (values, kw), e in zip(cases, expected):      # and each answer is the least over every tiling
        h = kw.get("h", H)
        assert [x and x[0] for x in e] == [brute(h, values, m, kw.get("fulls"), kw.get("caps", ())) for m in MEMORIES]
