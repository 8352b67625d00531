"""The best-first order of ``shortest_splits`` changes what it costs, never what it answers (issue 35).

Into each down-set, the edges are costed in the order of their bound (the best path into the edge's start plus the
block's compulsory transfers), so that the best path found early lets the prune skip the rest; of candidates equal
on ``(H, kernels, tie)``, the one first in the space's own order of edges (and of a block's partitions) wins, as when
the edges were costed in that order.  Checked against a route that shares neither the order nor the bound: a
dynamic programme over the down-sets in the space's order of edges and partitions, every edge costed, a candidate
taken only when strictly less (so the first of equals stays), on prepared forms of random programs
(:func:`napkin_cat.testing.programs.random_program`) and of attention: the same path (blocks and partitions) at
every memory.  The partitions costed are at most the reference's.
"""
import math

import pytest

import napkin_cat as nc
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search.context import KernelCache, search_of
from napkin_cat.search.forms import prepared_forms
from napkin_cat.search.paths import playable, shortest_splits
from napkin_cat.testing.programs import random_program

MEMORIES = [8, 16, 64, 2 ** 12]
SEEDS = [601, 1032, 3, 7, 11, 19, 23, 42, 57, 88]


def _case(seed):
    p = random_program(seed, concrete=True)
    return p.diagram, {str(k): int(v) for k, v in p.sizes.items()}


def reference(space, search, evaluate, n) -> list:
    """Per point: ``(H, kernels, [(block, variant)])`` of the first least ``(H, kernels, tie)`` chain in the space's
    order (tie: the transfers again, as the search's where nothing is masked), every edge costed."""
    inf = (math.inf, math.inf, math.inf)
    dist, back = {0: [(0, 0, 0)] * n}, {0: [None] * n}
    for b in space.downs[1:]:
        dist[b], back[b] = [inf] * n, [None] * n
        for a, block in space.into[b]:
            for v, curve in search.choice(space.graph, block).options:
                for k in range(n):
                    h = evaluate(curve, k) if dist[a][k] != inf else None
                    if h is None:
                        continue
                    cand = (dist[a][k][0] + h, dist[a][k][1] + 1, dist[a][k][2] + h)
                    if cand < dist[b][k]:
                        dist[b][k], back[b][k] = cand, (a, block, v)
    out = []
    for k in range(n):
        if dist[space.full][k] == inf:
            out.append(None)
            continue
        path, node = [], space.full
        while node:
            a, block, v = back[node][k]
            path.append((block, v))
            node = a
        out.append((dist[space.full][k][0], dist[space.full][k][1], path[::-1]))
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_best_first_answers_as_the_edges_order(seed):
    diagram, sizes = _case(seed)
    book = rulebook()
    ok = playable(book.roles)
    given = nc.Sizes(sizes)
    forms = [f for f in prepared_forms(diagram, book, 2, sizes=sizes) if f.cut is None and len(f.graph)]
    costed = []

    def evaluate(curve, k):
        costed.append(curve)
        return curve.at_all(sizes, MEMORIES)[k][0] if ok(curve) else None

    for form in forms:
        search = search_of(1, KernelCache())
        costed.clear()
        got = shortest_splits(form.space, search, MEMORIES, evaluate, lambda ch: ch.compulsory_at(given),
                              tie=evaluate)
        mine = len(set(costed))
        costed.clear()
        want = reference(form.space, search, evaluate, len(MEMORIES))
        assert mine <= len(set(costed)), (seed, mine, len(set(costed)))
        for k, m in enumerate(MEMORIES):
            if want[k] is None:
                assert got[k] is None, (seed, m)
                continue
            assert (got[k][0], got[k][1], [(b, v) for b, v, _ in got[k][2]]) == want[k], (seed, m)
