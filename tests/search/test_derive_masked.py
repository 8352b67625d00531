"""``nc.derive`` on masked attention and on the cross-entropies: masks make tiles skipped and so cheaper
algorithms; linear cross-entropy streams its vocabulary in one kernel; each derived algorithm runs in the plan
runner (counting what the cost says) and in the kernels."""
from __future__ import annotations

import functools
import importlib.util
import shutil

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.bubbles import Kernel
from napkin_cat.syntax.flat import layers

ISSUE = {"q": 4096, "x": 4096, "d": 128}


@functools.cache
def attention_at(n):
    """Attention derived at q = x = ``n``, d = 128, M = 2^16 (two tests divide by it at 4096: derived once)."""
    return nc.derive(nc.library.attention(), memory=2 ** 16, sizes={"q": n, "x": n, "d": 128})


def test_causal_attention_costs_about_half_of_attention():
    full = attention_at(4096)
    causal = nc.derive(nc.library.causal_attention(), memory=2 ** 16, sizes=ISSUE)
    assert 0.45 < causal.H / full.H < 0.6
    tiles = {str(k): int(v) for k, v in causal.optimum.sizes.items()}
    assert nc.cost(causal.diagram, sizes={**ISSUE, **tiles}).H[1] == causal.H     # the tiles line up: exact


def test_a_sliding_window_makes_derived_transfers_linear_in_the_sequence():
    h = {n: nc.derive(nc.library.sliding_window_attention(256), memory=2 ** 16,
                      sizes={"q": n, "x": n, "d": 128}).H for n in (4096, 8192)}
    full = {n: attention_at(n).H for n in (4096, 8192)}
    assert h[8192] / h[4096] == pytest.approx(2, rel=0.02)        # linear
    assert full[8192] / full[4096] == pytest.approx(4, rel=0.02)   # quadratic


def _kernels(d):
    out = []
    for _, box in layers(d):
        if isinstance(box, Kernel):
            out.append(box)
        elif hasattr(box, "arg"):
            out += _kernels(box.arg)
    return out


def test_linear_cross_entropy_streams_its_vocabulary_in_one_kernel_and_matches_the_hand_derivation():
    """Hand derivation: one kernel, a Grid over n (tiles g_n), a Stream over v.  Per group: the hidden states'
    tile (g_n·e) and its targets (g_n integers) once, the weight's rows (v·e) slice by slice, the loss (g_n)
    stored: H = n·e + n·v·e/g_n + 2n.  The group holds g_n·e + s_v·e + 2·g_n with s_v = 1, so at large M
    g_n = M/e and H* = n·e + 2n + n·v·e²/M."""
    n, e, v, M = (nc.symbol(s) for s in ("n", "e", "v", "M"))
    r = nc.derive(nc.library.linear_cross_entropy(), memory="M", reference={"n": 4096, "e": 1024, "v": 32768})
    large = [g for g in r.regimes if g.H.has(M)][-1]      # past it the tiles are whole (issue 35): a constant
    assert sympy.simplify(large.H - (n * e + 2 * n + n * v * e ** 2 / M)) == 0
    assert sympy.simplify(r.regimes[-1].H - (n * e + e * v + 2 * n)) == 0   # reads X, W and the targets once
    (kernel,) = _kernels(large.diagram)
    c = nc.cost(large.diagram)
    g = nc.symbol("g_n")
    assert sympy.simplify(c.H[1] - (n * e + n * v * e / g + 2 * n)) == 0
    assert sympy.simplify(c.H_bytes[1] - 4 * (n * e + n * v * e / g + 2 * n)) == 0     # targets: n int32
    saved = [b for b in large.diagram.boxes if getattr(b.data, "kind", None) == "save"]
    assert not saved and all({"n", "v"} - set(a.names) for a in _level0_arrays(large.diagram))
    targets = [a for a in kernel.dom.inside if a.dtype == nc.INT32]
    assert [a.names for a in targets] == [("n",)]


