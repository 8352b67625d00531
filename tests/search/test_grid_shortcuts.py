"""The reference search's shortcuts against its exact route (issue 35, grid-35).

**Partitions below their least memory are not costed.**  A partition whose least memory
(:meth:`~napkin_cat.search.curves.Curve.least`, read off the function before it is costed) exceeds every memory at
which an edge into its block is still open (its compulsory bound may still beat the best path there) sets nothing in
the shortest path: its H is None at those memories, and at the others no partition of the block beats the best.  So
:func:`~napkin_cat.search.paths.shortest_splits` leaves it uncosted (``fits``), and ``select``'s ``evaluate`` answers
None below a curve's least memory without building its table (the joins of :mod:`.segments` and ``grow`` ask
merged blocks at one memory).

The exact route is the same search with every least memory read as 0 (nothing is known to not fit, so every
partition an edge reaches is costed): the answers are identical and the shortcut costs fewer partitions.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.search import curves, paths
from napkin_cat.search.context import KernelCache

from fuzzing import random_function
from shared import counted_costings, ln_matmul

L = nc.library
MEMORIES = [2 ** k for k in range(4, 25, 2)]


def _answers(f, memory, sizes=None):
    """A derive's answers, in a cold kernel cache: H (srepr), each regime's variant and tiles."""
    r = nc.derive(f, memory=memory, sizes=sizes, cache=KernelCache())
    regimes = [(str(g.variant), sympy.srepr(sympy.sympify(g.H)),
                sorted((str(k), sympy.srepr(sympy.sympify(v))) for k, v in g.optimum.sizes.items()))
               for g in getattr(r, "regimes", ()) or ()]
    return sympy.srepr(sympy.sympify(r.H)) if not isinstance(r.H, list) else repr(r.H), regimes, \
        str(getattr(r, "variant", None))


def _exact_route(monkeypatch):
    """Every least memory read as 0: nothing is skipped as not fitting (the search without the shortcut)."""
    monkeypatch.setattr(curves.Curve, "least", lambda self, sizes: 0)


PROGRAMS = {
    "attention": lambda: (L.attention(), {"q": 96, "x": 80, "d": 24}),
    "mlp": lambda: (L.mlp(), None),
    "ln_matmul": lambda: (ln_matmul(), None),
    "causal": lambda: (L.causal_attention(), {"q": 64, "x": 64, "d": 16}),
    "random 5": lambda: (random_function(np.random.default_rng(1), 5, concrete=False), None),
    "random 6": lambda: (random_function(np.random.default_rng(7), 6, concrete=False), None),
}


def _sizes(f, given):
    from napkin_cat.search.envelope import reference_sizes
    return given or {str(k): int(v) for k, v in reference_sizes(f).items()}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_numeric_answers_are_the_exact_routes(name, monkeypatch):
    """A numeric derive at 11 memories: the same H and tiles as the route that costs every partition reached, and
    no more partitions costed."""
    f, given = PROGRAMS[name]()
    sizes = _sizes(f, given)
    calls = counted_costings(monkeypatch)
    fast = _answers(f, MEMORIES, sizes)
    fast_calls = calls[0]
    with monkeypatch.context() as m:
        _exact_route(m)
        calls[0] = 0
        exact = _answers(f, MEMORIES, sizes)
        exact_calls = calls[0]
    assert fast == exact
    assert fast_calls <= exact_calls


@pytest.mark.parametrize("name", ["attention", "mlp", "random 6"])
def test_symbolic_answers_are_the_exact_routes(name, monkeypatch):
    """The symbolic derive (its reference search over the grid of memories, then the probes): the same H, regimes
    and tiles."""
    f, given = PROGRAMS[name]()
    fast = _answers(f, "M", given)
    with monkeypatch.context() as m:
        _exact_route(m)
        exact = _answers(f, "M", given)
    assert fast == exact


def test_fewer_partitions_costed_in_a_symbolic_derive(monkeypatch):
    """The work saved, counted: the symbolic derive of layer_norm → matmul costs fewer partitions than the exact
    route (the grid's smallest memories fit no fused kernel's least, and their edges are the ones left open there)."""
    f = ln_matmul()
    calls = counted_costings(monkeypatch)
    fast = _answers(f, "M")
    fast_calls = calls[0]
    with monkeypatch.context() as m:
        _exact_route(m)
        calls[0] = 0
        exact = _answers(f, "M")
        exact_calls = calls[0]
    assert fast == exact
    assert fast_calls < exact_calls


def test_shortest_splits_skips_a_partition_that_fits_nowhere_open():
    """The rule on a space of two blocks: block 0b11's one partition fits at no memory (``fits`` False), so it is
    never read, and the answer is the split into 0b01 and 0b10; with ``fits`` absent it is read (and does not fit:
    the same answer)."""
    from types import SimpleNamespace as NS
    space_ = NS(graph=None, downs=[0, 1, 3], into={1: [(0, 1)], 3: [(1, 2), (0, 3)]}, full=3)
    search = NS(choice=lambda graph, block: NS(options=[(block, block)], bound=0))
    read = []

    def evaluate(c, k):
        read.append(c)
        return None if c == 3 else 5

    def rows(c):
        read.append(c)
        return [None if c == 3 else 5], [0]
    got = paths.shortest_splits(space_, search, [0], evaluate, lambda ch: ch.bound, rows=rows,
                                fits=lambda c, k: c != 3)
    assert [(b, v) for b, v, _ in got[0][2]] == [(1, 1), (2, 2)] and 3 not in read
    read.clear()
    again = paths.shortest_splits(space_, search, [0], evaluate, lambda ch: ch.bound, rows=rows)
    assert again == got and 3 in read


def test_an_edge_at_its_bound_that_ties_on_h_and_kernels_is_costed():
    """An edge whose bound ties the best path into its end on ``(H, kernels)`` is still open there (its tie value
    may win): into 0b111, the split [0b011, 0b100] is found first (H 10, 2 kernels, tie 10), and [0b001, 0b110], its
    bound (2 + 8, 2) equal to that, ties it on H and kernels and wins on the tie (2).  (Mutation: an edge open only
    where its bound is strictly below the best loses it.)"""
    from types import SimpleNamespace as NS
    space_ = NS(graph=None, downs=[0, 1, 3, 7], into={1: [(0, 1)], 3: [(0, 3), (1, 2)], 7: [(3, 4), (1, 6)]},
                full=7)
    H = {1: 2, 2: 100, 3: 6, 4: 4, 6: 8}
    T = {1: 1, 2: 0, 3: 5, 4: 5, 6: 1}
    LB = {1: 0, 2: 0, 3: 0, 4: 4, 6: 8}
    search = NS(choice=lambda graph, block: NS(options=[(block, block)], bound=LB[block]))
    for fits in (None, lambda c, k: True):
        got = paths.shortest_splits(space_, search, [0], lambda c, k: H[c], lambda ch: ch.bound,
                                    tie=lambda c, k: T[c], fits=fits)
        assert got[0][:2] == (10, 2) and [b for b, _, _ in got[0][2]] == [1, 6]
