"""Every documented error: its type, and a message that names the offending axis, box or position."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.builder import Builder


# --------------------------------------------------------------------------- composition
def test_compose_different_axes_names_the_array_and_axes():
    f = nc.einsum("q d, x d -> q x")
    g = nc.softmax("q d", over="d")
    with pytest.raises(nc.CompositionError,
                       match=r"composite 1: array 0: .*outputs q×x but the second takes q×d "
                             r"\(axes \['q', 'x'\] vs \['q', 'd'\]\)"):
        f >> g


def test_compose_names_the_position_in_a_long_composite():
    a, b, c = nc.einsum("a b -> b a"), nc.elementwise("exp", "b a"), nc.softmax("a b", over="b")
    with pytest.raises(nc.CompositionError, match=r"at composite 3: array 0: .*outputs b×a but the second takes a×b"):
        nc.Diagram.id(a.dom).then(a, b, c)


def test_compose_names_the_array_index_in_a_tuple():
    f = nc.Id("q, x")
    g = nc.Id("q, y")
    with pytest.raises(nc.CompositionError, match=r"array 1: the first diagram outputs x but the second takes y"):
        f >> g


@pytest.mark.parametrize("other, why", [
    (nc.Id("q x", level=1), r"level 0 vs 1"),
    (nc.Id("q x", dtype="fp16"), r"dtype fp32 vs fp16"),
    (nc.Id("q x", x=4), r"axes \['q', 'x'\] vs \['q', 'x=4'\]"),
])
def test_compose_level_dtype_and_size_mismatches(other, why):
    with pytest.raises(nc.CompositionError, match=why):
        nc.Id("q x") >> other


def test_compose_different_number_of_arrays():
    with pytest.raises(nc.CompositionError, match=r"outputs 2 array\(s\) \['q×x', 'y'\] but the second takes 1"):
        nc.Id("q x, y") >> nc.Id("q x")


def test_compose_with_a_non_diagram():
    with pytest.raises(nc.CompositionError, match=r"cannot compose a napkin_cat Diagram with int"):
        nc.Id("q") >> 3


def test_builder_arity_and_types():
    b = Builder(nc.types("n, m"))
    A, B = b.inputs
    with pytest.raises(nc.CompositionError, match=r"takes 2 wires, got 1"):
        b(nc.elementwise("add", "n"), A)
    with pytest.raises(nc.CompositionError, match=r"input 1 of .*wire carries m, box takes n"):
        b(nc.elementwise("add", "n"), A, B)


# --------------------------------------------------------------------------- weaving
@pytest.mark.parametrize("axis, where", [("d", r"q×d"), ("x", r"x×d"), ("q", r"q×d")])
def test_weave_over_an_axis_already_present(axis, where):
    with pytest.raises(nc.WeaveError, match=rf"cannot weave over '{axis}': the diagram already has it in {where}"):
        nc.weave(nc.library.attention(), axis)


def test_weave_over_an_axis_present_only_inside():
    """The scores' axis x is inside attention (and in K, V); a diagram hiding it inside still refuses."""
    inner = nc.einsum("q d, x d -> q x") >> nc.reduce("sum", "q x -> q")
    with pytest.raises(nc.WeaveError, match=r"'x'"):
        nc.weave(inner, "x", inputs=[0])


def test_weave_an_input_that_does_not_exist():
    with pytest.raises(nc.WeaveError, match=r"cannot weave input 3: the diagram has inputs 0..2"):
        nc.weave(nc.library.attention(), "h", inputs=[3])


def test_weave_a_position_out_of_range():
    with pytest.raises(nc.WeaveError, match=r"cannot weave 'h' at position 5 of input 0 \(rank 2\)"):
        nc.weave(nc.einsum("q d, x d -> q x"), "h", inputs={0: 5})


def test_weave_axis_name_must_be_legal():
    with pytest.raises(nc.AxisError, match=r"axis name '1h' is not legal"):
        nc.weave(nc.library.attention(), "1h")


