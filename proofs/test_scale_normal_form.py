"""Obligations of the scales' normal form (``rewrites.scale_normal_form``): a scale (or a mean's 1/|A|) taken
after the contraction, sum or mean that reads it, and two scales multiplied into one, compute what they replace on
random contractions (random axes, operand counts, sizes, formats, axis orders) and random weaved variants of
them; each cost claim holds (the factor's reductions ahead decrease, the FLOPs from the axis sizes, no transfer
moved); a mutant of each rule fails its proof; the side conditions refuse what is not the pattern; on random
chains the normal form ends with no scaling read by a reduction, within the search's bound."""
from dataclasses import replace

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.rewriting import ObligationError, rewrite, to_netlist
from rewrites import RULEBOOK
from rewrites.contraction_instances import chain_instance
from rewrites.normal_form import box_like
from rewrites.scale_normal_form import LINEAR, SCALE_FORM, reductions_ahead, scale_through_contraction, scales_multiply

proves = pytest.mark.proves


@pytest.mark.parametrize("rule", [pytest.param(r, id=r.name, marks=proves(r.name)) for r in SCALE_FORM])
def test_each_rule_is_sound(rule):
    proof = rule.obligation.discharge(rule, trials=16, variants=8)
    assert proof.rewrites >= 16 and proof.varied >= 4 and proof.cost_checked
    assert proof.max_error < 1e-9
    assert len(proof.symbolic) == 1


# ---------------------------------------------------------------------- mutants fail their proofs
def _factor_forgotten(m):
    """The reader on the unscaled operand, the factor dropped (a mean taken as its sum)."""
    b, ins = m.wiring()
    sc, r = m.node("sc"), m.node("r")
    port = next(p for p, src in enumerate(m.net.producers(m.nodes["r"])) if src[0] == m.nodes["sc"])
    x = ins[("sc", 0)]
    if sc.spec.kind == "reduce_mean":
        x = b(box_like("reduce_sum", [sc.dom[0]], sc.cod[0]), x)
        operands = list(r.dom)
    else:
        operands = list(r.dom)
        operands[port] = sc.dom[0]
    wires = [ins[("r", j)] if j != port else x for j in range(len(r.dom))]
    return m.finish(b, {("r", 0): b(box_like(r.spec.kind, operands, r.cod[0]), *wires)})


def _constants_added(m):
    """c₁ + c₂ for c₁ · c₂."""
    b, ins = m.wiring()
    s1, s2 = m.node("s1"), m.node("s2")
    c = sympy.sympify(s1.spec.param("c")) + sympy.sympify(s2.spec.param("c"))
    return m.finish(b, {("s2", 0): b(box_like("scale", [s1.dom[0]], s2.cod[0], params={"c": c}), ins[("s1", 0)])})


@pytest.mark.parametrize("rule, wrong", [
    (scale_through_contraction, _factor_forgotten),     # Σ (c·x) y read as Σ x y
    (scales_multiply, _constants_added),                # c₂(c₁x) read as (c₁ + c₂)x
], ids=lambda v: getattr(v, "name", None) or v.__name__)
def test_a_mutant_of_each_rule_fails_its_proof(rule, wrong):
    with pytest.raises(ObligationError, match="is unsound"):
        replace(rule, rhs=wrong).obligation.discharge(replace(rule, rhs=wrong), trials=16)


# ---------------------------------------------------------------------- what the conditions refuse
def test_a_scaled_value_read_twice_by_one_contraction_is_left_as_it_is():
    """(c·x)·(c·x) is c²·(x·x): taking c out once would be wrong, so the rule refuses it."""
    b = nc.Builder(nc.types("n"))
    (x,) = b.inputs
    s = b(nc.elementwise("scale", "n", const=3), x)
    d = b.build(b(nc.einsum("n, n -> ()"), s, s))
    for cand in scale_through_contraction.candidates(d):
        with pytest.raises(nc.RewriteError, match="one_port"):
            scale_through_contraction.apply(d, cand)


def test_a_scale_read_elsewhere_too_is_not_moved():
    """c·x read by the contraction and by an exp: the scale is computed anyway, nothing to move."""
    b = nc.Builder(nc.types("q d, x d"))
    Q, K = b.inputs
    s = b(nc.elementwise("scale", "q d", const=2), Q)
    d = b.build(b(nc.einsum("q d, x d -> q x"), s, K), b(nc.elementwise("exp", "q d"), s))
    assert scale_through_contraction.matches(d) == []


# ---------------------------------------------------------------------- the normal form on random chains
def _scalings_read_by_reductions(diagram) -> int:
    net = to_netlist(diagram)
    return sum(1 for nid, n in net.nodes.items() if n.kind == "box" and n.spec.kind in ("scale", "reduce_mean")
               for e in net.consumers(nid) if e[0] in net.nodes and net.nodes[e[0]].kind == "box"
               and net.nodes[e[0]].spec.kind in LINEAR)


def _scaled(arr, c):
    return box_like("scale", [arr], arr, params={"c": c})


@pytest.mark.parametrize("seed", range(6))
def test_scales_written_anywhere_in_a_chain_end_after_it(seed):
    """A random chain C₂(…, C₁(…), …) with scales on an input, the intermediate and twice on the output: the
    normal form (every ``normalise`` rule) leaves no scaling read by a reduction, at most one scale, the product
    of the constants (the maths), computes what the chain computes, and ends within the search's step bound."""
    rng = np.random.default_rng(seed)
    c1, c2 = [bx for bx in chain_instance(rng, wrapped=False).boxes if bx.data is not None]
    consts = [2, sympy.Rational(1, 3), -5, sympy.Rational(1, 7)]
    b = nc.Builder(nc.Ty(*c1.dom.inside, *(a for a in c2.dom.inside if a != c1.cod.inside[0])))
    ins = list(b.inputs)
    first = [b(_scaled(w.array, consts[0]), w) if j == 0 else w for j, w in enumerate(ins[:len(c1.dom.inside)])]
    t = b(_scaled(c1.cod.inside[0], consts[1]), b(c1, *first))
    at = list(c2.dom.inside).index(c1.cod.inside[0])
    rest = ins[len(c1.dom.inside):]
    y = b(_scaled(c2.cod.inside[0], consts[2]), b(c2, *rest[:at], t, *rest[at:]))
    f = b.build(b(_scaled(c2.cod.inside[0], consts[3]), y))
    rules = [r for r in RULEBOOK.rules if r.name in RULEBOOK.roles["normalise"] + RULEBOOK.roles["simplify"]]
    net = to_netlist(f)
    bound = (len(net.nodes) + len(net.wires) + 1) * (sum(len(w.array.axes) for w in net.wires.values()) + 1)
    r = rewrite(f, rules, "fixpoint", max_steps=bound)
    assert len(r.trace.steps) < bound
    assert _scalings_read_by_reductions(r.diagram) == 0 and reductions_ahead(r.diagram) == 0
    scales = [bx for bx in r.diagram.boxes if bx.data is not None and bx.data.kind == "scale"]
    assert len(scales) == 1 and sympy.sympify(scales[0].data.param("c")) == sympy.Mul(*consts)
    assert nc.equivalent(f, r.diagram, trials=2)