def _level0_arrays(d):
    """Every array at level 0 inside the algorithm (its inputs and outputs excluded): what a kernel writes."""
    out = []
    for _, box in layers(d):
        out += [a for a in box.cod.inside if a.level == 0 and box is not d]
        if hasattr(box, "arg") and not isinstance(box, Kernel):
            out += _level0_arrays(box.arg)
    return [a for a in out if a not in d.cod.inside]


SMALL = {"causal_attention": (lambda: nc.library.causal_attention(), {"q": 64, "x": 64, "d": 16}),
         "sliding_window_attention": (lambda: nc.library.sliding_window_attention(8), {"q": 64, "x": 64, "d": 16}),
         "alibi_attention": (lambda: nc.library.alibi_attention(0.25), {"q": 64, "x": 64, "d": 16}),
         "document_attention": (lambda: nc.library.document_attention(), {"q": 64, "x": 64, "d": 16}),
         "cross_entropy": (lambda: nc.library.cross_entropy(), {"n": 64, "v": 96}),
         "linear_cross_entropy": (lambda: nc.library.linear_cross_entropy(), {"n": 64, "e": 16, "v": 96})}


def _inputs(d, sizes, rng):
    out = []
    for arr in d.dom.inside:
        shape = tuple(sizes[a.name] for a in arr.axes)
        if arr.dtype == nc.INT32:
            top = sizes["v"] if "v" in sizes else 3
            out.append(np.sort(rng.integers(0, top, shape)).astype(np.int32))
        else:
            out.append(rng.normal(size=shape).astype(np.float32))
    return out


@functools.cache
def _derived_plan(name):
    """``name`` derived at M = 2^10 and its plan at the derivation's tiles (both tests below run it: derived once)."""
    make, sizes = SMALL[name]
    f = make()
    r = nc.derive(f, memory=2 ** 10, sizes=sizes)
    tiles = {str(k): int(v) for k, v in r.optimum.sizes.items()}
    return f, sizes, r, tiles, nc.plan(r.diagram, {**sizes, **tiles})


@pytest.mark.parametrize("name", list(SMALL))
def test_each_derives_and_runs_in_the_runner_and_the_c_kernel(name):
    f, sizes, r, tiles, p = _derived_plan(name)
    xs = _inputs(f, sizes, np.random.default_rng(0))
    with np.errstate(invalid="ignore"):
        want = nc.evaluate(f, *[x.astype(np.float64) if x.dtype == np.float32 else x for x in xs])
        out, counted = p.run(*xs)
    assert counted.transfers == nc.cost(r.diagram, sizes={**sizes, **tiles}).H
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    np.testing.assert_allclose(nc.codegen.c(p)(*xs), want, rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("name", list(SMALL))
def test_each_derived_algorithm_runs_in_triton_and_compiles_in_cuda(name):
    if not (importlib.util.find_spec("triton") and importlib.util.find_spec("torch") and shutil.which("nvcc")):
        pytest.skip("needs triton (with torch) for the interpreter and nvcc for the CUDA compile")
    f, sizes, _, _, p = _derived_plan(name)
    xs = _inputs(f, sizes, np.random.default_rng(1))
    with np.errstate(invalid="ignore"):
        want = nc.evaluate(f, *[x.astype(np.float64) if x.dtype == np.float32 else x for x in xs])
    np.testing.assert_allclose(nc.codegen.triton(p)(*xs), want, rtol=1e-4, atol=1e-4, equal_nan=True)
    assert nc.codegen.cuda(p).compile(arch=90)["smem"] == p.smem_bytes


def test_symbolic_derive_of_causal_attention_halves_the_leading_term():
    q, d, M = (nc.symbol(s) for s in ("q", "d", "M"))
    causal = [g.H for g in nc.derive(nc.library.causal_attention(), memory="M").regimes if g.H.has(M)][-1]
    full = [g.H for g in nc.derive(nc.library.attention(), memory="M").regimes if g.H.has(M)][-1].subs(
        nc.symbol("x"), q)     # the large-M forms (past them every tile is whole, issue 35)
    assert sympy.simplify(causal - (3 * d * q + 2 * d ** 2 * q ** 2 / M)) == 0
    assert sympy.limit(causal / full, q, sympy.oo) == sympy.Rational(1, 2)
