"""Attention's backward derived (issue 23): ``nc.derive(nc.grad(attention))`` writes SoftMax through its log-sum-exp,
recomputes the probabilities (and dP, dS) in every kernel that uses them, and never writes a q×x array to level 0
(at q = x = 4096, d = 128 from M = 2^16, where its kernels fit; at q = x = 256, d = 32 from 2^12).

The derived algorithm takes only Q, K, V and dO (no O and L saved by a forward pass: it computes L and D by
kernels of its own), so it moves about 1.7 times FlashAttention-2's backward IO (:func:`backward_io.io_fa2`, written
out from its paper) at every memory: the same Θ(N²d²/M).  As FlashAttention-2's, it computes dK and dV in one
kernel per block of keys (sibling fusion, ``rewrites/siblings.py``: the two are independent and both stream Q, dO
and L, which the joined kernel reads once per block); that kernel holds K, V, dK and dV, so its blocks are smaller
than each alone.

Each H is checked by routes that do not go through the search: the instrumented run of the derived plan at its
own tiles counts the same transfers, it is 1.6 to 1.8 times FlashAttention-2's formula, and at least the lower
bound.  Three memories at q = x = 256, d = 32 run by default (:mod:`backward_io`; measured 648,448, 365,824 and
224,512 at 2^12, 2^13, 2^14: 1.70 times the formula); q = x = 4096, d = 128 at seven memories with
``NAPKIN_SLOW=1`` (148,393,984 at 2^16 and 14,209,024 at 2^20; the table in test_derive_backward_saved.py)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.search.bounds import attention_backward
from napkin_cat.syntax.flat import layers

from backward_io import LARGE, MEMORIES, SIZES, compulsory, counted, io_fa2, io_lower, unsaved

N, D = SIZES["q"], SIZES["d"]
slow = pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="q = x = 4096 at seven memories: NAPKIN_SLOW=1")


@pytest.fixture(scope="module")
def derived():
    return unsaved()


def written(d):
    """The arrays the kernels of ``d`` write to level 0 that are not ``d``'s outputs."""
    return [a for _, box in layers(d) if isinstance(box, nc.Region) for a in box.cod.inside
            if a not in d.cod.inside]


def test_no_q_by_x_array_reaches_level_0(derived):
    assert sorted(derived.H) == list(MEMORIES)
    for r in derived.regimes:
        assert not [a for a in written(r.diagram) if {"q", "x"} <= set(a.names)], r.variant
        rules = [s.rule for s in r.trace]
        assert "softmax_to_logsumexp" in rules and "recompute" in rules
        assert sorted(tuple(a.names) for a in written(r.diagram)) == [("q",), ("q",)]   # L and D: statistics


def test_h_is_what_the_derived_plan_moves(derived):
    """The instrumented run of each derived plan at its own sizes and tiles counts H transfers."""
    for r in derived.regimes:
        assert counted(r) == {1: r.H}, r.memory


def test_h_is_within_a_constant_of_flashattention2s_backward(derived):
    """1.7 times FlashAttention-2's formula at every memory (the same Θ(N²d²/M)), and above the lower bound."""
    ratios = [derived.H[m] / io_fa2(N, D, m) for m in MEMORIES]
    assert all(1.6 < r < 1.8 for r in ratios), ratios
    assert abs(ratios[0] / ratios[-1] - 1) < 0.05
    grad = nc.grad(nc.library.attention())
    assert all(h >= max(io_lower(N, N, D, m), compulsory(grad, SIZES)) for m, h in derived.H.items())


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
    y, counts = nc.plan(d, sizes).run(*xs)
    want = nc.evaluate(nc.grad(nc.library.attention()), *xs)
    for a, b in zip(y, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert counts.transfers == at(d, sizes).H


def test_the_backward_bound_is_the_papers(derived):
    """derive's default gap report recognises the gradient's diagram and reports H / the backward bound: the
    larger of Li and Xu's bound and the compulsory 7Nd (Q, K, V, dO read, dQ, dK, dV written).  At q = x = 4096,
    d = 128 the first is the larger at 2^16 (FlashAttention-2's own IO is 15 to 25 times it), the second at 2^20."""
    given = attention_backward(nc.library.attention(), "M")
    for r in derived.regimes:
        want = max(io_lower(N, N, D, r.memory), 7 * N * D)
        assert r.bound == given.at({**SIZES, "M": r.memory}) == pytest.approx(want, rel=1e-12)
        assert r.gap == pytest.approx(r.H / want, rel=1e-9)
    n, d = LARGE["q"], LARGE["d"]
    for m in (2 ** 16, 2 ** 20):
        assert given.at({**LARGE, "M": m}) == pytest.approx(max(io_lower(n, n, d, m), 7 * n * d), rel=1e-12)
    assert io_lower(n, n, d, 2 ** 16) > 7 * n * d > io_lower(n, n, d, 2 ** 20)
    assert 15 < io_fa2(n, d, 2 ** 16) / io_lower(n, n, d, 2 ** 16) < 25


def test_the_backward_bound_refuses_a_diagram_that_is_not_attention():
    with pytest.raises(nc.NapkinError, match="attention's forward"):
        attention_backward(nc.library.mlp(), "M")


@slow
def test_at_4096_from_2_16_h_is_within_a_constant_of_flashattention2s_backward():
    """From 2^16 no q×x array reaches level 0 and H is 1.6 to 1.8 times FlashAttention-2's formula; the gap to
    the bound about 34 at 2^16 and 4 at 2^20; the plan at 2^20 moves H."""
    r = unsaved(tuple(2 ** k for k in range(14, 21)), large=True)
    n, d = LARGE["q"], LARGE["d"]
    for reg in r.regimes:
        assert reg.H >= max(io_lower(n, n, d, reg.memory), 7 * n * d)
        if reg.memory >= 2 ** 16:
            assert 1.6 < reg.H / io_fa2(n, d, reg.memory) < 1.8, reg.memory
            assert not [a for a in written(reg.diagram) if {"q", "x"} <= set(a.names)], reg.variant
    assert 30 < r.regimes[2].gap < 40 and 3 < r.regimes[-1].gap < 5
    assert counted(r.regimes[-1]) == {1: r.H[2 ** 20]}
