"""A row's log-sum-exp from the state of the online SoftMax beside it: ``μ + log z``, no second pass.

===========================  ==============================================================================
rule                         lhs → rhs
===========================  ==============================================================================
``logsumexp_from_softmax``   LSE(β·x) ⊗ SoftMax₁_β(x, Initialize(x)) → μ + log z  where (s, μ, δ, z) = SoftMax₁_β(…)
===========================  ==============================================================================

Unscaled SoftMax₁ (paper Table 4, errata D-08) run from the empty state ``Initialize(x) = (−∞, 0)`` over a whole
row returns ``μ = max βx`` and ``z = Σ exp(βx − μ)``, so::

    μ + log z  =  μ + log Σ exp(βx − μ)  =  log Σ exp(βx)  =  LSE(βx)

(a row of −∞ only: μ = −∞ and z = 0, so μ + log z = −∞ = LSE).  A function that returns a SoftMax's weighted sum
and the log-sum-exp of the same scores (attention's forward saving ``L`` for its backward) computes, once
prepared for FlashAttention-2 (``softmax_contraction_to_unscaled``), the row's running maximum and sum twice: in
SoftMax₁'s state, and again in the log-sum-exp's own.  The rule reads ``L`` off the SoftMax's state instead.

Side conditions: the SoftMax₁'s prior state is an ``Initialize`` (the whole row, as at function level); the
log-sum-exp reads the SoftMax's scores, or those scores scaled by its β (a ``scale`` box of constant β, removed
with the log-sum-exp where nothing else reads it), and reduces its axis (its output is the array of μ).

Cost claim: on the function (no kernels) no transfer changes; FLOPs of no class grow, and the log-sum-exp's
special FLOPs (an exp per score) are gone: per row, one ``log`` and one ``add`` in place of the reduction.

>>> import napkin_cat as nc
>>> from rewrites.softmax import softmax_contraction_to_unscaled
>>> fa2 = softmax_contraction_to_unscaled.apply(nc.library.attention(lse=True))
>>> once = logsumexp_from_softmax.apply(fa2)
>>> [b.name for b in once.boxes if b.name in ("LSE", "log", "add", "SoftMax₁", "scale")]
['SoftMax₁', 'log', 'add']
>>> bool(nc.equivalent(fa2, once))
True
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import Obligation, Rule, RuleSet
from napkin_cat.rewriting.closed import readers, source
from napkin_cat.rewriting.match import INPUT, Pattern, where
from napkin_cat.syntax.sizes import vanishes
from rewrites.softmax import INIT, softmax_contraction_to_unscaled


def _scaled_by(net, wire, beta):
    """The value ``wire`` carries seen through copies and, where β ≠ 1, through a ``scale`` by β: the value the
    log-sum-exp's β·x scales (None where it is another value)."""
    src = source(net, wire)
    if vanishes(sympy.sympify(beta) - 1):
        return src
    node = net.nodes.get(src[0]) if src[0] != INPUT else None
    if node is None or node.kind != "box" or node.spec.kind != "scale":
        return None
    c = node.box.data.param("c", None)
    if c is None or not vanishes(sympy.sympify(c) - sympy.sympify(beta)):
        return None
    return source(net, net.ins[src[0]][0])


def _softmax_of(net, nid):
    """The SoftMax₁ whose state gives log-sum-exp ``nid`` (run from Initialize over the scores the log-sum-exp
    reads, the same row axes), or None."""
    node = net.nodes[nid]
    if node.kind != "box" or node.spec.kind != "reduce_logsumexp":
        return None
    for s, sm in net.nodes.items():
        if sm.kind != "box" or sm.spec.kind != "softmax_unscaled" or sm.cod[1] != node.cod[0]:
            continue
        prior = [source(net, w) for w in net.ins[s][1:]]
        if any(p[0] == INPUT or net.nodes[p[0]].kind != "box" or net.nodes[p[0]].spec.kind != INIT for p in prior):
            continue
        if len({p[0] for p in prior}) != 1:
            continue
        if sm.dom[0] != node.dom[0]:
            continue
        if _scaled_by(net, net.ins[nid][0], sm.box.data.param("beta", 1)) == source(net, net.ins[s][0]):
            return s
    return None


