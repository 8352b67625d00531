"""Every diagram is well typed where it is built (issue 31, follow-up): ``from_layers``, which the operators' fast
paths, the readback of a netlist, weaving, relabelling, JSON loading and the rules' right-hand sides all build
through, checks each layer's box against the wires it is placed on (arrays equal: axes in order, level, dtype) and
refuses, with a :class:`~napkin_cat.errors.CompositionError` naming the layer, the box and the two types, what used
to surface only at evaluate time (numpy's broadcast ``ValueError``) or at JSON load.

Independent route: the expected types are read off the kernel the test builds (its Load moves ``c×a×b`` to
``a×b×c@1``), not from the check."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.errors import CompositionError
from napkin_cat.syntax.flat import from_layers
from napkin_cat.syntax.relabel import map_box
from rewrites import kernel_fusion


def woven_kernel():
    """``Kernel(exp)`` woven over ``c`` at the front of its input and the back of its output: its Load permutes."""
    return nc.weave(nc.kernel(nc.elementwise("exp", "a b"), 1), "c", inputs={0: 0}, position=-1)


def parts(diagram):
    return [layer.boxes_or_types[:3] for layer in diagram.inside]


def test_a_well_typed_list_of_layers_is_the_diagram():
    k = woven_kernel().boxes[0]
    d = from_layers(k.arg.dom, k.arg.cod, parts(k.arg))
    assert d.boxes == k.arg.boxes and (d.dom, d.cod) == (k.arg.dom, k.arg.cod)
    x = np.random.default_rng(0).normal(size=(2, 3, 4))
    np.testing.assert_allclose(nc.evaluate(d, x), np.exp(x).transpose(1, 2, 0))


def test_a_layer_on_wires_in_another_axis_order_and_level_is_refused():
    k = woven_kernel().boxes[0]
    _, exp, save = parts(k.arg)
    with pytest.raises(CompositionError, match=r"layer 0 \(box 'exp'\) is placed on wires \['c×a×b'\] but takes "
                                               r"\['a×b×c@1'\].*box's input 0.*axes \['c', 'a', 'b'\] vs "
                                               r"\['a', 'b', 'c'\]; level 0 vs 1"):
        from_layers(k.arg.dom, k.arg.cod, [exp, save])


def test_a_layer_of_another_dtype_or_a_wrong_codomain_is_refused():
    f16 = nc.elementwise("exp", "a b", dtype="fp16")
    f32 = nc.elementwise("exp", "a b")
    with pytest.raises(CompositionError, match=r"layer 1 \(box 'exp'\).*at array 0 \(the box's input 0\).*"
                                               r"dtype fp32 vs fp16"):
        from_layers(f32.dom, f16.cod, parts(f32) + parts(f16))
    with pytest.raises(CompositionError, match=r"the 1 layer\(s\) end on wires \['a×b'\] but the diagram's codomain "
                                               r"is \['a×b×c'\]"):
        from_layers(f32.dom, nc.types("a b c"), parts(f32))
    with pytest.raises(CompositionError, match=r"layer 0 \(box 'exp'\) .*takes 1 array\(s\) where there are 2"):
        from_layers(nc.types("a b, a b"), f32.cod, parts(f32))


def _strip_dropping_every_transfer(kernel_box):
    """``rewrites.kernels.strip`` as it was before issue 31: a permuting Load dropped with the others."""
    to0 = lambda a: a.replace(level=0)  # noqa: E731
    items = [(nc.Ty(*map(to0, left.inside)), map_box(box, to0, lambda n: n), nc.Ty(*map(to0, right.inside)))
             for left, box, right in parts(kernel_box.arg)
             if getattr(getattr(box, "data", None), "kind", None) not in ("load", "save")]
    return from_layers(nc.Ty(*map(to0, kernel_box.dom.inside)), nc.Ty(*map(to0, kernel_box.cod.inside)), items)


def test_a_rule_whose_right_hand_side_is_ill_typed_is_refused_where_it_rewrites(monkeypatch):
    """Kernel fusion with the old ``strip`` on a kernel whose Load permutes: refused at the rewrite, naming the
    layer and both types (it built a diagram that only failed when evaluated)."""
    lhs = woven_kernel() >> nc.kernel(nc.reduce("sum", "a b c -> a b"), 1)
    (m,) = kernel_fusion.matches(lhs)
    assert nc.equivalent(lhs, kernel_fusion.apply(lhs, m))
    monkeypatch.setattr("rewrites.kernels.strip", _strip_dropping_every_transfer)
    with pytest.raises(CompositionError, match=r"layer 0 \(box 'exp'\) is placed on wires \['c×a×b'\] but takes "
                                               r"\['a×b×c'\]"):
        kernel_fusion.apply(lhs, m)
