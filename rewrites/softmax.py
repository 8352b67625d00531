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

import napkin_cat as nc
from napkin_cat.algorithms.accumulators import (Binding, NormaliserForm, StateArray, build_state_diagrams,
                                                is_contraction_over, register, single)
from napkin_cat.syntax.primitive import converts
from napkin_cat.syntax.printed import filled
from napkin_cat.syntax.relabel import remembered
from napkin_cat.rewriting.match import Pattern, kind
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet, shape_of
from rewrites.softmax_identities import division_identity, online_softmax_identity, table4_identity

INIT = "softmax_init"
#: the state (μ′, z′) of an online SoftMax before its first slice (the empty stream: no maximum, no mass), which
#: Initialize's outputs hold whatever its input, and that it prints as (a fill, wherever the box stands)
HEAD = (-np.inf, 0.0)


def _is_conversion(box) -> bool:
    """Whether ``box`` only changes its operand's number format (its kind's record says ``conversion``)."""
    data = getattr(box, "data", None)
    return data is not None and converts(data.kind)


def _init_impl(xs, core):
    x = xs[0]
    batch = x.shape[:x.ndim - len(core.inputs[0])]
    return [np.full(batch, v) for v in HEAD]


def _init_check(core):
    if len(core.inputs) != 1 or len(core.inputs[0]) < 1 or core.outputs != ((), ()):
        raise nc.SignatureError("softmax_init: the item signature is Rˣ → (μ′: R, z′: R)")


def ensure_initialize():
    """Declare the ``softmax_init`` kind (Table 4's Initialize) unless it is declared."""
    if INIT not in nc.engine.KINDS:
        nc.declare(INIT, _init_impl, check=_init_check, label="Initialize", forms=filled(*HEAD),
                   doc="Initialize() of Table 4: the stream head (μ′, z′) = (−∞, 0), one per weave index.")


ensure_initialize()


# ---------------------------------------------------------------------- constructors
def _sig(names) -> str:
    return " ".join(names) or "()"   # () is an array without axes


def _sizes(*arrays) -> dict:
    return {a.name: a.size for arr in arrays for a in arr.axes}


def online_box(kind_name, scores, over, beta):
    """``kind(x, μ′, z′) -> (x-shaped, μ, ·, z)`` for ``softmax_aux`` / ``softmax_unscaled``."""
    w = _sig(n for n in scores.names if n not in over)
    x = _sig(scores.names)
    params = {} if beta == 1 else {"beta": beta}
    return nc.apply(kind_name, f"{x}, {w}, {w} -> {x}, {w}, {w}, {w}", core=list(over), params=params,
                    level=scores.level, dtype=scores.dtype, sizes=_sizes(scores))


def initialize(scores, over):
    """Initialize: the scores ``x`` → (μ′, z′) = (−∞, 0), weaved like the SoftMax's normaliser."""
    ensure_initialize()
    w = _sig(n for n in scores.names if n not in over)
    return nc.apply(INIT, f"{_sig(scores.names)} -> {w}, {w}", core=list(over), level=scores.level,
                    dtype=scores.dtype, sizes=_sizes(scores))


def binary(name, left, right):
    """The elementwise box ``name(left, right)``, its output shaped like ``left``."""
    return nc.elementwise(name, f"{_sig(left.names)}, {_sig(right.names)} -> {_sig(left.names)}",
                          level=left.level, dtype=left.dtype, sizes=_sizes(left, right))


# ---------------------------------------------------------------------- bindings and conditions
def bind_softmax(var):
    """A binding that reads the SoftMax matched at ``var``: its scores, streamed and weaved axes, β, order."""
    def bind(m):
        node = m.node(var)
        scores = node.dom[0]
        weaves = set(node.spec.weave_names)
        found = {"scores": scores, "over": tuple(n for n in scores.names if n not in weaves),
                 "weaves": tuple(n for n in scores.names if n in weaves),
                 "beta": node.spec.param("beta", 1), "order": tuple(node.cod[0].names)}
        if "c" in m.nodes:
            found["port"] = next(p for p, src in enumerate(m.net.producers(m.nodes["c"]))
                                 if src[0] == m.nodes[var])
            found["out"] = m.node("c").cod[0]
        return found
    return bind


