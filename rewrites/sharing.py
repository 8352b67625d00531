"""Shared loads: a kernel that reads one value in several places loads it once.

===============  ====================================================================================
rule             lhs → rhs
===============  ====================================================================================
``shared_load``  copy(x) ; Kernel(Load x ; Load x ; F)  →  Kernel(Load x ; copy ; F)   (one Load of x)
===============  ====================================================================================

Kernel formation loads each input port (paper §2.2), so a kernel built by fusing kernels that read
one value (SwiGLU's ``silu(X W₁) · (X W₃)``, LayerNorm's mean and centring of ``X``) loads it once per
port.  A Load is a function of its argument, and a copy can be pushed through any function
(``f ; copy = copy ; (f ⊗ f)``, the copy law of a markov category, paper §2), so loading once and
copying on the chip computes the same.

In the netlist the copies of a value are one n-ary copy node (:mod:`napkin_cat.rewriting.netlist`), of
which the kernel may be only some of the readers, with paths between (``x → Kernel(x) → K`` and
``x → K``).  So the rule matches the kernel alone: its boundary keeps one port per read, the right-hand
side reads the first port of each shared value and discards the others (``copy_discard`` then drops those
copies).  Side condition: two of the kernel's ports are fed by one copy node (they read one value).

Cost claim: the transfers at the kernel's level, and at each level its loads pass through, drop by exactly
the size of each discarded port's array (and its bytes); FLOPs and every other level are unchanged.

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting import rewrite
>>> from rewrites.partition import kernel_formation
>>> sq = nc.elementwise("mul", "n d, n d -> n d")
>>> b = nc.Builder(nc.types("n d"))
>>> (X,) = b.inputs
>>> twice = rewrite(b.build(b(sq, X, X)), [kernel_formation]).diagram   # Kernel(Load X ; Load X ; X·X)
>>> once = shared_load.apply(twice)
>>> [str(h) for h in (nc.cost(twice).H[1], nc.cost(once).H[1])]
['3*d*n', '2*d*n']
>>> bool(nc.equivalent(twice, once))
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


def shared_ports(net, kernel) -> list:
    """``[(first port, (other ports …))]``: the kernel's ports that read one value (one copy node feeds them)."""
    by_copy = {}
    for p, (node, _) in enumerate(net.producers(kernel)):
        if node != INPUT and net.nodes[node].kind == "copy":
            by_copy.setdefault(node, []).append(p)
    return [(ports[0], tuple(ports[1:])) for ports in by_copy.values() if len(ports) > 1]


def _shares(m):
    if shared_ports(m.net, m.nodes["k"]):
        return True
    return f"each of its {len(m.node('k').dom)} inputs reads a different value"


def _once_rhs(m):
    k = m.box("k")
    n = len(k.dom)
    first = {p: keep for keep, others in shared_ports(m.net, m.nodes["k"]) for p in others}
    kept = [p for p in range(n) if p not in first]
    function = strip(k)
    inner = nc.Builder(nc.Ty(*(function.dom.inside[p] for p in kept)))
    wire = dict(zip(kept, inner.inputs))
    outs = inner(function, *(wire[first.get(p, p)] for p in range(n)))
    outs = outs if isinstance(outs, tuple) else (outs,)
    once = nc.kernel(inner.build(*outs), k.params["level"])
    b, ins = m.wiring()
    got = b(once, *(ins[("k", p)] for p in kept))   # the other reads are discarded
    got = got if isinstance(got, tuple) else (got,)
    return m.finish(b, {("k", j): w for j, w in enumerate(got)})


# ---------------------------------------------------------------------- the obligation
def swiglu_up():
    """SwiGLU's up projection, silu(X W₁) · (X W₃): X read by two contractions (the shared-load instance)."""
    b = nc.Builder(nc.types("n e, e f, e f"))
    X, W1, W3 = b.inputs
    gate = b(nc.elementwise("silu", "n f"), b(nc.einsum("n e, e f -> n f"), X, W1))
    return b.build(b(nc.elementwise("mul", "n f, n f -> n f"), gate, b(nc.einsum("n e, e f -> n f"), X, W3)))


def _square():
    b = nc.Builder(nc.types("n d"))
    (X,) = b.inputs
    return b.build(b(nc.elementwise("mul", "n d, n d -> n d"), X, X))


def _three_reads(rng):
    """``X`` read by two to three maps and combined with ``Y``; one map at random reads ``Y`` too."""
    b = nc.Builder(nc.types("a b, a b"))
    X, Y = b.inputs
    maps = [str(rng.choice(["exp", "tanh", "relu", "neg"])) for _ in range(int(rng.integers(2, 4)))]
    acc = Y
    for f in maps:
        acc = b(nc.elementwise("add", "a b"), acc, b(nc.elementwise(f, "a b"), X))
    return b.build(acc)


def _instance(rng):
    """A fused kernel reading one value in several ports (kernel formation and fusion to a fixpoint)."""
    builds = [swiglu_up, _square, nc.library.rms_norm, nc.library.layer_norm, lambda: _three_reads(rng)]
    f = builds[int(rng.integers(len(builds)))]()
    return rewrite(f, [kernel_formation.using(level=int(rng.integers(1, 3))), kernel_fusion]).diagram


def _cost_claim(lhs, rhs, m):
    k = m.box("k")
    level = k.params["level"]
    dropped = [k.dom.inside[p] for _, others in shared_ports(m.net, m.nodes["k"]) for p in others]
    values = sum((numel(a) for a in dropped), sympy.Integer(0))
    nbytes = sum((numel(a) * a.dtype.bytes for a in dropped), sympy.Integer(0))
    before, after = nc.cost(lhs), nc.cost(rhs)
    for lv in set(before.H) | set(after.H) | set(range(1, level + 1)):
        want = values if 1 <= lv <= level else 0   # a level-ℓ kernel loads through every level above it
        got = sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0))
        assert sympy.expand(got - want) == 0, f"H[{lv}] drops by {got}, expected {want} (one load per extra read)"
        want_b = nbytes if 1 <= lv <= level else 0
        got_b = sympy.expand(before.H_bytes.get(lv, 0) - after.H_bytes.get(lv, 0))
        assert sympy.expand(got_b - want_b) == 0, f"bytes at level {lv} drop by {got_b}, expected {want_b}"
    assert before.flops == after.flops, f"FLOPs changed: {before.flops} → {after.flops}"


shared_load = Rule(
    "shared_load",
    Pattern({"k": PLAIN_KERNEL}),
    _once_rhs,
    conditions=(Condition("shared_value", _shares, "two of the kernel's ports must read one value (one copy)"),),
    obligation=Obligation(_instance, cost=_cost_claim),
    doc="""copy(x) ; Kernel(Load x ; Load x ; F) → Kernel(Load x ; copy ; F): a value read in several places
    is loaded once.

    The copy law (paper §2: a Load is a function, and copy commutes with functions in a markov category):
    the kernel's first port of each shared value is loaded and copied on the chip, the other reads are
    discarded outside.  Cost claim: H at the kernel's level (and each level its loads pass) drops by each
    discarded port's array.""")

RULES = RuleSet((shared_load,))
