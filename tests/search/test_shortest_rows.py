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
