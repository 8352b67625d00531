"""Constructors (einops-style strings), the Builder and the type functors of relabel."""
from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.syntax.flat import is_structural
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.primitive import KINDS, Weave


# --------------------------------------------------------------------------- parse and types
def test_parse_inputs_and_outputs():
    assert nc.engine.parse("q d, x d -> q x") == ([["q", "d"], ["x", "d"]], [["q", "x"]])
    assert nc.engine.parse("q x") == ([["q", "x"]], None)
    assert nc.engine.parse("a,b->") == ([["a"], ["b"]], [[]])
    assert nc.engine.parse("  q   d ,x d->q x ") == ([["q", "d"], ["x", "d"]], [["q", "x"]])


def test_types_share_axes_between_arrays():
    t = nc.types("q d, x d", d=4)
    q, x, d = nc.axes("q x d", d=4)
    assert t == nc.Ty(nc.Array((q, d)), nc.Array((x, d)))
    assert nc.types("q", level=2, dtype="bf16") == nc.Ty(nc.Array((q,), 2, nc.BF16))


def test_id_forms():
    assert nc.Id().dom == nc.Ty() and not nc.Id().boxes
    assert nc.Id("").dom == nc.Ty(nc.Array(()))
    assert nc.Id("x d").dom == nc.types("x d")
    arr = nc.Array(nc.axes("q x"))
    assert nc.Id(arr).dom == nc.Ty(arr)
    assert nc.Id(nc.types("a, b")).cod == nc.types("a, b")


# --------------------------------------------------------------------------- einsum
def test_einsum_weaves_outputs_and_contracts_the_rest():
    s = nc.einsum("q d, x d -> q x", d=64)
    box = s.boxes[0]
    assert len(s.boxes) == 1
    assert box.data.kind == "contract"
    assert box.data.weaves == (Weave("x", (1,)), Weave("q", (0,)))  # innermost first
    assert [str(a) for a in s.dom.inside] == ["q×d[64]", "x×d[64]"]
    assert s.cod == nc.types("q x")


