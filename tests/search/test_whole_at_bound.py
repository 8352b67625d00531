"""A point where the whole is one kernel at its bound is answered without the search (issue 35, grid-35f).

:func:`~napkin_cat.search.paths.whole_at_bound`: with a superadditive bound (the compulsory transfers read off the
graph), every split's ``(H, kernels)`` is at least ``(bound of the whole, 1)``, so where a partition of the whole meets
its bound the cheapest split is that one kernel (least tie, first of equal).  ``shortest_splits(whole=True)`` and
``select`` answer those points so and search the others; the exact route is the same search with the law answering
no point (``whole_at_bound`` patched to ``{}``).  Checked against it: random programs at memories from 2⁴ to 2³⁰
(where the whole fits whole), the select of several functions over the symbolic mode's grid, numeric derives; the
law fires on most of them, and the transformer block's grid select costs fewer partitions with it.
"""
from __future__ import annotations

from types import SimpleNamespace as NS

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.search import envelope, paths
from napkin_cat.search.context import KernelCache
from napkin_cat.search.envelope import GRID, reference_sizes
from napkin_cat.search.paths import shortest_splits, whole_at_bound
from napkin_cat.search.space import select

from fuzzing import random_function
from shared import counted_costings, ln_matmul, random_search

L = nc.library
MEMORIES = [2 ** k for k in range(4, 31, 2)]


def _key(found):
    return None if found is None else (found[0], found[1], [(b, v.describe(), id(c)) for b, v, c in found[2]])


@pytest.mark.parametrize("seed", range(16))
def test_random_programs_agree_with_the_search(seed):
    """The law's points against the search at every point, on one search (the same curves): equal answers, and
    at every point the law answers, the one kernel at the whole's bound."""
    made = random_search(seed, MEMORIES)
    if made is None:
        pytest.skip("no operation")
    p, graph, space, search, evaluate, lower = made
    exact = shortest_splits(space, search, MEMORIES, evaluate, lower, tie=evaluate)
    law = shortest_splits(space, search, MEMORIES, evaluate, lower, tie=evaluate, whole=True)
    assert [_key(f) for f in law] == [_key(f) for f in exact], p.call
    settled = whole_at_bound(space, search, len(MEMORIES), evaluate, lower, tie=evaluate)
    bound = lower(search.choice(graph, space.full))
    for k, (H, kernels, path) in settled.items():
        assert (H, kernels) == (bound, 1) and exact[k][:2] == (bound, 1), (p.call, k)


def test_the_law_fires_on_random_programs():
    """Not vacuous: on some random programs the whole meets its bound at the large memories."""
    fired = 0
    for seed in range(16):
        made = random_search(seed, MEMORIES)
        if made is None:
            continue
        _, _, space, search, evaluate, lower = made
        fired += bool(whole_at_bound(space, search, len(MEMORIES), evaluate, lower))
    assert fired >= 2, fired     # (2 of the 14 with operations, measured)


class _Stop(Exception):
    pass


def _selected(f, monkeypatch, law: bool, floor: bool = True):
    """The symbolic derive's grid select (:data:`~napkin_cat.search.envelope.GRID` at the reference sizes, cold):
    per memory the form's steps, its kernels' blocks, partitions and ``(H, tiles)``; with the law or without it (the
    exact route), with a joined block's partitions read past one at its bound or not (``floor``); and the partitions
    costed."""
    sizes = {str(k): int(v) for k, v in reference_sizes(f).items()}
    got = []
    real = paths.best_option
    with monkeypatch.context() as m:
        if not law:
            m.setattr(paths, "whole_at_bound", lambda *a, **k: {})
        if not floor:
            m.setattr(paths, "best_option", lambda graph, block, search, evaluate, k, floor=None:
                      real(graph, block, search, evaluate, k))
        costed = counted_costings(m)

        def first(forms, search, sizes_, memories, *a, **k):
            assert memories == GRID
            got.extend(select(forms, search, sizes_, memories, *a, **k))
            raise _Stop
        m.setattr(envelope, "select", first)
        with pytest.raises(_Stop):
            nc.derive(f, memory="M", cache=KernelCache())
    out = []
    for k, b in enumerate(got):
        if b is None:
            out.append(None)
            continue
        form, path = b
        out.append((len(form.steps), [(blk, v.describe(), c.at(sizes, GRID[k])) for blk, v, c in path]))
    return out, costed[0]


PROGRAMS = {
    "attention": L.attention,
    "mlp": L.mlp,
    "ln_matmul": ln_matmul,
    "swiglu": L.swiglu_mlp,
    "random 5": lambda: random_function(np.random.default_rng(1), 5, concrete=False),
    "random 6": lambda: random_function(np.random.default_rng(7), 6, concrete=False),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_select_agrees_with_the_exact_route(name, monkeypatch):
    f = PROGRAMS[name]()
    law, _ = _selected(f, monkeypatch, True)
    exact, _ = _selected(f, monkeypatch, False)
    assert law == exact


def test_block_grid_costs_fewer_partitions(monkeypatch):
    """The transformer block's grid select (segments, seam joins): the same answers, fewer partitions costed with the
    shortcut (the segments are one kernel at their bound from 2²² or so on; a seam join's block has a partition at its
    bound there: 699 -> 682 -> 670 at 36d497c); both shortcuts off against both on."""
    f = L.transformer_block()
    both, fewest = _selected(f, monkeypatch, True)
    exact, more = _selected(f, monkeypatch, False, floor=False)
    assert both == exact
    assert fewest < more, (fewest, more)
    # (the floor alone, against reading every partition: test_best_option_floor, on random partition lists)


def test_best_option_floor():
    """``best_option(floor=)`` against reading every partition: on random partition lists (ties, partitions that do
    not fit) with a floor at most each one's H, the same answer; fewer partitions read where one meets the floor."""
    rng = np.random.default_rng(3)
    fewer = 0
    for _ in range(300):
        hs = [None if rng.random() < 0.2 else int(rng.integers(4, 9)) for _ in range(int(rng.integers(1, 6)))]
        fitting = [h for h in hs if h is not None]
        floor = int(rng.integers(0, min(fitting) + 1)) if fitting else 4
        options = [(f"p{i}", i) for i in range(len(hs))]
        search = NS(choice=lambda graph, block: NS(options=options))
        read = []
        got = paths.best_option(None, 1, search, lambda c, k: read.append(c) or hs[c], 0, floor=floor)
        assert got == paths.best_option(None, 1, search, lambda c, k: hs[c], 0), (hs, floor)
        fewer += len(read) < len(hs)
    assert fewer > 10, fewer     # (24 of 300, measured)


@pytest.mark.parametrize("name", ["attention", "ln_matmul", "random 6"])
def test_numeric_derives_agree(name, monkeypatch):
    f = PROGRAMS[name]()
    sizes = {str(k): int(v) for k, v in reference_sizes(f).items()}
    memories = [2 ** k for k in range(10, 31, 4)]

    def answers():
        r = nc.derive(f, memory=memories, sizes=sizes, cache=KernelCache())
        return repr(r.H), [str(x.variant) for x in getattr(r, "regimes", ()) or ()]
    law = answers()
    with monkeypatch.context() as m:
        m.setattr(paths, "whole_at_bound", lambda *a, **k: {})
        exact = answers()
    assert law == exact
