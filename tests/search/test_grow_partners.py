"""Cost-guided fusion past the cap asks only the kernels a kernel feeds (issue 35, an outside program: the
symbolic derive of a transformer block's gradient, whose forms are capped, spent most of its time pairing kernels).

* :meth:`~napkin_cat.search.blocks.OpGraph.convex` (read off each operation's reach, kept per block) is what a
  breadth-first search from the block's outside successors says (a second route, written here), on runs of random
  topological orders (convex) and on random sets of operations, of several programs;
* :func:`~napkin_cat.search.growth.grow` pairing a kernel only with those holding an operation it feeds
  (``partners``) answers as pairing it with every kernel does: the same ``(H, kernels, path)`` at every memory of
  derives whose spaces are capped (the budget lowered so that small programs' are), and grow is called there.
"""
from __future__ import annotations

import random

import pytest

import napkin_cat as nc
from napkin_cat.search import growth, paths
from napkin_cat.search.blocks import OpGraph, bits
from napkin_cat.search.context import KernelCache
from napkin_cat.testing.programs import random_program
from tests.answers import assert_runs_counts_and_replays


def searched_convex(graph, block: int) -> bool:
    """No path leaves ``block`` and returns: a breadth-first search from the operations it feeds outside it."""
    frontier = 0
    for i in bits(block):
        frontier |= graph.succs[i] & ~block
    seen = 0
    while frontier:
        seen |= frontier
        nxt = 0
        for i in bits(frontier):
            if graph.succs[i] & block:
                return False
            nxt |= graph.succs[i]
        frontier = nxt & ~seen & ~block
    return True


PROGRAMS = {
    "block": lambda: nc.library.transformer_block(),
    "block gradient": lambda: nc.grad(nc.library.transformer_block(), wrt=[0]),
    "swiglu gradient": lambda: nc.grad(nc.library.swiglu_mlp(), wrt=[0]),
    **{f"random {s}": (lambda s=s: random_program(s, n_ops=7).diagram) for s in (3, 11, 19)},
}


def topological(graph, rng) -> list:
    """A random topological order of the operations (each after those it reads)."""
    left, order = [p.bit_count() for p in graph.preds], []
    ready = [i for i, n in enumerate(left) if n == 0]
    while ready:
        i = ready.pop(rng.randrange(len(ready)))
        order.append(i)
        for s in bits(graph.succs[i]):
            left[s] -= 1
            if left[s] == 0:
                ready.append(s)
    return order


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_convex_is_the_breadth_first_searchs_answer(name):
    g = OpGraph(nc.engine.to_netlist(PROGRAMS[name]()))
    n = len(g.nodes)
    rng = random.Random(n)
    blocks = set()
    for _ in range(200):    # a run of a topological order: the difference of two down-sets, convex
        order = topological(g, rng)
        a = rng.randrange(n)
        blocks.add(sum(1 << i for i in order[a:rng.randint(a + 1, min(n, a + 8))]))
    blocks |= {sum(1 << i for i in rng.sample(range(n), rng.randint(1, min(n, 6)))) for _ in range(400)}
    verdicts = {block: g.convex(block) for block in blocks}
    assert verdicts == {block: searched_convex(g, block) for block in blocks}
    assert True in verdicts.values() and (n < 3 or False in verdicts.values())   # both answers met


def test_grow_with_partners_answers_as_pairing_every_kernel(monkeypatch):
    monkeypatch.setattr(paths, "BUDGET", 6)      # small programs' spaces capped: their winners are grown
    real, calls = growth._join_greedily, []

    def both(graph, search, found, evaluate, k, may_join, lower=None, partners=None):
        got = real(graph, search, found, evaluate, k, may_join, lower, partners)
        if partners is not None:
            every = real(graph, search, found, evaluate, k, may_join, lower, None)
            assert (got[0], got[1], [p[0] for p in got[2]]) == (every[0], every[1], [p[0] for p in every[2]])
            calls.append(len(found[2]) - got[1])     # the joins made
        return got
    monkeypatch.setattr(growth, "_join_greedily", both)
    f = nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1)
    r = nc.derive(f, memory=[2 ** 12, 2 ** 16, 2 ** 20], sizes={"q": 256, "x": 256, "d": 32}, cache=KernelCache())
    assert r.H
    assert calls and any(calls)       # grow ran, and joined kernels somewhere


def searched_downsets(graph, within=None, units=None) -> tuple:
    """Every down-set, each grown from the empty one by trying every step at every down-set (a second route to
    :meth:`~napkin_cat.search.blocks.OpGraph.grown`), and per down-set the steps it can take next."""
    steps = graph.steps(within, units)
    seen, frontier = {0}, [0]
    while frontier:
        nxt = []
        for d in frontier:
            for u, need in steps:
                if not d & u and not need & ~d and d | u not in seen:
                    seen.add(d | u)
                    nxt.append(d | u)
        frontier = nxt
    takes = {d: [u for u, need in steps if not u & d and not need & ~d] for d in seen}
    return sorted(seen, key=lambda m: (m.bit_count(), m)), takes


