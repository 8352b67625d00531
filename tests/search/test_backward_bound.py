"""The lower bound of a gradient diagram, read off its structure (issue 23 (d)): ``lower_bound(nc.grad(f))`` is
attention's backward bound (Li and Xu, arXiv 2410.09397) exactly when the diagram *is* ``nc.grad`` of an attention
forward (confirmed by building that gradient again); a diagram that only looks like one gets the compulsory bound."""
from __future__ import annotations

import math

import pytest

import napkin_cat as nc
from napkin_cat.search.bounds import COMPULSORY, attention_backward, lower_bound
from napkin_cat.syntax.flat import copy, discard, swap
from napkin_cat.syntax.builder import Builder

L = nc.library
AT = {"q": 64, "x": 48, "d": 8, "h": 3, "g": 2}


def li_xu(nS, nK, d, M):
    """Li and Xu's Θ(min{(|S|d² + |K|d²)/M, (|S|d + |K|d)/√M}), written from the paper, constant 1."""
    return min((nS * d ** 2 + nK * d ** 2) / M, (nS * d + nK * d) / math.sqrt(M))


def compulsory(diagram, env):
    return sum(math.prod(env[n] for n in a.names) for a in (*diagram.dom.inside, *diagram.cod.inside))


@pytest.mark.parametrize("make, nS, nK", [
    (L.attention, 64 * 48, 48 * 8),
    (L.multi_head_attention, 3 * 64 * 48, 3 * 48 * 8),
    (L.grouped_query_attention, 3 * 2 * 64 * 48, 3 * 48 * 8)])
def test_the_default_bound_of_a_gradient_is_attentions_backward(make, nS, nK):
    forward = make()
    g = nc.grad(forward)
    b = lower_bound(g, "M")
    assert b == attention_backward(forward, "M") and b.structural and "Li-Xu" in b.source
    for M in (2 ** 6, 2 ** 12):                          # below and above d² = 64
        want = max(li_xu(nS, nK, 8, M), compulsory(g, AT))
        assert float(b.at({**AT, "M": M})) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("wrt", [[0], [2], [1, 0], [2, 0, 1]])
def test_a_subset_of_the_gradients_is_recognised_too(wrt):
    """A proper subset keeps the score-array terms (each gradient recomputes the scores); all three, in any order,
    the whole bound; the compulsory part writes only the gradients asked for."""
    forward = L.attention()
    g = nc.grad(forward, wrt=wrt)
    b = lower_bound(g, "M")
    assert b == attention_backward(forward, "M", wrt)
    M, nS = 2 ** 12, 64 * 48
    theorem = li_xu(nS, 48 * 8, 8, M) if len(wrt) == 3 else min(nS * 64 / M, nS * 8 / math.sqrt(M))
    assert float(b.theorem.subs({nc.symbol(k): v for k, v in {**AT, "M": M}.items()})) == pytest.approx(theorem)
    assert b.compulsory.subs({nc.symbol(k): v for k, v in AT.items()}) == compulsory(g, AT)


def test_a_forward_written_another_way_is_recognised():
    """The second product with its operands swapped (V first), and number formats: the same structure."""
    b = Builder(nc.types("q d") @ nc.types("x d") @ nc.types("x d"))
    Q, K, V = b.inputs
    P = b(nc.softmax("q x", over="x"), b(nc.einsum("q d, x d -> q x"), Q, K))
    swapped = b.build(b(nc.einsum("x d, q x -> q d"), V, P))
    assert lower_bound(nc.grad(swapped), "M") == attention_backward(swapped, "M")
    fp16 = L.attention(formats={"P": "fp16", "V": "fp16", "O": "fp16"})
    assert lower_bound(nc.grad(fp16), "M") == attention_backward(fp16, "M")


def _only_compulsory(diagram):
    b = lower_bound(diagram, "M")
    assert not b.structural and b.source.startswith(COMPULSORY), b.source
    assert b.H == sum((a.numel for a in (*diagram.dom.inside, *diagram.cod.inside)), 0)


def test_the_gradient_of_attention_with_an_elementwise_map_for_softmax_is_not_recognised():
    b = Builder(nc.types("q d") @ nc.types("x d") @ nc.types("x d"))
    Q, K, V = b.inputs
    P = b(nc.elementwise("exp", "q x"), b(nc.einsum("q d, x d -> q x"), Q, K))
    _only_compulsory(nc.grad(b.build(b(nc.einsum("q x, x d -> q d"), P, V))))


def test_a_hand_edited_or_longer_gradient_is_not_recognised():
    """Each holds attention's first product and SoftMax on its inputs (the candidate forward is rebuilt), but is not
    its gradient: the confirmation refuses them (while one whose outputs are only reordered is a gradient)."""
    att = L.attention()
    g = nc.grad(att)
    _only_compulsory(g >> (nc.elementwise("exp", "q d") @ nc.Id(g.cod[1:])))       # dQ edited
    _only_compulsory(g >> (nc.Id(g.cod[:1]) @ discard(g.cod[1:2]) @ copy(g.cod[2:])))   # dV twice, no dK
    exchanged = g >> (nc.Id(g.cod[:1]) @ swap(g.cod[1:2], g.cod[2:]))     # dK and dV exchanged: wrt = [0, 2, 1]
    assert lower_bound(exchanged, "M") == attention_backward(att, "M")
    _only_compulsory(nc.grad(att >> nc.elementwise("exp", "q d")))                   # a longer forward's
    _only_compulsory(nc.grad(L.mlp()))


def test_the_backward_bound_takes_input_positions():
    with pytest.raises(nc.NapkinError, match="wrt"):
        attention_backward(L.attention(), "M", wrt=[0, 0])
    with pytest.raises(nc.NapkinError, match="wrt"):
        attention_backward(L.attention(), "M", wrt=[3])


def test_a_diagram_with_regions_gets_a_bound():
    """A partitioned diagram (kernels, loops: no primitive kind) is read, not refused: the compulsory bound."""
    from rewrites import flash_attention
    _only_compulsory(flash_attention(L.attention()).diagram)
    _only_compulsory(nc.kernel(L.matmul()))
