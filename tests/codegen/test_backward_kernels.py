"""Kernels of attention's derived backward (issue 23): the four kernels nc.derive makes of nc.grad(attention) at
M = 2^20 (the log-sum-exp, D, dQ, and dK with dV in one kernel by sibling fusion, each recomputing the
probabilities) run in C at ragged sizes (arena
poisoned) and under the Triton interpreter, against the gradient nc.evaluate gives (itself checked against
finite differences in tests/autodiff); the CUDA kernels compile with the plan's shared memory."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.sizes import symbols_of
from kernels_common import needs_cc, needs_nvcc, needs_triton


@pytest.fixture(scope="module")
def derived():
    r = nc.derive(nc.grad(nc.library.attention()), 2 ** 20, sizes={"q": 4096, "x": 4096, "d": 128})
    assert len(r.variant.kernels) == 4 and "recompute" in r.variant.prepared
    return r.diagram


def plan(d, axes, tile):
    return nc.plan(d, {**axes, **{str(s): tile for s in symbols_of(d) if str(s) not in axes}})


def check(kernel, axes, seed=0):
    rng = np.random.default_rng(seed)
    shapes = ((axes["q"], axes["d"]), (axes["x"], axes["d"]), (axes["x"], axes["d"]), (axes["q"], axes["d"]))
    xs = [(rng.normal(size=s) / 2).astype(np.float32) for s in shapes]
    want = nc.evaluate(nc.grad(nc.library.attention()), *[x.astype(np.float64) for x in xs])
    for got, w in zip(kernel(*xs), want):
        np.testing.assert_allclose(np.asarray(got, np.float64), w, rtol=1e-4, atol=1e-5)


@needs_cc
def test_the_c_kernels_of_the_backward_match_the_gradient_at_ragged_sizes(derived):
    axes = {"q": 9, "x": 13, "d": 5}
    k = nc.codegen.c(plan(derived, axes, 4), poison=True)
    assert k.source.count("void nc_kernel") == 4
    check(k, axes)


@needs_triton
def test_the_triton_kernels_of_the_backward_match_the_gradient(derived):
    axes = {"q": 32, "x": 32, "d": 16}
    check(nc.codegen.triton(plan(derived, axes, 16)), axes, seed=1)


@needs_nvcc
def test_the_cuda_kernels_of_the_backward_compile_with_the_plans_shared_memory(derived):
    p = plan(derived, {"q": 32, "x": 32, "d": 16}, 16)
    info = nc.codegen.cuda(p).compile(arch=90)
    assert info["smem"] == p.smem_bytes and len(info["kernels"]) == 4 and info["spills"] == 0
