"""The boxes a normal form writes and the measures it decreases (:mod:`rewrites.normal_form` and the normal forms
built on it: :mod:`rewrites.scale_normal_form`, :mod:`rewrites.sum_normal_form`, :mod:`rewrites.variance_normal_form`,
:mod:`rewrites.log_probability`).

A normal form's rhs is one box of the matched signature (:func:`box_like`: the arrays' axes, orders, level and
number format kept), legal where it can be written (:func:`buildable`), where the matched intermediates are read
inside the match only (:func:`private_to`) and in one number format (:func:`one_format`); every rewrite decreases
the measure, ``measure(rhs) < measure(lhs)`` (:func:`fewer_nodes`, :func:`netlist_size`).  A scaling's factor is
read and moved by :func:`factor`, :func:`unscaled`, :func:`without_factor` and :func:`with_factor`.

>>> import napkin_cat as nc
>>> (q_x,) = nc.types("q x").inside
>>> box_like("exp", [q_x], q_x).boxes[0].name
'exp'
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.errors import SignatureError
from napkin_cat.rewriting import to_netlist


def spelled(names) -> str:
    return " ".join(names) or "()"   # () is an array without axes


def box_like(kind_name: str, ins, out, *, core=(), params=None):
    """A box of ``kind_name`` reading the arrays ``ins`` and writing ``out`` (their axes, orders, level and
    number format), ``core`` its item-level axes: the box a normal form writes where the matched boxes were."""
    sizes = {a.name: a.size for arr in (*ins, out) for a in arr.axes}
    sig = ", ".join(spelled(a.names) for a in ins) + " -> " + spelled(out.names)
    return nc.apply(kind_name, sig, core=tuple(core), params=params or {}, level=ins[0].level, dtype=ins[0].dtype,
                    out_dtype=out.dtype, out_level=out.level, sizes=sizes)


def reduced(node) -> tuple:
    """The axes a reduction box sums (or maxes) away: those of its input it is not weaved over, in order."""
    return tuple(n for n in node.dom[0].names if n not in node.spec.weave_names)


def count(node):
    """|A|: how many values a reduction box reduces into each value it writes (its reduced axes' sizes multiplied)."""
    return sympy.Mul(*(a.size for a in node.dom[0].axes if a.name in reduced(node)))


#: the boxes that multiply by a constant (:func:`factor`): a scale, and a mean (a sum and 1/|A|)
SCALINGS = ("scale", "reduce_mean")


def factor(node):
    """The constant a box multiplies by: a scale's ``c``, a mean's ``1/|A|`` (mean_A x = (1/|A|)·Σ_A x), else 1.

    >>> factor(to_netlist(nc.reduce("mean", "q x -> q", x=4)).nodes[0])
    1/4
    """
    if node.spec.kind == "reduce_mean":
        return 1 / count(node)
    return sympy.sympify(node.spec.param("c", 1)) if node.spec.kind == "scale" else sympy.Integer(1)


def unscaled(node):
    """The array a scaling ``node`` multiplies by its :func:`factor`: a scale's input, a mean's sum (its output)."""
    return node.cod[0] if node.spec.kind == "reduce_mean" else node.dom[0]


def without_factor(b, node, wire):
    """In the builder ``b``, what the scaling ``node`` makes of ``wire`` before its factor (:func:`unscaled`): the
    wire itself for a scale, its sum Σ_A for a mean."""
    if node.spec.kind == "reduce_mean":
        return b(box_like("reduce_sum", [node.dom[0]], node.cod[0]), wire)
    return wire


def with_factor(b, node, wire):
    """``wire`` (an array like ``node``'s output) times ``node``'s :func:`factor`: a scale box, none where it is 1."""
    c = factor(node)
    return wire if c == 1 else b(box_like("scale", [node.cod[0]], node.cod[0], params={"c": c}), wire)


def buildable(build):
    """A condition: the normal form's box can be written with the matched signature (else why not)."""
    def test(m):
        try:
            build(m)
        except SignatureError as e:
            return str(e).splitlines()[0]
        return True
    return test


def private_to(*ends):
    """A condition: the matched intermediates are read inside the match only (the boundary outputs are those of
    the pattern variables ``ends``)."""
    def test(m):
        leaks = sorted({v for v, _ in m.outputs if v not in ends})
        return not leaks or f"{', '.join(repr(m.node(v).name) for v in leaks)} is also read outside"
    return test


def one_format(m):
    """Every matched wire carries one number format at one level (the primitive computes in one format)."""
    arrays = {(a.level, a.dtype) for v in m.nodes for a in (*m.node(v).dom, *m.node(v).cod)}
    return len(arrays) == 1 or f"the matched values are in {len(arrays)} formats or levels"


def netlist_size(diagram) -> int:
    """Nodes plus wires of the diagram's netlist."""
    net = to_netlist(diagram)
    return len(net.nodes) + len(net.wires)


def measure(diagram) -> int:
    """Nodes plus wires of the diagram's netlist, plus its means: what every rule of the normal form decreases."""
    means = sum(1 for n in to_netlist(diagram).nodes.values() if n.kind == "box" and n.spec.kind == "reduce_mean")
    return netlist_size(diagram) + means


def fewer_nodes(lhs, rhs, m):
    """The termination claim: the rewrite decreases :func:`measure` (removes nodes or wires, a copy's branch, or a
    mean), and moves nothing on the function (no kernels)."""
    assert measure(rhs) < measure(lhs), f"the measure {measure(lhs)} became {measure(rhs)}"
    before, after = nc.cost(lhs), nc.cost(rhs)
    for lv in set(before.H) | set(after.H):
        assert sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed on the function"


__all__ = ["SCALINGS", "box_like", "buildable", "count", "factor", "fewer_nodes", "measure", "netlist_size",
           "one_format", "private_to", "reduced", "spelled", "unscaled", "with_factor", "without_factor"]
