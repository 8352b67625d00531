"""The cheapest kernel split (``paths.shortest_splits``) against an exhaustive route (issue 35, item 1).

``shortest_splits`` reads each block's partitions and bound once per search (a block ends edges from many
down-sets) and skips an edge whose bound cannot beat the best path known.  The reference here walks every chain of
down-sets of the same space, edge by edge with no bound and no memo, each block at the cheapest of its partitions'
curves, on random programs (:func:`napkin_cat.testing.programs.random_program`) at their sizes and a few memories:

* the least transfers per memory are equal (or both say nothing fits);
* the path returned is a chain of the space's edges from nothing to every operation, whose kernels' transfers add
  up to the transfers it reports.
"""
import math

import pytest

from napkin_cat.search.context import KernelCache, search_of
from napkin_cat.search.paths import shortest_splits

from shared import random_search

SEEDS = range(16)
MEMORIES = [2 ** 4, 2 ** 7, 2 ** 12]


def exhaustive(space, search, evaluate, n) -> list:
    """Per point: the least transfers over every chain of the space's edges (math.inf where none fits)."""
    best = {}

    def least(b, k):          # the cheapest way to compute the down-set b from nothing
        if b == 0:
            return 0
        if (b, k) not in best:
            costs = []
            for a, block in space.into[b]:
                hs = [evaluate(curve, k) for _, curve in search.choice(space.graph, block).options]
                hs = [h for h in hs if h is not None]
                if hs:
                    costs.append(least(a, k) + min(hs))
            best[(b, k)] = min(costs, default=math.inf)
        return best[(b, k)]
    return [least(space.full, k) for k in range(n)]


@pytest.mark.parametrize("seed", SEEDS)
def test_shortest_splits_find_the_exhaustive_least(seed):
    made = random_search(seed, MEMORIES)
    if made is None:
        pytest.skip("no operation")
    p, graph, space, search, evaluate, lower = made
    got = shortest_splits(space, search, MEMORIES, evaluate, lower)
    want = exhaustive(space, search_of(1, KernelCache()), evaluate, len(MEMORIES))
    assert [math.inf if g is None else g[0] for g in got] == want, (p.call, got, want)
    edges = {(a, b, block) for b, into in space.into.items() for a, block in into}
    for k, found in enumerate(got):
        if found is None:
            continue
        H, kernels, path = found
        done = 0
        for block, _, curve in path:
            assert (done, done | block, block) in edges, (p.call, k, path)
            done |= block
        assert done == space.full and kernels == len(path), (p.call, k)
        assert sum(evaluate(curve, k) for _, _, curve in path) == H, (p.call, k)