GRAPHS = {
    "attention backward": lambda: nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1),
    "swiglu gradient": lambda: nc.grad(nc.library.swiglu_mlp(), wrt=[0]),
    "block": lambda: nc.library.transformer_block(),
    **{f"random {s}": (lambda s=s: random_program(s, n_ops=7, readers=3).diagram) for s in (5, 8, 13)},
}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_down_sets_and_their_next_steps_are_the_searched_ones(name):
    g = OpGraph(nc.engine.to_netlist(GRAPHS[name]()), share=True, join=True)
    rng = random.Random(7)
    asked = [(None, None), (None, g.units())]
    for _ in range(3):       # within a run of a topological order (a segment), with and without units
        order = topological(g, rng)
        a = rng.randrange(len(order))
        within = sum(1 << i for i in order[a:])
        asked += [(within, None), (within, [u for u in g.units() if u & ~within == 0])]
    for within, units in asked:
        downs, steps, takes = g.grown(within, units)
        want, want_takes = searched_downsets(g, within, units)
        assert downs == want and g.downsets(within, units) == want
        assert {d: [steps[k][0] for k in bits(takes[d])] for d in downs} == want_takes
    assert len(downs) > 2


def scanned_order(graph, blocks):
    """The order of a scan from the front for a block whose reads are done (a second route to ``growth.ordered``)."""
    left, out, done = list(blocks), [], 0
    while left:
        for k, b in enumerate(left):
            need = 0
            for i in bits(b):
                need |= graph.preds[i]
            if need & ~b & ~done == 0:
                out.append(b)
                done |= b
                del left[k]
                break
        else:
            return None
    return out


def split(ops: list, rng, most: int) -> list:
    """The operations ``ops`` (in their order) cut into up to ``most + 1`` runs, as masks."""
    n = len(ops)
    cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randint(0, most)))) if n > 1 else []
    return [sum(1 << i for i in ops[a:b]) for a, b in zip([0] + cuts, cuts + [n])]


@pytest.fixture(params=list(GRAPHS))
def graph(request):
    return OpGraph(nc.engine.to_netlist(GRAPHS[request.param]()))


def test_ordered_is_the_scans_order(graph):
    g, rng, answers = graph, random.Random(11), set()
    n = len(g.nodes)
    for _ in range(300):
        ops = list(range(n)) if rng.random() < 0.5 else topological(g, rng)      # runs of a random or topological
        blocks = split(ops, rng, 5)
        rng.shuffle(blocks)
        if rng.random() < 0.2 and len(blocks) > 1:
            blocks.pop()           # an operation no block holds
        got = growth.ordered(g, blocks)
        assert got == scanned_order(g, blocks)
        answers.add(got is None)
    assert answers == {True, False}       # both orders and refusals met


def test_a_join_is_admissible_where_the_joined_split_orders(graph):
    g, rng, answers = graph, random.Random(5), set()
    for _ in range(100):
        blocks = split(topological(g, rng), rng, 6)
        if rng.random() < 0.15 and len(blocks) > 2:
            blocks.pop(0)        # a block reads an operation no block holds: nothing orders
        blocks = growth.ordered(g, blocks) or blocks
        ok = growth.joinable(g, blocks)
        for i in range(len(blocks)):
            for j in range(len(blocks)):
                if i != j:
                    rest = [b for m, b in enumerate(blocks) if m not in (i, j)] + [blocks[i] | blocks[j]]
                    assert ok((i, j)) == (scanned_order(g, rest) is not None), (blocks, i, j)
                    answers.add(ok((i, j)))
    assert answers == {True, False}


@pytest.mark.parametrize("blocks, memory", [(2, 2 ** 8), (3, 2 ** 10)])
def test_seam_fusion_orders_a_range_that_reads_the_kernels_before_it(blocks, memory, monkeypatch):
    """A seam join whose range of kernels reads a kernel before it was refused (``ordered`` found no block holding
    what it read: 102 of the 115 saving joins of four blocks at three memories).  Ordered with the kernels before the
    range computed, every saving join is applied, some in a range after the first kernel, and the answer runs,
    counts its H and replays."""
    from napkin_cat.search import segments
    real, refused, ranges = segments.ordered, [], []

    def recorded(graph, blocks_, done=0):
        got = real(graph, blocks_, done)
        refused.append(got is None)
        ranges.append(done != 0)
        return got
    monkeypatch.setattr(segments, "ordered", recorded)
    f = nc.library.transformer_stack(blocks)
    sizes = {"n": 16, "e": 8, "h": 2, "d": 4, "f": 16}
    r = nc.derive(f, memory=memory, sizes=sizes, cache=KernelCache())
    assert refused and not any(refused) and any(ranges)
    assert_runs_counts_and_replays(f, r, sizes, scale=0.3, seed=0)
