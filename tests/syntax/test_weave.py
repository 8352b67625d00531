"""Weaving: positions, subsets of inputs, copies, weave lists, and the paper's MHA/GQA."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat import library
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.primitive import Weave
from napkin_cat.syntax.weave import core_of


def per_index(diagram, inputs_batched, *xs, h):
    """Reference for a weave: run ``diagram`` once per index of the new axis (axis 0 of weaved xs)."""
    outs = []
    for k in range(h):
        args = [x[k] if w else x for x, w in zip(xs, inputs_batched)]
        y = nc.evaluate(diagram, *args)
        outs.append(y if isinstance(y, tuple) else (y,))
    return [np.stack([o[j] for o in outs]) for j in range(len(outs[0]))]


# --------------------------------------------------------------------------- positions
@pytest.mark.parametrize("position, expected", [
    (0, ("h", "q", "x")), (1, ("q", "h", "x")), (2, ("q", "x", "h")), (-1, ("q", "x", "h")),
    (-2, ("q", "h", "x")), (-3, ("h", "q", "x"))])
def test_weave_positions(position, expected, helpers, rng):
    s = nc.softmax("q x", over="x")
    w = nc.weave(s, "h", position=position)
    assert w.cod.inside[0].names == expected
    assert w.dom.inside[0].names == expected
    helpers.well_typed(w)
    X = rng.normal(size=(4, 2, 3))  # h q x
    want = helpers.softmax(X, axis=-1)
    perm = [("h", "q", "x").index(n) for n in expected]
    got = nc.evaluate(w, X.transpose(perm))
    np.testing.assert_allclose(got, want.transpose(perm), rtol=1e-12)


def test_weave_position_out_of_range():
    with pytest.raises(nc.WeaveError, match=r"position 3 .* legal positions are -3..2"):
        nc.weave(nc.softmax("q x", over="x"), "h", position=3)


def test_weave_per_input_positions(helpers, rng):
    """inputs={i: p}: each weaved input gets the axis where it says; outputs at ``position``."""
    f = nc.einsum("q d, x d -> q x")
    w = nc.weave(f, "h", inputs={0: 1, 1: 0}, position=-1)
    assert [a.names for a in w.dom.inside] == [("q", "h", "d"), ("h", "x", "d")]
    assert w.cod.inside[0].names == ("q", "x", "h")
    helpers.well_typed(w)
    Q, K = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 6, 4))  # h q d, h x d
    got = nc.evaluate(w, Q.transpose(1, 0, 2), K)
    np.testing.assert_allclose(got, np.einsum("hqd,hxd->qxh", Q, K), rtol=1e-12)


def test_weave_per_input_positions_through_several_boxes(helpers, rng):
    """The first box reading a weaved input sees it where the caller put it (here: last)."""
    att = library.attention()
    w = nc.weave(att, "h", inputs={0: -1, 1: 0, 2: 1}, position=0)
    assert [a.names for a in w.dom.inside] == [("q", "d", "h"), ("h", "x", "d"), ("x", "h", "d")]
    assert w.cod.inside[0].names == ("h", "q", "d")
    helpers.well_typed(w)
    Q, K, V = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 4))
    got = nc.evaluate(w, Q.transpose(1, 2, 0), K, V.transpose(1, 0, 2))
    want = np.stack([helpers.attention(Q[i], K[i], V[i]) for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-10)


# --------------------------------------------------------------------------- subsets and copies
@pytest.mark.parametrize("inputs", [[0], [1], [0, 1], []])
def test_weave_subsets_of_inputs(inputs, helpers, rng):
    f = nc.einsum("q d, x d -> q x")
    w = nc.weave(f, "h", inputs=inputs)
    helpers.well_typed(w)
    for i, arr in enumerate(w.dom.inside):
        assert ("h" in arr.names) == (i in inputs)
    assert w.cod.inside[0].names == ("h", "q", "x")
    Q = rng.normal(size=(3, 2, 4) if 0 in inputs else (2, 4))
    K = rng.normal(size=(3, 5, 4) if 1 in inputs else (5, 4))
    sizes = {"h": 3} if not inputs else None
    got = nc.evaluate(w, Q, K, sizes=sizes)
    want = per_index(f, [0 in inputs, 1 in inputs], Q, K, h=3)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_unweaved_inputs_are_copied_to_every_index(rng):
    w = nc.weave(nc.elementwise("add", "n"), "h", inputs=[0])
    a, b = rng.normal(size=(4, 3)), rng.normal(size=3)
    got = nc.evaluate(w, a, b)
    for k in range(4):
        np.testing.assert_allclose(got[k], a[k] + b)


def test_output_independent_of_weaved_inputs_is_broadcast(rng):
    """Weaving f @ g over f's input only: g's output is copied along h."""
    f, g = nc.elementwise("exp", "n"), nc.elementwise("neg", "m")
    w = nc.weave(f @ g, "h", inputs=[0])
    assert [a.names for a in w.cod.inside] == [("h", "n"), ("h", "m")]
    assert w.boxes[-1].data.weaves[-1] == Weave("h", ())  # a copy: weave with no input
    a, b = rng.normal(size=(3, 2)), rng.normal(size=5)
    ya, yb = nc.evaluate(w, a, b)
    np.testing.assert_allclose(ya, np.exp(a))
    np.testing.assert_allclose(yb, np.broadcast_to(-b, (3, 5)))


def test_weave_nothing_needs_the_size(rng):
    w = nc.weave(nc.Id("x"), "h", inputs=[])
    with pytest.raises(nc.ShapeError, match=r"axis 'h'.*not known from the inputs.*sizes=\{'h'"):
        nc.evaluate(w, np.ones(3))
    np.testing.assert_array_equal(nc.evaluate(w, np.arange(3.0), sizes={"h": 2}),
                                  [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]])
    concrete = nc.weave(nc.Id("x"), nc.Axis("h", 2), inputs=[])
    assert nc.evaluate(concrete, np.arange(3.0)).shape == (2, 3)


def test_weave_through_swaps_copies_and_discards(helpers, rng):
    b = Builder(nc.types("n, n, n"))
    A, B, C = b.inputs
    y = b(nc.elementwise("sub", "n"), B, A)
    z = b(nc.elementwise("mul", "n"), y, B)
    d = b.build(z, A)
    for inputs in ([0], [1], [2], [0, 2], [0, 1, 2]):
        w = nc.weave(d, "h", inputs=inputs)
        helpers.well_typed(w)
        xs = [rng.normal(size=(3, 4) if i in inputs else (4,)) for i in range(3)]
        got = nc.evaluate(w, *xs)
        want = per_index(d, [i in inputs for i in range(3)], *xs, h=3)
        for g, r in zip(got, want, strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-12)


def test_weave_a_region(rng):
    from napkin_cat.algorithms.bubbles import Kernel
    k = Kernel.around(nc.einsum("a b, b c -> a c"), level=1)
    w = nc.weave(k, "h", inputs=[0])
    assert [a.names for a in w.dom.inside] == [("h", "a", "b"), ("b", "c")]
    assert isinstance(w.boxes[0], Kernel) and w.boxes[0].params == {"level": 1}
    A, B = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5))
    np.testing.assert_allclose(nc.evaluate(w, A, B), A @ B, rtol=1e-12)


# --------------------------------------------------------------------------- weave lists and cores
def test_weave_of_a_weaved_box_appends_and_keeps_the_core():
    f = nc.einsum("q d, x d -> q x")
    box = f.boxes[0]
    w = nc.weave(f, "h", inputs=[1], position=1)
    wbox = w.boxes[0]
    assert wbox.data.weaves == box.data.weaves + (Weave("h", (1,)),)
    assert wbox.data.kind == box.data.kind and wbox.data.params == box.data.params
    assert core_of(wbox.data, wbox.dom, wbox.cod) == core_of(box.data, box.dom, box.cod)
    ww = nc.weave(w, "b")
    assert ww.boxes[0].data.weave_names == ("x", "q", "h", "b")
    assert core_of(ww.boxes[0].data, ww.boxes[0].dom, ww.boxes[0].cod).inputs == ((nc.Axis("d"),),) * 2


def test_item_level_box_weaved_is_the_einsum_box():
    """Weaving the item-level dot product over x then q is einsum("q d, x d -> q x")."""
    dot = nc.einsum("d, d -> ")
    w = nc.weave(nc.weave(dot, "x", inputs=[1]), "q", inputs=[0])
    assert w == nc.einsum("q d, x d -> q x")


def test_weave_over_elementwise_builds_the_einops_box():
    assert nc.weave(nc.elementwise("exp", "x"), "q") == nc.elementwise("exp", "q x")
    assert nc.weave(nc.softmax("x", over="x"), "q") == nc.softmax("q x", over="x")


# --------------------------------------------------------------------------- the paper's examples
def test_weave_attention_over_heads_is_multi_head_attention():
    assert nc.weave(library.attention(), "h") == library.multi_head_attention()


def test_weave_attention_twice_is_grouped_query_attention():
    gqa = nc.weave(nc.weave(library.attention(), "g", inputs=[0]), "h")
    assert gqa == library.grouped_query_attention()


def test_weave_multi_head_attention_over_a_batch(helpers, rng):
    mha = library.multi_head_attention()
    w = nc.weave(mha, "b", inputs=[0, 1, 2], position=1)
    assert [a.names for a in w.dom.inside] == [("h", "b", "q", "d"), ("h", "b", "x", "d"), ("h", "b", "x", "d")]
    helpers.well_typed(w)
    Q, K, V = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(2, 3, 6, 5)), rng.normal(size=(2, 3, 6, 5))
    want = np.empty((2, 3, 4, 5))
    for i in range(2):
        for j in range(3):
            want[i, j] = helpers.attention(Q[i, j], K[i, j], V[i, j])
    np.testing.assert_allclose(nc.evaluate(w, Q, K, V), want, rtol=1e-10)


def test_weave_queries_only_shares_keys_and_values(helpers, rng):
    """Weaving attention over a batch of queries only: K and V are copied to every batch index."""
    w = nc.weave(library.attention(), "b", inputs=[0])
    Q, K, V = rng.normal(size=(3, 4, 5)), rng.normal(size=(6, 5)), rng.normal(size=(6, 5))
    want = np.stack([helpers.attention(Q[i], K, V) for i in range(3)])
    np.testing.assert_allclose(nc.evaluate(w, Q, K, V), want, rtol=1e-10)


@pytest.mark.parametrize("signature, numpy_signature, shapes", [
    ("a -> a", "ha->ha", [(2, 3)]),
    ("a b, b c -> a c", "hab,hbc->hac", [(2, 3, 4), (2, 4, 5)]),
    ("a b, b c, c d -> a d", "hab,hbc,hcd->had", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("a, b, c, d -> d c b a", "ha,hb,hc,hd->hdcba", [(2, 2), (2, 3), (2, 1), (2, 2)]),
])
def test_weave_einsum_with_any_number_of_inputs(signature, numpy_signature, shapes, helpers, rng):
    w = nc.weave(nc.einsum(signature), "h")
    helpers.well_typed(w)
    xs = [rng.normal(size=s) for s in shapes]
    np.testing.assert_allclose(nc.evaluate(w, *xs), np.einsum(numpy_signature, *xs), rtol=1e-12, atol=1e-12)
    assert w == nc.einsum(", ".join("h " + p.strip() for p in signature.split("->")[0].split(","))
                          + " -> h " + signature.split("->")[1].strip())