SAME_ORDER = Condition(
    "same_order", lambda m: m.vars["order"] == tuple(m.vars["scores"].names)
    or f"{list(m.vars['scores'].names)} in, {list(m.vars['order'])} out",
    "the SoftMax must keep its input's axis order (a weave that puts an axis elsewhere in the output is not "
    "rewritten)")
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
SAME_LEVEL = Condition(
    "same_level",
    lambda m: m.vars["out"].level == m.vars["scores"].level,
    "the contraction's output must live at the level of the scores (number formats may differ: the rewrite "
    "converts s to the contraction's operand format and z to the output's format)")


# ---------------------------------------------------------------------- rules
def _to_auxiliary(m):
    b, ins = m.wiring()
    x = ins[("s", 0)]
    mu0, z0 = b(initialize(m.vars["scores"], m.vars["over"]), x)
    y, _mu, _dz, _z = b(online_box("softmax_aux", m.vars["scores"], m.vars["over"], m.vars["beta"]), x, mu0, z0)
    return m.finish(b, {("s", 0): y})


def _ports(box) -> str:
    """The box's signature with each port's axes in its own order (a weave may put an axis anywhere in each)."""
    return (", ".join(_sig(a.names) for a in box.dom.inside) + " -> " +
            ", ".join(_sig(a.names) for a in box.cod.inside))


def _map(name, *arrays, out):
    """The elementwise ``name`` of ``arrays`` written in the axis order of ``out`` (and at its level and dtype)."""
    return nc.elementwise(name, ", ".join(_sig(a.names) for a in arrays) + f" -> {_sig(out.names)}",
                          level=out.level, dtype=out.dtype, sizes=_sizes(*arrays))


def _to_unscaled(m):
    """SoftMax₁ with SoftMax₀'s own ports (each in the order a weave gave it), then s/z and δ·z′ in the order of
    SoftMax₀'s outputs."""
    aux, v = m.box("a"), m.vars
    b, ins = m.wiring()
    x, mu_prev, z_prev = (ins[("a", p)] for p in range(3))
    params = {} if v["beta"] == 1 else {"beta": v["beta"]}
    unscaled = nc.apply("softmax_unscaled", _ports(aux), core=list(v["over"]), params=params,
                        level=v["scores"].level, dtype=v["scores"].dtype, sizes=_sizes(*aux.dom.inside))
    s, mu, delta, z = b(unscaled, x, mu_prev, z_prev)
    y_out, _, dz_out, _ = aux.cod.inside
    y = b(_map("div", s.array, z.array, out=y_out), s, z)
    dz = b(_map("mul", delta.array, z_prev.array, out=dz_out), delta, z_prev)
    return m.finish(b, {("a", 0): y, ("a", 1): mu, ("a", 2): dz, ("a", 3): z})


def _divide_after(m):
    b, ins = m.wiring()
    c = m.box("c")
    n, z = ins[("d", 0)], ins[("d", 1)]
    o = b(c, *(n if p == m.vars["port"] else ins[("c", p)] for p in range(len(c.dom))))
    return m.finish(b, {("c", 0): b(binary("div", m.vars["out"], z.array), o, z)})


def _fused(m):
    b, ins = m.wiring()
    c, v = m.box("c"), m.vars
    x = ins[("s", 0)]
    mu0, z0 = b(initialize(v["scores"], v["over"]), x)
    s, _mu, _delta, z = b(online_box("softmax_unscaled", v["scores"], v["over"], v["beta"]), x, mu0, z0)
    s = b.convert(s, c.dom.inside[v["port"]].dtype)  # P in the format the contraction takes (FA3's conversion)
    o = b(c, *(s if p == v["port"] else ins[("c", p)] for p in range(len(c.dom))))
    z = b.convert(z, v["out"].dtype)
    return m.finish(b, {("c", 0): b(binary("div", v["out"], z.array), o, z)})


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
    return online_box("softmax_aux", x, over, beta)


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


