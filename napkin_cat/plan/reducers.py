"""The reducers of a stream as the plan reads them: the ops they cover, their state, their step.

A reducer folds the streamed axis away (paper Fig. streaming_condition).  A *monoid* reducer is one
box whose kind has an accumulator: its state is its output, filled with the monoid's identity and
folded into once per trip (``o ← o ⊕ F(chunk)``, a multiply-add for a contraction).  A *form*
reducer (online softmax) maintains named state arrays, runs its step diagram ``B(state ⊗ chunk)``
once per trip and its finish once; both come from the streaming analysis
(:mod:`napkin_cat.algorithms.streaming`), never from a per-algorithm table here.

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.streaming import analyse
>>> (r,) = reducers_of(analyse(nc.library.matmul(), "b"))
>>> r.monoid, [(n, str(a), v) for n, a, v in r.state]
('sum', [('sum', 'a×c', 0.0)])
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.plan.ir import PlanError
from napkin_cat.syntax.primitive import kind_of


@dataclass(frozen=True)
class PlanReducer:
    """``ops`` covered; ``inputs``/``outputs`` value ids; ``state`` ((name, Array, init), …);
    ``monoid`` (accumulator name) or ``step``/``finish`` diagrams, or ``nest`` (a nested region advanced
    on the state, :mod:`napkin_cat.algorithms.nesting`) and its ``finish``."""

    ops: tuple
    inputs: tuple
    outputs: tuple
    state: tuple
    monoid: str | None = None
    step: object = None
    finish: object = None
    nest: object = None


_ROLES = {"chunk": "body", "softmax": "body", "reduce": "body"}


def ops_in(plan, role: str) -> list:
    """The op indices of ``role`` (head, body, tail), in order."""
    return sorted(i for i, r in plan.role.items() if _ROLES.get(r, r) == role)


def reducers_of(plan) -> list:
    """The reducers of a :class:`~napkin_cat.algorithms.streaming.StreamPlan`."""
    out = []
    for r in plan.reducers:
        if getattr(r, "nest", None) is not None:
            state = tuple((s.name, s.array, s.init) for s in r.state)
            out.append(PlanReducer(tuple(r.ops), tuple(r.inputs), tuple(r.outputs), state, None, None, r.finish,
                                   r.nest))
            continue
        step = getattr(r, "step", None)
        if step is not None:
            state = tuple((s.name, s.array, s.init) for s in r.state)
            out.append(PlanReducer(tuple(r.ops), tuple(r.inputs), tuple(r.outputs), state, None, step, r.finish))
            continue
        ops = tuple(getattr(r, "ops", (r.op,)))
        box, ins, outs = plan.ops[ops[0]]
        acc = getattr(r, "accumulator", None) or kind_of(box.data.kind).accumulator
        if acc is None or len(ops) != 1:
            raise PlanError(f"the stream along {plan.axis!r} folds {box.name!r} with the reducer {r.kind!r}, "
                            "which has neither a monoid nor a step diagram the plan can expand")
        init = float(acc.identity(()))
        out.append(PlanReducer(ops, tuple(ins), (outs[0],), ((acc.name, box.cod.inside[0], init),), acc.name))
    return out
