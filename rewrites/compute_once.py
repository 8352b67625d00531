"""A kernel computes each value once: the copies a fusion or a join brought into one kernel merged inside it.

=======================  ===========================================================================
rule                     lhs → rhs
=======================  ===========================================================================
``kernel_common_value``  Kernel(F) → Kernel(F′), F′ = F with each value computed once (``common_value``)
=======================  ===========================================================================

A kernel is made from operations that were apart in the function: each reader of a recomputed value (a
consumer's own copy, :mod:`rewrites.recompute`; a closed value such as a mask of positions, computed by each port
that reads it) brings its own copy of the value's operations, and kernel fusion and sibling fusion
(:mod:`rewrites.siblings`) put those copies side by side in one kernel.  Attention's backward is the case in point:
``dK`` reads ``dS = P ∘ (dP − D)`` and ``dV`` reads ``P``; each recomputes ``P = exp(S − L)`` from ``S = Q Kᵀ``,
and in the joined kernel per block of keys ``S``, the mask and ``P`` were computed twice per trip.

Inside the kernel the copies are two boxes reading the same values, and a box is a deterministic function, so
``f ; copy = copy ; (f ⊗ f)`` (paper §2, a markov category): the kernel's function is rewritten by
``common_value`` (one value computed once) and ``copy_discard`` (the reads it leaves discarded) to a fixpoint.
The kernel loads and saves what it did; it computes fewer operations.

Cost claim: H unchanged at every level (the same ports loaded, the same outputs saved); FLOPs of every class not
more, and fewer in all, by exactly the FLOPs of the function's operations that the rewrite removed
(``cost(F) − cost(F′)`` counted on the function inside, times the kernel's trips: one here, as the rule takes an
unpartitioned kernel); one box fewer inside per merged twin.

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting import rewrite
>>> from rewrites.partition import kernel_formation, kernel_fusion
>>> from rewrites.siblings import sibling_fusion
>>> from rewrites.sharing import shared_load
>>> b = nc.Builder(nc.types("q d, x d, q x"))
>>> Q, K, G = b.inputs
>>> P1, P2 = (b(nc.elementwise("exp", "q x"), b(nc.einsum("q d, x d -> q x"), Q, K)) for _ in range(2))
>>> two = b.build(b(nc.einsum("q x, x d -> q d"), b(nc.elementwise("mul", "q x, q x -> q x"), G, P1), K),
...               b(nc.einsum("q x, q d -> x d"), P2, Q))
>>> joined = shared_load.apply(rewrite(two, [kernel_formation, kernel_fusion, sibling_fusion]).diagram)
>>> once = kernel_common_value.apply(joined)
>>> [boxes(strip(next(k for k in d.boxes if isinstance(k, nc.Kernel)))) for d in (joined, once)]
[7, 5]
>>> str(nc.cost(joined).H[1]) == str(nc.cost(once).H[1]), bool(nc.equivalent(joined, once))
(True, True)
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.library.masks import causal_mask
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet, rewrite, to_netlist
from napkin_cat.rewriting.match import Pattern
from napkin_cat.syntax.indices import where
from rewrites.basic import boxes, common_value, copy_discard
from rewrites.kernel_nodes import PLAIN_KERNEL
from rewrites.kernels import kernel_formation, kernel_fusion, strip
from rewrites.sharing import shared_load
from rewrites.siblings import sibling_fusion

#: the rules a kernel's function is rewritten by: a value computed twice computed once, the discards it leaves gone
ONCE = RuleSet((common_value, copy_discard))


def computed_once(function) -> nc.Diagram:
    """``function`` with each of its values computed once (``common_value`` and ``copy_discard`` to a fixpoint:
    each step removes a box or a copy, so at most as many steps as the netlist has nodes and wires)."""
    net = to_netlist(function)
    return rewrite(function, ONCE, "fixpoint", max_steps=len(net.nodes) + len(net.wires) + 1).diagram


def _twice(m):
    if common_value.matches(to_netlist(strip(m.box("k")))):
        return True
    return "the kernel computes each of its values once already"


def _once_rhs(m):
    k = m.box("k")
    once = nc.kernel(computed_once(strip(k)), k.params["level"])
    b, ins = m.wiring()
    got = b(once, *(ins[("k", p)] for p in range(len(k.dom))))
    got = got if isinstance(got, tuple) else (got,)
    return m.finish(b, {("k", j): w for j, w in enumerate(got)})


# ---------------------------------------------------------------------- the obligation
def operand_gradients_apart():
    """Both operands' gradients of ``S = Q Kᵀ`` through a map, each computing ``S`` and ``exp S`` itself (two
    consumers' own copies): ``G ∘ exp(S)`` times ``K``, and ``exp(S)ᵀ`` times ``Q``."""
    b = nc.Builder(nc.types("q d, x d, q x"))
    Q, K, G = b.inputs
    P1, P2 = (b(nc.elementwise("exp", "q x"), b(nc.einsum("q d, x d -> q x"), Q, K)) for _ in range(2))
    return b.build(b(nc.einsum("q x, x d -> q d"), b(nc.elementwise("mul", "q x, q x -> q x"), G, P1), K),
                   b(nc.einsum("q x, q d -> x d"), P2, Q))