# ---------------------------------------------------------------------- the rules
softmax_to_auxiliary = Rule(
    "softmax_to_auxiliary",
    Pattern({"s": kind("softmax")}, bind=bind_softmax("s")),
    _to_auxiliary,
    conditions=(WEAVED, SAME_ORDER),
    obligation=Obligation(softmax_instance, inputs=extreme_inputs, symbolic=(table4_identity,)),
    doc="""SoftMax(x) → SoftMax₀(x, Initialize(x)) with (μ, δz′, z) discarded.

    Paper Table 4 (Base → Auxiliary SoftMax), Appendix "Fusion of SoftMax-Contraction".""")

auxiliary_to_unscaled = Rule(
    "auxiliary_to_unscaled",
    Pattern({"a": kind("softmax_aux")}, bind=bind_softmax("a")),
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
    Pattern({"s": kind("softmax"), "c": kind("contract")}, [("s", 0, "c", None)], bind=bind_softmax("s")),
    _fused,
    conditions=(WEAVED, SAME_ORDER, SURVIVES, SAME_LEVEL),
    obligation=Obligation(softmax_contraction_instance, inputs=extreme_inputs,
                          symbolic=(online_softmax_identity, division_identity)),
    doc="""SoftMax(x) · v → (SoftMax₁(x, Initialize(x)).s · v) / z.

    Paper Appendix "Fusion of SoftMax-Contraction" and Table 4: unscaled SoftMax
    with the "/z" tail moved to the end (FlashAttention-2's numerically stable form).""")

# ---------------------------------------------------------------------- the online form (accumulator B)
def online_state(scores, out, axis):
    """The maintained arrays of streamed SoftMax-contraction: running max μ, running sum z, output o."""
    rows = scores.replace(axes=tuple(a for a in scores.axes if a.name != axis))
    mu, z = HEAD
    return [StateArray("μ", rows, mu), StateArray("z", rows, z), StateArray("o", out, 0.0)]


def online_step(b, state, scores, contract, axis, box):
    """B((μ′, z′, o′), x, v) = (μ, z, δ·o′ + s·v) with (s, μ, δ, z) = SoftMax₁(x, μ′, z′) (Table 4, D-08).

    The running output is rescaled and accumulated by one fused multiply-add per value (the paper's
    "FP16 accumulate", 2d FLOPs per row per trip in Table 3).
    """
    mu_p, z_p, o_p = state
    beta = box.data.param("beta", 1)
    s, mu, delta, z = b(online_box("softmax_unscaled", scores.array, (axis,), beta), scores, mu_p, z_p)
    out = o_p.array
    delta = b.convert(delta, out.dtype)  # the rescale factor in the running output's format
    rows = delta.array
    sig = f"{_sig(out.names)}, {_sig(rows.names)}, {_sig(out.names)} -> {_sig(out.names)}"
    fma = nc.elementwise("fma", sig, level=out.level, dtype=out.dtype, sizes=_sizes(out, rows))
    o = b(fma, o_p, delta, contract(s))
    return [mu, z, o]


def online_finish(b, state):
    """The tail: y = o / z (z converted to the output's number format when they differ)."""
    _mu, z, o = state
    z = b.convert(z, o.array.dtype)
    return b(binary("div", o.array, z.array), o, z)


def masked_scores(consts) -> bool:
    """A trip whose scores are all −∞ (masked) leaves (μ, z, o) unchanged: s = 0, μ = μ′, δ = 1 (or 0 while
    μ′ = −∞, when z′ and o′ are still 0), so the trip may be skipped."""
    return consts[0] == -np.inf


