"""Equal programs written another way: the laws of the normal form read right to left, for the fuzz.

A user writes SoftMax by hand, squares by ``x · x``, a mean as a scaled sum, a 3-operand einsum as two binary
ones, sums after the contraction they could be inside.  Each *reformulation* here is one of those laws read
backwards (the primitive written out as a user might), a rule on one box; :func:`reformulate` applies a random
few of them to a program.  The fuzz then derives both (:func:`napkin_cat.testing.checks.check_reformulated`):
``nc.derive`` must reach the same ``H`` from either, and its result must compute what the program computes.

=========================  ===================================================================================
reformulation              primitive → how a user writes it
=========================  ===================================================================================
``softmax_by_hand``        SoftMax_{A,β}(x)  →  s = β·x ; e = exp(s − max_A s) ; e / Σ_A e
``logsumexp_by_hand``      LSE_A(x)  →  m = max_A x ; log Σ_A exp(x − m) + m
``square_as_product``      square(x)  →  x · x
``mean_as_scaled_sum``     mean_A(x)  →  (1/|A|) · Σ_A x
``contraction_in_pairs``   C(X₁, X₂, X₃, …)  →  C′(C₁₂(X₁, X₂), X₃, …)     (C₁₂ keeps the axes the rest names)
``sum_after_contraction``  C(X…) summing a  →  Σ_a C′(X…), C′ keeping a
``scale_on_an_operand``    C(X₀, X₁, …)  →  ½ · C(2 · X₀, X₁, …)   (a scale on an operand, undone after)
``variance_uncentred``     μ = mean_A x ; mean_A((x − μ)²)  →  mean_A(x²) − μ²     (x − μ kept for its other readers)
``computed_twice``         y = f(x) read by r₁, r₂, …  →  r₁ reads f(x), the others a second f(x)   (not in the
                           fuzz's walk, :data:`REFORMULATIONS`: tests apply it where they choose)
=========================  ===================================================================================

Each is exact in exact arithmetic; in floating point the written SoftMax and log-sum-exp are the max-shifted forms
(so they compute what the primitive computes), and the uncentred variance loses the digits the row's mean takes
(the normal form's ``uncentred_variance`` writes it centred again: the centred one is the one evaluated).  The
programs of :mod:`.programs` draw normal inputs, on which
every form is defined.

>>> import napkin_cat as nc
>>> d = nc.softmax("q x", over="x", beta=0.5)
>>> [b.data.kind for b in softmax_by_hand.apply(d).boxes if b.data is not None]
['scale', 'reduce_max', 'sub', 'exp', 'reduce_sum', 'div']
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import Rule, RuleSet
from napkin_cat.rewriting.pattern import Pattern, kind, structural, where


def _sig(names) -> str:
    return " ".join(names) or "()"


def _box(kind_name: str, ins, out, *, params=None):
    """A box of ``kind_name`` reading the arrays ``ins`` and writing ``out`` (their axes, orders and format)."""
    sizes = {a.name: a.size for arr in (*ins, out) for a in arr.axes}
    sig = ", ".join(_sig(a.names) for a in ins) + " -> " + _sig(out.names)
    return nc.apply(kind_name, sig, params=params or {}, level=ins[0].level, dtype=ins[0].dtype,
                    out_dtype=out.dtype, out_level=out.level, sizes=sizes)


def _reduced(node) -> tuple:
    return tuple(n for n in node.dom[0].names if n not in node.spec.weave_names)


def _rows(x, over):
    return x.replace(axes=tuple(a for a in x.axes if a.name not in over))


def _one_box(kind_name: str):
    return Pattern({"b": kind(kind_name)})


# ---------------------------------------------------------------------- the primitives written out
def _softmax_by_hand(m):
    node = m.node("b")
    x, out, over = node.dom[0], node.cod[0], _reduced(node)
    b, ins = m.wiring()
    s = ins[("b", 0)]
    beta = sympy.sympify(node.spec.param("beta", 1))
    if beta != 1:
        s = b(_box("scale", [x], x, params={"c": beta}), s)
    rows = _rows(x, over)
    e = b(_box("exp", [x], x), b(_box("sub", [x, rows], x), s, b(_box("reduce_max", [x], rows), s)))
    return m.finish(b, {("b", 0): b(_box("div", [x, rows], out), e, b(_box("reduce_sum", [x], rows), e))})


def _logsumexp_by_hand(m):
    node = m.node("b")
    x, out = node.dom[0], node.cod[0]
    rows = _rows(x, _reduced(node))
    b, ins = m.wiring()
    mx = b(_box("reduce_max", [x], rows), ins[("b", 0)])
    e = b(_box("exp", [x], x), b(_box("sub", [x, rows], x), ins[("b", 0)], mx))
    lg = b(_box("log", [rows], rows), b(_box("reduce_sum", [x], rows), e))
    return m.finish(b, {("b", 0): b(_box("add", [rows, rows], out), lg, mx)})


def _square_as_product(m):
    node = m.node("b")
    b, ins = m.wiring()
    x = ins[("b", 0)]
    return m.finish(b, {("b", 0): b(_box("mul", [node.dom[0], node.dom[0]], node.cod[0]), x, x)})


def _mean_as_scaled_sum(m):
    node = m.node("b")
    x, out = node.dom[0], node.cod[0]
    over = _reduced(node)
    count = sympy.Mul(*(a.size for a in x.axes if a.name in over))
    b, ins = m.wiring()
    total = b(_box("reduce_sum", [x], out), ins[("b", 0)])
    return m.finish(b, {("b", 0): b(_box("scale", [out], out, params={"c": 1 / count}), total)})


def _in_pairs(m):
    node = m.node("b")
    first, second, rest = node.dom[0], node.dom[1], node.dom[2:]
    needed = {n for arr in (*rest, node.cod[0]) for n in arr.names}
    kept = {a.name: a for arr in (first, second) for a in arr.axes if a.name in needed}
    pair = first.replace(axes=tuple(kept.values()))
    b, ins = m.wiring()
    y = b(_box("contract", [first, second], pair), ins[("b", 0)], ins[("b", 1)])
    rest_wires = [ins[("b", j)] for j in range(2, len(node.dom))]
    return m.finish(b, {("b", 0): b(_box("contract", [pair, *rest], node.cod[0]), y, *rest_wires)})


def _summed(node) -> list:
    out = set(node.cod[0].names)
    return list(dict.fromkeys(a for arr in node.dom for a in arr.axes if a.name not in out))


def _sum_after(m):
    node = m.node("b")
    a = _summed(node)[0]
    out = node.cod[0]
    wide = out.replace(axes=(*out.axes, a))
    b, ins = m.wiring()
    y = b(_box("contract", list(node.dom), wide), *(ins[("b", j)] for j in range(len(node.dom))))
    return m.finish(b, {("b", 0): b(_box("reduce_sum", [wide], out), y)})


def _scale_on_operand(m):
    node = m.node("b")
    x = node.dom[0]
    b, ins = m.wiring()
    wires = [ins[("b", j)] for j in range(len(node.dom))]
    wires[0] = b(_box("scale", [x], x, params={"c": sympy.Integer(2)}), wires[0])
    y = b(_box("contract", list(node.dom), node.cod[0]), *wires)
    return m.finish(b, {("b", 0): b(_box("scale", [node.cod[0]], node.cod[0], params={"c": sympy.Rational(1, 2)}),
                                      y)})


def _through_copies(net, nid, port):
    """The node (and port) that writes the value ``nid`` reads at ``port``, through copies."""
    src = net.wires[net.ins[nid][port]].src
    while src[0] in net.nodes and net.nodes[src[0]].kind == "copy":
        src = net.wires[net.ins[src[0]][0]].src
    return src


def _centred_variance_of(net, nodes):
    """The square ``q`` and mean ``v`` of the centred values ``s`` = x − μ (``m`` = μ the mean of x over the axes
    ``v`` averages), and the copy ``k`` of x − μ where others read it too; None where ``s`` centres no mean's row."""
    s, m = nodes["s"], nodes["m"]
    if _through_copies(net, s, 0) != _through_copies(net, m, 0):
        return None
    dst = net.wires[net.outs[s][0]].dst[0]
    copied = dst in net.nodes and net.nodes[dst].kind == "copy"
    readers = [net.wires[w].dst[0] for w in net.outs[dst]] if copied else [dst]
    for q in readers:
        if q not in net.nodes or net.nodes[q].kind != "box" or net.nodes[q].spec.kind != "square":
            continue
        v = net.wires[net.outs[q][0]].dst[0]
        if (v in net.nodes and net.nodes[v].kind == "box" and net.nodes[v].spec.kind == "reduce_mean"
                and set(_reduced(net.nodes[v])) == set(_reduced(net.nodes[m]))):
            return {"q": q, "v": v, **({"k": dst} if copied else {})}
    return None


