"""The Triton kernel as the GPU runs it: runtime sizes (one kernel, any lengths), the even variant without
masks beside the ragged one, tensor-core products on 16-bit operands with fp32 accumulators, axes of
extent 1 dropped, the launch order and shape.  Run under the interpreter against numpy written from the
mathematics."""
from __future__ import annotations

import re

import numpy as np
import pytest

import napkin_cat as nc
from kernels_common import needs_triton
from rewrites import flash_attention

pytestmark = needs_triton
BF16 = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}


def softmax_attention(Q, K, V):
    """SoftMax(Q Kᵀ/√d) V over the last two axes, in float64 (written from the definition)."""
    Q, K, V = (np.asarray(a, np.float64) for a in (Q, K, V))
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    P = np.exp(S - S.max(-1, keepdims=True))
    return (P / P.sum(-1, keepdims=True)) @ V


def bf16(x):
    """``x`` rounded to bfloat16 (kept as float32): what the kernel reads."""
    import torch
    return torch.from_numpy(np.asarray(x, np.float32)).bfloat16().float().numpy()


def rel(got, want) -> float:
    return float(np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want))


@pytest.fixture(scope="module")
def mha_kernel():
    flash = flash_attention(nc.library.multi_head_attention(formats=BF16)).diagram
    p = nc.plan(flash, {"q": 64, "x": 64, "d": 16, "h": 2, "g_q": 32, "s_x": 16, "g_h": 1})
    return nc.codegen.triton(p)


def test_one_kernel_runs_at_sizes_other_than_its_plans(mha_kernel):
    """q, x and h are runtime arguments: lengths that divide the tiles (the even variant) and lengths that
    do not (the ragged one) give attention, to bf16 accuracy."""
    assert [str(s) for s in mha_kernel.printer.runtime] == ["q", "x", "h"]
    rng = np.random.default_rng(3)
    for h, q, x in [(2, 64, 64), (3, 96, 32), (1, 50, 37), (2, 17, 100)]:
        Q, K, V = (bf16(rng.standard_normal((h, n, 16))) for n in (q, x, x))
        got = mha_kernel(Q, K, V)
        assert got.shape == (h, q, 16)
        assert rel(got, softmax_attention(Q, K, V)) < 1e-2


def test_the_even_variant_has_no_mask_and_the_launcher_checks_its_conditions(mha_kernel):
    src = mha_kernel.source
    even = src[src.index("def nc_kernel0("):src.index("def nc_kernel0_ragged(")]
    ragged = src[src.index("def nc_kernel0_ragged("):src.index("def nc_run(")]
    assert "mask=" not in even and "tl.where((r_" not in even
    assert "mask=" in ragged and "tl.minimum(32, q - 32*i_q)" in ragged
    assert "kernel = nc_kernel0 if (q) % 32 == 0 and (x) % 16 == 0 else nc_kernel0_ragged" in src


def test_16_bit_operands_go_to_the_tensor_cores_with_fp32_accumulators(mha_kernel):
    src = mha_kernel.source
    dots = re.findall(r"tl\.dot\([^\n]*", src)
    assert dots and not any("input_precision" in d for d in dots)       # bf16 in, default precision
    assert any("acc=o0" in d for d in dots)                              # P·V summed into the state
    assert "o0 = tl.full([32, 16], 0.0, tl.float32)" in src             # the accumulator is fp32
    assert "(softmax_unscaled11_0).to(tl.bfloat16)" in src or ".to(tl.bfloat16)" in src


def test_fp32_operands_keep_their_precision():
    flash = flash_attention(nc.library.attention()).diagram
    p = nc.plan(flash, {"q": 32, "x": 32, "d": 16, "g_q": 16, "s_x": 16})
    assert all('input_precision="ieee"' in d for d in re.findall(r"tl\.dot\([^\n]*", nc.codegen.triton(p).source))
    tf32 = nc.codegen.triton(p, precision="tf32").source
    assert 'input_precision="tf32"' in tf32
    with pytest.raises(nc.codegen.CodegenError, match="precision 'fast'.*ieee"):
        nc.codegen.triton(p, precision="fast")


def test_an_axis_of_extent_one_is_no_block_dimension(mha_kernel):
    """g_h = 1: each program holds one head; its tensors are matrices, not 16 × … padded blocks."""
    src = mha_kernel.source
    assert "r_h_" not in src and "tl.arange(0, 16)" in src
    assert re.search(r"tl\.full\(\[32, 16\]", src)


def test_programs_sharing_streamed_tiles_are_consecutive(mha_kernel):
    """K and V carry h, not q: the q-blocks of one head are launched together (they read the same K, V)."""
    src = mha_kernel.source
    assert "i_h = nc_b // ((q + 31) // 32)" in src and "i_q = (nc_b) % ((q + 31) // 32)" in src


def test_runtime_sizes_can_be_fixed_or_named():
    flash = flash_attention(nc.library.attention()).diagram
    p = nc.plan(flash, {"q": 32, "x": 48, "d": 16, "g_q": 16, "s_x": 16})
    fixed = nc.codegen.triton(p, runtime=False)
    assert fixed.printer.runtime == () and "def nc_kernel0(x0, x1, x2, y0):" in fixed.source
    assert [str(s) for s in nc.codegen.triton(p, runtime=["x"]).printer.runtime] == ["x"]
    with pytest.raises(nc.codegen.CodegenError, match="size 'd' cannot vary at run time.*eligible sizes are"):
        nc.codegen.triton(p, runtime=["d"])
    with pytest.raises(nc.codegen.CodegenError, match="size 'g_q' cannot vary at run time: a tile"):
        nc.codegen.triton(p, runtime=["g_q"])
    with pytest.raises(nc.codegen.CodegenError, match="'zz' is not a size of the plan"):
        nc.codegen.triton(p, runtime=["zz"])


def test_inconsistent_runtime_sizes_are_refused_naming_the_axis(mha_kernel):
    Q, K, V = np.zeros((2, 8, 16)), np.zeros((2, 9, 16)), np.zeros((2, 10, 16))
    with pytest.raises(nc.ShapeError, match="axis 'x' of argument 2"):
        mha_kernel(Q, K, V)
    with pytest.raises(nc.ShapeError, match="must have 16 values along 'd'"):
        mha_kernel(np.zeros((2, 8, 8)), K, K)


@pytest.mark.parametrize("rows, warps", [(64, 4), (128, 8), (32, 4)])
def test_a_warpgroup_per_64_rows_of_the_products(rows, warps):
    mm = nc.group(nc.group(nc.stream(nc.einsum("a b, b c -> a c", dtype="bf16"), "b", "s_b"), "a", "g_a"),
                  "c", "g_c")
    p = nc.plan(mm, {"a": 256, "b": 64, "c": 256, "g_a": rows, "g_c": 128, "s_b": 32})
    k = nc.codegen.triton(p)
    assert k.printer.num_warps == warps and f"num_warps={warps}" in k.source


def test_the_matrix_product_in_bf16_at_other_sizes():
    mm = nc.group(nc.group(nc.stream(nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="bf16"), "b", "s_b"),
                           "a", "g_a"), "c", "g_c")
    k = nc.codegen.triton(nc.plan(mm, {"a": 32, "b": 32, "c": 32, "g_a": 16, "g_c": 16, "s_b": 16}))
    rng = np.random.default_rng(0)
    for a, b, c in [(32, 32, 32), (40, 24, 17)]:
        A, B = bf16(rng.standard_normal((a, b))), bf16(rng.standard_normal((b, c)))
        want = A.astype(np.float64) @ B
        assert rel(k(A, B), want) < 1e-2
