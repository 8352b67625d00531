"""Kernels of masked attention and of the cross-entropies: the C kernel (run here, its arena poisoned), the CUDA
kernel (compiled, its shared memory the plan's), the Triton kernel (run under the interpreter, even and ragged
variants, at other sizes than its plan's) all skip the trips the mask never reaches and compute what numpy
does."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from kernels_common import needs_nvcc, needs_triton

ATTENTIONS = {
    "causal": lambda: nc.library.causal_attention(),
    "window": lambda: nc.library.sliding_window_attention(3),
    "alibi": lambda: nc.library.alibi_attention(0.25),
    "document": lambda: nc.library.document_attention(causal=True),
}
LOSSES = {"cross-entropy": lambda: nc.library.cross_entropy(),
          "linear cross-entropy": lambda: nc.library.linear_cross_entropy()}
RAGGED = {"q": 13, "x": 11, "d": 4, "g_q": 4, "s_x": 4}
EVEN = {"q": 32, "x": 32, "d": 16, "g_q": 16, "s_x": 16}
LOSS_SIZES = {"n": 7, "e": 5, "v": 13, "g_n": 4, "s_v": 4}


def flash(att):
    return nc.group(nc.stream(att, "x", "s_x"), "q", "g_q")


def streamed_loss(d):
    return nc.group(nc.stream(d, "v", "s_v"), "n", "g_n")


def loss_plan(d, sizes):
    names = {a.name for arr in d.dom.inside for a in arr.axes} | {"g_n", "s_v"}
    return nc.plan(streamed_loss(d), {k: v for k, v in sizes.items() if k in names})


def attention_inputs(att, sizes, seed=0):
    rng = np.random.default_rng(seed)
    q, x, d = sizes["q"], sizes["x"], sizes["d"]
    xs = [rng.normal(size=(q, d)).astype(np.float32), rng.normal(size=(x, d)).astype(np.float32),
          rng.normal(size=(x, d)).astype(np.float32)]
    if len(att.dom) == 5:
        xs += [np.sort(rng.integers(0, 2, q)).astype(np.int32), np.sort(rng.integers(0, 2, x)).astype(np.int32)]
    return xs


def loss_inputs(d, sizes, seed=0):
    rng = np.random.default_rng(seed)
    n, v = sizes["n"], sizes["v"]
    t = rng.integers(0, v, n).astype(np.int32)
    if len(d.dom) == 2:
        return [rng.normal(size=(n, v)).astype(np.float32), t]
    return [rng.normal(size=(n, sizes["e"])).astype(np.float32), rng.normal(size=(v, sizes["e"])).astype(np.float32), t]


def close(got, want, tol=2e-5):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    both = np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[both], want[both], rtol=tol, atol=tol)


@pytest.mark.parametrize("name", list(ATTENTIONS))
def test_the_c_kernel_skips_masked_trips_and_computes_attention(name):
    att = ATTENTIONS[name]()
    p = nc.plan(flash(att), RAGGED)
    k = nc.codegen.c(p, poison=True)         # a value read before it is written would be NaN
    assert "the trips the mask reaches" in k.source and "// the mask is never true on this trip" not in k.source
    xs = attention_inputs(att, RAGGED)
    with np.errstate(invalid="ignore"):
        close(k(*xs), nc.evaluate(att, *[x.astype(np.float64) for x in xs]))
        _, counted = p.run(*xs)
    assert counted.transfers == nc.cost(flash(att), sizes=RAGGED).H


@pytest.mark.parametrize("name", list(LOSSES))
def test_the_c_kernel_of_a_loss_reads_integer_targets(name):
    d = LOSSES[name]()
    p = loss_plan(d, LOSS_SIZES)
    k = nc.codegen.c(p, poison=True)
    assert "const int *restrict x" in k.source and "nc_t" in k.source
    xs = loss_inputs(d, LOSS_SIZES)
    close(k(*xs), nc.evaluate(d, *xs), tol=1e-4)


@needs_nvcc
@pytest.mark.parametrize("name", [*ATTENTIONS, *LOSSES])
def test_the_cuda_kernel_compiles_with_the_plans_shared_memory(name):
    if name in ATTENTIONS:
        p = nc.plan(flash(ATTENTIONS[name]()), EVEN)
    else:
        p = loss_plan(LOSSES[name](), {"n": 32, "e": 16, "v": 40, "g_n": 16, "s_v": 16})
    k = nc.codegen.cuda(p)
    info = k.compile(arch=90)
    assert info["smem"] == p.smem_bytes and info["spills"] == 0
    if name in ATTENTIONS:       # the loops over the trips the mask reaches (codegen/trips.py), no per-trip test
        assert "the trips the mask reaches" in k.source and "the mask is never true on this trip" not in k.source


@needs_triton
@pytest.mark.parametrize("name", list(ATTENTIONS))
def test_the_triton_kernel_skips_masked_trips_at_any_runtime_size(name):
    """A mask of positions: one kernel at every size (ragged trips included).  A mask that reads data skips by the
    data's block tables, whose shape is the plan's trips: the sizes they are indexed by stay fixed (not runtime
    eligible), and a call at other sizes is a ShapeError naming the axis."""
    att = ATTENTIONS[name]()
    k = nc.codegen.triton(nc.plan(flash(att), EVEN))
    src = k.source
    if k.printer.block_tables:
        assert "def nc_kernel0_ragged(" not in src and "nc_blocks0" in src
        xs = attention_inputs(att, {**EVEN, "q": 20, "x": 45}, seed=2)
        with pytest.raises(nc.ShapeError, match="along 'q' \\(fixed in the kernel\\)"):
            k(*xs)
        xs = attention_inputs(att, EVEN, seed=2)
        close(k(*xs, block_mask="data"), nc.evaluate(att, *[x.astype(np.float64) for x in xs]), tol=1e-4)
        return
    even = src[src.index("def nc_kernel0("):src.index("def nc_kernel0_ragged(")]
    assert "the trips the mask reaches" in even and "        if (" not in even     # the loop's range: no test
    for sizes in (EVEN, {**EVEN, "q": 20, "x": 45}):
        xs = attention_inputs(att, sizes, seed=2)
        with np.errstate(invalid="ignore"):
            close(k(*xs), nc.evaluate(att, *[x.astype(np.float64) for x in xs]), tol=1e-4)


@needs_triton
@pytest.mark.parametrize("name", list(LOSSES))
def test_the_triton_kernel_of_a_loss_gathers_within_each_slice(name):
    d = LOSSES[name]()
    k = nc.codegen.triton(loss_plan(d, {"n": 32, "e": 16, "v": 48, "g_n": 16, "s_v": 16}))
    assert "tl.sum(tl.where(" in k.source
    for sizes in ({"n": 32, "e": 16, "v": 48}, {"n": 19, "e": 16, "v": 37}):
        xs = loss_inputs(d, sizes, seed=4)
        close(k(*xs), nc.evaluate(d, *xs), tol=1e-4)


@needs_triton
def test_the_causal_loop_stops_at_the_diagonal():
    k = nc.codegen.triton(nc.plan(flash(nc.library.causal_attention()), EVEN))
    # the whole trips below the diagonal, then the diagonal's (i_x < ⌊(16·i_q + 31)/16⌋ = i_q + 1)
    assert "nc_i_x_r0 = tl.minimum(tl.maximum((16*i_q + 31) // 16, 0), (x + 15) // 16)" in k.source
    assert "nc_i_x_w1 = tl.minimum(tl.maximum((16*i_q + 1) // 16, 0), nc_i_x_r0)" in k.source
    assert "for i_x in range(0, nc_i_x_w1):" in k.source and "for i_x in range(nc_i_x_w1, nc_i_x_r0):" in k.source


@needs_triton
def test_the_triton_kernel_of_causal_attention_compiles_for_hopper():
    """Both kernels (even and ragged) compile for sm_90 at 64 queries by 32 keys of d = 64 (57,600 bytes of shared
    memory at three stages; 32 keys a trip instead of 64 halves Triton's compile, the costliest step of this file)."""
    k = nc.codegen.triton(nc.plan(flash(nc.library.causal_attention()),
                                  {"q": 256, "x": 256, "d": 64, "g_q": 64, "s_x": 32}))
    info = k.compile(arch=90)
    assert set(info["kernels"]) == {"nc_kernel0", "nc_kernel0_ragged"} and 0 < info["smem"] <= 227 * 1024


TABLE_SIZES = {"h": 2, "v": 13, "q": 6, "x": 5, "g_q": 4, "s_v": 4}


def table_read_at_positions():
    """``y[h, q, x] = T[h, t[q, x]]`` streamed along the table (each slice gives its part) and grouped over q."""
    return nc.group(nc.stream(nc.gather("h v, q x -> h q x"), "v", "s_v"), "q", "g_q")


def table_inputs(seed=6):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(2, 13)).astype(np.float32), rng.integers(0, 13, size=(6, 5)).astype(np.int32)]


def test_the_c_kernel_reads_a_table_at_positions_over_other_axes():
    p = nc.plan(table_read_at_positions(), TABLE_SIZES)
    k = nc.codegen.c(p, poison=True)
    T, t = table_inputs()
    close(k(T, t), T[:, t])
    got, counted = p.run(T, t)
    close(got, T[:, t])
    assert counted.transfers == nc.cost(table_read_at_positions(), sizes=TABLE_SIZES).H


@needs_triton
def test_the_triton_kernel_reads_a_table_at_positions_over_other_axes():
    k = nc.codegen.triton(nc.plan(table_read_at_positions(), TABLE_SIZES))
    T, t = table_inputs()
    close(k(T, t), T[:, t])


@needs_nvcc
def test_the_cuda_kernel_reads_a_table_at_positions_over_other_axes():
    p = nc.plan(table_read_at_positions(), TABLE_SIZES)
    k = nc.codegen.cuda(p)
    assert "const int nc_t = (int)" in k.source
    info = k.compile(arch=90)
    assert info["smem"] == p.smem_bytes and info["spills"] == 0
