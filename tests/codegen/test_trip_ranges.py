"""The C and Triton kernels print a stream's trips as loops over ranges of its index (``codegen/ranges.py`` reads the
skip test and the whole trips' test into unions of ranges, ``codegen/trips.py`` prints them; one analysis for both),
and the Triton printer names its kernels consecutively and prints no ragged variant it never launches.

Routes: each kernel's output = numpy's masked attention in float64 from the mask's formula = the plan's runner, on
causal, sliding-window, sinks beside a window (two ranges with a gap), two crossing windows (two ranges bounded
below, ordered at run time), prefix-LM and document masks (segment ids: no position, every trip as written), at
ragged sizes (the last tile of ``q``, of ``x`` or both short); the printed source counted: no trip tests a condition
(``continue`` in C, a per-trip ``if`` in Triton) where the conditions are ranges, and each stream with whole trips
has a whole loop per range.

Mutations caught: the C printer's whole loops switched off (``whole_loops`` → False: each trip tests
``if (full)`` again, the count fails); the run-time order of two ranges bounded below dropped (``_Chain.pieces``
keeping the spans as written: the two-window kernels skip trips, outputs differ); the kernels numbered by the plan's
launches (``kernel_launches`` without ``replace``: ``nc_kernel1`` after a view); a tile of 1 taken as an assumption
(``divides_always`` → False: a ragged variant behind ``if True``).
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.plan.ir import StreamLoop, walk
from napkin_cat.syntax.adapter import Ty
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import elementwise
from napkin_cat.syntax.dtype import INT32
from napkin_cat.syntax.indices import compare, logical, position
from kernels_common import needs_cc, needs_nvcc, needs_triton

D, SINKS, WINDOW, CROSS, PREFIX = 8, 4, 5, 30, 6


def window(b, qi, xi, lo: int, hi: int):
    """``q + lo ≤ x ≤ q + hi`` over q × x."""
    low = b(elementwise("shift", "q", const=lo, dtype=INT32), qi)
    high = b(elementwise("shift", "q", const=hi, dtype=INT32), qi)
    return b(logical("and", "q x, q x -> q x"), b(compare("le", "q, x -> q x"), low, xi),
             b(compare("le", "x, q -> q x"), xi, high))


def sinks_and_window():
    """``x < SINKS ∨ |q − x| ≤ WINDOW`` (StreamingLLM): two ranges of key tiles with a gap."""
    b = Builder(Ty())
    qi, xi = b(position("q")), b(position("x"))
    bound = b(elementwise("shift", "q", const=SINKS, dtype=INT32), b(elementwise("scale", "q", const=0, dtype=INT32),
                                                                      qi))
    sinks = b(compare("lt", "x, q -> q x"), xi, bound)
    return b.build(b(logical("or", "q x, q x -> q x"), sinks, window(b, qi, xi, -WINDOW, WINDOW)))


def two_windows():
    """``|x − q| ≤ WINDOW ∨ |x − (CROSS − q)| ≤ WINDOW``: a window on the diagonal and one on the anti-diagonal, two
    ranges each bounded below whose order changes with ``q`` (they cross at ``q = CROSS/2``): ordered at run time."""
    b = Builder(Ty())
    qi, xi = b(position("q")), b(position("x"))
    mirrored = b(elementwise("shift", "q", const=CROSS, dtype=INT32), b(elementwise("scale", "q", const=-1,
                                                                                     dtype=INT32), qi))
    return b.build(b(logical("or", "q x, q x -> q x"), window(b, qi, xi, -WINDOW, WINDOW),
                     window(b, mirrored, xi, -WINDOW, WINDOW)))


MASKS = {    # name → (attention, numpy's mask over (q, x) positions and the segment ids)
    "causal": (nc.library.causal_attention, lambda q, x, s, t: x <= q),
    "window": (lambda: nc.library.sliding_window_attention(WINDOW), lambda q, x, s, t: abs(q - x) <= WINDOW),
    "sinks+window": (lambda: nc.library.masked_attention(sinks_and_window()),
                     lambda q, x, s, t: (x < SINKS) | (abs(q - x) <= WINDOW)),
    "two windows": (lambda: nc.library.masked_attention(two_windows()),
                    lambda q, x, s, t: (abs(q - x) <= WINDOW) | (abs(CROSS - q - x) <= WINDOW)),
    "prefix-lm": (lambda: nc.library.prefix_lm_attention(PREFIX), lambda q, x, s, t: (x <= q) | (x < PREFIX)),
    "document": (nc.library.document_attention, lambda q, x, s, t: s[:, None] == t[None, :]),
}
SIZES = ((32, 32), (29, 29), (23, 37))


def planned(kind: str, nq: int, nx: int, tiles=(4, 8)):
    d = nc.group(nc.stream(nc.kernel(MASKS[kind][0]()), "x", "s_x"), "q", "g_q")
    return nc.plan(d, {"q": nq, "x": nx, "d": D, "g_q": tiles[0], "s_x": tiles[1]})


def arrays_for(kind: str, nq: int, nx: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    out = [rng.standard_normal((n, D)).astype(np.float32) for n in (nq, nx, nx)]
    if kind == "document":      # three documents, cut at different places along q and x
        out += [np.sort(rng.integers(0, 3, nq)).astype(np.int32), np.sort(rng.integers(0, 3, nx)).astype(np.int32)]
    return out


def reference(kind: str, arrays) -> np.ndarray:
    Q, K, V = (a.astype(np.float64) for a in arrays[:3])
    segs = arrays[3:] if kind == "document" else (None, None)
    allowed = MASKS[kind][1](np.arange(len(Q))[:, None], np.arange(len(K))[None, :], *segs)
    S = np.where(allowed, Q @ K.T / math.sqrt(D), -np.inf)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P = np.where(allowed.any(axis=1, keepdims=True), P, 0.0)
    return (P / np.maximum(P.sum(axis=1, keepdims=True), 1e-300)) @ V


def whole_streams(p) -> int:
    return sum(isinstance(s, StreamLoop) and s.full_trips is not None for s in walk(p.body))


@needs_cc
@pytest.mark.parametrize("kind", sorted(MASKS))
def test_the_c_kernel_loops_over_ranges_and_equals_numpy_and_the_runner(kind):
    for nq, nx in SIZES:
        p = planned(kind, nq, nx)
        k = nc.codegen.c(p, blas=False)
        xs = arrays_for(kind, nq, nx)
        want = reference(kind, xs)
        np.testing.assert_allclose(np.asarray(k(*xs)), want, rtol=1e-4, atol=1e-5, err_msg=f"{kind} {nq}×{nx}")
        np.testing.assert_allclose(np.asarray(p(*xs)), want, rtol=1e-4, atol=1e-5, err_msg=f"{kind} runner")
        src = k.source
        tests = [line for line in src.splitlines() if "continue;" in line]
        assert all("nc_state_i_x == 0" in line for line in tests), kind    # a document's block state alone
        assert "of this trip" not in src and "each trip tests" not in src, kind
        whole = src.count("the mask is true on every pair: not made")
        ranges = 2 if kind in ("sinks+window", "two windows") else 1
        assert whole == ranges * whole_streams(p), (kind, whole)     # a whole loop per range of whole trips
        if kind == "document":
            assert whole_streams(p) == 0 and src.count("for (int i_x") == 1


@needs_cc
def test_without_ranges_the_c_kernel_tests_each_trip_and_says_why():
    """A skip test not linear in the index (``i_x² ≤ 4``) falls back to the per-trip ``continue``, with the reason."""
    from napkin_cat.codegen.c.openmp import CPrinter
    p = planned("causal", 29, 29)
    printer = CPrinter(p, blas=False)
    (s,) = [s for s in walk(printer.plan.body) if isinstance(s, StreamLoop)]
    object.__setattr__(s, "when", s.index * s.index <= 4)       # i² ≤ 4: not linear in i
    src = printer.doprint_plan()
    assert "each trip tests it" in src and src.count("continue;") >= 1


@needs_triton
@pytest.mark.parametrize("kind", ["two windows", "document"])
def test_the_triton_kernel_loops_over_ranges_and_equals_numpy_and_the_runner(kind):
    for nq, nx in SIZES[1:]:
        p = planned(kind, nq, nx)
        k = nc.codegen.triton(p)
        xs = arrays_for(kind, nq, nx, seed=1)
        want = reference(kind, xs)
        np.testing.assert_allclose(np.asarray(k(*xs)), want, rtol=1e-4, atol=1e-5, err_msg=f"{kind} {nq}×{nx}")
        np.testing.assert_allclose(np.asarray(p(*xs)), want, rtol=1e-4, atol=1e-5)
        assert not re.search(r"\n\s+if \(", k.source) and "each trip tests" not in k.source, kind
        if kind == "two windows":
            assert k.source.count("tl.where(nc_i_x_") >= 4      # the two ranges ordered at run time


@needs_triton
def test_kernels_are_numbered_consecutively_past_a_view():
    """A rename (a view: the launcher's alias, no kernel) before a kernel: the one kernel is ``nc_kernel0``."""
    r = nc.renaming("n b -> a b", n=6, b=8)
    m = nc.library.matmul(a=6, b=8, c=8)
    p = nc.plan((r @ nc.Id(m.dom[1:])) >> nc.group(nc.kernel(m), "a", "g_a"), {"g_a": 2})
    k = nc.codegen.triton(p)
    assert re.findall(r"def (nc_kernel\w*)\(", k.source) == ["nc_kernel0"] and k.printer.aliases
    assert "nc_kernel0[(" in k.source
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((6, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(k(x, w)), x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)


@needs_triton
def test_no_ragged_variant_where_the_divisions_hold_at_every_size():
    """A tile of 1 divides every size: the even kernel alone, launched at any size (no ``if True else``)."""
    p = nc.plan(nc.group(nc.kernel(nc.library.matmul()), "a", "g_a"), {"a": 6, "b": 8, "c": 8, "g_a": 1})
    k = nc.codegen.triton(p)
    assert "_ragged" not in k.source and "if True" not in k.source and not k.printer.assumed
    assert k.launched({"a": 5}) == ["nc_kernel0"]
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((5, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(k(x, w)), x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)


@needs_triton
@pytest.mark.parametrize("kind", ["sinks+window", "two windows"])
def test_the_ranged_triton_kernels_compile_for_the_gpu(kind):
    """``triton.compile`` (sm_90, no GPU needed) takes the bounds of ranges (``tl.where`` of scalar tests, run-time
    order included) as loop bounds, in the ragged variant."""
    k = nc.codegen.triton(planned(kind, 32, 32))
    assert not re.search(r"\n\s+if \(", k.source) and "each trip tests" not in k.source
    assert k.source.count("the mask is true on every pair: not made") >= 3      # whole loops in both variants
    assert set(k.compile(arch=90, kernels=["nc_kernel0_ragged"])["kernels"]) == {"nc_kernel0_ragged"}


@needs_nvcc
@pytest.mark.parametrize("kind", ["sinks+window", "two windows"])
def test_the_ranged_cuda_kernels_compile(kind):
    """The CUDA kernel reads the same ranges (its trips as written within them: no whole loops): nvcc compiles it
    with the plan's shared memory; no trip tests the skip condition."""
    p = planned(kind, 29, 37)
    k = nc.codegen.cuda(p)
    assert "the trips the mask reaches" in k.source and "continue;" not in k.source
    assert "not made, read as true" not in k.source
    assert k.compile(arch=90)["smem"] == p.smem_bytes
