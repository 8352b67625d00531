"""What makes the C kernel a CPU kernel: exp, max and min as selects the compiler vectorises (their values
checked here against numpy), loads of an input's own rows as pointers, a layout that stages nothing, and the
warning when the contractions fall back to loops for want of cblas.h."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.codegen import BlasMissingWarning
from napkin_cat.codegen.c import CPrinter
from napkin_cat.codegen.c.blas import tell_blas_missing

from kernels_common import assert_close, inputs, needs_cc

SPECIAL = [-np.inf, -1e30, -104.0, -88.0, -87.3, -86.7, -86.64339798, -86.6, -50.0, -1e-30, -0.0, 0.0, 1e-30,
           0.5, 1.0, 20.0, 88.0, 88.3762626647949, 88.72283172607422, 88.72283935546875, 88.8, 1e30, np.inf, np.nan]


def _elementwise(kind, *, width=64):
    return nc.plan(nc.group(nc.elementwise(kind, "q x"), "q", "g_q"), {"q": 4, "x": width, "g_q": 2})


@needs_cc
def test_exp_is_within_two_ulp_of_exp_and_exact_at_the_edges():
    p = _elementwise("exp", width=2048)
    k = nc.codegen.c(p)
    assert "nc_exp(" in k.source and "expf(" not in k.source.split("static inline float nc_sigmoid")[1]
    rng = np.random.default_rng(0)
    x = np.concatenate([np.array(SPECIAL, np.float32), rng.uniform(-87, 88.7, 4 * 2048 - len(SPECIAL))])
    x = x.astype(np.float32).reshape(4, 2048)
    y = k(x)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64))
    normal = np.isfinite(x) & (x >= -86.64339798) & (want < np.finfo(np.float32).max)
    ulp = np.spacing(want[normal].astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(y[normal] - want[normal]) / ulp) <= 2.0
    assert np.all(y[x < -86.64339798] == 0.0)                     # the lowest binade and below flush to 0
    assert np.all(np.isposinf(y[(x > 88.7229) & ~np.isnan(x)]))    # above ln FLT_MAX, and +inf
    assert np.all(np.isnan(y[np.isnan(x)]))


@needs_cc
@pytest.mark.parametrize("kind, ref", [("max", np.maximum), ("min", np.minimum)])
def test_max_and_min_propagate_a_nan_like_numpy(kind, ref):
    """As ``nc.evaluate`` and the plan do (issue 25, family 3): C99's ``fmaxf`` would drop the NaN."""
    p = _elementwise(kind, width=32)
    k = nc.codegen.c(p)
    assert f"nc_f{kind}(" in k.source and f"f{kind}f(" not in k.source.split("#define NC_MAX")[1]
    a, b = inputs(p, seed=2)
    a[0, :5] = np.nan
    b[1, 3:9] = np.nan
    b[0, 2] = np.nan
    np.testing.assert_array_equal(k(a, b), ref(a, b))


def test_loads_of_an_inputs_own_rows_are_pointers_and_others_copies():
    flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    p = nc.plan(flash, {"q": 100, "x": 90, "d": 16, "g_q": 32, "s_x": 16})
    assert sorted(CPrinter(p, blas=False).views) == ["x0_1", "x1_1", "x2_1"]
    # a tile of columns is not the input's own rows: its rows have another stride, so it is copied
    mm = nc.plan(nc.group(nc.group(nc.library.matmul(), "a", "g_a"), "c", "g_c"),
                 {"a": 8, "b": 6, "c": 10, "g_a": 4, "g_c": 4})
    views = CPrinter(mm, blas=False).views
    assert "x0_1" in views and "x1_1" not in views
    src = nc.codegen.c(mm, blas=False).source
    assert "x0_1 = x0 + " in src and "x1_1[" in src and "const float *x1_1" not in src


@needs_cc
def test_a_view_reads_only_its_tile_at_ragged_edges(algorithms):
    from rewrites import flash_attention
    mha = nc.plan(flash_attention(nc.library.multi_head_attention()).diagram,
                  {"q": 7, "x": 6, "d": 3, "h": 3, "g_q": 3, "g_h": 1, "s_x": 4})
    for p in (algorithms["attention"], mha):
        k = nc.codegen.c(p, poison=True)
        assert "a view of" in k.source
        xs = inputs(p, seed=4)
        assert_close(k(*xs), p(*xs))


def test_the_c_layout_stages_nothing_where_the_cuda_one_does(algorithms):
    from napkin_cat.codegen.cuda import CudaPrinter
    from napkin_cat.plan.ir import walk
    flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    p = nc.plan(flash, {"q": 64, "x": 64, "d": 8, "g_q": 32, "s_x": 16})
    staged = {cls.__name__: sum(len(cls(p).layout.aliased(s)) for s in walk(p.body)) for cls in (CPrinter, CudaPrinter)}
    assert staged == {"CPrinter": 0, "CudaPrinter": 1}
    for name, plan in algorithms.items():
        printer = CPrinter(plan, blas=False)
        assert sum(len(printer.layout.aliased(s)) for s in walk(plan.body)) == 0, name