def _absorbed(net, nodes) -> dict:
    """The SoftMax₁ ``s`` beside the log-sum-exp, and ``c``, the scale by β the log-sum-exp alone reads (gone with
    it: nothing else computes with it), where there is one."""
    out = {"s": _softmax_of(net, nodes["l"])}
    src = source(net, net.ins[nodes["l"]][0])
    if src[0] != INPUT and net.nodes[src[0]].kind == "box" and net.nodes[src[0]].spec.kind == "scale" \
            and [r[0] for w in net.outs[src[0]] for r in readers(net, w)] == [nodes["l"]] \
            and _scaled_by(net, net.ins[nodes["l"]][0], net.nodes[out["s"]].box.data.param("beta", 1)) is not None \
            and not vanishes(sympy.sympify(net.nodes[out["s"]].box.data.param("beta", 1)) - 1):
        out["c"] = src[0]
    return out


def _rhs(m):
    b, ins = m.wiring()
    s = m.box("s")
    outs = b(s, *(ins[("s", p)] for p in range(len(s.dom))))
    mu, z = outs[1], outs[3]
    arr = mu.array
    sig = " ".join(arr.names) or "()"
    fmt = dict(level=arr.level, dtype=arr.dtype, sizes={a.name: a.size for a in arr.axes})
    log_z = b(nc.elementwise("log", sig, **fmt), z)
    L = b(nc.elementwise("add", f"{sig}, {sig} -> {sig}", **fmt), mu, log_z)
    return m.finish(b, {**{("s", j): w for j, w in enumerate(outs)}, ("l", 0): L})


# ---------------------------------------------------------------------- the obligation
def _instance(rng):
    """Attention with its log-sum-exp (plain, causal, or a random mask-free row over either axis with a random β),
    prepared for FlashAttention-2."""
    k = int(rng.integers(3))
    if k == 0:
        f = nc.library.attention(lse=True)
    elif k == 1:
        f = nc.library.causal_attention(lse=True)
    else:
        beta = [1, 0.5, 3][int(rng.integers(3))]
        b = nc.Builder(nc.types("q x, x e"))
        X, V = b.inputs
        Y = b(nc.einsum("q x, x e -> q e"), b(nc.softmax("q x", over="x", beta=beta), X), V)
        S = X if beta == 1 else b(nc.elementwise("scale", "q x", const=beta), X)
        f = b.build(Y, b(nc.reduce("logsumexp", "q x -> q"), S))
    return softmax_contraction_to_unscaled.apply(f)


def _cost(lhs, rhs, m):
    before, after = nc.cost(lhs), nc.cost(rhs)
    for lv in set(before.H) | set(after.H):
        assert sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed on the function"
    sizes = {s: 7 for c in (before, after) for v in c.flops.values() for s in sympy.sympify(v).free_symbols}
    for c in set(before.flops) | set(after.flops):
        got = sympy.sympify(before.flops.get(c, 0) - after.flops.get(c, 0)).subs(sizes)
        assert got >= 0, f"{c} FLOPs grew by {-got} at every size 7"
    gone = sympy.sympify(before.flops.get("special", 0) - after.flops.get("special", 0)).subs(sizes)
    assert gone > 0, "the log-sum-exp's exponentials are still computed"


logsumexp_from_softmax = Rule(
    "logsumexp_from_softmax",
    Pattern({"l": where("a log-sum-exp beside a SoftMax₁ of its row", lambda net, n: _softmax_of(net, n.id)
                        is not None, nodes=("box",))},
            absorb=_absorbed),
    _rhs,
    obligation=Obligation(_instance, cost=_cost),
    doc="""LSE(β·x) ⊗ SoftMax₁_β(x, Initialize(x)) → μ + log z: a row's log-sum-exp read off the state of the
    online SoftMax over the same row.

    μ = max βx and z = Σ exp(βx − μ) from the empty state (paper Table 4), so μ + log z = log Σ exp(βx).  Cost
    claim: no transfer changes on the function; FLOPs of no class grow, the log-sum-exp's exponentials gone.""")

RULES = RuleSet((logsumexp_from_softmax,))

__all__ = ["logsumexp_from_softmax", "RULES"]
