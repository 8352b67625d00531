"""Sibling fusion: two independent kernels that read one value become one kernel, which then loads it once.

==================  ================================================================================
rule                lhs → rhs
==================  ================================================================================
``sibling_fusion``  Kernel(f) ⊗ Kernel(g) → Kernel(f ⊗ g)   (no path between them; they read one value)
==================  ================================================================================

``kernel_fusion`` joins a kernel with one it feeds (``Kernel(f) ; Kernel(g)``); two kernels with no path
between them at all (neither reads what the other computes, directly or through other kernels) are the
monoidal product of the two, and in a monoidal category ``Kernel(f) ⊗ Kernel(g) = Kernel(f ⊗ g)``: a kernel
loads its inputs, runs its function and saves its outputs, and doing both one after the other inside one
kernel computes the same (the interchange law, paper §2: parallel composition needs no order).  The two
must run at one level, and the rule asks that they read one value (a copy node feeds both): joining kernels
that share nothing moves as much and needs more memory, so it never pays.

The gain is the next step's: the joined kernel reads the shared value in two ports, and ``shared_load``
(:mod:`rewrites.sharing`) loads it once.  A backward pass is the case in point: the gradients of a
contraction's two operands (``dK`` and ``dV`` of attention) are independent, both stream the same rows of
``Q`` and ``dO``; in one kernel per block of keys (FlashAttention-2's backward) those rows are read once.

Cost claim: the join alone moves exactly what the two kernels moved (each port is still loaded, each output
saved) and computes the same FLOPs; after ``shared_load`` on the joined kernel, H at its level drops by
exactly the sizes of the ports beyond the first that read one value (the values both kernels read, and any
value one of them read twice).

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting import rewrite
>>> from rewrites.partition import kernel_formation
>>> from rewrites.sharing import shared_load
>>> b = nc.Builder(nc.types("n e, e f, e f"))
>>> X, A, B = b.inputs
>>> two = b.build(b(nc.einsum("n e, e f -> n f"), X, A), b(nc.einsum("n e, e f -> n f"), X, B))  # x ↦ (xA, xB)
>>> kernels = rewrite(two, [kernel_formation]).diagram
>>> one = sibling_fusion.apply(kernels)
>>> once = shared_load.apply(one)
>>> [sum(isinstance(b, nc.Kernel) for b in d.boxes) for d in (kernels, one, once)]
[2, 1, 1]
>>> [str(nc.cost(d).H[1]) for d in (kernels, one, once)]
['2*e*f + 2*e*n + 2*f*n', '2*e*f + 2*e*n + 2*f*n', '2*e*f + e*n + 2*f*n']
>>> bool(nc.equivalent(kernels, once))
True
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.cost.iocost import numel
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet, rewrite
from napkin_cat.rewriting.match import INPUT, Pattern
from rewrites.kernel_nodes import PLAIN_KERNEL
from rewrites.kernels import kernel_formation, kernel_fusion, strip
from rewrites.sharing import shared_load, shared_ports


def read_values(net, kernel) -> dict:
    """``{copy node: [ports]}``: the kernel's ports that read a copied value (a value someone else reads too)."""
    out = {}
    for p, (node, _) in enumerate(net.producers(kernel)):
        if node != INPUT and net.nodes[node].kind == "copy":
            out.setdefault(node, []).append(p)
    return out


def _in_order(m):
    """One match per pair: the first kernel of the pair (in the netlist's order) is ``k1``."""
    pos = m.net.position
    return {} if pos[m.nodes["k1"]] < pos[m.nodes["k2"]] else None


def _same_level(m):
    a, b = m.box("k1").params["level"], m.box("k2").params["level"]
    return a == b or f"the kernels run at levels {a} and {b}"


def _share_a_value(m):
    common = read_values(m.net, m.nodes["k1"]).keys() & read_values(m.net, m.nodes["k2"]).keys()
    return bool(common) or "no value is read by both kernels (joining them would load as much)"


def _joined_rhs(m):
    k1, k2 = m.box("k1"), m.box("k2")
    b, wires = m.wiring()
    outs = {}
    for var, k in (("k1", k1), ("k2", k2)):
        got = b(strip(k), *(wires[(var, p)] for p in range(len(k.dom))))
        got = got if isinstance(got, tuple) else (got,)
        outs.update({(var, p): w for p, w in enumerate(got)})
    return nc.kernel(m.finish(b, outs), k1.params["level"])