def test_missing_blas_is_said_once_and_not_when_the_loops_are_chosen(monkeypatch, algorithms):
    p = algorithms["attention"]
    monkeypatch.setenv("NAPKIN_BLAS", "0")        # as if cblas.h were missing
    tell_blas_missing.cache_clear()               # as in a fresh process
    with pytest.warns(BlasMissingWarning, match=r"libopenblas-dev.*blas=False"):
        k = nc.codegen.c(p)
    assert "cblas_sgemm" not in k.source
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nc.codegen.c(p)                                # said once per process
        tell_blas_missing.cache_clear()                # as in a fresh process
        nc.codegen.c(p, blas=False)                    # the loops on purpose: nothing to say


@needs_cc
@pytest.mark.parametrize("blas", [False, True])
def test_sums_in_lanes_and_rows_in_passes_match_the_runner_with_strips_and_tails(blas):
    """Rows of 37 keys (two strips of NC_LANES and a tail of 5) and a last slice of 6 (a tail only); a sum and
    a mean over 50 values; the three-pass SoftMax rows."""
    from napkin_cat.codegen.c import blas_available
    if blas and not blas_available():
        pytest.skip("cblas.h not found (apt-get install libopenblas-dev)")
    from rewrites import flash_attention
    flash = nc.plan(flash_attention(nc.library.attention()).diagram,
                    {"q": 9, "x": 80, "d": 5, "g_q": 4, "s_x": 37})
    k = nc.codegen.c(flash, blas=blas)
    assert "nc_sum_lanes(nc_z_l)" in k.source and "rows in three passes" in k.source
    xs = inputs(flash, seed=5, scale=3.0)
    assert_close(k(*xs), flash(*xs))
    for kind in ("sum", "mean"):
        p = nc.plan(nc.group(nc.reduce(kind, "q x -> q"), "q", "g_q"), {"q": 6, "x": 50, "g_q": 4})
        k = nc.codegen.c(p, blas=blas)
        assert "nc_sum_lanes(nc_acc_l)" in k.source
        xs = inputs(p, seed=6)
        assert_close(k(*xs), p(*xs))


def test_a_contraction_whose_output_row_is_contiguous_runs_along_the_row(algorithms):
    """PV (o[q, d] += Σ_x P[q, x] V[x, d]: d contiguous in o and V, x strided in V) runs along d; QKᵀ (d, the
    summed axis, contiguous in both operands) stays a dot product, in lanes."""
    src = nc.codegen.c(algorithms["attention"], blas=False).source
    pv = src[src.index("// o0 += ·(softmax_unscaled11_0, x2_1)"):]
    assert "const float nc_a = softmax_unscaled11_0[" in pv.split("// tail")[0]
    qk = src[src.index("// contract10 ← ·(x0_1, x1_1)"):src.index("SoftMax₁(contract10")]
    assert "const float nc_a =" not in qk and "nc_sum_lanes(nc_acc_l)" in qk
    mm = nc.codegen.c(algorithms["matmul"], blas=False).source
    assert "+= nc_a * x1_1[" in mm


@needs_cc
def test_a_log_sum_exp_takes_its_maxima_as_selects_and_meets_numpy():
    """The online log-sum-exp's row max folds by ``nc_fold_max`` and merges by ``nc_fmax``, as the SoftMax's rows
    do: libm's ``fmaxf`` is a call, and kept the row loop scalar (attention(lse=True)'s forward at N = 1,024, 8
    heads, one core: 109 ms with it, 75 ms without, by the benchmarks' kernel)."""
    f = nc.library.attention(lse=True)
    p = nc.plan(nc.group(nc.stream(nc.kernel(f), "x", "s_x"), "q", "g_q"),
                {"q": 11, "x": 37, "d": 6, "s_x": 16, "g_q": 4})
    k = nc.codegen.c(p)
    assert "nc_fold_max(nc_m, scale" in k.source and "fmaxf(" not in k.source
    xs = inputs(p, seed=8, scale=4.0)           # logits of tens: the max matters
    q, kk, v = (x.astype(np.float64) for x in xs)
    s = q @ kk.T / np.sqrt(6)
    m = s.max(axis=1, keepdims=True)
    want_l = (m + np.log(np.exp(s - m).sum(axis=1, keepdims=True)))[:, 0]
    want_o = np.exp(s - m) / np.exp(s - m).sum(axis=1, keepdims=True) @ v
    o, lse = k(*xs)
    assert_close(lse, want_l.astype(np.float32), rtol=1e-5, atol=1e-5)
    assert_close(o, want_o.astype(np.float32), rtol=1e-4, atol=1e-5)
