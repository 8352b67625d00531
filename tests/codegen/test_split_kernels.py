"""Split streams as kernels: two launches, the first one block per group and part (each storing its partial
state), the second per group (the combine).  C with OpenMP and Triton (interpreter) give what numpy gives at
ragged sizes with P not dividing the slices, and more parts than slices; CUDA compiles with the plan's shared
memory (the larger of its two kernels')."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc

from kernels_common import needs_cc, needs_nvcc, needs_triton


def _mean_var():
    b = nc.Builder(nc.types("n d"))
    (X,) = b.inputs
    mu = b(nc.reduce("mean", "n d -> n"), X)
    c = b(nc.elementwise("sub", "n d, n -> n d"), X, mu)
    return b.build(mu, b(nc.reduce("mean", "n d -> n"), b(nc.elementwise("square", "n d"), c)))


CASES = {   # name: (function, streamed axis, grouped axis, sizes)
    "FlashDecoding": (nc.library.attention, "x", "q", {"q": 1, "x": 37, "d": 8}),
    "split-K": (nc.library.matmul, "b", "a", {"a": 3, "b": 29, "c": 5}),
    "sum": (lambda: nc.reduce("sum", "n v -> n"), "v", "n", {"n": 3, "v": 19}),
    "LayerNorm statistics": (_mean_var, "d", "n", {"n": 3, "d": 21}),
}
PARTS = [(3, 4), (4, 11)]      # (s, P): P does not divide the slices; more parts than slices


def planned(name, s, P):
    make, axis, grouped, sizes = CASES[name]
    d = nc.group(nc.stream(make(), axis, f"s_{axis}", parts="P"), grouped, f"g_{grouped}")
    return make(), nc.plan(d, {**sizes, f"s_{axis}": s, f"g_{grouped}": min(2, sizes[grouped]), "P": P})


def _check(kernel, f, p, seed=0):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=tuple(int(p.sizes[nc.symbol(a.name)]) for a in arr.axes)).astype(np.float32)
          for arr in f.dom.inside]
    got = kernel(*xs)
    want = nc.evaluate(f, *[x.astype(np.float64) for x in xs])
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                    strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=2e-4, atol=2e-5)


def test_the_parts_and_the_combine_are_two_launches():
    from napkin_cat.codegen.launch import launches
    _, p = planned("FlashDecoding", 4, 8)
    first, second = launches(p)
    assert [g.axis for g in first.grids] == ["q", "parts_x"] and first.blocks == 8
    assert [g.axis for g in second.grids] == ["q", "q"] and second.blocks == 1     # a group, one row of it


@needs_cc
@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("s, P", PARTS)
def test_c_kernel_matches_numpy(name, s, P):
    f, p = planned(name, s, P)
    k = nc.codegen.c(p, blas=False)
    assert k.source.count("#pragma omp for") == 2
    _check(k, f, p)


@needs_triton
@pytest.mark.parametrize("name", ["FlashDecoding", "split-K", "LayerNorm statistics"])
def test_triton_kernel_matches_numpy(name):
    f, p = planned(name, *PARTS[0])
    k = nc.codegen.triton(p)
    assert k.source.count("@triton.jit") >= 2
    _check(k, f, p)


@needs_nvcc
@pytest.mark.parametrize("name", ["FlashDecoding", "split-K"])
def test_cuda_compiles_with_the_plans_shared_memory(name):
    _, p = planned(name, *PARTS[0])
    r = nc.codegen.cuda(p).compile(arch="sm_90")
    assert len(r["kernels"]) == 2 and r["smem"] == p.smem_bytes == max(k["smem_static"] for k in r["kernels"].values())