# --------------------------------------------------------------------------- signatures
@pytest.mark.parametrize("signature, message", [
    ("q d, x d", r"needs an output after '->'"),
    ("q d, x d -> q x -> y", r"more than one '->'"),
    ("q d, x 1d -> q x", r"'1d' in input operand 1 is not an axis name"),
    ("q d, x d! -> q x", r"'d!' in input operand 1 is not an axis name"),
    ("q d,, x d -> q x", r"empty operand between commas"),
    ("q q, x d -> q x", r"input operand 0 of .* names axis 'q' twice"),
    ("q d, x d x -> q", r"input operand 1 of .* names axis 'x' twice"),
    ("q d, x d -> q x q", r"output operand 0 of .* names axis 'q' twice"),
    ("q d, x d -> q z", r"output axis 'z' .* appears in no input"),
    ("q d, x d -> q x, x", r"exactly one output array"),
])
def test_einsum_signature_errors(signature, message):
    with pytest.raises(nc.SignatureError, match=message):
        nc.einsum(signature)


def test_signature_must_be_a_string():
    with pytest.raises(nc.SignatureError, match=r"must be a string such as 'q d, x d -> q x', got 3"):
        nc.einsum(3)


def test_sizes_for_axes_the_signature_lacks():
    with pytest.raises(nc.SignatureError, match=r"sizes given for \['y'\]"):
        nc.einsum("q d, x d -> q x", y=3)


@pytest.mark.parametrize("build, message", [
    (lambda: nc.softmax("q x", over="y"), r"softmax over 'y': .* legal choices are \['q', 'x'\]"),
    (lambda: nc.softmax("q x, y", over="x"), r"softmax takes one array's axes"),
    (lambda: nc.elementwise("exp", "q x, q x"), r"'exp' takes 1 input\(s\), the signature .* gives 2"),
    (lambda: nc.elementwise("add", "q x, q y -> q x"), r"input 1 axis 'y' is not in the output"),
    (lambda: nc.elementwise("scale", "q x"), r"'scale' needs const="),
    (lambda: nc.elementwise("exp", "q x", const=2), r"'exp' takes no const"),
    (lambda: nc.reduce("sum", "q x -> q x"), r"reduces no axis"),
    (lambda: nc.reduce("sum", "q x -> y"), r"output axis 'y' is not an input axis"),
    (lambda: nc.split("q d", along="y", parts=(1, 2)), r"split along 'y': .* no such axis"),
    (lambda: nc.transfer("move", nc.types("q").inside[0]), r"'load' or 'save', not 'move'"),
    (lambda: nc.transfer("save", nc.types("q").inside[0]), r"cannot save q above level 0"),
    (lambda: nc.renaming("q d -> q d"), r"renames no axis"),
    (lambda: nc.renaming("q d -> d q"), r"new name 'd' is already an input axis"),
    (lambda: nc.apply("softmax", "q x"), r"softmax: the item signature is Rˣ → Rˣ"),
    (lambda: nc.apply("exp", "q x", core="x"), r"exp: acts on items"),
])
def test_constructor_signature_errors(build, message):
    with pytest.raises(nc.SignatureError, match=message):
        build()


# --------------------------------------------------------------------------- unknown primitives
def test_unknown_elementwise_lists_legal_names():
    with pytest.raises(nc.UnknownPrimitiveError,
                       match=r"unknown elementwise map 'foo'; legal names are \[.*'exp'.*'relu'.*\]"):
        nc.elementwise("foo", "q x")


def test_unknown_reduction_lists_legal_names():
    with pytest.raises(nc.UnknownPrimitiveError,
                       match=r"unknown reduction 'prod'; legal reductions are "
                             r"\['logsumexp', 'max', 'mean', 'min', 'sum'\]"):
        nc.reduce("prod", "q x -> q")


def test_unknown_kind_lists_declared_kinds():
    with pytest.raises(nc.UnknownPrimitiveError,
                       match=r"unknown primitive kind 'nokind'; declared kinds are \[.*'contract'"):
        nc.apply("nokind", "q x")


def test_unknown_primitive_is_a_key_error_with_a_readable_message():
    with pytest.raises(KeyError) as info:
        nc.elementwise("foo", "q")
    assert str(info.value).startswith("unknown elementwise map 'foo'")


def test_unknown_dtype():
    with pytest.raises(nc.NapkinError,
                       match=r"unknown dtype 'fp64'; legal dtypes are "
                             r"\['bf16', 'bool', 'fp16', 'fp32', 'fp8', 'int32'\]"):
        nc.cast("q", to="fp64")


