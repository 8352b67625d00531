"""Multi-pass normalisers derived (issue 22, item 3): where a row does not fit, ``nc.derive`` takes a statistics
pass and a normalising pass (``softmax_statistics_pass``, ``centred_statistics_pass``), and the algorithm it makes
computes the normaliser at ragged sizes, moves what its cost says in the counting runner, and runs as C (and
Triton, under the interpreter) kernels that match numpy written from the definitions."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import napkin_cat as nc

sys.path.insert(0, str(Path(__file__).parents[1] / "codegen"))
from kernels_common import needs_cc, needs_nvcc, needs_triton  # noqa: E402


def softmax_numpy(X):
    e = np.exp(X - X.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layer_norm_numpy(X, g, b, eps=1e-5):
    mu = X.mean(axis=1, keepdims=True)
    var = ((X - mu) ** 2).mean(axis=1, keepdims=True)
    return (X - mu) / np.sqrt(var + eps) * g + b


CASES = {"softmax": (lambda: nc.softmax("n v", over="v"), "v", "softmax_statistics_pass", softmax_numpy),
         "layer_norm": (nc.library.layer_norm, "d", "centred_statistics_pass", layer_norm_numpy)}


def _inputs(f, sizes, seed=0, shift=0.0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=tuple(sizes[a.name] for a in arr.axes)) + shift for arr in f.dom.inside]


@pytest.mark.parametrize("name, sizes, H", [
    ("softmax", {"n": 2 ** 14, "v": 2 ** 20}, 3 * 2 ** 34 + 2 * 2 ** 14),
    ("layer_norm", {"n": 2 ** 14, "d": 2 ** 16}, 3 * 2 ** 30 + 4 * 2 ** 14 + 2 * 4 * 2 ** 16),
])
def test_a_row_longer_than_the_memory_derives_two_passes(name, sizes, H):
    make, axis, rule, _ = CASES[name]
    r = nc.derive(make(), memory=2 ** 14, sizes=sizes)
    assert r.variant.prepared == (rule,) and len(r.variant.kernels) == 2
    assert r.variant.kernels[0].stream == axis and r.variant.kernels[1].stream == axis
    assert r.H == H == nc.cost(r.diagram, sizes=r.optimum.sizes).H[1]    # the row read twice, written once
    row, values = sizes[axis], sizes["n"] * sizes[axis]
    if name == "softmax":      # without the rule the row must fit: refused
        with pytest.raises(nc.MemoryLimitError, match=f"smallest memory that works is {row}"):
            nc.derive(make(), memory=2 ** 14, sizes=sizes, book=_without(rule))
    else:                      # without it, the centred row is stored by one pass and read by a third: 5 nd
        three = nc.derive(make(), memory=2 ** 14, sizes=sizes, book=_without(rule))
        assert len(three.variant.kernels) == 3 and 5 * values < three.H < 5 * values + 2 * row * sizes["n"] // 64
    one = nc.derive(make(), memory=4 * row, sizes=sizes)                 # where the row fits: one pass, less
    assert one.variant.prepared == () and one.H < r.H


def _without(rule):
    from napkin_cat.rewriting.registry import rulebook
    book = rulebook(None)
    roles = {**book.roles, "prepare": tuple(n for n in book.roles["prepare"] if n != rule)}
    return type(book)(book.name + "-without", book.rules, book.derivations, roles=roles)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_the_two_passes_compute_the_normaliser_and_move_what_they_cost(name, seed):
    make, axis, rule, numpy_of = CASES[name]
    rng = np.random.default_rng(seed)
    sizes = {"n": int(rng.integers(3, 8)), axis: int(rng.integers(9, 30))}
    f = make()
    r = nc.derive(f, memory=8, sizes=sizes, tiles="any")
    assert r.variant.prepared == (rule,)
    xs = _inputs(f, sizes, seed, shift=[0.0, 1e3][seed])
    want = numpy_of(*xs)
    np.testing.assert_allclose(nc.evaluate(r.diagram, *xs, sizes=r.optimum.sizes), want, rtol=1e-9, atol=1e-9)
    p = nc.plan(r.diagram, r.optimum.sizes)
    got, counted = p.run(*xs)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    assert counted.transfers == nc.cost(r.diagram, sizes=r.optimum.sizes).H and counted.transfers[1] == r.H


@needs_cc
@pytest.mark.parametrize("name", list(CASES))
def test_the_c_kernels_of_the_two_passes_match_numpy(name):
    make, axis, _, numpy_of = CASES[name]
    sizes = {"n": 5, axis: 23}
    f = make()
    r = nc.derive(f, memory=8, sizes=sizes, tiles="any")
    k = nc.codegen.c(nc.plan(r.diagram, r.optimum.sizes), poison=True)
    xs = [x.astype(np.float32) for x in _inputs(f, sizes, 3)]
    np.testing.assert_allclose(k(*xs), numpy_of(*[x.astype(np.float64) for x in xs]), rtol=2e-5, atol=2e-5)


@needs_nvcc
@pytest.mark.parametrize("name", list(CASES))
def test_the_cuda_kernels_of_the_two_passes_compile_with_the_plans_shared_memory(name):
    make, axis, rule, _ = CASES[name]
    r = nc.derive(make(), memory=2 ** 10, sizes={"n": 256, axis: 4096})
    assert r.variant.prepared == (rule,)
    p = nc.plan(r.diagram, r.optimum.sizes)
    info = nc.codegen.cuda(p).compile(arch=90)
    assert info["smem"] == p.smem_bytes and info["spills"] == 0


@needs_triton
@pytest.mark.parametrize("name", list(CASES))
def test_the_triton_kernels_of_the_two_passes_match_numpy(name):
    make, axis, rule, numpy_of = CASES[name]
    f = make()
    for sizes in ({"n": 16, axis: 64}, {"n": 11, axis: 37}):
        r = nc.derive(f, memory=16, sizes=sizes, tiles="any")
        assert r.variant.prepared == (rule,)
        k = nc.codegen.triton(nc.plan(r.diagram, r.optimum.sizes))
        xs = [x.astype(np.float32) for x in _inputs(f, sizes, 5)]
        np.testing.assert_allclose(k(*xs), numpy_of(*[x.astype(np.float64) for x in xs]), rtol=1e-4, atol=1e-4)
