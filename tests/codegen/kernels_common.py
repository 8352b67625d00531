"""Shared pieces of the code-generation tests: the library's derived algorithms, inputs, tool checks.

Imported by the tests of this folder (its conftest puts the folder on the path).

A test that needs a tool this machine lacks is skipped with the reason (``.ci/run`` installs them all,
so CI never skips)."""
from __future__ import annotations

import importlib.util
import os
import shutil

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.codegen.c import blas_available

HAVE_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/bin/nvcc")
HAVE_TRITON = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None
HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def _no_gpu() -> str:
    """Why CUDA kernels cannot run here ('' where a CUDA device is)."""
    from napkin_cat.codegen.cuda.kernel import device_arch
    try:
        device_arch(0)
    except nc.codegen.ToolNotFoundError as e:
        return str(e)
    return ""


NO_GPU = _no_gpu()

needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found (pip install nvidia-cuda-nvcc, or the CUDA "
                                                      "toolkit at /usr/local/bin/nvcc): CUDA compile checks skipped")
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="triton/torch not installed (pip install "
                                                          "'napkin-cat[kernels]'): Triton checks skipped")
needs_gpu = pytest.mark.skipif(bool(NO_GPU) or not HAVE_NVCC, reason=f"CUDA kernels run on a GPU with nvcc: "
                                                                   f"{NO_GPU or 'nvcc not found'}")
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler (apt-get install gcc): C kernel checks skipped")
needs_blas = pytest.mark.skipif(not blas_available(), reason="cblas.h not found (apt-get install libopenblas-dev): "
                                                            "BLAS contractions skipped")


def inputs(p, seed=0, scale=1.0):
    """Random float32 inputs of the plan's shapes."""
    rng = np.random.default_rng(seed)
    return [(scale * rng.standard_normal(tuple(int(sympy.sympify(e).subs(p.sizes)) for _, e in
                                              p.variable_map[n].shape))).astype(np.float32) for n in p.inputs]


def outputs(y):
    return list(y) if isinstance(y, tuple) else [y]


def assert_close(got, want, rtol=2e-4, atol=2e-5):
    got, want = outputs(got), outputs(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


BIG = {      # FlashAttention's level-1 arena past the 48 KiB static window (66,304 B and 116,224 B)
    "g_q=64": {"q": 256, "x": 256, "d": 64, "g_q": 64, "s_x": 64},
    "g_q=128": {"q": 512, "x": 512, "d": 64, "g_q": 128, "s_x": 64},
}


def big_plan(name):
    """The derived FlashAttention planned at ``BIG[name]``: dynamic shared memory in CUDA."""
    from rewrites import flash_attention
    return nc.plan(flash_attention(nc.library.attention()).diagram, BIG[name])


def derived():
    """The library's algorithms as the rules and partitions derive them: name → (diagram, sizes).

    Sizes are ragged (no tile divides its axis) so that every edge tile is masked."""
    from rewrites import flash_attention
    return {
        "matmul": (nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c"),
                   {"a": 9, "b": 11, "c": 7, "s_b": 4, "g_a": 4, "g_c": 3}),
        "attention": (flash_attention(nc.library.attention()).diagram,
                      {"q": 9, "x": 11, "d": 5, "g_q": 4, "s_x": 3}),
        "mha": (flash_attention(nc.library.multi_head_attention()).diagram,
                {"q": 7, "x": 6, "d": 3, "h": 3, "g_q": 3, "g_h": 2, "s_x": 4}),
        "gqa": (nc.group(nc.group(nc.stream(nc.library.grouped_query_attention(), "x", "s_x"), "g", "g_g"), "q",
                         "g_q"), {"q": 5, "x": 7, "d": 3, "h": 2, "g": 3, "g_g": 2, "g_q": 2, "s_x": 3}),
        "mlp": (nc.group(nc.stream(nc.library.mlp(), "f", "s_f"), "n", "g_n"),
                {"n": 7, "i": 5, "f": 9, "o": 4, "s_f": 4, "g_n": 3}),
    }
