"""SoftMax → Auxiliary SoftMax → Unscaled SoftMax, and ``/z`` moved past a contraction.

Paper Table 4 and Appendix "Fusion of SoftMax-Contraction" (errata D-08: the
intended updates are y′ ← y′·δz′/z, y′ ← y′·δ and y ← y/z):

===================================  ==================================================================
rule                                 lhs → rhs
===================================  ==================================================================
``softmax_to_auxiliary``             SoftMax(x) → SoftMax₀(x, Initialize(x)), (μ, δz′, z) discarded
``auxiliary_to_unscaled``            SoftMax₀(x, μ′, z′) → (s/z, μ, δ·z′, z) where (s, μ, δ, z) = SoftMax₁(x, μ′, z′)
``divide_after_contraction``         (n / z) · v → (n · v) / z        when z's axes survive the contraction
``softmax_contraction_to_unscaled``  SoftMax(x) · v → SoftMax₁(x, Initialize(x)) · v / z   (FlashAttention-2)
===================================  ==================================================================

``Initialize(x) = (μ′, z′) = (−∞, 0)`` is the head of the stream.  It reads its
input only for the shape of the weave axes (``nc.apply`` builds no box without
inputs), so the rewritten diagram copies the scores into it.

>>> import napkin_cat as nc
>>> att = nc.library.attention()
>>> fa2 = softmax_contraction_to_unscaled.apply(att)
>>> from napkin_cat.rewriting import to_netlist
>>> [n.name for n in to_netlist(fa2).nodes.values() if n.kind == "box"]
['·', 'Initialize', 'SoftMax₁', '·', 'div']
>>> bool(nc.equivalent(att, fa2))
True
"""
from __future__ import annotations

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.rewriting.match import Pattern, kind
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet, shape_of

INIT = "softmax_init"


def _init_impl(xs, core):
    x = xs[0]
    batch = x.shape[:x.ndim - len(core.inputs[0])]
    return [np.full(batch, -np.inf), np.zeros(batch)]


def _init_check(core):
    if len(core.inputs) != 1 or len(core.inputs[0]) < 1 or core.outputs != ((), ()):
        raise nc.SignatureError("softmax_init: the item signature is Rˣ → (μ′: R, z′: R)")


def ensure_initialize():
    """Declare the ``softmax_init`` kind (Table 4's Initialize) unless it is declared."""
    if INIT not in nc.KINDS:
        nc.declare(INIT, _init_impl, check=_init_check, label="Initialize",
                   doc="Initialize() of Table 4: the stream head (μ′, z′) = (−∞, 0), one per weave index.")


ensure_initialize()


# ---------------------------------------------------------------------- constructors
def _sig(names) -> str:
    return " ".join(names)


def _sizes(*arrays) -> dict:
    return {a.name: a.size for arr in arrays for a in arr.axes}


def _online(kind_name, scores, over, beta):
    """``kind(x, μ′, z′) -> (x-shaped, μ, ·, z)`` for ``softmax_aux`` / ``softmax_unscaled``."""
    w = _sig(n for n in scores.names if n not in over)
    x = _sig(scores.names)
    params = {} if beta == 1 else {"beta": beta}
    return nc.apply(kind_name, f"{x}, {w}, {w} -> {x}, {w}, {w}, {w}", core=list(over), params=params,
                    level=scores.level, dtype=scores.dtype, **_sizes(scores))


def initialize(scores, over):
    """Initialize: the scores ``x`` → (μ′, z′) = (−∞, 0), weaved like the SoftMax's normaliser."""
    ensure_initialize()
    w = _sig(n for n in scores.names if n not in over)
    return nc.apply(INIT, f"{_sig(scores.names)} -> {w}, {w}", core=list(over), level=scores.level,
                    dtype=scores.dtype, **_sizes(scores))


def _binary(name, left, right):
    return nc.elementwise(name, f"{_sig(left.names)}, {_sig(right.names)} -> {_sig(left.names)}",
                          level=left.level, dtype=left.dtype, **_sizes(left, right))


