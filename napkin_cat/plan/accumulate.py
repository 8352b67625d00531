"""A sum accumulated in place, as two statements: the state set to the rest, then the sum folded into it.

The plan writes ``o ← fma(o, δ, ·(P, V))``: the contraction is an *inlined operand*, computed into the
state and never stored (:mod:`napkin_cat.algorithms.reuse`).  A machine that has no such instruction
runs it the way the law reads (FlashAttention's ``acc = acc·δ + dot(p, v)``, an mma with C)::

    f(x₀, …, t) = rest(x_operands) + t    ⟹    out ← rest(x_operands);  out ⊕= t

with the kind's declared :class:`~napkin_cat.syntax.primitive.Addend` giving ``rest`` and its operands
(``rest = id`` writes nothing when its operand already is the output, else copies it).  The variables and
their live ranges are those of the plan: the same storage, the same peak.

>>> import napkin_cat as nc
>>> fa = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
>>> p = separated(nc.plan(fa, {"q": 4, "x": 4, "d": 2, "g_q": 2, "s_x": 2}))
>>> from napkin_cat.plan.printer import Printer
>>> [l.strip() for l in Printer(p.variable_map).block(p.body).splitlines() if l.strip().startswith("o0")]
['o0[g_q×d] ← 0', 'o0[g_q×d] ← mul(o0, softmax_unscaled12_2)', 'o0 += ·(softmax_unscaled11_0, x2_1)', \
'o0[g_q×d] ← div(o0, z0)']
"""
from __future__ import annotations

from napkin_cat.plan.ir import Compute, Copy, PlanError, rebuild
from napkin_cat.syntax.primitive import Weave, kind_of
from napkin_cat.syntax.weave import build_box


def split(s: Compute) -> list:
    """The statements running ``s`` with its inlined operands accumulated into its output."""
    if not s.inlined:
        return [s]
    kind = kind_of(s.kind)
    ((pos, t),) = s.inlined if len(s.inlined) == 1 else (None,)
    addend = next((a for a in kind.addends if a.position == pos), None)
    if addend is None or len(s.outs) != 1 or s.accumulate or kind_of(t.kind).accumulator is None:
        raise PlanError(f"{s.box.name}: an inlined operand at position {pos} is not one of the addends "
                        f"{[a.position for a in kind.addends]} of the kind {s.kind!r} with one output")
    out, ops = s.outs[0], addend.operands
    if addend.rest == "id":
        (src,) = [s.ins[p] for p in ops]
        rest = [] if src == out else [Copy(out, src, s.origin)]
    else:
        weaves = [Weave(w.name, tuple(ops.index(i) for i in w.inputs if i in ops)) for w in s.box.data.weaves]
        box = build_box(addend.rest, [s.box.dom.inside[p] for p in ops], list(s.box.cod.inside), weaves,
                        name=addend.rest)
        rest = [Compute(box, (out,), tuple(s.ins[p] for p in ops), None, s.origin)]
    return rest + [Compute(t.box, (out,), t.ins, kind_of(t.kind).accumulator.name, t.origin, t.at)]


def split_all(stmts) -> tuple:
    """``stmts`` with every Compute's inlined operands accumulated in two statements (:func:`split`)."""
    return rebuild(stmts, lambda s: split(s) if isinstance(s, Compute) else s)


def separated(plan):
    """The plan with its inlined sums run as two statements each (for a backend without an mma with C)."""
    return type(plan)(plan.diagram, plan.sizes, split_all(plan.body), plan.variable_map, plan.inputs,
                      plan.outputs)
