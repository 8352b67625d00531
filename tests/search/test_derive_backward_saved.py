"""Attention's backward derived from what its forward saved (issue 23 (a)): ``nc.derive(nc.grad(attention(lse=True),
wrt=[0, 1, 2], saved=True, aux=1))`` takes Q, K, V, the saved O and L (L = logsumexp_x(QKᵀ/√d)) and dO, as
FlashAttention-2's backward does.  The gradient diagram already reads them (:mod:`napkin_cat.autodiff.saved`): the
probabilities are ``exp(β·S − L)`` (no log-sum-exp kernel), and SoftMax's pairing is ``D = rowsum(dO ∘ O)`` by the
adjoint identity (a q×d pass, fused into the dQ kernel, instead of a pass over K and V).

At q = x = 4096, d = 128 derive finds 3 kernels, none writing a q×x array from M = 2^16 on: dQ with D (grid q,
stream x), dK and dV (each grid x, stream q; the search does not put the two accumulations in one kernel).  H
against the unsaved derivation (tests/search/test_derive_backward.py: 148,787,200 at 2^16, 14,725,120 at 2^20)
and FlashAttention-2's backward IO (:func:`io_fa2`, from its paper, 87.3M at 2^16):

    M       2^14         2^15         2^16         2^17        2^18        2^19        2^20
    saved   271,585,280  187,699,200  105,783,296  55,255,040  29,990,912  17,358,848  11,042,816
    before  321,388,544  237,502,464  148,787,200  77,287,424  41,537,536  23,662,592  14,725,120

The 2^16 derivation runs by default (about 4 s; 2^20 in tests/codegen/test_backward_saved_kernels.py); the seven
memories behind ``NAPKIN_SLOW=1`` (about 10 s more on 2 cores; the derivation at small sizes such as q = x = 256 is
slower than at 4096, as more kernel splits fit, so the structure is checked at 4096 and the equivalence at ragged
sizes on its plan)."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.syntax.adapter import layers

SIZES = {"q": 4096, "x": 4096, "d": 128}
SAVED = {2 ** 14: 271_585_280, 2 ** 15: 187_699_200, 2 ** 16: 105_783_296, 2 ** 17: 55_255_040,
         2 ** 18: 29_990_912, 2 ** 19: 17_358_848, 2 ** 20: 11_042_816}
UNSAVED = {2 ** 14: 321_388_544, 2 ** 15: 237_502_464, 2 ** 16: 148_787_200, 2 ** 17: 77_287_424,
           2 ** 18: 41_537_536, 2 ** 19: 23_662_592, 2 ** 20: 14_725_120}


def io_fa2(N, d, M):
    """FlashAttention-2's backward IO (Dao 2023, arXiv 2307.08691, Algorithm 2; as in test_derive_backward.py):
    6Nd + N + ⌈N/B_c⌉(5Nd + 2N), B_c = ⌈M/4d⌉."""
    Bc = math.ceil(M / (4 * d))
    return 6 * N * d + N + math.ceil(N / Bc) * (5 * N * d + 2 * N)


def backward():
    return nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1)


@pytest.fixture(scope="module")
def derived():
    return nc.derive(backward(), [2 ** 16], sizes=SIZES)


def kernels(d):
    return [box for _, box in layers(d) if isinstance(box, nc.Region)]


def written(d):
    """The arrays the kernels of ``d`` write to level 0 that are not ``d``'s outputs."""
    return [a for box in kernels(d) for a in box.cod.inside if a not in d.cod.inside]


def test_the_backward_reads_the_saved_statistics(derived):
    """No SoftMax and no log-sum-exp is computed; the one array written between kernels is D (one per query)."""
    for r in derived.regimes:
        names = set(str(r.variant).replace(";", " ").replace("[", " ").replace("]", " ").split())   # the boxes' labels
        assert "SoftMax" not in names and "LSE" not in names, r.variant
        assert not [a for a in written(r.diagram) if {"q", "x"} <= set(a.names)], r.variant
        assert sorted(tuple(a.names) for a in written(r.diagram)) == [("q",)]
        assert len(kernels(r.diagram)) == 3


def test_h_is_below_the_unsaved_derivation_and_near_flashattention2s_backward(derived):
    assert derived.H == {2 ** 16: SAVED[2 ** 16]} and io_fa2(4096, 128, 2 ** 16) == 87_298_048
    for m, h in derived.H.items():
        assert h < UNSAVED[m]
        assert 1.15 < h / io_fa2(4096, 128, m) < 1.35          # before: 1.70 and 1.75


def test_the_derived_backward_runs_at_ragged_sizes(derived):
    """Its plan at small ragged sizes: the gradient nc.grad(attention) gives from O and L computed by the
    forward, counts equal to the cost."""
    d = derived.regimes[-1].diagram
    tiles = {str(k): 3 for k in derived.regimes[-1].optimum.sizes if str(k) not in SIZES}
    sizes = {"q": 7, "x": 5, "d": 4, **tiles}
    rng = np.random.default_rng(0)
    Q, K, V, dO = (rng.normal(size=s) for s in ((7, 4), (5, 4), (5, 4), (7, 4)))
    O, L = nc.evaluate(nc.library.attention(lse=True), Q, K, V)
    y, counted = nc.plan(d, sizes).run(Q, K, V, O, L, dO)
    want = nc.evaluate(nc.grad(nc.library.attention()), Q, K, V, dO)
    for a, b in zip(y, want):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert counted.transfers == at(d, sizes).H


@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="seven memories: about 10 s more; NAPKIN_SLOW=1")
def test_h_at_every_memory():
    assert nc.derive(backward(), sorted(SAVED), sizes=SIZES).H == SAVED
