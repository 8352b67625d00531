"""Sliced streams in every backend: the body stores its slice of the output at the trip's offset inside the stream
loop (destination passing), so the C kernel and the Triton kernel (interpreted) give the runner's results, and the
CUDA kernel compiles with the shared memory the plan predicts."""
from __future__ import annotations

import pytest

import napkin_cat as nc

from kernels_common import assert_close, inputs, needs_cc, needs_nvcc, needs_triton

CASES = {
    # S = QKᵀ: the Q tile stays, K swept along x, S saved slice by slice
    "qk": (lambda: nc.group(nc.stream(nc.einsum("t f, k f -> t k"), "k", "s_k", sliced=True), "t", "g_t"),
           {"t": 10, "k": 11, "f": 4, "g_t": 4, "s_k": 3}),
    # a skinny product: the B tile resident, A swept along a (ragged slices)
    "matmul": (lambda: nc.group(nc.stream(nc.library.matmul(), "a", "s_a", sliced=True), "c", "g_c"),
               {"a": 9, "b": 4, "c": 6, "g_c": 3, "s_a": 2}),
    # a whole attention row block per trip: K, V resident
    "attention": (lambda: nc.stream(nc.library.attention(), "q", "s_q", sliced=True),
                  {"q": 5, "x": 6, "d": 3, "s_q": 2}),
}


@pytest.fixture(scope="module")
def plans():
    return {name: nc.plan(make(), sizes) for name, (make, sizes) in CASES.items()}


@pytest.mark.parametrize("backend", [pytest.param("c", marks=needs_cc), pytest.param("triton", marks=needs_triton)])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_sliced_stream_runs_as_the_runner_does(plans, name, backend):
    p = plans[name]
    xs = inputs(p, seed=3)
    assert_close(getattr(nc.codegen, backend)(p)(*xs), p(*xs))


@needs_nvcc
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_compiles_a_sliced_stream_with_the_predicted_shared_memory(plans, name):
    p = plans[name]
    r = nc.codegen.cuda(p).compile(arch="sm_80")
    assert r["smem"] == p.smem_bytes > 0
