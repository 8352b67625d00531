"""SoftMax through its saved statistic: the probabilities from the log-sum-exp of their row.

========================  ===================================================================================
rule                      lhs → rhs
========================  ===================================================================================
``softmax_to_logsumexp``  SoftMax_β(x) → exp(β·x − L)  with  L = logsumexp(β·x) over the SoftMax's axis
========================  ===================================================================================

``softmax(βx)ᵢ = exp(βxᵢ) / Σⱼ exp(βxⱼ) = exp(βxᵢ − log Σⱼ exp(βxⱼ))``.  ``L`` has one value per row (a
*statistic*: its axes are a strict subset of ``x``'s), so the recomputation rule (:mod:`rewrites.recompute`)
may recompute the probabilities from ``x``'s inputs and ``L`` in a kernel that holds only a block of a row:
what FlashAttention-2's backward does with the log-sum-exp its forward saved.

Cost claim: on the function (no kernels) no transfer changes.  (The FLOPs change: the log-sum-exp and the
exponential of the rhs against SoftMax's own count; the search weighs them.)

>>> import napkin_cat as nc
>>> sm = nc.softmax("q x", over="x")
>>> g = softmax_to_logsumexp.apply(sm)
>>> [b.name for b in g.boxes if getattr(b, "data", None) is not None]
['LSE', 'sub', 'exp']
>>> bool(nc.equivalent(sm, g))
True
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import Pattern, kind


def _rhs(m):
    box = m.box("s")
    (arr,) = box.dom.inside
    rows = [a for a in arr.axes if a.name in box.data.weave_names]
    sig = " ".join(arr.names) or "()"   # () is an array without axes
    row_sig = " ".join(a.name for a in rows) or "()"
    sizes = {a.name: a.size for a in arr.axes}
    beta = box.data.param("beta", 1)
    b, ins = m.wiring()
    x = ins[("s", 0)]
    if beta != 1:
        x = b(nc.elementwise("scale", sig, const=beta, level=arr.level, sizes=sizes), x)
    lse = b(nc.reduce("logsumexp", f"{sig} -> {row_sig}", level=arr.level, sizes=sizes), x)
    out = " ".join(box.cod.inside[0].names) or "()"   # a weave may put an axis elsewhere in the output
    y = b(nc.elementwise("exp", f"{sig} -> {out}", level=arr.level, sizes=sizes),
          b(nc.elementwise("sub", f"{sig}, {row_sig} -> {sig}", level=arr.level, sizes=sizes), x, lse))
    return m.finish(b, {("s", 0): y})


def _instance(rng):
    """A SoftMax over either axis, after a product or not, or attention's (β = 1/√d)."""
    k = int(rng.integers(3))
    if k == 2:
        return nc.library.attention()
    sm = nc.softmax("q x", over=str(rng.choice(["x", "q"])))
    return nc.einsum("q d, x d -> q x") >> sm if k == 1 else sm


def _cost(lhs, rhs, m):
    before, after = nc.cost(lhs), nc.cost(rhs)
    for lv in set(before.H) | set(after.H):
        assert sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed on the function"


softmax_to_logsumexp = Rule(
    "softmax_to_logsumexp",
    Pattern({"s": kind("softmax")}),
    _rhs,
    obligation=Obligation(_instance, cost=_cost),
    doc="""SoftMax_β(x) → exp(β·x − logsumexp(β·x)): the probabilities from their row's log-sum-exp.

    exp(βxᵢ)/Σⱼexp(βxⱼ) = exp(βxᵢ − log Σⱼ exp(βxⱼ)).  The log-sum-exp is a statistic (one value per row) that
    a recomputation reads instead of the probabilities.  Cost claim: no transfer changes on the function.""",
    oriented=False,
)

RULES = RuleSet((softmax_to_logsumexp,))

__all__ = ["softmax_to_logsumexp", "RULES"]
