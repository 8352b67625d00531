"""The numpy meaning of a device region (issue 37, items 1-2): every device's copy of the inside in lockstep, the
collectives on every device's values at once.  Each program is checked against numpy written from the maths, at
ragged shards (the axis not a multiple of P) and at P = 1."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.testing.devices import sharded_softmax
from napkin_cat.algorithms.devices import device_region


def _softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("P", [1, 2, 3, 4])
def test_a_sharded_woven_program_computes_the_program(P):
    rng = np.random.default_rng(P)
    Q, K, V = rng.normal(size=(7, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    expected = _softmax(Q @ K.T / 2.0) @ V                      # d = 4: β = 1/√d
    assert np.allclose(nc.evaluate(nc.shard(nc.library.attention(), "q", devices=P), Q, K, V), expected)
    flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    out = nc.evaluate(nc.shard(flash, "q", devices="P"), Q, K, V, sizes={"P": P, "g_q": 2, "s_x": 3})
    assert np.allclose(out, expected)
    X, W = rng.normal(size=(4, 9)), rng.normal(size=(9, 3))   # a matmul chain sharded on its rows
    chain = nc.einsum("n k, k m -> n m") >> nc.elementwise("exp", "n m") >> nc.reduce("sum", "n m -> n")
    assert np.allclose(nc.evaluate(nc.shard(chain, "n", devices=P), X, W), np.exp(X @ W).sum(-1))


def _megatron(P, h):
    hs = h / P if not isinstance(h, int) else -(-h // P)
    one = (nc.einsum("n d, d h -> n h", h=hs) >> nc.elementwise("relu", "n h", h=hs)) @ nc.Id("h e", h=hs) \
        >> nc.einsum("n h, h e -> n e", h=hs) >> nc.all_reduce("n e", devices=P)
    return device_region(one, "h", P, h)


@pytest.mark.parametrize("P", [1, 2, 3, 4, 7])
def test_column_then_row_parallel_mlp_with_one_all_reduce(P):
    rng = np.random.default_rng(P)
    x, w1, w2 = rng.normal(size=(3, 4)), rng.normal(size=(4, 7)), rng.normal(size=(7, 5))
    assert np.allclose(nc.evaluate(_megatron(P, 7), x, w1, w2), np.maximum(x @ w1, 0) @ w2)
    assert np.allclose(nc.evaluate(_megatron(nc.symbol("P"), nc.symbol("h")), x, w1, w2, sizes={"P": P}),
                       np.maximum(x @ w1, 0) @ w2)


def test_a_partial_left_unreduced_is_refused_by_name():
    hs = nc.symbol("h") / 2
    one = nc.einsum("n h, h e -> n e", h=hs)
    with pytest.raises(nc.DeviceError, match="output 0 .*replicated.*device 1"):
        nc.evaluate(device_region(one, "h", 2, nc.symbol("h")), np.ones((2, 4)), np.arange(12.0).reshape(4, 3))


@pytest.mark.parametrize("P", [1, 2, 3, 5])
def test_softmax_over_the_sharded_axis(P):
    rng = np.random.default_rng(P)
    S = rng.normal(size=(3, 11)) * 40
    assert np.allclose(nc.evaluate(sharded_softmax(P), S), _softmax(S))


def _attention_by_partials(P):
    """attention sharded on the keys: each device's online-softmax state (μ, z, o), merged by an all-reduce whose
    merge is the online-softmax reducer's (FlashDecoding's combine), then o / z."""
    xs = nc.symbol("x") / P
    b = nc.Builder(nc.types("q d") @ nc.types("x d, x d", x=xs))
    Q, K, V = b.inputs
    S = b(nc.einsum("q d, x d -> q x", x=xs), Q, K)
    mu = b(nc.reduce("max", "q x -> q", x=xs), S)
    E = b(nc.elementwise("exp", "q x", x=xs), b(nc.elementwise("sub", "q x, q -> q x", x=xs), S, mu))
    z, o = b(nc.reduce("sum", "q x -> q", x=xs), E), b(nc.einsum("q x, x d -> q d", x=xs), E, V)
    mu, z, o = b(nc.all_reduce("q, q, q d", devices=P, merge="softmax_contraction_to_unscaled"), mu, z, o)
    out = b(nc.elementwise("div", "q d, q -> q d"), o, z)
    return device_region(b.build(out), "x", P, nc.symbol("x"))


@pytest.mark.parametrize("P", [1, 2, 4])
def test_attention_from_the_devices_partial_states(P):
    rng = np.random.default_rng(P)
    Q, K, V = rng.normal(size=(3, 4)) * 30, rng.normal(size=(9, 4)), rng.normal(size=(9, 4))
    assert np.allclose(nc.evaluate(_attention_by_partials(P), Q, K, V), _softmax(Q @ K.T) @ V)


def test_all_gather_reduce_scatter_and_all_to_all_laws():
    rng = np.random.default_rng(0)
    P, n, e, h = 3, 6, 4, 9
    X, W = rng.normal(size=(n, h)), rng.normal(size=(h, e))
    # sequence parallel: partials reduce-scattered along n, an elementwise map on n's shards, all-gathered back
    hs, ns = h // P, n // P
    one = nc.einsum("n h, h e -> n e", h=hs, n=n) >> nc.reduce_scatter("n e", axis="n", devices=P, n=n) \
        >> nc.elementwise("exp", "n e", n=ns) >> nc.all_gather("n e", axis="n", devices=P, n=n)
    assert np.allclose(nc.evaluate(device_region(one, "h", P, h), X, W), np.exp(X @ W))
    # K and V all-gathered, then attention on every device (queries replicated)
    xs = nc.symbol("x") / P
    gather = nc.Id("q d") @ nc.all_gather("x d", axis="x", devices=P) @ nc.all_gather("x d", axis="x", devices=P)
    d = device_region(gather >> nc.library.attention(), "x", P, nc.symbol("x"))
    Q, K, V = rng.normal(size=(2, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 4))
    assert np.allclose(nc.evaluate(d, Q, K, V), _softmax(Q @ K.T / 2.0) @ V)
    assert xs == d.boxes[0].size
    # all-to-all: sharded on h, to sharded on n, a map, and back (Ulysses' exchange of sequence and heads)
    there = nc.all_to_all("n h", gather="h", scatter="n", devices=P, n=n, h=h)
    back = nc.all_to_all("n h", gather="n", scatter="h", devices=P, n=n, h=h)
    one = there >> nc.elementwise("exp", "n h", n=ns, h=h) >> back
    assert np.allclose(nc.evaluate(device_region(one, "h", P, h), X), np.exp(X))
    mid = nc.evaluate(device_region(there >> nc.all_gather("n h", axis="n", devices=P, n=n, h=h), "h", P, h), X)
    assert np.allclose(mid, X)


@pytest.mark.parametrize("P", [2, 3])
def test_woven_and_renamed_collectives_keep_their_laws(P):
    """A woven collective carries the woven axis where the weave places it, here first in the region's input and
    last in its output, so at different positions in the inputs and outputs of the collective that reads the input:
    its values are laid out as its output arrays say (the transpose a woven box implies).  An axis renamed is renamed
    in the collectives' parameters too (an all-gather along ``n`` becomes one along ``t``), and the renamed program
    computes the same.  Expected values: numpy, written here."""
    from napkin_cat.syntax.relabel import rename_axis
    from napkin_cat.syntax.weave import weave
    rng = np.random.default_rng(P)
    B, n, e = 2, 2 * P, 3
    ns = n // P
    Y = rng.normal(size=(B, n, e))
    scatter = nc.reduce_scatter("n e", axis="n", devices=P, n=n) >> nc.elementwise("exp", "n e", n=ns) \
        >> nc.all_gather("n e", axis="n", devices=P, n=n)              # Y replicated: each shard summed P times
    gather = nc.all_gather("n e", axis="n", devices=P, n=n) >> nc.elementwise("exp", "n e", n=n)
    there = nc.all_to_all("n e", gather="e", scatter="n", devices=P, n=n, e=e)
    ulysses = there >> nc.elementwise("exp", "n e", n=ns, e=e) >> nc.all_to_all("n e", gather="n", scatter="e",
                                                                               devices=P, n=n, e=e)
    cases = [(device_region(scatter, "n", P, n, sharded_in=(None,), sharded_out=(None,)), np.exp(P * Y)),
             (device_region(gather, "n", P, n, sharded_in=("n",), sharded_out=(None,)), np.exp(Y)),
             (device_region(ulysses, "e", P, e), np.exp(Y))]
    for region, expected in cases:
        d = weave(region, "b", inputs={0: 0}, position=-1, b=B)
        first = d.boxes[0].arg.boxes[0]
        assert first.dom.inside[0].names.index("b") == 0 and first.cod.inside[0].names.index("b") == 2
        assert np.allclose(nc.evaluate(d, Y), expected.transpose(1, 2, 0)), first.name
        renamed = rename_axis(d, "n", "t")
        assert {v for b in renamed.boxes[0].arg.boxes for k, v in b.data.params if k in ("axis", "gather", "scatter")}
        assert "n" not in {v for b in renamed.boxes[0].arg.boxes for _, v in b.data.params}
        assert np.allclose(nc.evaluate(renamed, Y), expected.transpose(1, 2, 0)), first.name
