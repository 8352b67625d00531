"""Kernels of a derived recomputation (issue 22, item 4): ``T = exp(Q Kᵀ)`` read by ``T V`` and ``Tᵀ W``, each
kernel recomputing ``T`` from Q and K.  The C kernel runs here (its arena poisoned), the Triton kernel under the
interpreter, and the CUDA kernel compiles with the plan's shared memory; each against numpy written from the
math."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.sizes import symbols_of
from kernels_common import needs_cc, needs_nvcc, needs_triton

BIG = {"q": 4096, "x": 4096, "d": 64, "e": 64}


def two_uses():
    b = nc.Builder(nc.types("q d, x d, x e, q e"))
    Q, K, V, W = b.inputs
    T = b(nc.elementwise("exp", "q x"), b(nc.einsum("q d, x d -> q x"), Q, K))
    return b.build(b(nc.einsum("q x, x e -> q e"), T, V), b(nc.einsum("q x, q e -> x e"), T, W))


@pytest.fixture(scope="module")
def derived():
    r = nc.derive(two_uses(), 2 ** 16, sizes=BIG)
    assert "recompute" in r.variant.prepared and len(r.variant.kernels) == 2
    return r.diagram


def sizes_for(d, axes, tile):
    """The axes' sizes and ``tile`` for every tile and stream size of ``d``."""
    names = {str(s) for s in symbols_of(d)}
    return {**axes, **{n: tile for n in names if n not in axes}}


def inputs(axes, seed=0):
    rng = np.random.default_rng(seed)
    q, x, d, e = (axes[a] for a in ("q", "x", "d", "e"))
    return [(rng.normal(size=s) / 4).astype(np.float32) for s in ((q, d), (x, d), (x, e), (q, e))]


def want(Q, K, V, W):
    T = np.exp(Q.astype(np.float64) @ K.astype(np.float64).T)
    return T @ V, T.T @ W


def close(got, exp, tol=1e-4):
    for g, w in zip(got, exp, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=tol, atol=tol)


@needs_cc
def test_the_c_kernels_recompute_and_match_numpy(derived):
    axes = {"q": 9, "x": 13, "d": 5, "e": 6}
    p = nc.plan(derived, sizes_for(derived, axes, 4))
    k = nc.codegen.c(p, poison=True)
    assert k.source.count("= nc_exp(") == 2                   # T made in both kernels
    xs = inputs(axes)
    close(k(*xs), want(*xs))


@needs_nvcc
def test_the_cuda_kernels_compile_with_the_plans_shared_memory(derived):
    p = nc.plan(derived, sizes_for(derived, {"q": 64, "x": 64, "d": 16, "e": 16}, 16))
    info = nc.codegen.cuda(p).compile(arch=90)
    assert info["smem"] == p.smem_bytes and len(info["kernels"]) == 2


@needs_triton
def test_the_triton_kernels_match_numpy(derived):
    axes = {"q": 32, "x": 32, "d": 16, "e": 16}
    k = nc.codegen.triton(nc.plan(derived, sizes_for(derived, axes, 16)))
    xs = inputs(axes, seed=2)
    close(k(*xs), want(*xs))
