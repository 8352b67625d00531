"""Scales move toward the outputs: a contraction absorbs a scaling of its operand, Σ (c·x) y = c · Σ x y.

A scale ``c · x`` (or a mean's ``1/|A|``, :func:`~rewrites.normal_form_boxes.factor`) read by a contraction, a sum or a
mean is taken after it, and two scales in a row are one.  Written anywhere in a chain of contractions the factor
ends in one place: after the last linear reduction that reads it, where ``scale_into_softmax`` may take it into a
SoftMax's β, and it no longer stands between two contractions, so ``contraction_merge`` makes the chain one
contraction whose order the search chooses by cost (``((A B)·c) C`` and ``(A B) C · c`` derive to the same H).
Both rules play ``normalise``.

=============================  ================================================================================
rule                           lhs → rhs
=============================  ================================================================================
``scale_through_contraction``  R(…, c·X, …)  →  c · R(…, X, …)          R a contraction, a sum or a mean
                               R(…, mean_A X, …)  →  (1/|A|) · R(…, Σ_A X, …)
``scales_multiply``            c₂ · (c₁ · X)  →  (c₁c₂) · X            (no scale where c₁c₂ = 1)
=============================  ================================================================================

Termination: a factor only moves toward the outputs, past one linear reduction per step, and none is made:
``scale_through_contraction`` keeps the number of scalings (a scale stays one, a mean becomes one scale and a sum)
and lowers :func:`reductions_ahead` (for each scaling, the linear reductions its value reaches downstream) by at
least one; ``scales_multiply`` removes a scale.  The other normal-form rules make no reduction after a scaling
except ``own_axes_first`` (one sum per summed axis occurrence, moved toward the inputs) and no scaling before a
reduction except ``sum_of_contraction`` (its mean's factor, after the merged contraction), so the steps of these
two rules are at most (scalings + means) × (reductions + summed occurrences + 1), within the search's driver bound
((nodes and wires + 1) × (axes on the wires + 1), :func:`napkin_cat.search.forms`).

Cost: no transfer moves (the function has no kernels yet).  The FLOPs of the scale become the reader's output
size (``Π out``) instead of its operand's: smaller for a reduction, larger for an outer product.  ``nc.derive``
minimises transfers, and a scale is an elementwise map that shares its producer's kernel wherever it stands, so
its place changes no H; a scale left between two contractions costs H (it keeps them apart: 16x on a 256 × 16
chain at memory 256).

>>> import sympy
>>> import napkin_cat as nc
>>> c = sympy.Rational(1, 8)
>>> d = (nc.elementwise("scale", "a c", const=c) @ nc.Id(nc.types("c e"))) >> nc.einsum("a c, c e -> a e")
>>> r = scale_through_contraction.apply(d)
>>> [b.name for b in r.boxes], bool(nc.equivalent(d, r, sizes=dict(a=3, c=4, e=2)))
(['·', 'scale'], True)
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import OUTPUT, Condition, Obligation, Rule, RuleSet, to_netlist
from napkin_cat.rewriting.match import Pattern, kind
from rewrites.contraction_instances import random_einsum, random_names
from rewrites.normal_form_boxes import SCALINGS, box_like, factor, unscaled, without_factor
from rewrites.sum_product import Term, loop_nest_flops

#: the linear reductions a factor moves through (a sum and a mean are contractions of one operand)
LINEAR = ("contract", "reduce_sum", "reduce_mean")


def _is(net, nid, kinds) -> bool:
    return nid != OUTPUT and net.nodes[nid].kind == "box" and net.nodes[nid].spec.kind in kinds


def reductions_ahead(diagram) -> int:
    """Σ over the scalings (scales and means) of the linear reductions their value reaches downstream: what
    ``scale_through_contraction`` lowers.

    >>> reductions_ahead(nc.elementwise("scale", "a c", const=2) >> nc.reduce("sum", "a c -> a"))
    1
    """
    net = to_netlist(diagram)
    total = 0
    for nid in net.nodes:
        if not _is(net, nid, SCALINGS):
            continue
        seen, todo = set(), [e[0] for e in net.consumers(nid)]
        while todo:
            v = todo.pop()
            if v == OUTPUT or v in seen:
                continue
            seen.add(v)
            todo.extend(e[0] for e in net.consumers(v))
        total += sum(1 for v in seen if _is(net, v, LINEAR))
    return total


def _scale(arr, c):
    return box_like("scale", [arr], arr, params={"c": c})


# ---------------------------------------------------------------------- a factor through a linear reduction
def _port(m) -> int:
    (port,) = [p for p, src in enumerate(m.net.producers(m.nodes["r"])) if src[0] == m.nodes["sc"]]
    return port


def _reader_on(m, operand):
    """The reader ``r`` with ``operand`` at the scaled port (its kind kept: a sum stays a sum)."""
    r = m.node("r")
    operands = list(r.dom)
    operands[_port(m)] = operand
    if r.spec.kind == "contract":
        return Term(tuple(operands), r.cod[0]).box()
    return box_like(r.spec.kind, operands, r.cod[0])


def _through_rhs(m):
    b, ins = m.wiring()
    sc, r, port = m.node("sc"), m.node("r"), _port(m)
    wires = [ins[("r", j)] if j != port else without_factor(b, sc, ins[("sc", 0)]) for j in range(len(r.dom))]
    y = b(_reader_on(m, unscaled(sc)), *wires)
    c = factor(sc)
    return m.finish(b, {("r", 0): y if c == 1 else b(_scale(r.cod[0], c), y)})


def _one_scaled_port(m):
    """The scaled value is read at one port of the reader (read twice, it would be scaled twice: c² · R)."""
    n = sum(1 for src in m.net.producers(m.nodes["r"]) if src[0] == m.nodes["sc"])
    return n == 1 or f"{m.node('r').name!r} reads the scaled value at {n} ports"


def _same_format(m):
    arrays = {(a.level, a.dtype) for v in m.nodes for a in (*m.node(v).dom, *m.node(v).cod)}
    return len(arrays) == 1 or f"the scaling and its reader are in {len(arrays)} formats or levels"


def scale_through_instance(rng):
    """A contraction of 1-3 random operands, or a sum or mean of a random array, one operand scaled (a random
    constant, read in another axis order at times) or averaged over 1-2 fresh axes placed anywhere (sizes given or
    symbolic); the scaling's input maybe read elsewhere too."""
    if rng.random() < 0.7:
        reader = random_einsum(rng, int(rng.integers(1, 4)))
    else:
        y = random_einsum(rng, 1).dom.inside[0]
        kept = tuple(a for a in y.axes if rng.random() < 0.5)
        reader = box_like(str(rng.choice(["reduce_sum", "reduce_mean"])), [y], y.replace(axes=kept[1:] or kept))
    ops = list(reader.dom.inside)
    port = int(rng.integers(len(ops)))
    x = ops[port]
    if rng.random() < 0.35:
        fresh = random_names(rng, int(rng.integers(1, 3)), avoid={a.name for o in ops for a in o.axes})
        axes = list(x.axes)
        for n in fresh:
            axes.insert(int(rng.integers(len(axes) + 1)), nc.Axis(n, int(rng.integers(1, 4))) if rng.random() < 0.5
                        else nc.Axis(n))
        src = x.replace(axes=tuple(axes))
        scaling = box_like("reduce_mean", [src], x)
    else:
        order = [x.axes[int(i)] for i in rng.permutation(len(x.axes))] if rng.random() < 0.3 else list(x.axes)
        src = x.replace(axes=tuple(order))
        scaling = box_like("scale", [src], x, params={"c": [0.5, 3, -2, sympy.Rational(1, 7)][int(rng.integers(4))]})
    b = nc.Builder(nc.Ty(*ops[:port], src, *ops[port + 1:]))
    ws = list(b.inputs)
    ws[port] = b(scaling, ws[port])
    out = b(reader, *ws)
    if rng.random() < 0.3:
        return b.build(out, b(box_like("exp", [src], src), b.inputs[port]))
    return b.build(out)


