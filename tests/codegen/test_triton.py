"""The Triton kernel: under the interpreter (CPU torch tensors) it gives the numpy runner's results on the
library's derived algorithms at ragged sizes; compiled for sm_80/sm_90 without a GPU, its shared memory is
compared with the plan's and the difference explained (pipelining stages), not hidden."""
from __future__ import annotations

import itertools

import pytest

import napkin_cat as nc

from kernels_common import assert_close, inputs, needs_triton

pytestmark = needs_triton


@pytest.mark.parametrize("name", ["matmul", "attention", "mha", "gqa", "mlp"])
def test_triton_kernel_gives_the_runners_results(algorithms, name):
    p = algorithms[name]
    xs = inputs(p, seed=2)
    k = nc.codegen.triton(p)
    assert "@triton.jit" in k.source and "tl.program_id(0)" in k.source
    assert_close(k(*xs), p(*xs))


def test_torch_tensors_in_torch_tensors_out(algorithms):
    import torch
    p = algorithms["attention"]
    xs = inputs(p, seed=4)
    y = nc.codegen.triton(p)(*[torch.from_numpy(x) for x in xs])
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    assert_close(y.numpy(), p(*xs))


def test_masks_hold_one_off_every_tile_multiple():
    """Ragged edges on both partitioned axes: the masked loads, the −∞ scores and the masked stores."""
    from rewrites import flash_attention
    flash = flash_attention(nc.library.attention()).diagram
    for q, x in itertools.product((15, 17), (15, 16, 17)):
        p = nc.plan(flash, {"q": q, "x": x, "d": 3, "g_q": 16, "s_x": 8} if q > 16 else
                    {"q": q, "x": x, "d": 3, "g_q": 8, "s_x": 8})
        xs = inputs(p, seed=q + x)
        assert_close(nc.codegen.triton(p)(*xs), p(*xs))


def _matmul():
    return nc.plan(nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c"),
                   {"a": 128, "b": 128, "c": 128, "s_b": 32, "g_a": 64, "g_c": 64})


def test_compiled_shared_memory_is_the_plans_rearranged_by_pipelining():
    """Triton keeps the accumulator in registers and buffers each stream load once per stage in flight:
    two stages hold the plan's bytes minus its accumulator; each further stage adds the stream's loads."""
    p = _matmul()
    k = nc.codegen.triton(p)
    two, three = (k.compile(arch=90, num_stages=s) for s in (2, 3))
    accumulator = 64 * 64 * 4
    loads = (64 * 32 + 32 * 64) * 4
    assert two["stream_loads"] == loads and two["plan_smem"] == p.smem_bytes == accumulator + loads
    assert two["smem"] == p.smem_bytes - accumulator
    assert three["smem"] - two["smem"] == loads
    assert k.compile(arch=80, num_stages=3)["smem"] == three["smem"]
    print(f"matmul 128³, tiles 64×64 by 32: plan {p.smem_bytes} B; Triton sm_90: 2 stages {two['smem']} B, "
          f"3 stages {three['smem']} B")


def test_errors_of_the_worker_are_typed(algorithms):
    k = nc.codegen.triton(algorithms["matmul"])
    broken = nc.codegen.TritonKernel(k.plan, k.source.replace("tl.dot(", "tl.no_such_dot("), k.printer)
    with pytest.raises(nc.codegen.CodegenError, match="Triton failed on the generated kernel"):
        broken(*inputs(k.plan))


def test_missing_triton_is_a_typed_error(algorithms, monkeypatch):
    import importlib.util
    from napkin_cat.codegen.triton import kernel as tritonkernel
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "triton" else real(name))
    monkeypatch.setattr(tritonkernel, "WORKERS", {})
    with pytest.raises(nc.codegen.ToolNotFoundError, match=r"triton is not installed.*napkin-cat\[kernels\]"):
        nc.codegen.triton(algorithms["matmul"])(*inputs(algorithms["matmul"]))
