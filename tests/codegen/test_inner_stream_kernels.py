"""Kernels of the 2-D loop (a stream inside a stream's trip along another axis): fused linear cross-entropy with
the logits tile built over the hidden axis, attention with the score tile built over the head dimension.  The C
kernel runs here (its arena poisoned), the Triton kernel under the interpreter at its plan's sizes and at ragged
runtime sizes, and the CUDA kernel compiles with the plan's shared memory."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from kernels_common import needs_cc, needs_nvcc, needs_triton


def lce_2d():
    return nc.group(nc.stream(nc.stream(nc.library.linear_cross_entropy(), "v", "s_v"), "e", "s_e"), "n", "g_n")


def attention_2d():
    return nc.group(nc.stream(nc.stream(nc.library.attention(), "x", "s_x"), "d", "s_d"), "q", "g_q")


CASES = {
    "linear_cross_entropy": (nc.library.linear_cross_entropy, lce_2d,
                             {"n": 7, "e": 11, "v": 13, "g_n": 3, "s_v": 5, "s_e": 4},
                             {"n": 64, "e": 64, "v": 64, "g_n": 32, "s_v": 32, "s_e": 16}),
    "attention": (nc.library.attention, attention_2d,
                  {"q": 9, "x": 13, "d": 5, "g_q": 4, "s_x": 6, "s_d": 2},
                  {"q": 32, "x": 32, "d": 32, "g_q": 16, "s_x": 16, "s_d": 16}),
}


def _inputs(function, sizes, seed=0):
    rng = np.random.default_rng(seed)
    xs = []
    for arr in function.dom.inside:
        shape = tuple(sizes[a.name] for a in arr.axes)
        xs.append(rng.integers(0, sizes["v"], shape).astype(np.int32) if arr.dtype.name == "int32"
                  else rng.normal(size=shape).astype(np.float32))
    return xs


def close(got, want, tol=1e-4):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol)


@needs_cc
@pytest.mark.parametrize("name", list(CASES))
def test_the_c_kernel_runs_the_2d_loop(name):
    function, build, ragged, _ = CASES[name]
    p = nc.plan(build(), ragged)
    k = nc.codegen.c(p, poison=True)
    assert k.source.count("for (") >= 3          # the group, the outer stream and the inner one
    xs = _inputs(function(), ragged)
    close(k(*xs), nc.evaluate(function(), *[x if x.dtype == np.int32 else x.astype(np.float64) for x in xs]))


@needs_nvcc
@pytest.mark.parametrize("name", list(CASES))
def test_the_cuda_kernel_of_the_2d_loop_compiles_with_the_plans_shared_memory(name):
    _, build, _, even = CASES[name]
    p = nc.plan(build(), even)
    info = nc.codegen.cuda(p).compile(arch=90)
    # (at g_n = s_v = 16 ptxas of CUDA 13 spills 8 bytes of its own loop state at 32 registers: a heuristic of
    # the compiler's unrolling, gone at -maxrregcount=64 or without __launch_bounds__; these sizes avoid it)
    assert info["smem"] == p.smem_bytes and info["spills"] == 0


@needs_triton
@pytest.mark.parametrize("name", list(CASES))
def test_the_triton_kernel_runs_the_2d_loop_at_any_runtime_size(name):
    function, build, _, even = CASES[name]
    k = nc.codegen.triton(nc.plan(build(), even))
    assert k.source.count("for i_") >= 2 and "tl.dot(" in k.source
    axes = {a.name for arr in function().dom.inside for a in arr.axes}
    runtime = {str(s) for s in k.printer.runtime}      # attention's head dimension is fixed in the kernel
    for sizes in ({a: even[a] for a in axes}, {a: even[a] + 5 * (a in runtime) for a in axes}):
        xs = _inputs(function(), sizes, seed=3)
        close(k(*xs), nc.evaluate(function(), *xs))
