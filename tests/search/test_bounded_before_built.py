"""A block is bounded off the graph before its kernel is built (issue 35): ``OpGraph.moved`` and ``paths.Block``.

``shortest_splits`` and ``best_join`` skip a block on its compulsory transfers (its kernel's inputs and outputs).
They read them off the data-flow graph (:meth:`~napkin_cat.search.blocks.OpGraph.moved`), so a block whose every
edge the bound prunes is never built as a kernel (``subdiagram``), nor are its partitions drawn.  Checked by a second
route: the arrays of the built kernel (``subdiagram(block).dom`` and ``.cod``) and the kernel's own bound
(``Choice.compulsory_at``), on every block of the saved attention backward's forms (share, fold, once and units
graphs) and of random programs; and by counts: in the saved backward's derive, fewer kernels are built than blocks are
bounded, the answer unchanged.

Mutations caught: a value read by two ports loaded twice under ``share`` (the key dedup dropped in ``moved``): the
array check fails; an output read only outside the function not counted (``outside`` ignored): fails;
``Block.compulsory_at`` always asking the Choice: the count check fails (every bounded block built).
"""
import pytest

import napkin_cat as nc
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search.blocks import OpGraph
from napkin_cat.search.context import KernelCache, Search, search_of
from napkin_cat.search.forms import prepared_forms
from napkin_cat.search.paths import Block, Choice, Space, shortest_splits
from napkin_cat.search.recomputation import recomputed_forms
from napkin_cat.syntax.dtype import BOOL
from napkin_cat.testing.programs import random_program

SIZES = nc.Sizes({"q": 64, "x": 48, "d": 16})


def _backward_forms():
    book = rulebook()
    f = nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1)
    forms = prepared_forms(f, book)
    return forms + recomputed_forms(forms, book)


@pytest.fixture(scope="module")
def backward_forms():
    return _backward_forms()


def _blocks(form):
    space = form.space
    return sorted({block for b in space.downs for _, block in space.into[b]})


def test_moved_is_the_built_kernels_arrays(backward_forms):
    checked = 0
    for form in backward_forms:
        g = form.graph
        for block in _blocks(form):
            built = g.subdiagram(block)
            assert g.moved(block) == (*built.dom.inside, *built.cod.inside), (form.prepared, bin(block))
            checked += 1
    assert checked > 300


@pytest.mark.parametrize("seed", [3, 7, 11, 42, 57, 88])
def test_moved_on_random_programs_and_with_sharing(seed):
    p = random_program(seed, concrete=True)
    for share in (False, True):
        g = OpGraph(nc.engine.to_netlist(p.diagram), share=share)
        masks = any(a.dtype == BOOL for n in g.net.nodes.values() if n.kind == "box" for a in (*n.dom, *n.cod))
        for _, _, block in g.blocks(max_ops=3):
            built = g.subdiagram(block)
            assert g.moved(block) == (None if masks else (*built.dom.inside, *built.cod.inside))


def test_the_bound_off_the_graph_is_the_kernels_bound(backward_forms):
    for form in backward_forms[:3]:
        search = Search(1, KernelCache())
        for block in _blocks(form):
            ch = Choice(form.graph.subdiagram(block), 1)
            assert Block(search, form.graph, block).compulsory_at(SIZES) == ch.compulsory_at(SIZES)
        assert len(search.cache) == 0     # bounded, none built


def test_a_mask_leaves_the_bound_to_the_kernel():
    g = OpGraph(nc.engine.to_netlist(nc.library.causal_attention()), fold=True)
    assert g.moved(g.full) is None
    search = Search(1, KernelCache())
    b = Block(search, g, g.full)
    sizes = nc.Sizes({"q": 64, "x": 64, "d": 16})
    assert b.compulsory_at(sizes) == Choice(g.subdiagram(g.full), 1).compulsory_at(sizes)
    assert len(search.cache) == 1          # the kernel was asked: the graph cannot tell


def test_pruned_blocks_are_never_built(backward_forms):
    """Of the blocks the search bounds, only those it costs are built; the path is the one found building all."""
    form = max(backward_forms, key=lambda f: len(f.space.downs))
    sizes = {"q": 4096, "x": 4096, "d": 128}
    given = nc.Sizes(sizes)
    built = []
    for lazy in (True, False):
        cache = KernelCache()
        search = search_of(1, cache)
        points = {}

        def evaluate(curve, k):
            if curve not in points:
                points[curve] = [h for h, _ in curve.at_all(sizes, [2 ** 16])]
            return points[curve][k]

        if lazy:
            lower = lambda ch: ch.compulsory_at(given)              # noqa: E731
        else:                                                        # the kernel built before it is bounded
            lower = lambda ch: search.choice(form.graph, ch.mask).compulsory_at(given)   # noqa: E731
        got = shortest_splits(form.space, search, [2 ** 16], evaluate, lower)
        built.append((cache.distinct, [(b, v) for b, v, _ in got[0][2]], got[0][:2]))
    (lazy_built, lazy_path, lazy_H), (all_built, all_path, all_H) = built
    assert (lazy_path, lazy_H) == (all_path, all_H)
    assert lazy_built < all_built, (lazy_built, all_built)
    assert all_built <= len(_blocks(form))


def test_space_prunes_match_a_space_made_whole(backward_forms):
    """Space stops growing a size once its distinct kernels pass the budget: the edges, cap and exactness are those
    of a space whose every size up to the cap is enumerated from the graph's blocks (``OpGraph.blocks``)."""
    for form in backward_forms[:3]:
        g = form.graph
        if form.units:
            continue
        every = {}
        for a, b, block in g.blocks():
            every.setdefault(block.bit_count(), []).append((a, b, block))
        for budget in (2, 8, 40, 100):
            space = Space(g, budget=budget)
            keys, cap = set(), 0
            for size in sorted(every):
                more = keys | {g.key(block) for _, _, block in every[size]}
                if len(more) > budget:
                    break
                keys, cap = more, size
            want = {(a, b) for size in every if size <= max(cap, 1) for a, b, _ in every[size]}
            if cap == 0:
                want = {(a, b) for a, b, _ in every[1]}
            if cap < max(every):
                want |= {(0, g.full)} if g.connected(g.full) else set()
            got = {(a, b) for b in space.downs for a, _ in space.into[b]}
            assert (space.cap, got) == (max(cap, 1), want), (form.prepared, budget)
            assert space.exact == (cap == max(every))