# --------------------------------------------------------------------------- axes
@pytest.mark.parametrize("build, message", [
    (lambda: nc.axes("q q"), r"axis 'q' is named twice"),
    (lambda: nc.axes("q", x=3), r"sizes given for axes \['x'\] that are not in \['q'\]"),
    (lambda: nc.axes("q-1"), r"axis name 'q-1' is not legal"),
    (lambda: nc.Axis("q", 0), r"size of axis 'q' must be a positive integer, got 0"),
    (lambda: nc.Axis("q", -2), r"size of axis 'q' must be a positive integer, got -2"),
    (lambda: nc.Axis("q", True), r"size of axis 'q' must be a positive integer or a symbol, got True"),
    (lambda: nc.Axis("q", 2.5), r"size of axis 'q' must be an int, a symbol name or a sympy expression"),
    (lambda: nc.split("q d", along="q", parts=(1, 2), q=4), r"split of 'q': parts \[1, 2\] add up to 3, not .* 4"),
])
def test_axis_errors(build, message):
    with pytest.raises(nc.AxisError, match=message):
        build()


# --------------------------------------------------------------------------- evaluate
def test_wrong_rank():
    with pytest.raises(nc.ShapeError, match=r"input 1 \(x×d\): expected an array of rank 2 with axes \['x', 'd'\], "
                                            r"got shape \(4,\)"):
        nc.evaluate(nc.einsum("q d, x d -> q x"), np.ones((2, 3)), np.ones(4))


def test_wrong_concrete_size_names_axis_and_both_sizes():
    with pytest.raises(nc.ShapeError, match=r"input 0 \(q×d\[3\]\): axis 'd' has size 3, but the array has 4"):
        nc.evaluate(nc.einsum("q d, x d -> q x", d=3), np.ones((2, 4)), np.ones((5, 3)))


def test_size_contradicting_an_axis_already_bound_by_another_input():
    with pytest.raises(nc.ShapeError, match=r"input 1 \(x×d\): axis 'd' \(d\) is already bound to 3, "
                                            r"but this array has 5 along it"):
        nc.evaluate(nc.einsum("q d, x d -> q x"), np.ones((2, 3)), np.ones((4, 5)))


def test_size_contradicting_an_axis_bound_by_sizes():
    with pytest.raises(nc.ShapeError, match=r"axis 'q' \(q\) is already bound to 3, but this array has 2"):
        nc.evaluate(nc.einsum("q d, x d -> q x"), np.ones((2, 3)), np.ones((4, 3)), sizes={"q": 3})


def test_size_contradicting_a_derived_size():
    d = nc.substitute(nc.einsum("q d, x d -> q x"), d=2 * nc.symbol("k"))
    with pytest.raises(nc.ShapeError, match=r"axis 'd' has size 2\*k = 6, but the array has 5"):
        nc.evaluate(d, np.ones((2, 5)), np.ones((4, 5)), sizes={"k": 3})


def test_split_parts_contradict_the_array():
    with pytest.raises(nc.ShapeError, match=r"split of axis 'q': parts \[2, 3\] add up to 5, but the array has 6"):
        nc.evaluate(nc.split("q d", along="q", parts=(2, 3)), np.ones((6, 2)))


def test_wrong_number_of_inputs():
    with pytest.raises(nc.ShapeError, match=r"takes 2 array\(s\) \['q×d', 'x×d'\], got 1"):
        nc.evaluate(nc.einsum("q d, x d -> q x"), np.ones((2, 3)))


def test_non_numeric_input():
    with pytest.raises(nc.ShapeError, match=r"input 0: expected a numeric array, got dtype <U1"):
        nc.evaluate(nc.Id("q"), np.array(["a", "b"]))


def test_evaluate_needs_a_diagram():
    with pytest.raises(nc.NapkinError, match=r"evaluate takes a napkin_cat Diagram, got str"):
        nc.evaluate("q d -> q")


def test_merge_has_no_numpy_meaning():
    with pytest.raises(nc.NapkinError, match=r"a merge has no meaning as a function of arrays"):
        nc.evaluate(nc.Diagram.merge(nc.types("q"), 2), np.ones(2), np.ones(2))


def test_unknown_size_must_be_passed():
    w = nc.weave(nc.Id("x"), "h", inputs=[])
    with pytest.raises(nc.ShapeError, match=r"size of axis 'h' of 'id' \(h\) is not known from the inputs"):
        nc.evaluate(w, np.ones(3))


def test_every_error_is_a_napkin_error():
    for err in (nc.CompositionError, nc.AxisError, nc.WeaveError, nc.SignatureError, nc.UnknownPrimitiveError,
                nc.ShapeError, nc.SerialisationError, nc.RewriteError, nc.LevelError, nc.MemoryLimitError):
        assert issubclass(err, nc.NapkinError)