#: SoftMax(x) · v streamed: the accumulator of softmax_contraction_to_unscaled's right-hand side.
SOFTMAX_CONTRACTION = NormaliserForm(
    "softmax_contraction_to_unscaled", "softmax", online_state, online_step, online_finish,
    doc="SoftMax over the streamed axis, consumed by a contraction over it: online softmax (Table 4).",
    neutral=masked_scores)


class UnscaledForm:
    """The same accumulator read off the rule's output: Initialize ; SoftMax₁ ; contraction (then /z).

    Matched at a SoftMax₁ whose (μ′, z′) come from an Initialize (the head: (−∞, 0)) and whose
    scores feed one contraction over the axis; its (μ, z) and the contraction's output are the state.
    """

    name = "softmax_contraction_to_unscaled"
    kind = "softmax_unscaled"
    neutral = staticmethod(masked_scores)

    def match(self, plan, i):
        box, ins, outs = plan.ops[i]
        axis = plan.axis
        core = [a.name for a in box.dom.inside[0].axes if a.name not in box.data.weave_names]
        if core != [axis]:
            return f"{box.name} runs over {core}, not over the streamed axis {axis!r} alone"
        heads = [plan.producer(v) for v in ins[1:]]
        k = heads[0][0] if None not in heads and [h[0] for h in heads] == [heads[0][0]] * 2 else None
        own = k is not None and plan.ops[k][0].data.kind == INIT and [h[1] for h in heads] == [0, 1] and all(
            u == (i, p) for p, v in zip((1, 2), plan.ops[k][2]) for u in plan.uses.get(v, []))
        if not own:
            return f"the state (μ′, z′) of {box.name} does not come from its own Initialize (the stream's head)"
        users = plan.uses.get(outs[0], [])
        conversion = ()
        if len(users) == 1 and users[0][0] >= 0 and _is_conversion(plan.ops[users[0][0]][0]):
            conversion = (users[0][0],)  # s converted to the contraction's operand format on the way
            users = plan.uses.get(plan.ops[users[0][0]][2][0], [])
        if not (len(users) == 1 and users[0][0] >= 0 and is_contraction_over(plan.ops[users[0][0]][0], axis)):
            return f"{box.name}'s scores must feed one contraction over {axis!r} (through at most one cast)"
        if plan.uses.get(outs[2]):
            return f"{box.name}'s δ is read elsewhere; the online form keeps it inside the step"
        c, port = users[0]
        cbox, cins, couts = plan.ops[c]
        if any(n != axis and n not in cbox.cod.inside[0].names for n in box.cod.inside[0].names):
            return f"the contraction after {box.name} sums away an axis along which μ and z differ"
        others = [p for p in range(len(cins)) if p != port]

        def build():
            scores, out = box.dom.inside[0], cbox.cod.inside[0]
            state = tuple(online_state(scores, out, axis))

            def step(b, st, x, *rest):
                def contract(w):  # the contraction takes its operand in its own number format
                    args = list(rest)
                    args.insert(port, b.convert(w, cbox.dom.inside[port].dtype))
                    return b(single(cbox), *args)
                return online_step(b, st, x, contract, axis, box)

            def finish(b, st):
                mu, z, o = st
                return o, z, mu
            return (state, *build_state_diagrams(self.name, state, [scores] + [cbox.dom.inside[p] for p in others],
                                                 step, finish, [out, box.cod.inside[3], box.cod.inside[1]]))
        state, step_d, finish_d = remembered(box, (self, axis, port, cbox), build)
        return Binding(self, (k, i, *conversion, c), (ins[0], *(cins[p] for p in others)), tuple(state), step_d,
                       finish_d, (couts[0], outs[3], outs[1]))


#: The online forms this library provides (entry point ``napkin_cat.accumulators``; registered on import).
ONLINE_FORMS = (SOFTMAX_CONTRACTION, UnscaledForm())
for _form in ONLINE_FORMS:
    register(_form)

RULES = RuleSet((softmax_to_auxiliary, auxiliary_to_unscaled, divide_after_contraction,
                 softmax_contraction_to_unscaled))