@pytest.mark.parametrize("signature, numpy_signature, shapes", [
    ("a b -> b a", "ab->ba", [(3, 4)]),
    ("a b -> a", "ab->a", [(3, 4)]),
    ("a b -> ", "ab->", [(3, 4)]),
    ("a, a -> ", "a,a->", [(5,), (5,)]),
    ("a, b -> a b", "a,b->ab", [(2,), (3,)]),
    ("a b, b c -> a c", "ab,bc->ac", [(2, 3), (3, 4)]),
    ("h q d, h x d -> h q x", "hqd,hxd->hqx", [(2, 3, 4), (2, 5, 4)]),
    ("a b, b c, c d -> a d", "ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]),
    ("a b, b c, c d, d e -> e a", "ab,bc,cd,de->ea", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("i j, j k, k i -> ", "ij,jk,ki->", [(2, 3), (3, 4), (4, 2)]),
])
def test_einsum_any_number_of_operands(signature, numpy_signature, shapes, rng):
    xs = [rng.normal(size=s) for s in shapes]
    d = nc.einsum(signature)
    assert len(d.dom) == len(shapes)
    np.testing.assert_allclose(nc.evaluate(d, *xs), np.einsum(numpy_signature, *xs), rtol=1e-12, atol=1e-12)


def test_einsum_sizes_are_keywords_and_symbols_otherwise():
    d = nc.einsum("q d, x d -> q x", q=3)
    q = d.dom.inside[0].axes[0]
    assert q.size == 3
    assert d.dom.inside[1].axes[0].size == nc.symbol("x")
    assert isinstance(d.dom.inside[1].axes[0].size, sympy.Symbol)


# --------------------------------------------------------------------------- softmax, elementwise, reduce
def test_softmax_constructor(helpers, rng):
    s = nc.softmax("q x", over="x", beta=0.5)
    box = s.boxes[0]
    assert box.name == "SoftMax" and box.data.kind == "softmax"
    assert box.data.weave_names == ("q",)
    assert box.data.param("beta") == 0.5
    X = rng.normal(size=(3, 4))
    np.testing.assert_allclose(nc.evaluate(s, X), helpers.softmax(0.5 * X, axis=1), rtol=1e-12)
    over_q = nc.softmax("q x", over="q")
    np.testing.assert_allclose(nc.evaluate(over_q, X), helpers.softmax(X, axis=0), rtol=1e-12)


def test_softmax_over_several_axes(helpers, rng):
    s = nc.softmax("b q x", over="q x")
    X = rng.normal(size=(2, 3, 4))
    want = helpers.softmax(X.reshape(2, 12), axis=1).reshape(2, 3, 4)
    np.testing.assert_allclose(nc.evaluate(s, X), want, rtol=1e-12)


def test_elementwise_broadcasts_through_the_signature(rng):
    add = nc.elementwise("add", "q d, d -> q d")
    assert add.dom == nc.types("q d, d")
    A, b = rng.normal(size=(3, 4)), rng.normal(size=4)
    np.testing.assert_allclose(nc.evaluate(add, A, b), A + b)
    sub = nc.elementwise("sub", "d, q d -> q d")
    np.testing.assert_allclose(nc.evaluate(sub, b, A), b - A)
    # a single array for a binary map means both inputs have that type
    mul = nc.elementwise("mul", "q d")
    assert mul.dom == nc.types("q d, q d")
    np.testing.assert_allclose(nc.evaluate(mul, A, A), A * A)


def test_elementwise_output_order_transposes(rng):
    t = nc.elementwise("id", "a b -> b a")
    A = rng.normal(size=(2, 3))
    np.testing.assert_array_equal(nc.evaluate(t, A), A.T)


@pytest.mark.parametrize("name, fn", [("scale", lambda x: 2.5 * x), ("shift", lambda x: x + 2.5)])
def test_elementwise_constants(name, fn, rng):
    X = rng.normal(size=(2, 3))
    d = nc.elementwise(name, "a b", const=2.5)
    np.testing.assert_allclose(nc.evaluate(d, X), fn(X))


@pytest.mark.parametrize("name, fn", [("sum", np.sum), ("max", np.max), ("min", np.min), ("mean", np.mean)])
def test_reduce(name, fn, rng):
    X = rng.normal(size=(2, 3, 4))
    np.testing.assert_allclose(nc.evaluate(nc.reduce(name, "a b c -> a"), X), fn(X, axis=(1, 2)))
    np.testing.assert_allclose(nc.evaluate(nc.reduce(name, "a b c -> c a"), X), fn(X, axis=1).T)
    np.testing.assert_allclose(nc.evaluate(nc.reduce(name, "a b c -> "), X), fn(X))


# --------------------------------------------------------------------------- split, join, cast, transfer, rename
def test_split_and_join_are_inverse(rng):
    sp = nc.split("q d", along="q", parts=(2, 3), q=5)
    jn = nc.join("q d", along="q", parts=(2, 3), q=5)
    assert sp.cod == jn.dom and jn.cod == sp.dom
    X = rng.normal(size=(5, 4))
    a, b = nc.evaluate(sp, X)
    np.testing.assert_array_equal(a, X[:2])
    np.testing.assert_array_equal(b, X[2:])
    np.testing.assert_array_equal(nc.evaluate(sp >> jn, X), X)


def test_split_along_an_inner_axis(rng):
    sp = nc.split("q d", along="d", parts=(1, 2, 3))
    X = rng.normal(size=(2, 6))
    parts = nc.evaluate(sp, X)
    assert [p.shape for p in parts] == [(2, 1), (2, 2), (2, 3)]
    np.testing.assert_array_equal(np.concatenate(parts, axis=1), X)


def test_cast_changes_the_dtype_of_the_type():
    c = nc.cast("q x", to="bf16")
    assert c.dom.inside[0].dtype == nc.FP32
    assert c.cod.inside[0].dtype == nc.BF16
    assert c.cod.inside[0].dtype.bytes == 2


def test_transfer_changes_the_level():
    arr = nc.Array(nc.axes("q x"), level=0)
    load = nc.transfer("load", arr)
    assert load.cod.inside[0] == arr.replace(level=1)
    save = nc.transfer("save", load.cod.inside[0])
    assert save.cod.inside[0] == arr
    X = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(nc.evaluate(load >> save, X), X)


def test_rename_keeps_sizes_and_values(rng):
    r = nc.renaming("h n d -> h m d", n=5)
    assert [str(a) for a in r.cod.inside] == ["h×m[5]×d"]
    X = rng.normal(size=(2, 5, 3))
    np.testing.assert_array_equal(nc.evaluate(r, X), X)


# --------------------------------------------------------------------------- relabel functors
def test_rename_axis_and_substitute():
    mm = nc.einsum("q d, x d -> q x")
    r = nc.rename_axis(mm, "x", "k", size=nc.symbol("k"))
    assert r == nc.einsum("q d, k d -> q k")
    assert nc.substitute(mm, d=64) == nc.einsum("q d, x d -> q x", d=64)
    assert nc.substitute(mm, {nc.symbol("q"): 2}) == nc.einsum("q d, x d -> q x", q=2)


def attention_on(d: str):
    """Attention built from the constructors with the head axis called ``d`` and β = 1/√d."""
    b = nc.Builder(nc.types(f"q {d}, x {d}, x {d}"))
    Q, K, V = b.inputs
    S = b(nc.einsum(f"q {d}, x {d} -> q x"), Q, K)
    P = b(nc.softmax("q x", over="x", beta=1 / sympy.sqrt(nc.symbol(d))), S)
    return b.build(b(nc.einsum(f"q x, x {d} -> q {d}"), P, V))


def test_rename_axis_substitutes_the_size_everywhere(rng, helpers):
    """β = 1/√d follows d → c: the renamed attention is the one built on c, and it runs."""
    assert attention_on("d") == nc.library.attention()
    renamed = nc.rename_axis(nc.library.attention(), "d", "c")
    assert renamed == attention_on("c")
    Q, K, V = rng.normal(size=(2, 5)), rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    np.testing.assert_allclose(nc.evaluate(renamed, Q, K, V), helpers.attention(Q, K, V), rtol=1e-10)


def test_rename_axis_reaches_region_sizes_and_weaves(rng, helpers):
    """A Grid whose group size is an expression in the renamed axis, inside a weave over it."""
    mha = nc.library.multi_head_attention()
    grid = nc.group(mha, "q", nc.symbol("q") / 2)
    renamed = nc.rename_axis(nc.rename_axis(grid, "q", "n"), "h", "k")
    box = renamed.boxes[0]
    assert box.params == {"axis": "n", "size": nc.symbol("n") / 2}
    assert nc.rename_axis(nc.rename_axis(grid, "q", "n"), "n", "q") == grid
    names = {w for b in box.arg.boxes[0].arg.boxes for w in getattr(b.data, "weave_names", ())}
    assert "k" in names and "h" not in names and "q" not in names
    Q, K, V = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3))
    np.testing.assert_allclose(nc.evaluate(renamed, Q, K, V), helpers.attention(Q, K, V), rtol=1e-10)