# ---------------------------------------------------------------------- bindings and conditions
def _bind_softmax(var):
    def bind(m):
        node = m.node(var)
        scores = node.dom[0]
        weaves = set(node.spec.weave_names)
        found = {"scores": scores, "over": tuple(n for n in scores.names if n not in weaves),
                 "weaves": tuple(n for n in scores.names if n in weaves),
                 "beta": node.spec.param("beta", 1)}
        if "c" in m.nodes:
            found["port"] = next(p for p, src in enumerate(m.net.producers(m.nodes["c"]))
                                 if src[0] == m.nodes[var])
            found["out"] = m.node("c").cod[0]
        return found
    return bind


WEAVED = Condition("weaved", lambda m: bool(m.vars["weaves"]) or "no weave axis",
                   "the SoftMax must be weaved over at least one axis (its μ, z are then arrays)")
SURVIVES = Condition(
    "normaliser_survives",
    lambda m: set(m.vars["weaves"]) <= set(m.vars["out"].names)
    or f"{sorted(set(m.vars['weaves']) - set(m.vars['out'].names))} summed away",
    "every axis the normaliser z varies along must survive the contraction, so that /z commutes with it")
SAME_FORMAT = Condition(
    "same_format",
    lambda m: (m.vars["out"].level, m.vars["out"].dtype) == (m.vars["scores"].level, m.vars["scores"].dtype),
    "the contraction's output must have the level and dtype of the scores")


# ---------------------------------------------------------------------- rules
def _to_auxiliary(m):
    b, ins = m.wiring()
    x = ins[("s", 0)]
    mu0, z0 = b(initialize(m.vars["scores"], m.vars["over"]), x)
    y, _mu, _dz, _z = b(_online("softmax_aux", m.vars["scores"], m.vars["over"], m.vars["beta"]), x, mu0, z0)
    return m.finish(b, {("s", 0): y})


def _to_unscaled(m):
    b, ins = m.wiring()
    x, mu_prev, z_prev = (ins[("a", p)] for p in range(3))
    s, mu, delta, z = b(_online("softmax_unscaled", m.vars["scores"], m.vars["over"], m.vars["beta"]),
                        x, mu_prev, z_prev)
    y = b(_binary("div", m.vars["scores"], z.array), s, z)
    dz = b(_binary("mul", delta.array, z_prev.array), delta, z_prev)
    return m.finish(b, {("a", 0): y, ("a", 1): mu, ("a", 2): dz, ("a", 3): z})


def _divide_after(m):
    b, ins = m.wiring()
    c = m.box("c")
    n, z = ins[("d", 0)], ins[("d", 1)]
    o = b(c, *(n if p == m.vars["port"] else ins[("c", p)] for p in range(len(c.dom))))
    return m.finish(b, {("c", 0): b(_binary("div", m.vars["out"], z.array), o, z)})


def _fused(m):
    b, ins = m.wiring()
    c, v = m.box("c"), m.vars
    x = ins[("s", 0)]
    mu0, z0 = b(initialize(v["scores"], v["over"]), x)
    s, _mu, _delta, z = b(_online("softmax_unscaled", v["scores"], v["over"], v["beta"]), x, mu0, z0)
    o = b(c, *(s if p == v["port"] else ins[("c", p)] for p in range(len(c.dom))))
    return m.finish(b, {("c", 0): b(_binary("div", v["out"], z.array), o, z)})


# ---------------------------------------------------------------------- obligations
def _scores(rng):
    w = [str(n) for n in rng.permutation(["q", "h"])[:int(rng.integers(1, 3))]]
    over = ["x"] if rng.random() < 0.8 else ["x", "y"]
    names = [str(n) for n in rng.permutation(w + over)]
    beta = [1, 0.5, 0.125][int(rng.integers(3))]
    return names, over, w, beta


def softmax_instance(rng):
    names, over, _, beta = _scores(rng)
    sm = nc.softmax(_sig(names), over=over, beta=beta)
    return sm >> nc.elementwise("neg", _sig(names)) if rng.integers(2) else sm


