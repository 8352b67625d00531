"""A parallelism requirement in the search (issue 22, item 2): ``nc.derive(..., min_blocks=B)`` returns the
cheapest algorithm whose every kernel launches at least B thread blocks.  At decode (q = 1) attention then
derives FlashDecoding (its stream along x split into parts, the partial (μ, z, o) merged) and a skinny matmul
derives split-K; without the requirement neither is split (IO never prefers it).  The results compute the
function, report their blocks, and cost what their algorithm costs.

The blocks ``r.blocks`` reports are counted here without the library's count: from the plan's grid loops around
each kernel (:func:`launched`), and from the trip counts of the chosen tiles, written out per test."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.plan.ir import GridLoop, Kernel, StreamLoop, walk


def launched(d, sizes) -> list:
    """The thread blocks of each kernel the plan of ``d`` at ``sizes`` launches: the product of the trips
    ⌈full/tile⌉ of the grid loops around it.  A split stream's second launch, which merges its parts (a stream over
    the parts), is left out: it is the combine, not a kernel of the algorithm."""
    p = nc.plan(d, sizes)
    found = []

    def visit(stmts, outer):
        for s in stmts:
            if isinstance(s, GridLoop):
                full, tile = (sympy.sympify(e).subs(p.sizes) for e in (s.full, s.tile))
                if full.free_symbols:         # the rows of a group (a combine's, left out): its extent
                    continue
                visit(s.body, outer * -(-int(full) // int(tile)))
            elif isinstance(s, Kernel):
                if not any(isinstance(t, StreamLoop) and t.axis.startswith("parts_") for t in walk(s.body)):
                    found.append(outer)
    visit(p.body, 1)
    return found


def ceil(a, b):
    return -(-a // b)


def test_flash_decoding_is_derived_at_q_1_under_132_blocks():
    sizes = {"q": 1, "x": 65536, "d": 128}
    plain = nc.derive(nc.library.attention(), 2 ** 14, sizes=sizes)
    r = nc.derive(nc.library.attention(), 2 ** 14, sizes=sizes, min_blocks=132)
    assert plain.blocks == 1 == min(launched(plain.diagram, plain.optimum.sizes))
    assert plain.H == 2 * 65536 * 128 + 2 * 128
    (k,) = r.variant.kernels
    assert k.stream == "x" and k.parts and r.blocks >= 132
    P = r.optimum.sizes[k.parts]
    assert launched(r.diagram, r.optimum.sizes) == [P]       # one query: one group, P parts
    assert r.blocks == P == 256       # the first divisor of x past 132: more parts only move more
    # each part loads q (d values) and writes and reads back its (μ, z, o) (2 + d values each way)
    assert r.H == plain.H + (P - 1) * 128 + 2 * P * (2 + 128) == nc.cost(r.diagram, sizes=r.optimum.sizes).H[1]


def test_split_k_is_derived_for_a_skinny_matmul():
    S = {"a": 64, "b": 2 ** 16, "c": 64}
    plain = nc.derive(nc.library.matmul(), 2 ** 14, sizes=S)
    r = nc.derive(nc.library.matmul(), 2 ** 14, sizes=S, min_blocks=132)
    (k,) = r.variant.kernels
    assert plain.blocks == 1 and not plain.variant.kernels[0].parts
    assert k.stream == "b" and k.parts and r.blocks >= 132
    P, ga, gc = (r.optimum.sizes[n] for n in (k.parts, k.tiles["a"], k.tiles["c"]))
    assert r.blocks == ceil(64, ga) * ceil(64, gc) * P == min(launched(r.diagram, r.optimum.sizes))
    assert r.H == plain.H + 2 * P * ga * gc * (64 // ga) * (64 // gc)


def test_enough_groups_need_no_split():
    r = nc.derive(nc.library.matmul(), 2 ** 10, sizes={"a": 256, "b": 64, "c": 256}, min_blocks=16)
    assert not r.variant.kernels[0].parts and r.blocks >= 16
    ga, gc = (r.optimum.sizes[r.variant.kernels[0].tiles[a]] for a in "ac")
    assert r.blocks == ceil(256, ga) * ceil(256, gc) == min(launched(r.diagram, r.optimum.sizes))
    plain = nc.derive(nc.library.matmul(), 2 ** 10, sizes={"a": 256, "b": 64, "c": 256})
    assert r.H >= plain.H


@pytest.mark.parametrize("seed", [0, 1])
def test_the_derived_split_computes_the_function_at_ragged_sizes(seed):
    rng = np.random.default_rng(seed)
    sizes = {"q": int(rng.integers(1, 4)), "x": int(rng.integers(20, 50)), "d": int(rng.integers(2, 6))}
    att = nc.library.attention()
    r = nc.derive(att, 96, sizes=sizes, min_blocks=8, tiles="any")
    assert any(k.parts for k in r.variant.kernels) and r.blocks >= 8
    tiles = r.optimum.sizes
    by_tiles = [int(np.prod([ceil(sizes[a], tiles[k.tiles[a]]) for a in k.groups])) * (tiles[k.parts] if k.parts else 1)
                for k in r.variant.kernels]
    assert r.blocks == min(by_tiles) == min(launched(r.diagram, tiles))
    xs = [rng.normal(size=(sizes["q"], sizes["d"])) * 10, rng.normal(size=(sizes["x"], sizes["d"])),
          rng.normal(size=(sizes["x"], sizes["d"]))]
    np.testing.assert_allclose(nc.evaluate(r.diagram, *xs, sizes=r.optimum.sizes), nc.evaluate(att, *xs),
                               rtol=1e-10, atol=1e-12)
    assert nc.cost(r.diagram, sizes=r.optimum.sizes).H[1] == r.H
    assert nc.isomorphic(r.trace.replay(att), r.diagram)


def test_the_requirement_is_refused_where_nothing_meets_it():
    with pytest.raises(nc.MemoryLimitError, match="launches 1000 thread blocks"):
        nc.derive(nc.library.matmul(), 2 ** 10, sizes={"a": 4, "b": 8, "c": 4}, min_blocks=1000)
    with pytest.raises(nc.NapkinError, match="min_blocks must be a positive int"):
        nc.derive(nc.library.matmul(), 2 ** 10, sizes={"a": 4, "b": 8, "c": 4}, min_blocks=0)
    with pytest.raises(nc.NapkinError, match="concrete sizes"):
        nc.derive(nc.library.matmul(), "M", min_blocks=4)
