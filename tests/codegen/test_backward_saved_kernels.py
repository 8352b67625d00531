"""Kernels of attention's backward derived from the saved O and L (``nc.grad(attention(lse=True), saved=True,
aux=1)``, tests/search/test_derive_backward_saved.py): its two kernels at M = 2^20 (dQ with D = rowsum(dO ∘ O),
dK with dV, each recomputing P = exp(β·S − L)) run in C at ragged sizes (arena poisoned) and under the Triton
interpreter, against the unsaved gradient nc.evaluate gives (O and L computed by the forward); the CUDA kernels
compile with the plan's shared memory."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.sizes import symbols_of
from kernels_common import needs_cc, needs_nvcc, needs_triton


@pytest.fixture(scope="module")
def derived():
    back = nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1)
    r = nc.derive(back, 2 ** 20, sizes={"q": 4096, "x": 4096, "d": 128})
    assert len(r.variant.kernels) == 2 and r.H == 10_526_720
    return r.diagram


def plan(d, axes, tile):
    return nc.plan(d, {**axes, **{str(s): tile for s in symbols_of(d) if str(s) not in axes}})


def check(kernel, axes, seed=0):
    rng = np.random.default_rng(seed)
    Q, K, V, dO = ((rng.normal(size=s) / 2).astype(np.float32)
                   for s in ((axes["q"], axes["d"]), (axes["x"], axes["d"]), (axes["x"], axes["d"]),
                             (axes["q"], axes["d"])))
    wide = [a.astype(np.float64) for a in (Q, K, V, dO)]
    O, L = nc.evaluate(nc.library.attention(lse=True), *wide[:3])
    want = nc.evaluate(nc.grad(nc.library.attention()), *wide)
    got = kernel(Q, K, V, O.astype(np.float32), L.astype(np.float32), dO)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=1e-4, atol=1e-5)


@needs_cc
def test_the_c_kernels_of_the_saved_backward_match_the_gradient_at_ragged_sizes(derived):
    axes = {"q": 9, "x": 13, "d": 5}
    k = nc.codegen.c(plan(derived, axes, 4), poison=True)
    assert k.source.count("void nc_kernel") == 2
    check(k, axes)


@needs_triton
def test_the_triton_kernels_of_the_saved_backward_match_the_gradient(derived):
    axes = {"q": 32, "x": 32, "d": 16}
    check(nc.codegen.triton(plan(derived, axes, 16)), axes, seed=1)


@needs_nvcc
def test_the_cuda_kernels_of_the_saved_backward_compile_with_the_plans_shared_memory(derived):
    p = plan(derived, {"q": 32, "x": 32, "d": 16}, 16)
    info = nc.codegen.cuda(p).compile(arch=90)
    assert info["smem"] == p.smem_bytes and len(info["kernels"]) == 2 and info["spills"] == 0
