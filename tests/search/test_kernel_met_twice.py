"""A kernel met twice is costed once (issue 35, item 2), and only a kernel that is the same is shared.

Two block keys may name one kernel: a key says which outputs other operations read and which values a form computes
once, and blocks that differ only there can build the same function diagram (layer norm's recomputed mean folded
away, say).  The kernel cache (:mod:`napkin_cat.search.context`) looks a new key up a second time by ``(diagram,
level, density)`` and shares the Choice it finds.  Second route: every Choice the cache hands out is compared with
the block's own, built fresh from ``graph.subdiagram(block)`` at the level and density asked: the same kernel, the same
partitions, the same cost records (H, columns, FLOPs) and the same optimum at numeric sizes.  A shared Choice must not
cross sizes (arrays of other sizes are another kernel) or densities (a mask from data costs its trips by it).
"""
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.search.blocks import OpGraph
from napkin_cat.search.context import KernelCache
from napkin_cat.search.paths import Choice, Space
from napkin_cat.testing.programs import random_program

MEMORIES = [2 ** 7, 2 ** 10]


class Recording(KernelCache):
    """A kernel cache that records what it was asked and what it answered."""

    def __init__(self):
        super().__init__()
        self.asked = []

    def choice(self, graph, block, level, density=1):
        got = super().choice(graph, block, level, density)
        self.asked.append((graph, block, level, density, got))
        return got


def _record(curve) -> tuple:
    c = curve.search_cost
    return (dict(c.H), {lvl: sorted(map(str, cols)) for lvl, cols in c.columns.items()}, dict(c.flops),
            repr(c.groups), repr(c.streams))


def _costs(choice: Choice, sizes: dict) -> list:
    """Each partition's description, its cost record and its optimum at ``sizes`` and :data:`MEMORIES`."""
    return [(v.describe(), _record(c), c.at_all(sizes, MEMORIES)) for v, c in choice.options]


def _check(cache: Recording, sizes: dict) -> int:
    """Every answer of ``cache`` is the asked block's own kernel at the asked level and density, and a Choice answered
    for another key costs what a fresh Choice of this block costs; how many answers were shared that way."""
    shared, fresh_of = 0, {}
    for graph, block, level, density, got in cache.asked:
        function = graph.subdiagram(block)
        assert got.function == function and got.level == level and got.density == density
        if got.function is not function and id(got) not in fresh_of:   # built for another key: check it once
            shared += 1
            fresh_of[id(got)] = True
            assert _costs(got, sizes) == _costs(Choice(function, level, density), sizes)
    return shared


def test_a_kernel_met_under_two_keys_is_costed_once_and_costs_what_its_own_does():
    sizes = {"n": 64, "d": 32}
    cache = Recording()
    r = nc.derive(nc.library.layer_norm(), memory=2 ** 10, sizes=sizes, cache=cache)
    assert cache.distinct < len(cache)              # some keys name one kernel (90 keys, 80 kernels at 2dbe3d7)
    shared = {id(got) for *_, got in cache.asked}
    assert len(shared) == cache.distinct
    assert _check(cache, sizes) > 0
    assert r.H == nc.cost(r.diagram, sizes=r.optimum.sizes).H[1]


def _ask(cache, f, density=1) -> OpGraph:
    """Ask ``cache`` for the Choice of every block of ``f``'s space (as a derivation's first form does)."""
    graph = OpGraph(nc.engine.to_netlist(f))
    for block in {b for into in Space(graph).into.values() for _, b in into}:
        cache.choice(graph, block, 1, density)
    return graph


def test_a_kernel_at_other_sizes_is_another_kernel():
    """Layer norm with its sizes in the arrays (n = 64, then n = 48) in one cache: the block keys differ, and so
    must the kernels (a key by the diagram's names alone, its repr say, would share them)."""
    cache = Recording()
    for n in (64, 48):
        _ask(cache, nc.library.layer_norm(n=n, d=32))
    assert {got.function.dom.inside[0].axes[0].size for *_, got in cache.asked} == {64, 48}
    _check(cache, {})


def test_a_kernel_at_another_density_is_another_choice():
    """Document attention (a mask from data) asked at density 1 and 1/4 in one cache: no Choice is shared across the
    densities, and the whole kernel's cheapest partition moves less at 1/4 (the density is what its cost reads)."""
    cache, quarter = Recording(), sympy.Rational(1, 4)
    f = nc.library.document_attention(q=128, x=128, d=16)
    whole = {density: cache.choice(graph, graph.full, 1, density)
             for density in (1, quarter) for graph in [_ask(cache, f, density)]}
    _check(cache, {})
    at = {}
    for _, _, _, density, got in cache.asked:
        at.setdefault(density, set()).add(id(got))
    assert at[1].isdisjoint(at[quarter])
    least = {d: min(h for h, _ in (curve.at({}, 2 ** 12) for _, curve in c.options) if h is not None)
             for d, c in whole.items()}
    assert least[quarter] < least[1]


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 7, 8])
def test_random_programs_every_answer_is_the_blocks_own(seed):
    """Random programs (napkin_cat.testing): every answer is the block's own kernel, a shared one costs what a fresh
    one does, and the answer's H is what the cost functor reads off the derived algorithm."""
    p = random_program(seed, concrete=True, n_ops=4)
    cache = Recording()
    try:
        r = nc.derive(p.diagram, memory=2 ** 9, sizes=p.sizes, cache=cache)
    except nc.NapkinError:
        pytest.skip(f"{p.call}: nothing to derive")
    _check(cache, p.sizes)
    if r.H is not None:
        assert nc.cost(r.diagram, sizes=r.optimum.sizes).H.get(1, 0) == r.H
