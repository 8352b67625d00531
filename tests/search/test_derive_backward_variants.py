"""Attention's backward derived for its variants (issue 23), by the same search and with nothing in it naming
them: ReLU and sigmoid attention (an elementwise map in SoftMax's place), attention with a bias input (its
gradient included), multi-head, grouped-query and causal attention.  Each derived backward is equivalent to
``nc.grad`` of the function, and from the memory where the recomputed form wins its kernels write no q×x array
(one carrying both the query and the key axes) to level 0: only per-row statistics, where there are any.

The sizes are small (q = x = 256, d = 32, M = 2^13: at 2^14 and up the bias's backward keeps P at level 0 again,
and from 2^15 one kernel holds everything).  ReLU, sigmoid and bias attention derive in 2 to 5 s; multi-head,
grouped-query and causal attention in 12 to 24 s each (more boxes: the head axes, the mask's positions), so they
run with ``NAPKIN_SLOW=1`` only (all six passed in 66 s on 2 cores)."""
from __future__ import annotations

import os

import pytest

import napkin_cat as nc
from napkin_cat.library.sizing import Sized
from napkin_cat.syntax.builder import Builder

from level0 import crosses, intermediates, kernels

N, D, M = 256, 32, 2 ** 13


def elementwise_attention(name):
    """``name(Q Kᵀ) V``: an elementwise map in SoftMax's place (ReLU, sigmoid attention)."""
    k = Sized({"q": N, "x": N, "d": D})
    b = Builder(k.types("q d") @ k.types("x d") @ k.types("x d"))
    Q, K, V = b.inputs
    P = b(k.elementwise(name, "q x"), b(k.einsum("q d, x d -> q x"), Q, K))
    return b.build(b(k.einsum("q x, x d -> q d"), P, V))


def bias_attention():
    """``SoftMax(Q Kᵀ + B) V`` with the bias B (q×x) an input: its gradient dB is the scores' gradient."""
    k = Sized({"q": N, "x": N, "d": D})
    b = Builder(k.types("q d") @ k.types("x d") @ k.types("x d") @ k.types("q x"))
    Q, K, V, B = b.inputs
    S = b(k.elementwise("add", "q x, q x -> q x"), b(k.einsum("q d, x d -> q x"), Q, K), B)
    return b.build(b(k.einsum("q x, x d -> q d"), b(k.softmax("q x", over="x"), S), V))


VARIANTS = {
    "relu": (lambda: elementwise_attention("relu"), {}, 0),
    "sigmoid": (lambda: elementwise_attention("sigmoid"), {}, 0),
    "bias": (bias_attention, {}, 2),
    "mha": (lambda: nc.library.multi_head_attention(q=N, x=N, d=D, h=8), {}, 2),
    "gqa": (lambda: nc.library.grouped_query_attention(q=N, x=N, d=D, h=2, g=4), {}, 2),
    "causal": (lambda: nc.library.causal_attention(q=N, x=N, d=D), {}, 2),
}


SLOW = {"mha", "gqa", "causal"}
RUN = [pytest.param(v, marks=pytest.mark.skipif(v in SLOW and not os.environ.get("NAPKIN_SLOW"),
                                                 reason="12-24 s derivation: set NAPKIN_SLOW=1"))
       for v in sorted(VARIANTS)]


@pytest.fixture(scope="module", params=RUN)
def derived(request):
    make, sizes, stats = VARIANTS[request.param]
    g = nc.grad(make())
    return request.param, g, nc.derive(g, M, sizes=sizes), stats


def test_the_derived_backward_is_the_gradient(derived):
    name, g, r, _ = derived
    assert nc.equivalent(g, r.diagram, trials=1), name


def test_no_q_by_x_array_reaches_level_0(derived):
    """Only the statistics (L and D = rowsum(P∘dP), one value per query row) go between the kernels; a map
    without a normaliser (ReLU, sigmoid) needs none."""
    name, g, r, stats = derived
    between = intermediates(r.diagram)
    assert not crosses(between, "q", "x"), (name, [str(a) for a in between])
    assert len([a for a in between if "q" in a.names and a.dtype.family != "int"]) == stats, name
    assert "recompute" in [s.rule for s in r.trace] or stats == 0, name
    assert kernels(r.diagram) >= 2