def softmax_contraction_instance(rng, *, strict: bool = True):
    """``SoftMax(x) · v`` with random weave/core axes and a random contraction (z's axes kept)."""
    names, over, w, beta = _scores(rng)
    extra = [e for e in ("d", "e") if rng.random() < 0.6]
    shared = [w[0]] if rng.random() < 0.4 else []
    v = [str(n) for n in rng.permutation(over + extra + shared)]
    out = [str(n) for n in rng.permutation(w + extra)]
    if not strict and rng.random() < 0.5:
        out = [n for n in out if n != w[0]]
    sm = nc.softmax(_sig(names), over=over, beta=beta)
    b = nc.Builder(sm.dom @ nc.types(_sig(v)))
    S, V = b.inputs
    P = b(sm, S)
    args = (P, V) if rng.integers(2) else (V, P)
    sig = f"{_sig(args[0].array.names)}, {_sig(args[1].array.names)} -> {_sig(out)}"
    return b.build(b(nc.einsum(sig), *args))


def auxiliary_instance(rng):
    names, over, w, beta = _scores(rng)
    x = nc.types(_sig(names)).inside[0]
    return _online("softmax_aux", x, over, beta)


def divide_instance(rng):
    """``(n / σ(z)) · v`` with z varying along some of n's weave axes, all kept by the contraction."""
    names, over, w, _ = _scores(rng)
    extra = [e for e in ("d",) if rng.random() < 0.7]
    v = [str(n) for n in rng.permutation(over + extra)]
    out = [str(n) for n in rng.permutation(w + extra)]
    z = [str(n) for n in rng.permutation(w)][:int(rng.integers(1, len(w) + 1))]
    b = nc.Builder(nc.types(f"{_sig(names)}, {_sig(z)}, {_sig(v)}"))
    N, Z, V = b.inputs
    Zp = b(nc.elementwise("sigmoid", _sig(z)), Z)
    Y = b(nc.elementwise("div", f"{_sig(names)}, {_sig(z)} -> {_sig(names)}"), N, Zp)
    return b.build(b(nc.einsum(f"{_sig(names)}, {_sig(v)} -> {_sig(out)}"), Y, V))


def extreme_inputs(rng, diagram, sizes):
    """Input 0 (the scores): logits up to ±1e4, some entries masked to −inf; others normal."""
    xs = []
    for i, arr in enumerate(diagram.dom.inside):
        x = rng.normal(size=shape_of(arr, sizes))
        if i == 0:
            x = x * [1.0, 1e2, 1e4][int(rng.integers(3))]
            x[rng.random(x.shape) < [0.0, 0.2, 0.5][int(rng.integers(3))]] = -np.inf
        xs.append(x)
    return xs


# ---------------------------------------------------------------------- symbolic proofs
def online_softmax_identity():
    """Combining (μ₁, z₁, y₁) and (μ₂, z₂, y₂) is the unsplit SoftMax-contraction (any baselines)."""
    xs, vs = sympy.symbols("x1:6", real=True), sympy.symbols("v1:6", real=True)
    m1, m2, m = sympy.symbols("m1 m2 m", real=True)
    halves = ((xs[:2], vs[:2], m1), (xs[2:], vs[2:], m2))
    parts = []
    for x, v, base in halves:
        z = sum(sympy.exp(xi - base) for xi in x)
        o = sum(sympy.exp(xi - base) * vi for xi, vi in zip(x, v))  # unscaled accumulator
        parts.append((base, z, o))
    (b1, z1, o1), (b2, z2, o2) = parts
    d1, d2 = sympy.exp(b1 - m), sympy.exp(b2 - m)
    z = d1 * z1 + d2 * z2
    y = (d1 * o1 + d2 * o2) / z
    y_aux = (d1 * z1 * (o1 / z1) + d2 * z2 * (o2 / z2)) / z  # auxiliary: rescale y′ by δz′/z
    target = sum(sympy.exp(xi) * vi for xi, vi in zip(xs, vs)) / sum(sympy.exp(xi) for xi in xs)
    assert sympy.simplify(sympy.powsimp(sympy.expand(y - target))) == 0, "unscaled combine"
    assert sympy.simplify(sympy.powsimp(sympy.expand(y_aux - target))) == 0, "auxiliary combine"
    assert sympy.simplify(z - sum(sympy.exp(xi - m) for xi in xs)) == 0, "running sum"


