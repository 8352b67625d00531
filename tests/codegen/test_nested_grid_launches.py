"""Grids nested along one axis launch their innermost tiles (issue 31, family 7): the C, CUDA and Triton kernels run
one block per innermost tile, as :mod:`napkin_cat.algorithms.launches` counts, and compute the function.

An inner Grid cuts each tile of the outer one, the last tile shorter (``a = 10`` by 7, then by 3: ``(3 + 3 + 1) +
3``, four blocks).  The printers decode the flat block index into the chain's indices
(:meth:`napkin_cat.codegen.printer.CodePrinter.unflatten`).  Independent routes:

* the innermost tiles enumerated here from the definition (loop over the outer tiles, cut each one): the decode
  printed in the Triton dialect (Python syntax), evaluated block by block, reaches each exactly once;
* the launch count in the emitted source (C's ``nc_b < N``, CUDA's ``<<<N``, the Triton launcher's grid evaluated
  at the call's sizes) is the number of those tiles;
* the outputs equal ``nc.evaluate`` of the unpartitioned function (the C kernel through ctypes; the Triton kernel
  under ``TRITON_INTERPRET=1`` at sizes other than its plan's: ragged, divisible, an outer tile larger than the
  axis); the CUDA source compiles with nvcc at the plan's shared memory.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.codegen.launch import launches
from napkin_cat.codegen.triton.printer import TritonPrinter
from rewrites import flash_attention

from kernels_common import assert_close, needs_cc, needs_nvcc, needs_triton

TILES = ("g_a", "h_a", "k_a")


def innermost(start, n, tiles) -> list:
    """The innermost tiles ``(start, length)`` of an axis segment ``[start, start + n)`` cut by ``tiles`` in turn,
    outermost first, each cutting the tiles of the one before (the last one of each cut shorter)."""
    if not tiles:
        return [(start, n)]
    g, rest = tiles[0], tiles[1:]
    return [t for k in range(math.ceil(n / g)) for t in innermost(start + k * g, min(g, n - k * g), rest)]


def matmul_nested(depth: int, *, across: bool = False):
    """``A B`` streamed along b, its rows grouped ``depth`` times along a (a Grid along c in between: ``across``)."""
    d = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
    if across:
        d = nc.group(d, "c", "g_c")
    for t in TILES[1:depth]:
        d = nc.group(d, "a", t)
    return d


def attention_nested():
    """FlashAttention (Grid along q by g_q) with each query tile grouped again by h_q."""
    return nc.group(flash_attention(nc.library.attention()).diagram, "q", "h_q")


def decoded_starts(p, n, tiles) -> list:
    """Per block of the plan's one launch, the start of its innermost tile along a (an axis of ``n`` cut by
    ``tiles``): the Triton dialect's decode (Python syntax) evaluated at ``nc_b`` = 0, 1, …, each index checked
    against the tiles of the segment it cuts."""
    (launch,) = launches(p)
    printer = TritonPrinter(p, runtime=False)
    decode = [(name, compile(value, name, "eval")) for name, value in printer.decode(launch, "nc_b")]
    names = [printer.code(g.index) for g in launch.grids]
    starts = []
    for b in range(launch.blocks):
        env = {"nc_b": b}
        for name, value in decode:
            env[name] = eval(value, {}, dict(env))
        start, segment = 0, n
        for name, g in zip(names, tiles):
            i = env[name]
            assert 0 <= i < math.ceil(segment / g), f"block {b}: {name} = {i}, past the tiles of {segment} by {g}"
            start, segment = start + i * g, min(g, segment - i * g)
        starts.append(start)
    return starts


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), data=st.data())
def test_the_blocks_decode_into_each_innermost_tile_once(n, data):
    """Random chains of one to three Grids along a (ragged, divisible, an inner tile past the outer one's last,
    shorter tile)."""
    tiles = [data.draw(st.integers(1, n), label="g_a")]
    for _ in range(data.draw(st.integers(0, 2), label="inner Grids")):
        tiles.append(data.draw(st.integers(1, tiles[-1]), label="inner tile"))
    sizes = {"a": n, "b": 2, "c": 2, "s_b": 2, **dict(zip(TILES, tiles))}
    p = nc.plan(matmul_nested(len(tiles)), sizes)
    want = innermost(0, n, tiles)
    (launch,) = launches(p)
    assert launch.blocks == len(want)
    assert sorted(decoded_starts(p, n, tiles)) == [s for s, _ in want]


C_CASES = {
    "ragged": {"a": 10, "g_a": 7, "h_a": 3},
    "divisible": {"a": 12, "g_a": 6, "h_a": 3},
    "inner tile past the last outer tile": {"a": 10, "g_a": 7, "h_a": 4},
    "one outer tile": {"a": 7, "g_a": 7, "h_a": 2},
    "three Grids": {"a": 13, "g_a": 5, "h_a": 3, "k_a": 2},
    "a Grid along c between": {"a": 10, "g_a": 7, "h_a": 3, "c": 5, "g_c": 2},
}


@needs_cc
@pytest.mark.parametrize("name", sorted(C_CASES))
def test_the_c_kernel_launches_the_innermost_tiles_and_computes_the_product(name):
    sizes = {"b": 5, "c": 3, "s_b": 2, **C_CASES[name]}
    tiles = [sizes[t] for t in TILES if t in sizes]
    p = nc.plan(matmul_nested(len(tiles), across="g_c" in sizes), sizes)
    blocks = len(innermost(0, sizes["a"], tiles)) * math.ceil(sizes["c"] / sizes.get("g_c", sizes["c"]))
    k = nc.codegen.c(p, blas=False, poison=True)
    assert re.findall(r"nc_b < (\d+);", k.source) == [str(blocks)]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((sizes["a"], sizes["b"])).astype(np.float32)
    y = rng.standard_normal((sizes["b"], sizes["c"])).astype(np.float32)
    got = k(x, y)
    assert_close(got, nc.evaluate(nc.library.matmul(), x, y))
    assert_close(got, x @ y)


@needs_cc
@pytest.mark.parametrize("q, g_q, h_q", [(10, 7, 3), (12, 6, 3)])
def test_the_c_kernel_of_nested_query_tiles_computes_attention(q, g_q, h_q):
    p = nc.plan(attention_nested(), {"q": q, "x": 9, "d": 4, "g_q": g_q, "h_q": h_q, "s_x": 4})
    k = nc.codegen.c(p)
    assert re.findall(r"nc_b < (\d+);", k.source) == [str(len(innermost(0, q, [g_q, h_q])))]
    rng = np.random.default_rng(q)
    Q, K, V = (rng.standard_normal(s).astype(np.float32) for s in ((q, 4), (9, 4), (9, 4)))
    assert_close(k(Q, K, V), nc.evaluate(nc.library.attention(), Q, K, V))


@needs_triton
def test_the_triton_kernel_launches_the_innermost_tiles_at_runtime_sizes():
    """One kernel planned at a = 12 (6, then 3), run at a = 12 (divisible), 10 (ragged: 6 + 4 → 3 + 3 + 3 + 1) and
    4 (the outer tile, 6, past the axis): its launcher's grid at each a is the number of innermost tiles."""
    p = nc.plan(matmul_nested(2), {"a": 12, "b": 5, "c": 3, "s_b": 2, "g_a": 6, "h_a": 3})
    k = nc.codegen.triton(p)
    assert [str(s) for s in k.printer.runtime] == ["a", "b"]
    (grid,) = re.findall(r"\[\((.+),\)\]\(", k.source)
    rng = np.random.default_rng(3)
    for a in (12, 10, 4):
        assert eval(grid, {}, {"a": a, "b": 5}) == len(innermost(0, a, [6, 3]))
        x = rng.standard_normal((a, 5)).astype(np.float32)
        y = rng.standard_normal((5, 3)).astype(np.float32)
        assert_close(k(x, y), nc.evaluate(nc.library.matmul(), x, y))


