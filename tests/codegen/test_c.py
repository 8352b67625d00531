"""The C/OpenMP kernel: the numpy runner's results on the library's derived algorithms, with BLAS and with
the loops the CUDA kernel runs; masks that hold at sizes one off every tile multiple (canaries around the
buffers, the arena poisoned with NaN); threads; the compile cache; typed errors."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.codegen.kernel import cache_dir

from kernels_common import assert_close, inputs, needs_blas, needs_cc

pytestmark = needs_cc


@pytest.mark.parametrize("name", ["matmul", "attention", "mha", "gqa", "mlp"])
@pytest.mark.parametrize("blas", [False, pytest.param(True, marks=needs_blas)])
def test_c_kernel_gives_the_runners_results(algorithms, name, blas):
    p = algorithms[name]
    xs = inputs(p, seed=1)
    k = nc.codegen.c(p, blas=blas)
    # GQA's score tile has two free axes on the query side (h, q): a loop nest, not one matrix product
    assert ("cblas_sgemm" in k.source) == (blas and name != "gqa")
    assert_close(k(*xs), p(*xs))


def _canaried(shape, fill, pad=37):
    """A C-contiguous view of ``shape`` inside a buffer whose other values are ``fill``."""
    n = int(np.prod(shape))
    buf = np.full(n + 2 * pad, fill, np.float32)
    return buf, buf[pad:pad + n].reshape(shape)


@pytest.mark.parametrize("blas", [False, pytest.param(True, marks=needs_blas)])
def test_masks_hold_one_off_every_tile_multiple(blas):
    """Sizes tile·k − 1, tile·k, tile·k + 1 along every partitioned axis: the kernel reads nothing past its
    inputs (huge canaries would reach the outputs), writes nothing past its outputs (their canaries stay),
    and reads no on-chip value before writing it (the arena is NaN at every block's start)."""
    from rewrites import flash_attention
    flash = flash_attention(nc.library.attention()).diagram
    for q, x in itertools.product((7, 8, 9), (7, 8, 9)):
        p = nc.plan(flash, {"q": q, "x": x, "d": 3, "g_q": 4, "s_x": 4})
        xs = inputs(p, seed=q * 10 + x)
        views = []
        for arr in xs:
            buf, view = _canaried(arr.shape, 1e30)
            view[...] = arr
            views.append(view)
        out_buf, out = _canaried((q, 3), -7.0)
        nc.codegen.c(p, blas=blas, poison=True)(*views, out=[out])
        assert_close(out, p(*xs))
        assert np.all(out_buf[:37] == -7.0) and np.all(out_buf[37 + q * 3:] == -7.0)


def test_poisoned_arena_is_what_catches_a_read_before_a_write():
    """The poison check can fail: a kernel whose on-chip state is never filled reads NaN."""
    p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
                {"a": 5, "b": 7, "c": 3, "s_b": 3, "g_a": 2})
    k = nc.codegen.c(p, blas=False, poison=True)
    assert "sum0[3*j_a + j_c] = 0.0f;" in k.source
    broken = nc.codegen.CKernel(p, k.source.replace("sum0[3*j_a + j_c] = 0.0f;", ";"), k.printer)
    xs = inputs(p)
    assert np.isnan(broken(*xs)).all() and not np.isnan(k(*xs)).any()


def test_two_threads_give_the_same_result(algorithms):
    p = algorithms["attention"]
    xs = inputs(p, seed=3)
    k = nc.codegen.c(p)
    np.testing.assert_array_equal(k(*xs, threads=2), k(*xs, threads=1))


def test_compiled_libraries_are_cached_by_source_hash(algorithms, tmp_path, monkeypatch):
    monkeypatch.setenv("NAPKIN_CACHE", str(tmp_path))
    k = nc.codegen.c(algorithms["matmul"], blas=False)
    path = k.library_path()
    assert path.parent == cache_dir() and path.is_relative_to(tmp_path)
    stamp = path.stat().st_mtime_ns
    again = nc.codegen.c(algorithms["matmul"], blas=False)
    assert again.library_path() == path and path.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("backend, suffix", [("c", ".c"), ("cuda", ".cu"), ("triton", ".py")])
