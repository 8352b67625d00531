"""Seam joins and greedy growth replayed at a point whose reads answer alike (napkin_cat.search.replay).

The law: a join step reads the point only through ``evaluate``; where its input path is one seen at another point and
every H it read there reads the same at this point, it answers the same.  Checked against every point run (the route
kept as ``replay=False``) on random programs cut at every seam (seam joins) and searched in a capped space (growth),
and on random steps against :class:`Replays` directly.  (The transformer block's symbolic and numeric derives answer
alike with it: too slow for a test, measured for the change.)

Mutations caught: ``Replays.answer`` checking only the first read (``reads[:1]``) fails test_random_steps and
test_seam_joins_replayed; a replay that skips the check of the input (one key for every path) fails both too.
"""
from __future__ import annotations

import random

from napkin_cat.search import paths, segments
from napkin_cat.search.replay import Replays
from shared import random_search

MEMORIES = sorted([2 ** e for e in range(4, 14)] + [3 * 2 ** e for e in range(4, 8)] + [1000, 1001])


def _same(a, b) -> bool:
    """Per point the same H, kernels and path (block, partition and curve by identity)."""
    def key(found):
        return None if found is None else (found[0], found[1], [(blk, id(v), id(c)) for blk, v, c in found[2]])
    return [key(x) for x in a] == [key(x) for x in b]


def _counting(monkeypatch) -> list:
    made = []

    class Counted(Replays):
        def __init__(self):
            super().__init__()
            made.append(self)
    monkeypatch.setattr(segments, "Replays", Counted)
    monkeypatch.setattr(paths, "Replays", Counted)
    return made


def test_random_steps():
    """A step that reads a random number of random curves, branching on their values: replayed at every point as run."""
    rng = random.Random(5)
    for trial in range(200):
        curves = [f"c{i}" for i in range(6)]
        table = {c: [rng.choice([1, 2, 2, 3]) for _ in range(12)] for c in curves}
        reads = []

        def evaluate(curve, k):
            reads.append((curve, k))
            return table[curve][k]

        def step(ev, k, seed=trial):
            r, total, c = random.Random(seed), 0, "c0"
            for _ in range(4):
                v = ev(c, k)
                total += v
                c = curves[(v * 7 + r.randrange(6)) % 6]    # the next read depends on the value read
            return total, c
        memo = Replays()
        keys = [rng.choice("ab") for _ in range(12)]
        got = [memo.answer(keys[k], evaluate, k, step) for k in range(12)]
        assert got == [step(lambda c, kk: table[c][kk], k) for k in range(12)]
        assert memo.replayed + memo.ran == 12


def _seamed(seed):
    found = random_search(seed, MEMORIES)
    if found is None:
        return None
    p, graph, space, search, evaluate, lower = found
    if len(graph) > 16:
        return None     # (kept short: a test of a few seconds)
    parts, joints = segments.cut(graph, least=1)
    return (graph, parts, joints, search, evaluate, lower) if joints else None


def test_seam_joins_replayed(monkeypatch):
    """Random programs cut at every seam: the segmented search with seam joins replayed answers
    as with every point's joins run, at 16 memories; and some points are replayed."""
    made, checked = _counting(monkeypatch), 0
    for seed in range(60):
        found = _seamed(seed)
        if found is None:
            continue
        graph, parts, joints, search, evaluate, lower = found
        on = segments.segmented_shortest(graph, parts, joints, search, MEMORIES, evaluate, lower, ("t", seed))
        off = segments.segmented_shortest(graph, parts, joints, search, MEMORIES, evaluate, lower, ("t", seed),
                                          replay=False)
        assert _same(on, off), seed
        checked += 1
        if checked == 12:
            break
    assert checked >= 10
    assert sum(m.replayed for m in made) > 0


def test_growth_replayed(monkeypatch):
    """Random programs in a space capped at two operations a kernel: growth replayed answers as grown at every point."""
    made, checked = _counting(monkeypatch), 0
    for seed in range(40):
        found = random_search(seed, MEMORIES)
        if found is None:
            continue
        p, graph, _, search, evaluate, lower = found
        space = paths.Space(graph, budget=2)
        if space.exact:
            continue
        got = paths.shortest_splits(space, search, MEMORIES, evaluate, lower)
        on = paths.grow_each(graph, search, got, evaluate, lower)
        off = [g and paths.grow(graph, search, g, evaluate, k, lower) for k, g in enumerate(got)]
        assert _same(on, off), seed
        checked += 1
        if checked == 10:
            break
    assert checked >= 10
    assert sum(m.replayed for m in made) > 0