@needs_triton
def test_the_triton_kernel_of_nested_query_tiles_computes_attention():
    p = nc.plan(attention_nested(), {"q": 10, "x": 9, "d": 4, "g_q": 7, "h_q": 3, "s_x": 4})
    k = nc.codegen.triton(p)
    rng = np.random.default_rng(5)
    for q in (10, 14, 3):
        Q, K, V = (rng.standard_normal(s).astype(np.float32) for s in ((q, 4), (9, 4), (9, 4)))
        assert_close(k(Q, K, V), nc.evaluate(nc.library.attention(), Q, K, V))


@needs_nvcc
@pytest.mark.parametrize("make, sizes, blocks", [
    (lambda: matmul_nested(2, across=True), {"a": 10, "b": 5, "c": 5, "s_b": 2, "g_a": 7, "h_a": 3, "g_c": 2}, 4 * 3),
    (attention_nested, {"q": 10, "x": 9, "d": 4, "g_q": 7, "h_q": 3, "s_x": 4}, 4),
])
def test_the_cuda_kernel_launches_the_innermost_tiles_and_compiles(make, sizes, blocks):
    p = nc.plan(make(), sizes)
    k = nc.codegen.cuda(p)
    assert re.findall(r"nc_kernel0<<<(\d+),", k.source) == [str(blocks)]
    assert "const long nc_b = blockIdx.x;" in k.source
    assert k.compile(arch="sm_90")["smem"] == p.smem_bytes