def linear_in_each_operand():
    """Σᵢ (c·xᵢ) yᵢ = c · Σᵢ xᵢ yᵢ, and Σᵢ (1/n Σⱼ xᵢⱼ) yᵢ = (1/n) Σᵢ (Σⱼ xᵢⱼ) yᵢ."""
    c = sympy.Symbol("c", real=True)
    xs, ys = sympy.symbols("x1:4", real=True), sympy.symbols("y1:4", real=True)
    assert sympy.expand(sum(c * x * y for x, y in zip(xs, ys)) - c * sum(x * y for x, y in zip(xs, ys))) == 0
    xx = [sympy.symbols(f"x{i}_1:3", real=True) for i in range(3)]
    mean = sum(sum(r) / 2 * y for r, y in zip(xx, ys))
    assert sympy.expand(mean - sympy.Rational(1, 2) * sum(sum(r) * y for r, y in zip(xx, ys))) == 0


def _through_claim(lhs, rhs, m):
    """The claim: :func:`reductions_ahead` decreases and no scaling is made; the FLOPs are the reader's loop nest on
    the unscaled operand (and a mean's sum) plus one scale of the reader's output, for the scaling and the reader;
    no transfer moves."""
    assert reductions_ahead(rhs) < reductions_ahead(lhs), \
        f"the reductions ahead of scalings {reductions_ahead(lhs)} became {reductions_ahead(rhs)}"
    scalings = sum(1 for n in to_netlist(rhs).nodes.values() if n.kind == "box" and n.spec.kind in SCALINGS)
    assert scalings <= sum(1 for n in to_netlist(lhs).nodes.values()
                           if n.kind == "box" and n.spec.kind in SCALINGS), "a scaling was made"
    sc, r = m.node("sc"), m.node("r")
    operands = list(r.dom)
    operands[_port(m)] = unscaled(sc)
    removed = [loop_nest_flops(Term.of(r)),
               loop_nest_flops(Term.of(sc)) if sc.spec.kind == "reduce_mean"
               else {"general": sympy.Mul(*(a.size for a in sc.cod[0].axes))}]
    added = [loop_nest_flops(Term(tuple(operands), r.cod[0]))]
    if sc.spec.kind == "reduce_mean":
        added.append(loop_nest_flops(Term.of(sc)))
    if factor(sc) != 1:
        added.append({"general": sympy.Mul(*(a.size for a in r.cod[0].axes))})
    before, after = nc.cost(lhs), nc.cost(rhs)
    for p in set(before.flops) | set(after.flops):
        want = before.flops.get(p, 0) - sum(f.get(p, 0) for f in removed) + sum(f.get(p, 0) for f in added)
        assert sympy.simplify(after.flops.get(p, 0) - want) == 0, f"{p} FLOPs: {after.flops.get(p, 0)}, not {want}"
    for lv in set(before.H) | set(after.H):
        assert sympy.simplify(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed"


scale_through_contraction = Rule(
    "scale_through_contraction",
    Pattern({"sc": kind(*SCALINGS), "r": kind(*LINEAR)}, [("sc", 0, "r", None)]),
    _through_rhs,
    conditions=(Condition("one_port", _one_scaled_port, "the scaled value must be read at one port of the reader"),
                Condition("one_format", _same_format,
                          "the scaling and the reduction reading it must compute in one format at one level")),
    obligation=Obligation(scale_through_instance, symbolic=(linear_in_each_operand,), cost=_through_claim,
                          rtol=1e-9, atol=1e-9),
    doc="""R(…, c·X, …) → c · R(…, X, …): a contraction (a sum, a mean) of a scaled operand is the scaled
    contraction; a mean's factor too: R(…, mean_A X, …) → (1/|A|) · R(…, Σ_A X, …).

    A contraction is linear in each operand: Σ_u (c·X) Π Y = c · Σ_u X Π Y.  The scaled value must be read by the
    reader alone (the pattern: no copy between them) and at one port.  Cost: the scale's FLOPs become the reader's
    output size; no transfer moves (see the module docstring on H).""")


# ---------------------------------------------------------------------- two scales in a row
def scales_instance(rng):
    """c₂ · (c₁ · x) over random axes, each scale maybe in another axis order, the product 1 at times."""
    x = random_einsum(rng, 1).dom.inside[0]
    mid = x.replace(axes=tuple(x.axes[int(i)] for i in rng.permutation(len(x.axes))))
    out = x.replace(axes=tuple(x.axes[int(i)] for i in rng.permutation(len(x.axes))))
    c1 = [0.5, 3, -2, sympy.Rational(1, 7)][int(rng.integers(4))]
    c2 = 1 / sympy.sympify(c1) if rng.random() < 0.3 else [2, sympy.Rational(1, 3), -1][int(rng.integers(3))]
    return box_like("scale", [x], mid, params={"c": c1}) >> box_like("scale", [mid], out, params={"c": c2})


def _product(m):
    return sympy.sympify(factor(m.node("s1")) * factor(m.node("s2")))


def _multiply_rhs(m):
    b, ins = m.wiring()
    x, out, c = m.node("s1").dom[0], m.node("s2").cod[0], _product(m)
    y = ins[("s1", 0)] if c == 1 and x == out else b(box_like("scale", [x], out, params={"c": c}), ins[("s1", 0)])
    return m.finish(b, {("s2", 0): y})


def _multiply_claim(lhs, rhs, m):
    """The claim: one scale (or none) where there were two; FLOPs drop by a scale's (or both); no transfer moves."""
    n = sympy.Mul(*(a.size for a in m.node("s1").cod[0].axes))
    kept = m.node("s1").dom[0] != m.node("s2").cod[0] or _product(m) != 1
    before, after = nc.cost(lhs), nc.cost(rhs)
    want = before.flops.get("general", 0) - (n if kept else 2 * n)
    assert sympy.simplify(after.flops.get("general", 0) - want) == 0, f"{after.flops}, not general {want}"
    assert len(rhs.boxes) < len(lhs.boxes)
    for lv in set(before.H) | set(after.H):
        assert sympy.simplify(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed"


def products_of_constants():
    """c₂ · (c₁ · x) = (c₁c₂) · x."""
    c1, c2, x = sympy.symbols("c1 c2 x", real=True)
    assert sympy.expand(c2 * (c1 * x) - (c1 * c2) * x) == 0


scales_multiply = Rule(
    "scales_multiply",
    Pattern({"s1": kind("scale"), "s2": kind("scale")}, [("s1", 0, "s2", 0)]),
    _multiply_rhs,
    conditions=(Condition("one_format", _same_format, "the two scales must compute in one format at one level"),),
    obligation=Obligation(scales_instance, symbolic=(products_of_constants,), cost=_multiply_claim,
                          rtol=1e-12, atol=1e-12),
    doc="""c₂ · (c₁ · X) → (c₁c₂) · X: consecutive scales are one (none where c₁c₂ = 1 and the order is kept).""")


SCALE_FORM = RuleSet((scale_through_contraction, scales_multiply))
RULES = SCALE_FORM

__all__ = ["RULES", "SCALE_FORM", "LINEAR", "scale_through_contraction", "scales_multiply", "reductions_ahead"]
