"""Nested regions (a kernel one level down inside a partitioned kernel; sub-loops of a stream): the C kernel
runs them, the CUDA kernel spreads a level-2 Grid over the threads and keeps the plan's shared memory, the
Triton kernel refuses a slice of an on-chip tensor by name.

Nested regions are built by ``nc.kernel(…, level=2)`` inside partitions and by streaming a stream again
(:mod:`napkin_cat.algorithms.nesting`).  The Triton kernel refuses the first slice of an on-chip tensor it
meets: the level-2 kernel's load of its part of the level-1 accumulator (``sum0``) or of the level-1 tile
``x0_1``."""
from __future__ import annotations

import pytest

import napkin_cat as nc

from kernels_common import HAVE_NVCC, assert_close, inputs, needs_cc


def _cases():
    from rewrites import flash_attention
    flash = flash_attention(nc.library.attention()).diagram
    tiled = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    two_level = nc.group(nc.group(nc.stream(nc.kernel(tiled, level=2), "b", "u_b"), "a", "h_a"), "c", "h_c")
    sub_loop = nc.stream(flash, "x", "u_x")
    two_level_flash = nc.stream(nc.group(nc.kernel(flash, level=2), "q", "h_q"), "x", "u_x")
    return {
        "two_level_matmul": (two_level, {"a": 9, "b": 13, "c": 7, "g_a": 4, "g_c": 6, "s_b": 6, "h_a": 2,
                                         "h_c": 3, "u_b": 4}),
        "sub_loop_attention": (sub_loop, {"q": 9, "x": 13, "d": 3, "g_q": 4, "s_x": 6, "u_x": 4}),
        "two_level_attention": (two_level_flash, {"q": 9, "x": 13, "d": 3, "g_q": 4, "s_x": 6, "u_x": 4, "h_q": 3}),
    }


@needs_cc
@pytest.mark.parametrize("name", ["two_level_matmul", "sub_loop_attention", "two_level_attention"])
def test_nested_plans_run_and_compile(name):
    diagram, sizes = _cases()[name]
    p = nc.plan(diagram, sizes)
    xs = inputs(p)
    assert_close(nc.codegen.c(p)(*xs), p(*xs))
    assert_close(nc.codegen.c(p, blas=False, poison=True)(*xs), p(*xs))
    k = nc.codegen.cuda(p)
    if HAVE_NVCC:
        assert k.compile(arch="sm_90")["smem"] == p.smem_bytes
    if name == "two_level_matmul":
        assert "nc_t += blockDim.x" in k.source and "unsigned char nc_arena2[" in k.source
        with pytest.raises(nc.codegen.CodegenError, match=r"reads on-chip tensors whole; (x0_1|sum0)\[.*\] is a slice"):
            nc.codegen.triton(p)
