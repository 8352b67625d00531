"""Every kernel the numeric search chooses is one the construction can make (issue 31: a search offers only what it
performs).  The search's joins past the exact space (cost-guided fusion, :func:`~napkin_cat.search.growth.grow`, and
seam fusion, ``_join_seams`` in :mod:`napkin_cat.search.segments`) joined two kernels where one reads the other's
value through a rename, a view in global memory: ``nc.derive(transformer_block, memory=58112)`` (an H100's shared
memory per block in fp32 values, the one-device form ``time_form(compute="transfers")`` times) chose one kernel of
34 operations holding both ends of the K/V rename, and construction failed ("kernel fusion cannot join the 2
kernels of block 0").  A join now asks :meth:`~napkin_cat.search.blocks.OpGraph.linked` of the union, as the exact
space asks of its blocks.

Second routes: the derived H against the instrumented run of its plan (the runner's counted transfers), and its
outputs against the function evaluated unfused; at a small memory (4096) the same checks on a split the exact
joins never reached past.

Mutation caught: either guard removed (``graph.linked`` in ``_join_greedily`` or in ``_join_seams``): derive raises
ConstructionError at these memories (measured: the seam join at 58112, cost-guided fusion in the segments)."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware.clustered import time_form
from napkin_cat.search.devices import device_forms

SIZES = {"n": 16, "e": 16, "h": 2, "d": 8, "f": 32}


def inputs(d, sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=tuple(sizes[a] for a in arr.names)) for arr in d.dom.inside]


@pytest.mark.parametrize("memory", [58112, 4096])
def test_the_block_derived_at_a_large_memory_is_made_and_moves_what_it_counts(memory):
    f = nc.library.transformer_block()
    r = nc.derive(f, memory=memory, sizes=SIZES)
    sizes = dict(r.optimum.sizes)
    xs = inputs(f, SIZES)
    with np.errstate(all="ignore"):
        out, counters = nc.plan(r.diagram, sizes).run(*xs)
        expected = nc.evaluate(f, *xs)
    assert counters.transfers.get(1, 0) == r.H
    assert np.allclose(out, expected, rtol=1e-9, atol=1e-9)


def test_the_one_device_form_of_the_block_is_timed_by_transfers():
    c = nc.hardware.cluster("h100-sxm5", devices=2, link="nvlink4")
    (one,) = [form for form in device_forms(nc.library.transformer_block(), 2) if form.label == "one device"]
    timed = time_form(one, c, SIZES, compute="transfers")
    assert timed.refused is None, timed.refused
    assert timed.time > 0 and timed.memory > 0


def test_cost_guided_fusion_never_joins_the_ends_of_a_view_read_outside_however_much_it_would_save():
    """``exp ; rename_{n→m} ; exp`` whose view is an output too: the two exps are two kernels (the rename is a view
    between them, in global memory; one kernel of both would need it inside and outside).  Costed so that their join
    would save nearly everything, :func:`grow` still keeps them apart; a join of two kernels that one kernel can hold
    is taken (the control).  (fuse-35: a view read only inside a kernel is folded into it; before, every view was
    kept apart.)"""
    from napkin_cat.search.blocks import OpGraph
    from napkin_cat.search.context import KernelCache, Search
    from napkin_cat.search.growth import grow
    from napkin_cat.search.paths import best_option

    def two_exps(rename: bool):
        b = nc.Builder(nc.types("h n"))
        (X,) = b.inputs
        Y = b(nc.elementwise("exp", "h n"), X)
        if rename:
            V = b(nc.renaming("h n -> h m"), Y)
            return b.build(V, b(nc.elementwise("exp", "h m", m="n"), V))
        return b.build(b(nc.elementwise("exp", "h n"), Y))

    for rename in (True, False):
        g = OpGraph(nc.engine.to_netlist(two_exps(rename)))
        search, sizes = Search(1, KernelCache()), {"h": 16, "n": 16}
        parts = [best_option(g, 1 << i, search, lambda c, k: c.at_all(sizes, [2 ** 10])[k][0], 0) for i in range(2)]
        apart = {id(p[2]) for p in parts}
        evaluate = lambda c, k: 100 if id(c) in apart else 1        # noqa: E731  (a join saves 199)
        found = (200, 2, [(1 << i, p[1], p[2]) for i, p in enumerate(parts)])
        blocks = [block for block, _, _ in grow(g, search, found, evaluate, 0)[2]]
        assert blocks == ([1, 2] if rename else [3]) and g.linked(3) is not rename