def test_rename_axis_with_a_size_that_contradicts_the_axis():
    with pytest.raises(nc.AxisError, match="'d' has size 8.*cannot also be 4"):
        nc.rename_axis(nc.library.attention(d=8), "d", "c", size=4)
    assert nc.rename_axis(nc.library.attention(d=8), "d", "c", size=8) == nc.rename_axis(
        nc.library.attention(d=8), "d", "c")


def test_an_unbound_parameter_is_a_shape_error(rng):
    sm = nc.softmax("q x", over="x", beta=1 / sympy.sqrt(nc.symbol("k")))
    with pytest.raises(nc.ShapeError, match=r"parameter 1/sqrt\(k\) is not known: \[.k.\].*sizes="):
        nc.evaluate(sm, rng.normal(size=(2, 3)))


def test_relabel_is_a_functor():
    f = nc.einsum("q d, x d -> q x")
    g = nc.softmax("q x", over="x", beta=nc.symbol("d") ** -0.5)
    for F in (lambda d: nc.substitute(d, d=8, q=3), lambda d: nc.rename_axis(d, "x", "y"),
              lambda d: nc.at_level(d, 1)):
        assert F(f >> g) == F(f) >> F(g)
        assert F(f @ g) == F(f) @ F(g)


def test_substitute_reaches_box_parameters(rng, helpers):
    """β = d^(-1/2) follows d: a substituted diagram is the one built with that size."""
    att = nc.substitute(nc.library.attention(), d=8)
    assert att == nc.library.attention(d=8)
    Q, K, V = rng.normal(size=(2, 8)), rng.normal(size=(3, 8)), rng.normal(size=(3, 8))
    np.testing.assert_allclose(nc.evaluate(att, Q, K, V), helpers.attention(Q, K, V), rtol=1e-10)


def test_at_level():
    d = nc.at_level(nc.einsum("a b, b c -> a c"), 1)
    assert all(a.level == 1 for a in (*d.dom.inside, *d.cod.inside))


