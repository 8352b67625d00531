"""shortest_splits(rows=...) (issue 35): a caller's tables per partition answer as evaluate and tie per point do."""
from __future__ import annotations

import random
from types import SimpleNamespace as NS

from napkin_cat.search.paths import shortest_splits


def _chain_space(n_ops):
    """The down-sets of a chain of ``n_ops`` operations: every block a contiguous run (bit i: operation i)."""
    downs = [(1 << i) - 1 for i in range(n_ops + 1)]
    into = {b: [(a, b ^ a) for a in downs if a < b] for b in downs[1:]}
    return NS(graph=None, downs=downs, into=into, full=downs[-1])


def test_rows_answer_as_evaluate_and_tie():
    """Second route: the same search asked point by point; random H (None: no fit), ties and their estimates, so the
    estimate decides between paths of equal H and kernels at some points."""
    rng = random.Random(35)
    decided = 0
    for _ in range(30):
        space, points = _chain_space(4), list(range(5))
        curves = {}

        def choice(graph, block):
            if block not in curves:
                curves[block] = [f"{block}:{o}" for o in range(2)]
            return NS(options=[(c, c) for c in curves[block]], bound=0)
        H = {}
        est = {}

        def evaluate(c, k):
            if (c, k) not in H:
                H[(c, k)] = None if rng.random() < 0.15 else rng.choice([4, 6, 8])
            return H[(c, k)]

        def tie(c, k):
            return est.setdefault((c, k), rng.randint(0, 3))
        search = NS(choice=choice)
        plain = shortest_splits(space, search, points, evaluate, lambda ch: ch.bound, tie=tie)
        tabled = shortest_splits(space, search, points, evaluate, lambda ch: ch.bound, tie=tie,
                                 rows=lambda c: ([evaluate(c, k) for k in points],
                                                 lambda: [tie(c, k) for k in points]))
        assert tabled == plain
        no_tie = shortest_splits(space, search, points, evaluate, lambda ch: ch.bound)
        decided += sum(a != b for a, b in zip(plain, no_tie))
    assert decided          # the ties mattered somewhere: a tie row read wrongly would show



def test_rows_read_once_per_partition():
    """A block ends edges from many down-sets: its partitions' rows are read once in the search, not once per edge
    (three independent operations: 7 blocks end 19 edges); each tie row is read at most once, and only where its
    curve fits at a point reached.  Mutation caught: the table not kept (rows read per edge)."""
    downs = sorted(range(8), key=lambda m: (m.bit_count(), m))
    into = {b: [(a, b ^ a) for a in downs if a != b and a & ~b == 0] for b in downs[1:]}
    space, points = NS(graph=None, downs=downs, into=into, full=7), [0, 1]
    read, tie_read = {}, {}

    def choice(graph, block):
        return NS(options=[(f"{block}:{o}", f"{block}:{o}") for o in range(2)], bound=0)

    def rows(c):
        read[c] = read.get(c, 0) + 1

        def ties():
            tie_read[c] = tie_read.get(c, 0) + 1
            return [1, 1]
        ops = int(c.split(":")[0]).bit_count()      # fusing costs: the three kernels apart are the cheapest
        return [5 * ops * ops, None if c.endswith(":1") else 7 * ops * ops], ties
    edges = sum(len(v) for v in space.into.values())
    got = shortest_splits(space, NS(choice=choice), points, lambda c, k: 0, lambda ch: ch.bound, rows=rows)
    assert got[0][:2] == (15, 3) and got[1][:2] == (21, 3)
    assert edges == 19 and set(read.values()) == {1} and len(read) == 2 * 7
    assert set(tie_read.values()) == {1} and len(tie_read) == 2 * 7