def unscaled_step(x, beta, mu_prev, z_prev):
    """Table 4's SoftMax₁(x⃗, (μ′, ·, z′)) → (s⃗, μ, δ, z), in sympy: the rule's right-hand side runs it."""
    mu = sympy.Max(*(beta * xi for xi in x), mu_prev)
    s = [sympy.exp(beta * xi - mu) for xi in x]
    delta = sympy.exp(mu_prev - mu)
    return s, mu, delta, delta * z_prev + sum(s)


def auxiliary_from_unscaled(s, mu, delta, z, z_prev):
    """The right-hand side of ``auxiliary_to_unscaled``: SoftMax₀'s outputs (s⃗/z, μ, δ·z′, z) from SoftMax₁'s."""
    return [si / z for si in s], mu, delta * z_prev, z


def _softmax_of(scores, beta):
    """The textbook SoftMax exp(βxᵢ) / Σⱼ exp(βxⱼ), with no running maximum."""
    total = sum(sympy.exp(beta * xj) for xj in scores)
    return [sympy.exp(beta * xi) / total for xi in scores]


def _same(a, b) -> bool:
    """a = b: refuted fast at seeded random points, else proved by sympy."""
    diff = a - b
    rng = np.random.default_rng(0)
    for _ in range(3):
        point = {s: sympy.Float(rng.uniform(0.1, 2.0) if s.is_positive else rng.normal()) for s in diff.free_symbols}
        if abs(complex(diff.subs(point).evalf())) > 1e-9:
            return False
    return sympy.simplify(sympy.powsimp(sympy.expand(sympy.powsimp(diff)))) == 0


def table4_identity(step=unscaled_step, rhs=auxiliary_from_unscaled):
    """Recursively expanded Auxiliary SoftMax is the SoftMax of the concatenation (Table 4, Fig. softmax_stream).

    A prior chunk x⃗′ is summarised, as Base SoftMax computes them, by μ′ = max βx′ⱼ and
    z′ = Σⱼ exp(βx′ⱼ − μ′).  SoftMax₀(x⃗, (μ′, z′)), built as ``rhs(step(x⃗, μ′, z′))``, must give
    y⃗ = the SoftMax of x⃗′ ++ x⃗ restricted to x⃗, δz′·e^μ = Σⱼ exp(βx′ⱼ) (the prior sum, rebased)
    and z·e^μ = Σ over x⃗′ ++ x⃗ (the running sum), each compared with the textbook formula; and
    from Initialize() = (−∞, 0) it gives SoftMax(x⃗).
    """
    x, prior = sympy.symbols("x1:4", real=True), sympy.symbols("p1:3", real=True)
    beta = sympy.Symbol("beta", positive=True)
    mu_prev = sympy.Max(*(beta * p for p in prior))
    z_prev = sum(sympy.exp(beta * p - mu_prev) for p in prior)
    y, mu, dz, z = rhs(*step(x, beta, mu_prev, z_prev), z_prev)
    whole = _softmax_of(prior + x, beta)[len(prior):]
    assert all(_same(a, b) for a, b in zip(y, whole)), "y is not the softmax of the concatenation"
    assert _same(dz * sympy.exp(mu), sum(sympy.exp(beta * p) for p in prior)), "δz′ is not the rebased prior sum"
    assert _same(z * sympy.exp(mu), sum(sympy.exp(beta * v) for v in prior + x)), "z is not the running sum"
    y0, _, _, z0 = rhs(*step(x, beta, -sympy.oo, 0), 0)
    assert all(_same(a, b) for a, b in zip(y0, _softmax_of(x, beta))), "from Initialize() it is not SoftMax"
    assert _same(z0 * sympy.exp(sympy.Max(*(beta * xi for xi in x))), sum(sympy.exp(beta * xi) for xi in x)), \
        "from Initialize() z is not the sum"


