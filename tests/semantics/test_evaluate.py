"""The numpy functor (flat interpreter) and ``equivalent``."""
from __future__ import annotations

import numpy as np

import napkin_cat as nc
from napkin_cat.syntax.flat import compose_all


# --------------------------------------------------------------------------- the interpreter
def test_single_output_is_an_array_several_a_tuple(rng):
    X = rng.normal(size=(2, 3))
    assert isinstance(nc.evaluate(nc.Id("a b"), X), np.ndarray)
    out = nc.evaluate(nc.Id("a b, a b"), X, X)
    assert isinstance(out, tuple) and len(out) == 2


def test_structural_boxes(rng):
    a, b = rng.normal(size=3), rng.normal(size=4)
    A, B = nc.types("n"), nc.types("m")
    y = nc.evaluate(nc.Diagram.swap(A, B), a, b)
    np.testing.assert_array_equal(y[0], b)
    np.testing.assert_array_equal(y[1], a)
    y = nc.evaluate(nc.Diagram.copy(A, 3), a)
    assert len(y) == 3 and all(np.array_equal(v, a) for v in y)
    y = nc.evaluate(nc.Diagram.copy(A, 0) @ nc.Id(B), a, b)
    np.testing.assert_array_equal(y, b)


def test_empty_diagram_and_unit(rng):
    assert nc.evaluate(nc.Id()) == ()
    X = rng.normal(size=(2, 2))
    np.testing.assert_array_equal(nc.evaluate(nc.Id("a b") @ nc.Id(), X), X)


def test_offsets_in_a_layer(rng):
    """A box in the middle of a layer reads and writes the right wires."""
    d = nc.Id("a") @ nc.elementwise("sub", "b") @ nc.Id("c")
    a, b1, b2, c = rng.normal(size=2), rng.normal(size=3), rng.normal(size=3), rng.normal(size=4)
    ya, yb, yc = nc.evaluate(d, a, b1, b2, c)
    np.testing.assert_array_equal(ya, a)
    np.testing.assert_allclose(yb, b1 - b2)
    np.testing.assert_array_equal(yc, c)


def test_inputs_may_be_lists_and_ints():
    y = nc.evaluate(nc.einsum("a b, b c -> a c"), [[1, 2]], [[3], [4]])
    assert y.tolist() == [[11]]


def test_sizes_argument_binds_symbols():
    w = nc.weave(nc.Id("x"), "h", inputs=[])
    assert nc.evaluate(w, np.ones(2), sizes={"h": 4}).shape == (4, 2)
    assert nc.evaluate(w, np.ones(2), sizes={nc.symbol("h"): 3}).shape == (3, 2)


def test_symbolic_parameters_read_bound_sizes(helpers, rng):
    """β = d^(-1/2) is evaluated with the d of the inputs, whatever it is."""
    att = nc.library.attention()
    for d in (1, 4, 9):
        Q, K, V = rng.normal(size=(2, d)), rng.normal(size=(3, d)), rng.normal(size=(3, d))
        np.testing.assert_allclose(nc.evaluate(att, Q, K, V), helpers.attention(Q, K, V), rtol=1e-10)


def test_a_thousand_boxes_do_not_overflow_the_stack(rng):
    """discopy's nested python.Function overflows past ~300 boxes; the flat interpreter does not."""
    boxes = [nc.elementwise("neg", "n d") if k % 2 else nc.elementwise("tanh", "n d") for k in range(1000)]
    d = compose_all(nc.types("n d"), *boxes)
    X = rng.normal(size=(3, 2))
    want = X
    for k in range(1000):
        want = -want if k % 2 else np.tanh(want)
    np.testing.assert_allclose(nc.evaluate(d, X), want, rtol=1e-12)


def test_evaluate_does_not_mutate_inputs(rng):
    X = rng.normal(size=(3, 4))
    before = X.copy()
    nc.evaluate(nc.softmax("q x", over="x") >> nc.elementwise("exp", "q x"), X)
    np.testing.assert_array_equal(X, before)


def test_evaluate_a_kernel_region(rng):
    from napkin_cat.algorithms.bubbles import Kernel
    mm = nc.at_level(nc.einsum("a b, b c -> a c"), 1)
    k = Kernel.around(mm, level=1)
    A, B = rng.normal(size=(2, 3)), rng.normal(size=(3, 4))
    np.testing.assert_allclose(nc.evaluate(k, A, B), A @ B)


# --------------------------------------------------------------------------- equivalent
def test_equivalent_true_cases():
    assert nc.equivalent(nc.einsum("a b -> b a"), nc.elementwise("id", "a b -> b a"))
    assert nc.equivalent(nc.weave(nc.library.attention(), "h"), nc.library.multi_head_attention())
    # exp(neg(x)) == recip(exp(x)): different boxes, same function
    assert nc.equivalent(nc.elementwise("neg", "n") >> nc.elementwise("exp", "n"),
                         nc.elementwise("exp", "n") >> nc.elementwise("recip", "n"))
    # two-operand contraction is associative
    assert nc.equivalent(
        nc.einsum("a b, b c, c d -> a d"),
        (nc.einsum("a b, b c -> a c") @ nc.Id("c d")) >> nc.einsum("a c, c d -> a d"))


def test_equivalent_false_names_output_error_and_sizes():
    f = nc.Id("a") @ nc.elementwise("exp", "b")
    g = nc.Id("a") @ nc.elementwise("relu", "b")
    verdict = nc.equivalent(f, g, seed=3)
    assert not verdict
    assert verdict.output == 1
    assert verdict.max_error > 0
    assert set(verdict.sizes) == {"a", "b"} and all(isinstance(v, int) for v in verdict.sizes.values())
    assert "output 1 differs by up to" in verdict.message
    assert f"{verdict.max_error:.3g}" in verdict.message
    assert "'a': " in verdict.message and "'b': " in verdict.message
    assert "Equivalence(False" in repr(verdict)


def test_equivalent_false_on_types():
    verdict = nc.equivalent(nc.Id("a"), nc.Id("b"))
    assert not verdict and "types differ" in verdict.message


def test_equivalent_detects_a_wrong_temperature():
    f = nc.softmax("q x", over="x")
    g = nc.softmax("q x", over="x", beta=1.01)
    assert not nc.equivalent(f, g)
    assert nc.equivalent(f, g, rtol=0.5, atol=0.5)


def test_equivalent_with_concrete_and_fixed_sizes():
    f = nc.library.attention(d=8)
    assert nc.equivalent(f, f, sizes={"q": 2, "x": 3})
    verdict = nc.equivalent(nc.reduce("sum", "a -> "), nc.reduce("max", "a -> "), sizes={"a": 5})
    assert not verdict and verdict.sizes == {"a": 5}


def test_equivalent_reports_a_sizes_dependent_difference():
    """mean and sum agree only when a = 1: the random sizes find it."""
    verdict = nc.equivalent(nc.reduce("sum", "a -> "), nc.reduce("mean", "a -> "), trials=10)
    assert not verdict and verdict.sizes["a"] > 1
    assert nc.equivalent(nc.reduce("sum", "a -> "), nc.reduce("mean", "a -> "), sizes={"a": 1})