def _masked_twice():
    """A mask of positions computed by each of two readers (closed values, one copy per port), and a map."""
    b = nc.Builder(nc.types("q x, q x"))
    X, Y = b.inputs
    outs = []
    for Z in (X, Y):
        keep = b(causal_mask())
        outs.append(b(where("q x, q x -> q x"), keep, b(nc.elementwise("tanh", "q x"), Z)))
    return b.build(b(nc.elementwise("add", "q x, q x -> q x"), *outs))


def _rows_twice(rng):
    """A map of one value computed again by a second reader, and two decoys: scales of one value by two constants
    (not one value)."""
    b = nc.Builder(nc.types("a b, a b"))
    X, Y = b.inputs
    f = str(rng.choice(["exp", "tanh", "neg"]))
    first = b(nc.elementwise(f, "a b"), X)
    other = b(nc.elementwise("mul", "a b, a b -> a b"), first, Y)
    second = b(nc.elementwise(f, "a b"), X)
    c = float(rng.choice([0.5, 2.0, -3.0]))
    twice, thrice = (b(nc.elementwise("scale", "a b", const=k), X) for k in (c, c + 1))
    decoys = b(nc.elementwise("sub", "a b, a b -> a b"), twice, thrice)
    return b.build(b(nc.reduce("sum", "a b -> a"), second), b(nc.elementwise("add", "a b, a b -> a b"), other, decoys))


def _instance(rng):
    """One unpartitioned kernel (formed, fused and joined, each value loaded once) that computes a value twice."""
    builds = [operand_gradients_apart, _masked_twice, lambda: _rows_twice(rng)]
    f = builds[int(rng.integers(len(builds)))]()
    level = int(rng.integers(1, 3))
    made = rewrite(f, [kernel_formation.using(level=level), kernel_fusion, sibling_fusion]).diagram
    return rewrite(made, [shared_load, copy_discard]).diagram


def _cost_claim(lhs, rhs, m):
    before, after = nc.cost(lhs), nc.cost(rhs)
    for lv in set(before.H) | set(after.H):
        got = sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0))
        assert got == 0, f"H[{lv}] changed by {got}: the kernel loads and saves what it did"
    inside, once = strip(m.box("k")), computed_once(strip(m.box("k")))
    assert boxes(once) < boxes(inside), "no box was merged"
    dropped = {c: sympy.expand(nc.cost(inside).flops.get(c, 0) - nc.cost(once).flops.get(c, 0))
               for c in set(before.flops) | set(after.flops)}
    for c, want in dropped.items():
        got = sympy.expand(before.flops.get(c, 0) - after.flops.get(c, 0))
        assert sympy.expand(got - want) == 0, f"{c} FLOPs dropped by {got}, expected {want}"
        assert not (want.is_number and want < 0), f"{c} FLOPs grew by {-want}"
    assert any(sympy.expand(w) != 0 for w in dropped.values()), "no FLOPs saved"


kernel_common_value = Rule(
    "kernel_common_value",
    Pattern({"k": PLAIN_KERNEL}),
    _once_rhs,
    conditions=(Condition("computed_twice", _twice, "the kernel must compute some value twice (two boxes of one "
                                                    "kind and parameters reading the same values)", local=True),),
    obligation=Obligation(_instance, cost=_cost_claim, rtol=0, atol=0),
    local=True,     # the kernel's function computed once, wired as the hole
    doc="""Kernel(F) → Kernel(F′), F′ = F with each value computed once: two boxes inside one kernel computing one
    value (of one kind and parameters, reading the same values) become one box whose value is copied.

    The copy law (paper §2: boxes are deterministic, ``f ; copy = copy ; (f ⊗ f)``) inside the kernel: its
    function is rewritten by ``common_value`` and ``copy_discard`` to a fixpoint.  Exact in floating point (the
    one box computes what each computed).  Cost claim: H unchanged at every level, FLOPs down by those of the
    merged boxes.""")

RULES = RuleSet((kernel_common_value,))

__all__ = ["kernel_common_value", "computed_once", "operand_gradients_apart", "RULES"]