# ---------------------------------------------------------------------- the obligation
def two_products():
    """``x ↦ (x·A, x·B)``: two products of one input."""
    b = nc.Builder(nc.types("n e, e f, e g"))
    X, A, B = b.inputs
    return b.build(b(nc.einsum("n e, e f -> n f"), X, A), b(nc.einsum("n e, e g -> n g"), X, B))


def _operand_gradients():
    """The gradients of both operands of ``S = Q Kᵀ`` through a map: ``dQ = (dS∘f′(S)) K`` and
    ``dK = (dS∘f′(S))ᵀ Q`` read ``Q``, ``K`` and ``dS`` each (independent once each recomputes ``S``)."""
    b = nc.Builder(nc.types("q d, x d, q x"))
    Q, K, dS = b.inputs
    outs = []
    for spec in ("q x, x d -> q d", "q x, q d -> x d"):
        S = b(nc.einsum("q d, x d -> q x"), Q, K)
        G = b(nc.elementwise("mul", "q x, q x -> q x"), dS, b(nc.elementwise("exp", "q x"), S))
        outs.append(b(nc.einsum(spec), G, K if spec.startswith("q x, x") else Q))
    return b.build(*outs)


def _three_maps():
    """A row statistic and two maps of one input: three kernels, each two independent."""
    b = nc.Builder(nc.types("a b, a b"))
    X, Y = b.inputs
    return b.build(b(nc.reduce("sum", "a b -> a"), X), b(nc.elementwise("exp", "a b"), X),
                   b(nc.elementwise("mul", "a b, a b -> a b"), X, Y))


def _instance(rng):
    """Kernels (formed, fused where one feeds another, each loading a value once) some two of which are
    independent and read one value; at level 1 or 2."""
    builds = [two_products, _operand_gradients, _three_maps]
    f = builds[int(rng.integers(len(builds)))]()
    level = int(rng.integers(1, 3))
    rules = [kernel_formation.using(level=level)] + ([kernel_fusion] if rng.integers(2) else [])
    return rewrite(f, rules).diagram


def _extra_reads(net, kernels) -> list:
    """The arrays of the ports beyond the first that read one value, over the ports of ``kernels`` together."""
    by = {}
    for k in kernels:
        for node, ports in read_values(net, k).items():
            by.setdefault(node, []).extend((k, p) for p in ports)
    return [net.nodes[k].box.dom.inside[p] for reads in by.values() for k, p in reads[1:]]


def _cost_claim(lhs, rhs, m):
    before, after = nc.cost(lhs), nc.cost(rhs)
    for lv in set(before.H) | set(after.H):
        got = sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0))
        assert got == 0, f"the join alone changed H[{lv}] by {got}"
    assert before.flops == after.flops, f"FLOPs changed: {before.flops} → {after.flops}"
    level = m.box("k1").params["level"]
    dropped = sum((numel(a) for a in _extra_reads(m.net, (m.nodes["k1"], m.nodes["k2"]))), sympy.Integer(0))
    net = m.fill(_joined_rhs(m))                        # the join again, as a netlist: its new node is the kernel
    (joined,) = [n for n in net.nodes if n not in m.net.nodes and net.nodes[n].kind == "region"]
    found = [s for s in shared_load.matches(net) if s.nodes["k"] == joined]
    assert found and shared_ports(net, joined), "the joined kernel reads no value twice"
    shared = nc.cost(shared_load.fill(found[0]).diagram)
    for lv in range(1, level + 1):
        got = sympy.expand(after.H.get(lv, 0) - shared.H.get(lv, 0))
        assert sympy.expand(got - dropped) == 0, f"sharing the joined kernel's loads drops H[{lv}] by {got}, " \
                                                 f"expected {dropped} (one load per extra read)"


sibling_fusion = Rule(
    "sibling_fusion",
    Pattern({"k1": PLAIN_KERNEL, "k2": PLAIN_KERNEL}, bind=_in_order),
    _joined_rhs,
    conditions=(Condition("same_level", _same_level, "both kernels must run at one level"),
                Condition("shared_value", _share_a_value, "the kernels must read one value (one copy feeds both)")),
    obligation=Obligation(_instance, cost=_cost_claim),
    doc="""Kernel(f) ⊗ Kernel(g) → Kernel(f ⊗ g): two kernels with no path between them, at one level, that read
    one value, become one kernel.

    The interchange law of a monoidal category (paper §2): independent kernels are a tensor product, and a
    kernel of a tensor product loads, computes and saves what the two did.  Cost claim: H and FLOPs unchanged
    by the join; after ``shared_load`` on the joined kernel, H drops by exactly the extra reads' sizes.""")

RULES = RuleSet((sibling_fusion,))

__all__ = ["sibling_fusion", "read_values", "RULES"]