def _variance_uncentred(m):
    x, mu, var = m.node("m").dom[0], m.node("m").cod[0], m.node("v").cod[0]
    b, ins = m.wiring()
    mean = b(m.box("m"), ins[("m", 0)])
    centred = b(m.box("s"), ins[("s", 0)], mean)
    ex2 = b(_box("reduce_mean", [x], var), b(_box("square", [x], x), ins[("m", 0)]))
    uncentred = b(_box("sub", [var, mu], var), ex2, b(_box("square", [mu], mu), mean))
    outs = {"m": mean, "s": centred, "k": centred, "v": uncentred}
    return m.finish(b, {p: outs[p[0]] for p in m.outputs})


def _copied_value(net, n) -> bool:
    """A box of one output, not a transfer, whose value is copied (read in several places)."""
    if n.kind != "box" or n.spec.kind in ("load", "save") or len(n.cod) != 1:
        return False
    dst = net.wires[net.outs[n.id][0]].dst[0]
    return dst in net.nodes and net.nodes[dst].kind == "copy"


def _computed_twice(m):
    b, ins = m.wiring()
    f = m.box("f")
    again = [ins[("f", p)] for p in range(len(m.node("f").dom))]
    first, second = b(f, *again), b(f, *again)
    return m.finish(b, {p: first if k == 0 else second for k, p in enumerate(m.outputs)})


