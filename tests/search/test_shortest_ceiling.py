"""A ceiling on the cheapest kernel split (``paths.shortest_splits(ceiling=)``): what ``select`` passes a form, the
best H the forms before it found at each memory, so that a split that would lose to it is not searched for.

The law (``paths.shortest_splits``' docstring): at a point where some split moves at most the ceiling the answer is
unchanged, path and all; elsewhere the answer moves more than the ceiling or is None.  Checked on random programs
(:func:`napkin_cat.testing.programs.random_program`) at three memories, each point's ceiling its own answer's H (the
answer stays) and infinite (nothing changes), with the partitions costed counted: a ceiling never costs more of
them, and over the programs it spares some (a ceiling read nowhere would not).
"""
import math

import pytest

from napkin_cat.search.paths import shortest_splits

from shared import random_search

SEEDS = range(16)
MEMORIES = [2 ** 4, 2 ** 7, 2 ** 12]


def _run(made, ceiling):
    p, graph, space, search, evaluate, lower = made
    asked = set()

    def counting(curve, k):
        asked.add(curve)
        return evaluate(curve, k)
    got = shortest_splits(space, search, MEMORIES, counting, lower, ceiling=ceiling)
    return [None if g is None else (g[0], g[1], [(b, v) for b, v, _ in g[2]]) for g in got], len(asked)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_ceiling_keeps_every_answer_within_it_and_drops_none_other(seed):
    made = random_search(seed, MEMORIES)
    if made is None:
        pytest.skip("no operation")
    call = made[0].call
    free, costed = _run(made, None)
    assert _run(made, [math.inf] * len(MEMORIES))[0] == free, call
    at_own = [math.inf if g is None else g[0] for g in free]
    kept, fewer = _run(made, at_own)
    assert kept == free and fewer <= costed, (call, kept, free)


def test_a_ceiling_spares_partitions():
    spared = 0
    for seed in SEEDS:
        made = random_search(seed, MEMORIES)
        if made is None:
            continue
        free, costed = _run(made, None)
        spared += costed - _run(made, [math.inf if g is None else g[0] for g in free])[1]
    assert spared > 0
