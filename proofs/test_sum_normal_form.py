"""Obligations of the sums' normal form (``rewrites.sum_normal_form``): a sum of a contraction summed inside it,
an operand's own axes summed first, a contraction merged into each reader compute what they replace, on random
contractions (random axes, operand counts, sizes, formats) and random variants of them; each cost claim (the
FLOPs from the axis sizes, no transfer moved; the sum merged shrinks the netlist) holds; a mutant of each rule
fails its proof; the side conditions refuse what is not the pattern."""
from dataclasses import replace

import pytest

import napkin_cat as nc
from napkin_cat.rewriting import ObligationError
from rewrites.normal_form_boxes import box_like
from rewrites.sum_normal_form import (SUM_FORM, contraction_into_readers, own_axes_first, own_sums_first,
                                      sum_of_contraction)
from rewrites.sum_product import Term

proves = pytest.mark.proves
RULES = list(SUM_FORM) + [contraction_into_readers]


@pytest.mark.parametrize("rule", [pytest.param(r, id=r.name, marks=proves(r.name)) for r in RULES])
def test_each_rule_is_sound(rule):
    proof = rule.obligation.discharge(rule, trials=16, variants=8)
    assert proof.rewrites >= 16 and proof.varied >= 4 and proof.cost_checked
    assert proof.max_error < 1e-9
    assert proof.symbolic == ("sum_product_associativity",)


# ---------------------------------------------------------------------- mutants fail their proofs
def _max_not_sum_first(m):
    """The operands' own axes maxed, not summed."""
    b, ins = m.wiring()
    term = Term.of(m.node("c"))
    sums, outer = own_sums_first(term)
    wires = [ins[("c", j)] for j in range(len(term.operands))]
    for port, s in sums.items():
        wires[port] = b(box_like("reduce_max", list(s.operands), s.output), wires[port])
    return m.finish(b, {("c", 0): b(outer.box(), *wires)})


def _sum_and_mean_swapped(m):
    """A sum of the contraction's output averaged; a mean of it summed inside, the count forgotten."""
    b, ins = m.wiring()
    c, s = Term.of(m.node("c")), m.node("s")
    wires = [ins[("c", j)] for j in range(len(c.operands))]
    if s.spec.kind == "reduce_mean":
        return m.finish(b, {("s", 0): b(Term(c.operands, s.cod[0]).box(), *wires)})
    return m.finish(b, {("s", 0): b(box_like("reduce_mean", [c.output], s.cod[0]), b(c.box(), *wires))})


def _sum_readers_take_the_max(m):
    """The contraction readers merged rightly, the sums reading the contraction as maxima."""
    b, ins = m.wiring()
    c1 = Term.of(m.node("c1"))
    a = [ins[("c1", j)] for j in range(len(c1.operands))]
    y = b(c1.box(), *a)
    outs = {}
    for var, port_out in m.outputs:
        node = m.node(var)
        if var == "k":
            outs[(var, port_out)] = y
        elif node.spec.kind == "reduce_sum":
            outs[(var, port_out)] = b(box_like("reduce_max", [c1.output], node.cod[0]), y)
        else:
            port = next(j for j, src in enumerate(m.net.producers(m.nodes[var])) if src[0] == m.nodes["k"])
            rest = [ins[(var, j)] for j in range(len(node.dom)) if j != port]
            outs[(var, port_out)] = b(Term.of(node).merge(port, c1).box(), *rest[:port], *a, *rest[port:])
    return m.finish(b, outs)


@pytest.mark.parametrize("rule, wrong", [
    (own_axes_first, _max_not_sum_first),            # max_own X for Σ_own X
    (sum_of_contraction, _sum_and_mean_swapped),     # the count divided out, or forgotten
    (contraction_into_readers, _sum_readers_take_the_max),   # Σ read as max
], ids=lambda v: getattr(v, "name", None) or v.__name__)
def test_a_mutant_of_each_rule_fails_its_proof(rule, wrong):
    with pytest.raises(ObligationError, match="is unsound"):
        replace(rule, rhs=wrong).obligation.discharge(replace(rule, rhs=wrong), trials=16)


# ---------------------------------------------------------------------- what the conditions refuse
def test_no_operand_with_axes_of_its_own_is_left_as_it_is():
    d = nc.einsum("q d, x d -> q x")
    (cand,) = own_axes_first.candidates(d)
    with pytest.raises(nc.RewriteError, match="own_axes"):
        own_axes_first.apply(d, cand)


def test_a_reader_naming_a_summed_axis_is_refused():
    b = nc.Builder(nc.types("q d, x d, x d"))
    Q, K, V = b.inputs
    S = b(nc.einsum("q d, x d -> q x"), Q, K)
    d = b.build(b(nc.einsum("q x, x d -> q d"), S, V), b(nc.reduce("sum", "q x -> q"), S))
    (cand,) = contraction_into_readers.candidates(d)
    with pytest.raises(nc.RewriteError, match="no_capture"):
        contraction_into_readers.apply(d, cand)


def test_a_sum_of_a_shared_contraction_is_not_merged_by_the_normal_form():
    """Σ_x S with S read elsewhere too: merging would recompute S (the search prices that, the normal form not)."""
    b = nc.Builder(nc.types("q d, x d"))
    Q, K = b.inputs
    S = b(nc.einsum("q d, x d -> q x"), Q, K)
    d = b.build(b(nc.reduce("sum", "q x -> q"), S), b(nc.elementwise("exp", "q x"), S))
    assert sum_of_contraction.matches(d) == []
    assert len(contraction_into_readers.matches(d)) == 1


def test_a_reader_of_another_readers_result_is_not_offered():
    """T = A·A read by R₀ = T·A and by R₁ = R₀·T: R₁'s operand R₀ is made inside the match, so merging T into both
    would leave R₁ without its input (found by the rules fuzz, program 20242311: the rule offered it and raised)."""
    b = nc.Builder(nc.types("i"))
    (a,) = b.inputs
    t = b(nc.einsum("i, i -> i"), a, a)
    r0 = b(nc.einsum("i, i -> i"), t, a)
    d = b.build(b(nc.einsum("i, i -> ()"), r0, t))
    offered = contraction_into_readers.matches(d)
    for m in offered:
        assert nc.equivalent(d, contraction_into_readers.apply(d, m), sizes={"i": 3}, trials=1)
