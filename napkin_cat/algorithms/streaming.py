"""Streamability along an axis, derived from the primitives' accumulators (Appendix A.1).

A region F is streamable along ``a`` when every box that reads streamed data
either maps over ``a`` (``a`` is one of its weaves: an *E* box, applied chunk by
chunk), or reduces ``a`` away with an accumulator (contraction: sum; reductions:
sum/max/min), or is a SoftMax over ``a`` whose only consumer is a contraction
over ``a`` (SoftMax-contraction: the online-softmax accumulator of Table 4).
Boxes that do not see streamed data run once before (head) or after (tail).
This is the fusion theorem read as an algorithm::

    F streamable along a, E weaved over a   ⟹   E ; F streamable along a
    F streamable along a                    ⟹   weave_h(F) streamable along a

>>> import napkin_cat as nc
>>> plan = analyse(nc.library.attention(), "x")
>>> [r.kind for r in plan.reducers]
['softmax-contraction']
>>> analyse(nc.softmax("q x", over="x"), "x")
Traceback (most recent call last):
...
napkin_cat.errors.RewriteError: SoftMax alone is not streamable along 'x': its output grows with 'x' ...
"""
from __future__ import annotations

from dataclasses import dataclass, field

from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.errors import RewriteError
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.wiring import consumers, trace_values


@dataclass
class Reducer:
    """A box (or SoftMax-contraction pair) that folds the streamed axis away."""

    kind: str            # 'sum', 'max', 'min', 'softmax-contraction'
    op: int              # index of the reducing op (the contraction for the pair)
    softmax: int | None = None


@dataclass
class StreamPlan:
    """head (run once), chunk (run per slice), reducers (accumulate), tail (run once)."""

    axis: str
    ops: list
    dom: list
    cod: list
    role: dict = field(default_factory=dict)   # op index -> 'head' | 'chunk' | 'reduce' | 'tail'
    reducers: list = field(default_factory=list)
    streamed_inputs: list = field(default_factory=list)

    def indices(self, role):
        return [i for i, r in self.role.items() if r == role]


def _has_axis(arr, axis):
    return axis in arr.names


def _label(box):
    return "SoftMax" if box.data.kind == "softmax" else repr(box.name)


def analyse(region: Diagram, axis: str) -> StreamPlan:
    """Classify the boxes of ``region`` for streaming along ``axis``, or raise RewriteError saying why not."""
    ops, dom, cod = trace_values(region)
    arrays = {v: region.dom.inside[v] for v in dom}
    for box, ins, outs in ops:
        for v, arr in zip(outs, box.cod.inside):
            arrays[v] = arr
    plan = StreamPlan(axis, ops, dom, cod)
    plan.streamed_inputs = [i for i, v in enumerate(dom) if _has_axis(arrays[v], axis)]
    if not plan.streamed_inputs:
        raise RewriteError(f"cannot stream along {axis!r}: no input of the region carries it "
                           f"(inputs {[str(a) for a in region.dom.inside]})")
    dep = {v: ("chunk" if _has_axis(arrays[v], axis) else "const") for v in dom}
    uses = consumers(ops, cod)
    fused = {}
    for i, (box, ins, outs) in enumerate(ops):
        classes = {dep[v] for v in ins}
        if i in fused:  # the contraction of a SoftMax-contraction pair
            role = "reduce"
        elif "chunk" not in classes:
            role = "tail" if "state" in classes else "head"
        elif "state" in classes:
            raise RewriteError(f"{box.name!r} reads both streamed data and an accumulated result, so "
                               f"it is not streamable along {axis!r}")
        elif isinstance(box, Bubble):
            raise RewriteError(f"cannot stream along {axis!r} through the region {box.name}; "
                               "stream before partitioning inside it")
        else:
            role = _chunk_role(plan, i, box, ins, outs, arrays, uses, fused)
        plan.role[i] = role
        for v in outs:
            dep[v] = {"head": "const", "chunk": "chunk", "reduce": "state", "tail": "state",
                      "softmax": "chunk"}[role]
    for j, v in enumerate(cod):
        if dep[v] == "chunk":
            raise RewriteError(f"region is not streamable along {axis!r}: output {j} "
                               f"{region.cod.inside[j]} grows with {axis!r}")
    if not plan.reducers:
        raise RewriteError(f"region is not streamable along {axis!r}: no box folds it away")
    return plan


def _chunk_role(plan, i, box, ins, outs, arrays, uses, fused):
    axis = plan.axis
    spec = box.data
    if axis in spec.weave_names:
        return "chunk"
    kind = kind_of(spec.kind)
    out_carry = [j for j, arr in enumerate(box.cod.inside) if _has_axis(arr, axis)]
    if spec.kind == "softmax" and out_carry:
        users = uses.get(outs[0], [])
        if not (len(users) == 1 and users[0][0] >= 0 and _is_contraction_over(plan.ops[users[0][0]][0], axis)):
            raise RewriteError(f"SoftMax alone is not streamable along {axis!r}: its output grows with "
                               f"{axis!r} (output 0 carries it); compose it with a contraction over {axis!r}")
        core = [a.name for a in box.dom.inside[0].axes if a.name not in spec.weave_names]
        if core != [axis]:
            raise RewriteError(f"SoftMax over {core} is streamable along one of its axes only when it runs over "
                               f"that axis alone; here it runs over {core}")
        contraction = plan.ops[users[0][0]][0]
        rows = [a for a in box.cod.inside[0].names if a != axis]
        lost = [n for n in rows if n not in contraction.cod.inside[0].names]
        if lost:
            raise RewriteError(f"SoftMax-contraction is not streamable along {axis!r}: the contraction also sums "
                               f"away {lost}, along which the running max and sum differ")
        fused[users[0][0]] = i
        plan.reducers.append(Reducer("softmax-contraction", users[0][0], i))
        return "softmax"
    if out_carry:
        raise RewriteError(f"{box.name!r} is not streamable along {axis!r}: {axis!r} is in its item-level "
                           f"core and its output {out_carry[0]} still carries it")
    if kind.accumulator is None:
        raise RewriteError(f"{box.name!r} reduces {axis!r} but its kind {spec.kind!r} declares no "
                           "accumulator, so it is not streamable")
    plan.reducers.append(Reducer(kind.accumulator.name, i))
    return "reduce"


def _is_contraction_over(box, axis) -> bool:
    if isinstance(box, Bubble) or box.data.kind != "contract":
        return False
    return any(axis in a.names for a in box.dom.inside) and all(axis not in a.names for a in box.cod.inside)


def is_streamable(region: Diagram, axis: str) -> bool:
    try:
        analyse(region, axis)
        return True
    except RewriteError:
        return False