# --------------------------------------------------------------------------- the Builder
def test_builder_inserts_copy_swap_discard(rng):
    b = Builder(nc.types("n, n, n"))
    A, B, C = b.inputs                               # C is never used: discarded
    y = b(nc.elementwise("sub", "n"), B, A)           # out of order: a swap
    z = b(nc.elementwise("mul", "n"), y, B)           # B used twice: a copy
    d = b.build(z)
    kinds = {is_structural(box) for box in d.boxes}
    assert {"swap", "copy", "discard"} <= kinds
    a, bb, c = rng.normal(size=(3, 4))
    np.testing.assert_allclose(nc.evaluate(d, a, bb, c), (bb - a) * bb)


def test_builder_rejects_a_wire_of_the_wrong_type():
    b = Builder(nc.types("n"))
    (A,) = b.inputs
    with pytest.raises(nc.CompositionError, match=r"input 0 .*wire carries n, box takes m"):
        b(nc.elementwise("exp", "m"), A)


_AFFINE = ("affine3", lambda xs, core: [xs[0] - 2 * xs[1] + 3 * xs[2]])
_BINARY = {"sub": np.subtract, "mul": np.multiply, "max": np.maximum}
_UNARY = {"neg": np.negative, "tanh": np.tanh}


@st.composite
def programs(draw):
    """A random straight-line program on wires of one type (so that only the order is checked)."""
    n_inputs = draw(st.integers(1, 4))
    n_ops = draw(st.integers(0, 7))
    ops = []
    n_wires = n_inputs
    for _ in range(n_ops):
        name = draw(st.sampled_from(["affine3", *_BINARY, *_UNARY]))
        arity = 3 if name == "affine3" else 2 if name in _BINARY else 1
        args = draw(st.lists(st.integers(0, n_wires - 1), min_size=arity, max_size=arity))
        ops.append((name, args))
        n_wires += 1
    outputs = draw(st.lists(st.integers(0, n_wires - 1), min_size=1, max_size=3))
    return n_inputs, ops, outputs


@settings(max_examples=80, deadline=None)
@given(programs())
def test_builder_computes_the_program(program):
    """Whatever the copies and swaps, the diagram computes the straight-line program."""
    n_inputs, ops, outputs = program
    KINDS.pop(_AFFINE[0], None)
    nc.declare(*_AFFINE, flops=lambda core: {"general": 4})
    try:
        b = Builder(nc.types(", ".join(["n"] * n_inputs)))
        wires = list(b.inputs)
        rng = np.random.default_rng(len(ops))
        values = [rng.normal(size=3) for _ in range(n_inputs)]
        inputs = list(values)
        for name, args in ops:
            arity = len(args)
            box = nc.apply(name, ", ".join(["n"] * arity) + " -> n")
            wires.append(b(box, *(wires[i] for i in args)))
            xs = [values[i] for i in args]
            values.append(_AFFINE[1](xs, None)[0] if name == "affine3"
                          else _BINARY[name](*xs) if name in _BINARY else _UNARY[name](*xs))
        d = b.build(*(wires[i] for i in outputs))
        got = nc.evaluate(d, *inputs)
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(outputs)
        for g, i in zip(got, outputs):
            np.testing.assert_allclose(g, values[i], rtol=1e-12, atol=1e-12)
    finally:
        KINDS.pop(_AFFINE[0], None)


def test_builder_three_operand_gather_regression():
    """Operands gathered from both sides of the first one (the old gather put the third in the middle)."""
    KINDS.pop(_AFFINE[0], None)
    nc.declare(*_AFFINE)
    try:
        b = Builder(nc.types("n, n, n"))
        A, B, C = b.inputs
        d = b.build(b(nc.apply("affine3", "n, n, n -> n"), B, A, C))
        a, bb, c = np.array([1.0]), np.array([10.0]), np.array([100.0])
        assert nc.evaluate(d, a, bb, c)[0] == 10 - 2 * 1 + 3 * 100
        b = Builder(nc.types("n, n, n"))
        A, B, C = b.inputs
        d = b.build(b(nc.apply("affine3", "n, n, n -> n"), C, A, B))
        assert nc.evaluate(d, a, bb, c)[0] == 100 - 2 * 1 + 3 * 10
    finally:
        KINDS.pop(_AFFINE[0], None)
