"""Attention's backward derived (issue 23): ``nc.derive(nc.grad(attention))`` at q = x = 4096, d = 128 writes
SoftMax through its log-sum-exp, recomputes the probabilities (and dP, dS) in every kernel that uses them, and
never writes a q×x array to level 0 (from M = 2^16, where its kernels fit).

FlashAttention-2's backward IO, written from its paper (Dao 2023, arXiv 2307.08691, Algorithm 2, with the
block size of FlashAttention's Algorithm 1, B_c = ⌈M/4d⌉): D = rowsum(dO ∘ O) reads dO and O and writes D
(2Nd + N); per block of K and V (N/B_c of them) the inner loop reads Qᵢ, Oᵢ, dOᵢ, dQᵢ, Lᵢ, Dᵢ and writes dQᵢ
over all N rows (5Nd + 2N); K and V are read and dK, dV written once (4Nd):

    IO_FA2(N, d, M) = 6Nd + N + ⌈N/B_c⌉ · (5Nd + 2N)  =  Θ(N²d²/M).

The derived algorithm takes only Q, K, V and dO (no O and L saved by a forward pass: it computes L and D by
kernels of its own), so it moves about 1.7 times as much, at every memory: the same Θ(N²d²/M).  As
FlashAttention-2's, it computes dK and dV in one kernel per block of keys (sibling fusion, ``rewrites/siblings.py``:
the two are independent and both stream Q, dO and L, which the joined kernel reads once per block); that kernel
holds K, V, dK and dV, so its blocks are smaller than each alone (g_x = 64 at 2^16, against 128), and the join
saves 393,216 values at 2^16 and 516,096 at 2^20 (before it: 148,787,200 and 14,725,120 in five kernels)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.search.bounds import attention_backward
from napkin_cat.syntax.adapter import layers

SIZES = {"q": 4096, "x": 4096, "d": 128}


def io_fa2(N, d, M):
    """FlashAttention-2's backward IO (module docstring)."""
    Bc = math.ceil(M / (4 * d))
    return 6 * N * d + N + math.ceil(N / Bc) * (5 * N * d + 2 * N)


@pytest.fixture(scope="module")
def derived():
    return nc.derive(nc.grad(nc.library.attention()), [2 ** 16, 2 ** 20], sizes=SIZES)    # the default gap report


def written(d):
    """The arrays the kernels of ``d`` write to level 0 that are not ``d``'s outputs."""
    return [a for _, box in layers(d) if isinstance(box, nc.Region) for a in box.cod.inside
            if a not in d.cod.inside]


def test_no_q_by_x_array_reaches_level_0(derived):
    for r in derived.regimes:
        assert not [a for a in written(r.diagram) if {"q", "x"} <= set(a.names)], r.variant
        rules = [s.rule for s in r.trace]
        assert "softmax_to_logsumexp" in rules and "recompute" in rules
        assert sorted(tuple(a.names) for a in written(r.diagram)) == [("q",), ("q",)]   # L and D: statistics


def test_h_is_within_a_constant_of_flashattention2s_backward(derived):
    """Before recomputation: 195,559,424 at 2^16 and 105,381,888 at 2^20 (6 and 4 kernels, P and dS at level 0)."""
    assert derived.H == {2 ** 16: 148_393_984, 2 ** 20: 14_209_024}
    ratios = [derived.H[m] / io_fa2(4096, 128, m) for m in (2 ** 16, 2 ** 20)]
    assert all(1.5 < r < 1.8 for r in ratios)
    assert abs(ratios[0] / ratios[1] - 1) < 0.05                    # the same Θ(N²d²/M)


def test_dk_and_dv_are_computed_in_one_kernel(derived):
    """One kernel writes both x×d gradients (dK, dV), grouped over the keys and streaming the queries; it reads
    Q, K, V, dO and the statistics L and D, each once (the join, then the shared loads)."""
    for r in derived.regimes:
        both = [box for _, box in layers(r.diagram) if isinstance(box, nc.Region)
                and [tuple(a.names) for a in box.cod.inside] == [("x", "d"), ("x", "d")]]
        assert len(both) == 1, r.variant
        assert sorted(tuple(a.names) for a in both[0].dom.inside) == sorted(
            [("q", "d"), ("x", "d"), ("x", "d"), ("q", "d"), ("q",), ("q",)])
        assert "sibling_fusion" in [s.rule for s in r.trace]
        kernel = next(k for k in r.variant.kernels if len(k.ops) > 10)
        assert kernel.stream == "q" and kernel.groups == ("x",)


def test_the_derived_backward_runs_at_ragged_sizes(derived):
    """Its plan at small ragged sizes: the gradient nc.evaluate gives, counts equal to the cost."""
    d = derived.regimes[-1].diagram
    tiles = {str(k): 3 for k in derived.regimes[-1].optimum.sizes if str(k) not in SIZES}
    sizes = {"q": 7, "x": 5, "d": 4, **tiles}
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=s) for s in ((7, 4), (5, 4), (5, 4), (7, 4))]
    y, counted = nc.plan(d, sizes).run(*xs)
    want = nc.evaluate(nc.grad(nc.library.attention()), *xs)
    for a, b in zip(y, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert counted.transfers == at(d, sizes).H


def io_lower(q, x, d, M):
    """The backward IO lower bound (Li and Xu, arXiv 2410.09397), written from the paper, constant 1."""
    return min((q * x * d ** 2 + x * d ** 3) / M, (q * x * d + x * d ** 2) / math.sqrt(M))


def test_the_gap_report_is_against_the_backward_lower_bound(derived):
    """derive's default gap report recognises the gradient's diagram and reports H / the backward bound (the larger
    of it and the compulsory 7Nd: Q, K, V, dO read, dQ, dK, dV written), attention_backward's: about 34 at 2^16,
    where FlashAttention-2's own IO is about 20 times the bound, and 4 at 2^20, where the compulsory part is the
    larger."""
    given = attention_backward(nc.library.attention(), "M")
    for r in derived.regimes:
        assert r.bound == given.at({**SIZES, "M": r.memory})
        want = max(io_lower(4096, 4096, 128, r.memory), 7 * 4096 * 128)
        assert r.bound == pytest.approx(want, rel=1e-12)
        assert r.gap == pytest.approx(r.H / want, rel=1e-9)
    assert 30 < derived.regimes[0].gap < 40 and 3 < derived.regimes[1].gap < 5
    assert 15 < io_fa2(4096, 128, 2 ** 16) / io_lower(4096, 4096, 128, 2 ** 16) < 25


def test_the_backward_bound_refuses_a_diagram_that_is_not_attention():
    with pytest.raises(nc.NapkinError, match="attention's forward"):
        attention_backward(nc.library.mlp(), "M")