def test_save_writes_the_source_and_a_launcher(algorithms, tmp_path, backend, suffix):
    k = getattr(nc.codegen, backend)(algorithms["matmul"])
    src, launch = k.save(tmp_path / backend)
    assert src.name == f"kernel{suffix}" and src.read_text() == k.source
    assert "nc_run" in launch.read_text() and "nc_run" in k.source
    compile(launch.read_text(), str(launch), "exec")


# ---------------------------------------------------------------------- errors
def test_wrong_arguments_are_named(algorithms):
    p = algorithms["attention"]
    k = nc.codegen.c(p)
    Q, K, V = inputs(p)
    with pytest.raises(nc.ShapeError, match=r"argument 1 \(x1, axes \['x', 'd'\]\) must have shape \(11, 5\)"):
        k(Q, K[:-1], V)
    with pytest.raises(nc.ShapeError, match="takes 3 array"):
        k(Q, K)


def test_a_missing_compiler_is_a_typed_error(algorithms, monkeypatch, tmp_path):
    monkeypatch.setenv("NAPKIN_CACHE", str(tmp_path))     # nothing cached: the kernel must be compiled
    monkeypatch.setattr("shutil.which", lambda name: None)
    k = nc.codegen.c(algorithms["matmul"], blas=False)
    with pytest.raises(nc.codegen.ToolNotFoundError, match=r"cc is not on this machine.*compile the C kernel"):
        k(*inputs(algorithms["matmul"]))


def test_a_kind_without_a_printed_form_is_named(scratch_kinds):
    """A kind declared without a backend's form runs in numpy and is refused by each printer by name: the kind,
    the backend and the ``forms=`` keyword (a MissingPartError, never a KeyError)."""
    nc.declare("twice", lambda xs, core: [2 * xs[0]], flops=lambda core: {"general": 1})
    d = nc.kernel(nc.apply("twice", "n -> n"))
    p = nc.plan(d, {"n": 4})
    np.testing.assert_array_equal(p(np.ones(4)), 2 * np.ones(4))
    for make, backend, keyword in ((nc.codegen.c, "c", r"forms=\{'c': …\}"),
                                   (nc.codegen.cuda, "cuda", r"forms=\{'cuda': …\} \(or a C form\)"),
                                   (nc.codegen.triton, "triton", r"forms=\{'triton': …\}")):
        with pytest.raises(nc.MissingPartError, match=rf"the {backend} backend has no printed form for primitive "
                                                      rf"kind 'twice': kind 'twice' has no .* form: declare it "
                                                      rf"with {keyword}") as e:
            make(p)
        assert isinstance(e.value, nc.codegen.UnknownKindError) and not isinstance(e.value, KeyError)


def test_a_declared_kind_prints_once_given_a_template(scratch_kinds):
    nc.declare("twice", lambda xs, core: [2 * xs[0]], flops=lambda core: {"general": 1},
               forms={"c": "(2.0f * {0})"})
    p = nc.plan(nc.kernel(nc.apply("twice", "n -> n")), {"n": 4})
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(nc.codegen.c(p)(x), 2 * x)


def test_number_formats_are_stored_as_declared():
    """FP16 operands and probabilities (the library's number formats): fp16 arrays in, on-chip fp16 tiles and
    a cast that rounds P to fp16, fp32 scores and output; the kernel gives the runner's results."""
    from rewrites import flash_attention
    att = nc.library.attention(formats={"Q": "fp16", "K": "fp16", "V": "fp16", "P": "fp16"})
    p = nc.plan(flash_attention(att).diagram, {"q": 9, "x": 11, "d": 8, "g_q": 4, "s_x": 4})
    xs = [x.astype(np.float16) for x in inputs(p)]
    k = nc.codegen.c(p)
    assert "const _Float16 *restrict x0" in k.source and "(_Float16)(" in k.source
    y = k(*xs)
    assert y.dtype == np.float32
    assert_close(y, p(*[x.astype(np.float32) for x in xs]))
    with pytest.raises(nc.codegen.CodegenError, match=r"the c backend stores no 'bf16' values \(variable 'x0_1'\); "
                                                    r"it stores \['bool', 'fp16', 'fp32', 'int32'\]"):
        nc.codegen.c(nc.plan(flash_attention(nc.library.attention(formats={"Q": "bf16", "K": "bf16"})).diagram,
                             {"q": 4, "x": 4, "d": 2, "g_q": 2, "s_x": 2}))
