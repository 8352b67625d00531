"""``growth.best_join``: the cost-guided join that saves the most, with joins that cannot win left uncosted.

Checked against a brute force written here (every admissible pair costed, the largest saving, the earliest pair of
equal savings) on seeded random pair lists with ties, joins that do not fit and inadmissible pairs; the lower bound
only spares work: a pair whose bound cannot beat the answer is never costed."""
import random

import pytest

from napkin_cat.search.growth import best_join


class Block:
    """A joined block's partitions: one, of transfers ``h`` (None: it fits no memory), and its lower bound."""

    def __init__(self, h, low):
        self.h, self.low, self.costed = h, low, 0

    @property
    def options(self):
        self.costed += 1
        return [] if self.h is None else [("whole", self.h)]


class Search:
    def __init__(self, blocks):
        self.blocks = blocks

    def choice(self, graph, block):
        return self.blocks[block]


def evaluate(curve, k):
    return curve


def brute(pairs, blocks, admissible):
    best = None
    for n, (x, y, both, tag) in enumerate(pairs):
        h = blocks[x | y].h
        if h is None or both - h <= 0 or not admissible(tag):
            continue
        if best is None or both - h > best[0]:
            best = (both - h, tag, x | y)
    return best


def problem(rng):
    """Pairs of single-bit blocks ``x``, ``y`` (distinct unions), savings drawn from a few values (ties)."""
    pairs, blocks = [], {}
    for n in range(rng.randint(1, 9)):
        x, y = 1 << (2 * n), 1 << (2 * n + 1)
        both = rng.choice([10, 20, 30, 40])
        h = None if rng.random() < 0.15 else rng.choice([0, 10, 20, 30, 40, 50])
        low = rng.randint(0, h) if h is not None else rng.randint(0, 50)
        blocks[x | y] = Block(h, low)
        pairs.append((x, y, both, n))
    banned = {n for n in range(len(pairs)) if rng.random() < 0.2}
    return pairs, blocks, (lambda tag: tag not in banned)


@pytest.mark.parametrize("seed", range(300))
def test_the_bounded_join_is_the_brute_force_join(seed):
    rng = random.Random(seed)
    pairs, blocks, admissible = problem(rng)
    expected = brute(pairs, blocks, admissible)
    for lower in (None, lambda ch: ch.low):
        got = best_join(None, Search(blocks), pairs, evaluate, 0, lower, admissible)
        assert (None if got is None else (got[0], got[1], got[2][0])) == expected
        if got is not None:
            assert got[2][2] == blocks[got[2][0]].h     # the joined block's curve is its cheapest partition's


def test_a_join_that_cannot_win_is_not_costed():
    rng = random.Random(0)
    spared = 0
    for _ in range(200):
        pairs, blocks, admissible = problem(rng)
        got = best_join(None, Search(blocks), pairs, evaluate, 0, lambda ch: ch.low, admissible)
        for n, (x, y, both, tag) in enumerate(pairs):
            bound = both - blocks[x | y].low
            beaten = bound <= 0 or (got is not None and bound < got[0])
            if beaten:   # it could neither save nor beat the saving found
                assert blocks[x | y].costed == 0, (pairs, n)
                spared += 1
            assert blocks[x | y].costed <= 1
    assert spared > 100