softmax_by_hand = Rule("softmax_by_hand", _one_box("softmax"), _softmax_by_hand,
                       doc="SoftMax_{A,β}(x) → e = exp(βx − max_A βx) ; e / Σ_A e")
logsumexp_by_hand = Rule("logsumexp_by_hand", _one_box("reduce_logsumexp"), _logsumexp_by_hand,
                         doc="LSE_A(x) → m = max_A x ; log Σ_A exp(x − m) + m")
square_as_product = Rule("square_as_product", _one_box("square"), _square_as_product, doc="square(x) → x · x")
mean_as_scaled_sum = Rule("mean_as_scaled_sum", _one_box("reduce_mean"), _mean_as_scaled_sum,
                          doc="mean_A(x) → (1/|A|) · Σ_A x")
contraction_in_pairs = Rule(
    "contraction_in_pairs",
    Pattern({"b": where("a contraction of three operands or more",
                        lambda net, n: n.kind == "box" and n.spec.kind == "contract" and len(n.dom) >= 3)}),
    _in_pairs, doc="C(X₁, X₂, X₃, …) → C′(C₁₂(X₁, X₂), X₃, …)")
sum_after_contraction = Rule(
    "sum_after_contraction",
    Pattern({"b": where("a contraction that sums an axis",
                        lambda net, n: n.kind == "box" and n.spec.kind == "contract" and bool(_summed(n)))}),
    _sum_after, doc="C(X…) summing a → Σ_a C′(X…)")

scale_on_an_operand = Rule(
    "scale_on_an_operand",
    Pattern({"b": where("a contraction of an operand or more",
                        lambda net, n: n.kind == "box" and n.spec.kind == "contract")}),
    _scale_on_operand, doc="C(X₀, X₁, …) → ½ · C(2 · X₀, X₁, …)")
variance_uncentred = Rule(
    "variance_uncentred",
    Pattern({"m": kind("reduce_mean"), "s": kind("sub")}, [("m", 0, "s", 1)], absorb=_centred_variance_of),
    _variance_uncentred, doc="μ = mean_A x ; mean_A((x − μ)²) → mean_A(x²) − μ²")

computed_twice = Rule(
    "computed_twice",
    Pattern({"f": where("a box whose value is read in several places", _copied_value), "c": structural("copy")},
            [("f", 0, "c", 0)]),
    _computed_twice, doc="y = f(x) read by r₁, r₂, … → r₁ reads f(x), the others a second f(x)")

#: the laws read backwards that ``nc.derive`` is invariant under (the fuzz's)
REFORMULATIONS = RuleSet((softmax_by_hand, logsumexp_by_hand, square_as_product, mean_as_scaled_sum,
                          contraction_in_pairs, sum_after_contraction, scale_on_an_operand, variance_uncentred))


@dataclass(frozen=True)
class Reformulated:
    """A program written another way: ``diagram`` and the ``laws`` applied (names, in order)."""

    diagram: object
    laws: tuple


def reformulate(diagram, rng, *, steps: int = 4, laws=REFORMULATIONS) -> Reformulated:
    """``diagram`` with up to ``steps`` of the reformulations ``laws`` applied, each at a random place among those
    offered (the primitives it writes out are not offered again, so the walk ends)."""
    applied = []
    for _ in range(steps):
        offered = [(rule, m) for rule in laws for m in rule.matches(diagram)]
        if not offered:
            break
        rule, m = offered[int(rng.integers(len(offered)))]
        diagram = rule.fill(m).diagram
        applied.append(rule.name)
    return Reformulated(diagram, tuple(applied))


__all__ = ["REFORMULATIONS", "Reformulated", "reformulate", "softmax_by_hand", "logsumexp_by_hand",
           "square_as_product", "mean_as_scaled_sum", "contraction_in_pairs", "sum_after_contraction",
           "scale_on_an_operand", "variance_uncentred", "computed_twice"]
