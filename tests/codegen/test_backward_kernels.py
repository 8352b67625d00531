"""Kernels of attention's derived backward (issue 23), at M = 2^20, q = x = 4096, d = 128:

* ``plain``: the four kernels nc.derive makes of ``nc.grad(attention)`` (the log-sum-exp, D, dQ, and dK with dV in
  one kernel by sibling fusion, each recomputing the probabilities);
* ``saved``: the two it makes of ``nc.grad(attention(lse=True), saved=True, aux=1)`` (dQ with D = rowsum(dO ∘ O),
  dK with dV, each recomputing P = exp(β·S − L) from the saved L; tests/search/test_derive_backward_saved.py).

Each runs in C at ragged sizes (arena poisoned) and under the Triton interpreter, against the gradient nc.evaluate
gives (itself checked against finite differences in tests/autodiff; O and L computed by the forward for
``saved``); the CUDA kernels compile with the plan's shared memory."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.sizes import symbols_of
from kernels_common import needs_cc, needs_nvcc, needs_triton

SIZES = {"q": 4096, "x": 4096, "d": 128}
KERNELS = {"plain": 4, "saved": 2}


@pytest.fixture(scope="module", params=sorted(KERNELS))
def derived(request):
    if request.param == "plain":
        r = nc.derive(nc.grad(nc.library.attention()), 2 ** 20, sizes=SIZES)
        assert len(r.variant.kernels) == 4 and "recompute" in r.variant.prepared
    else:
        back = nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1)
        r = nc.derive(back, 2 ** 20, sizes=SIZES)
        assert len(r.variant.kernels) == 2 and r.H == 10_526_720
    return request.param, r.diagram


def plan(d, axes, tile):
    return nc.plan(d, {**axes, **{str(s): tile for s in symbols_of(d) if str(s) not in axes}})


def check(kernel, form, axes, seed=0):
    rng = np.random.default_rng(seed)
    shapes = ((axes["q"], axes["d"]), (axes["x"], axes["d"]), (axes["x"], axes["d"]), (axes["q"], axes["d"]))
    xs = [(rng.normal(size=s) / 2).astype(np.float32) for s in shapes]
    wide = [x.astype(np.float64) for x in xs]
    want = nc.evaluate(nc.grad(nc.library.attention()), *wide)
    if form == "saved":
        O, L = nc.evaluate(nc.library.attention(lse=True), *wide[:3])
        xs = xs[:3] + [O.astype(np.float32), L.astype(np.float32)] + xs[3:]
    for got, w in zip(kernel(*xs), want, strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), w, rtol=1e-4, atol=1e-5)


@needs_cc
def test_the_c_kernels_of_the_backward_match_the_gradient_at_ragged_sizes(derived):
    form, d = derived
    axes = {"q": 9, "x": 13, "d": 5}
    k = nc.codegen.c(plan(d, axes, 4), poison=True)
    assert k.source.count("void nc_kernel") == KERNELS[form]
    check(k, form, axes)


@needs_triton
def test_the_triton_kernels_of_the_backward_match_the_gradient(derived):
    form, d = derived
    axes = {"q": 32, "x": 32, "d": 16}
    check(nc.codegen.triton(plan(d, axes, 16)), form, axes, seed=1)


@needs_nvcc
def test_the_cuda_kernels_of_the_backward_compile_with_the_plans_shared_memory(derived):
    form, d = derived
    p = plan(d, {"q": 32, "x": 32, "d": 16}, 16)
    info = nc.codegen.cuda(p).compile(arch=90)
    assert info["smem"] == p.smem_bytes and len(info["kernels"]) == KERNELS[form] and info["spills"] == 0