def division_identity():
    """Σᵢ (nᵢ/z) vᵢ = (Σᵢ nᵢ vᵢ)/z: a contraction is linear in each operand."""
    n, v = sympy.symbols("n1:5", real=True), sympy.symbols("v1:5", real=True)
    z = sympy.Symbol("z", positive=True)
    assert sympy.simplify(sum(ni / z * vi for ni, vi in zip(n, v)) - sum(ni * vi for ni, vi in zip(n, v)) / z) == 0


# ---------------------------------------------------------------------- the rules
softmax_to_auxiliary = Rule(
    "softmax_to_auxiliary",
    Pattern({"s": kind("softmax")}, bind=_bind_softmax("s")),
    _to_auxiliary,
    conditions=(WEAVED,),
    obligation=Obligation(softmax_instance, inputs=extreme_inputs, symbolic=(table4_identity,)),
    doc="""SoftMax(x) → SoftMax₀(x, Initialize(x)) with (μ, δz′, z) discarded.

    Paper Table 4 (Base → Auxiliary SoftMax), Appendix "Fusion of SoftMax-Contraction".""")

auxiliary_to_unscaled = Rule(
    "auxiliary_to_unscaled",
    Pattern({"a": kind("softmax_aux")}, bind=_bind_softmax("a")),
    _to_unscaled,
    conditions=(WEAVED,),
    obligation=Obligation(auxiliary_instance, inputs=extreme_inputs, symbolic=(table4_identity,)),
    doc="""SoftMax₀(x, μ′, z′) → (s/z, μ, δ·z′, z) where (s, μ, δ, z) = SoftMax₁(x, μ′, z′).

    Paper Table 4 (Auxiliary → Unscaled SoftMax), errata D-08.""")

divide_after_contraction = Rule(
    "divide_after_contraction",
    Pattern({"d": kind("div"), "c": kind("contract")}, [("d", 0, "c", None)],
            bind=lambda m: {"port": next(p for p, src in enumerate(m.net.producers(m.nodes["c"]))
                                         if src[0] == m.nodes["d"]),
                            "out": m.node("c").cod[0], "divisor": m.node("d").dom[1]}),
    _divide_after,
    conditions=(
        Condition("numerator_not_broadcast", lambda m: m.node("d").dom[0] == m.node("d").cod[0],
                  "the numerator must already have the quotient's axes"),
        Condition("divisor_survives",
                  lambda m: (bool(m.vars["divisor"].names)
                             and set(m.vars["divisor"].names) <= set(m.vars["out"].names))
                  or f"divisor axes {list(m.vars['divisor'].names)}, output axes {list(m.vars['out'].names)}",
                  "the divisor must vary along some axes, all of which survive the contraction"),
        Condition("same_format", lambda m: (m.vars["divisor"].level, m.vars["divisor"].dtype)
                  == (m.vars["out"].level, m.vars["out"].dtype),
                  "the divisor must have the level and dtype of the contraction's output")),
    obligation=Obligation(divide_instance, symbolic=(division_identity,)),
    doc="""(n / z) · v → (n · v) / z, when every axis of z survives the contraction.

    Paper Appendix "Fusion of SoftMax-Contraction": moving the shared "/z" to the
    end of the expression (FlashAttention-2).""")

softmax_contraction_to_unscaled = Rule(
    "softmax_contraction_to_unscaled",
    Pattern({"s": kind("softmax"), "c": kind("contract")}, [("s", 0, "c", None)], bind=_bind_softmax("s")),
    _fused,
    conditions=(WEAVED, SURVIVES, SAME_FORMAT),
    obligation=Obligation(softmax_contraction_instance, inputs=extreme_inputs,
                          symbolic=(online_softmax_identity, division_identity)),
    doc="""SoftMax(x) · v → (SoftMax₁(x, Initialize(x)).s · v) / z.

    Paper Appendix "Fusion of SoftMax-Contraction" and Table 4: unscaled SoftMax
    with the "/z" tail moved to the end (FlashAttention-2's numerically stable form).""")

RULES = RuleSet((softmax_to_auxiliary, auxiliary_to_unscaled, divide_after_contraction,
                 softmax_contraction_to_unscaled))
