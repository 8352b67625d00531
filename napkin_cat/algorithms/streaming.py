"""Streamability along an axis, derived from accumulators and accumulator forms (Appendix A.1).

A region F is streamable along ``a`` when every box that reads streamed data either maps over
``a`` (``a`` is one of its weaves: an *E* box, applied chunk by chunk), or reduces ``a`` away with
the accumulator of its kind (contraction: sum; reductions: sum/max/min), or is matched by a
registered accumulator form (:mod:`napkin_cat.algorithms.accumulators`; SoftMax followed by a
contraction has the online-softmax form of the rule library).  Boxes that do not see streamed data
run once before (head) or after (tail).  This is the fusion theorem read as an algorithm::

    F streamable along a, E weaved over a   ⟹   E ; F streamable along a
    F streamable along a                    ⟹   weave_h(F) streamable along a

The result, a :class:`StreamPlan`, is the one description of a stream that the numpy fold
(``semantics.regions``) and the cost functor (``cost.iocost``) read: head / body / tail ops and,
per reducer, its state arrays (shape, init), its step diagram ``B`` and its finish.

>>> import napkin_cat as nc
>>> plan = analyse(nc.library.attention(), "x")
>>> [plan.role[i] for i in range(len(plan.ops))]
['body', 'body', 'body']
>>> (r,) = plan.reducers
>>> r.kind, [(s.name, str(s.array), s.init) for s in r.state]
('softmax_contraction_to_unscaled', [('μ', 'q', -inf), ('z', 'q', 0.0), ('o', 'q×d', 0.0)])
>>> sorted(b.name for b in r.step.boxes if b.name in ("SoftMax₁", "·", "fma"))
['SoftMax₁', 'fma', '·']
>>> analyse(nc.softmax("q x", over="x"), "x")
Traceback (most recent call last):
...
napkin_cat.errors.RewriteError: SoftMax alone is not streamable along 'x': its output grows with 'x' ...
"""
from __future__ import annotations

from dataclasses import dataclass, field

from napkin_cat.algorithms.accumulators import GROUP, Binding, StateArray, forms_for
from napkin_cat.algorithms.nesting import nest_of
from napkin_cat.errors import RewriteError
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.wiring import consumers, trace_values


@dataclass(frozen=True)
class Reducer:
    """Ops that fold the streamed axis away, with the state they maintain.

    A monoid reducer (``accumulator`` set, ``step``/``finish`` None) is one op combining its
    partial results; a form reducer (``form`` set) runs ``step`` once per trip on
    ``state ⊗ inputs`` and ``finish`` once, producing the values ``outputs``.
    """

    ops: tuple
    inputs: tuple
    state: tuple
    outputs: tuple
    step: Diagram | None = None
    finish: Diagram | None = None
    accumulator: object = None
    form: object = None
    nest: object = None

    @property
    def kind(self) -> str:
        if self.nest is not None:
            return self.nest.kind
        return self.form.name if self.form is not None else self.accumulator.name

    @property
    def op(self) -> int:
        """The last op of the reducer (where its outputs are complete)."""
        return max(self.ops)



@dataclass
class StreamPlan:
    """head (run once), body (run per slice: maps and reducers), tail (run once), and the reducers."""

    axis: str
    ops: list
    dom: list
    cod: list
    arrays: dict = field(default_factory=dict)   # value id -> Array
    uses: dict = field(default_factory=dict)     # value id -> [(op, port)]
    role: dict = field(default_factory=dict)     # op index -> 'head' | 'body' | 'tail'
    reducers: list = field(default_factory=list)
    streamed_inputs: list = field(default_factory=list)
    sliced: list = field(default_factory=list)   # output positions written slice by slice (a sliced stream)

    def cod_array(self, j: int):
        """The array of output ``j``."""
        return self.arrays[self.cod[j]]

    @property
    def sliced_values(self) -> list:
        """The value ids of the sliced outputs (made per trip by the body, written at the trip's range)."""
        return [self.cod[j] for j in self.sliced]

    def indices(self, role):
        return [i for i, r in sorted(self.role.items()) if r == role]

    def producer(self, v):
        """``(op, port)`` that writes value ``v``, or None for an input of the region."""
        for k, (_, _, outs) in enumerate(self.ops):
            if v in outs:
                return k, outs.index(v)
        return None

    @property
    def covered(self) -> dict:
        """op index -> the reducer it belongs to."""
        return {i: r for r in self.reducers for i in r.ops}

    @property
    def maps(self) -> list:
        """Body ops that map over the axis, run chunk by chunk (not part of a reducer)."""
        cov = self.covered
        return [i for i in self.indices("body") if i not in cov]


def _has_axis(arr, axis):
    return axis in arr.names


def _no_form(box, axis, j, reasons):
    kind = box.data.kind
    if reasons:
        return reasons[0]
    return (f"{box.name!r} is not streamable along {axis!r}: {axis!r} is in its item-level core and its output {j} "
            f"still carries it, and no accumulator form is registered for its kind {kind!r}; register one with "
            f"napkin_cat.algorithms.accumulators.register(...) (or under the {GROUP!r} entry point)")


def _bindings(plan) -> tuple[dict, dict]:
    """Registered forms matched in the region: op -> Binding (first match wins), op -> reasons."""
    found, reasons = {}, {}
    for i, (box, _, _) in enumerate(plan.ops):
        if isinstance(box, Bubble):
            continue
        for form in forms_for(box.data.kind):
            res = form.match(plan, i)
            if isinstance(res, Binding):
                if not any(j in found for j in res.ops):
                    for j in res.ops:
                        found[j] = res
                break
            reasons.setdefault(i, []).append(res)
    return found, reasons


def analyse(region: Diagram, axis: str, sliced: bool = False) -> StreamPlan:
    """Classify the boxes of ``region`` for streaming along ``axis``, or raise RewriteError saying why not.

    With ``sliced`` an output that grows with ``axis`` is accepted: each trip computes its slice and
    writes it (a *sliced* output, recorded in ``plan.sliced``); inputs without ``axis`` are loaded once by
    the head and stay live through the trips.  Without it such an output is refused.
    """
    ops, dom, cod = trace_values(region)
    arrays = {v: region.dom.inside[v] for v in dom}
    for box, ins, outs in ops:
        arrays.update(zip(outs, box.cod.inside))
    plan = StreamPlan(axis, ops, dom, cod, arrays, consumers(ops, cod))
    plan.streamed_inputs = [i for i, v in enumerate(dom) if _has_axis(arrays[v], axis)]
    if not plan.streamed_inputs:
        raise RewriteError(f"cannot stream along {axis!r}: no input of the region carries it "
                           f"(inputs {[str(a) for a in region.dom.inside]})")
    dep = {v: ("chunk" if _has_axis(arrays[v], axis) else "const") for v in dom}
    bound, reasons = _bindings(plan)
    for i, (box, ins, outs) in enumerate(ops):
        if i in bound:
            role = _bound_role(plan, i, bound[i], dep)
        else:
            classes = {dep[v] for v in ins}
            if "internal" in classes:
                raise RewriteError(f"{box.name!r} reads a value inside the accumulator form of another box, so the "
                                   f"region is not streamable along {axis!r}")
            if "chunk" not in classes and "state" not in classes and _makes_axis(box, axis):
                role = broadcast_role(box, axis)
            elif "chunk" not in classes:
                role = "tail" if "state" in classes else "head"
            elif "state" in classes:
                raise RewriteError(f"{box.name!r} reads both streamed data and an accumulated result, so "
                                   f"it is not streamable along {axis!r}")
            elif isinstance(box, Bubble):
                role = _nested_role(plan, i, box, ins, outs)
            else:
                role = _chunk_role(plan, i, box, ins, outs, reasons.get(i, []))
        plan.role[i] = role
        reduced = any(i in r.ops for r in plan.reducers)
        for v in outs:
            if i in bound:
                dep[v] = "state" if v in bound[i].outputs else "internal"
            else:
                dep[v] = "state" if reduced else {"head": "const", "body": "chunk", "tail": "state"}[role]
    for j, v in enumerate(cod):
        if dep[v] == "chunk":
            if not sliced:
                raise RewriteError(f"region is not streamable along {axis!r}: output {j} "
                                   f"{region.cod.inside[j]} grows with {axis!r} (a sliced stream, "
                                   f"stream(..., sliced=True), writes such outputs slice by slice)")
            if v in dom:
                raise RewriteError(f"a sliced stream along {axis!r} cannot pass input {dom.index(v)} straight "
                                   f"through to output {j}: an output is made by a box of the region")
            plan.sliced.append(j)
        elif sliced and axis in region.cod.inside[j].names:
            raise RewriteError(f"output {j} {region.cod.inside[j]} of the sliced stream along {axis!r} carries "
                               f"{axis!r} but is made once (after the fold), not slice by slice")
    if not plan.reducers and not plan.sliced:
        raise RewriteError(f"region is not streamable along {axis!r}: no box folds it away"
                           + ("" if sliced else " (and no output is sliced: see stream(..., sliced=True))"))
    return plan


def _bound_role(plan, i, binding, dep):
    """Role of an op covered by a form; at its last op the form becomes a reducer."""
    if i != max(binding.ops):
        return "body"
    classes = {dep[v] for v in binding.inputs}
    name = binding.form.name
    if "state" in classes or "internal" in classes:
        raise RewriteError(f"the accumulator form {name!r} reads an accumulated result, so it is not "
                           f"streamable along {plan.axis!r}")
    if "chunk" not in classes:
        raise RewriteError(f"the accumulator form {name!r} reads no streamed data along {plan.axis!r}")
    plan.reducers.append(Reducer(binding.ops, binding.inputs, binding.state, binding.outputs,
                                 binding.step, binding.finish, form=binding.form))
    return "body"


def _nested_role(plan, i, box, ins, outs):
    """A region reading the slice: a nested reducer when it folds the axis away (:mod:`.nesting`), or a map run
    once per trip when it is a stream along another axis that maps over this one (:func:`inner_stream_map`)."""
    axis = plan.axis
    if inner_stream_map(box, axis):
        return "body"
    if any(_has_axis(arr, axis) for arr in box.cod.inside):
        raise RewriteError(f"cannot stream along {axis!r} through the region {box.name}: its output still carries "
                           f"{axis!r} (a region is advanced as a nested reducer, which folds the axis away; a "
                           f"sliced stream does not run a region as a map either); stream before partitioning "
                           f"inside it")
    try:
        nest = nest_of(box, axis, analyse)
    except RewriteError as e:
        raise RewriteError(f"cannot stream along {axis!r} through the region {box.name}: {e}") from None
    plan.reducers.append(Reducer((i,), tuple(ins), nest.state, tuple(outs), finish=nest.finish, nest=nest))
    return "body"


def inner_stream_map(box, axis: str) -> bool:
    """Whether the region ``box`` inside a stream along ``axis`` runs as a map there: a Stream along another
    axis that reduces its own axis away (no output carries it), whose outputs carry ``axis``, and whose every
    box that sees ``axis`` maps over it (a trip's slice of its outputs is made from the trip's slices alone).
    This is the 2-D tiled loop: per slice of ``axis``, a loop along the inner axis builds the slice's tile."""
    if getattr(box, "region", None) != "stream" or box.axis == axis or getattr(box, "sliced", False):
        return False
    if any(_has_axis(a, box.axis) for a in box.cod.inside) or not any(_has_axis(a, axis) for a in box.cod.inside):
        return False
    return _maps_over(box.arg, axis)


def _maps_over(d: Diagram, axis: str) -> bool:
    ops, _, _ = trace_values(d)
    for b, _, _ in ops:
        if isinstance(b, Bubble):
            if getattr(b, "region", None) in ("grid", "stream") and b.axis == axis:
                return False
            if not _maps_over(b.arg, axis):
                return False
        elif any(_has_axis(a, axis) for a in (*b.dom.inside, *b.cod.inside)) and axis not in b.data.weave_names \
                and b.data.kind not in ("load", "save"):
            return False
    return True


def _makes_axis(box, axis) -> bool:
    return any(_has_axis(arr, axis) for arr in box.cod.inside)


def broadcast_role(box, axis) -> str:
    """The role in a stream along ``axis`` of a box that reads no slice but makes the axis (a broadcast along it):
    ``"body"``, a map, made per trip at each slice's extent (a shorter last slice included), since inside the
    stream the axis has the slice's size; a box not weaved over ``axis`` is refused (made once, it would have a
    whole slice's size)."""
    if not isinstance(box, Bubble) and axis in box.data.weave_names:
        return "body"
    why = "it is a region" if isinstance(box, Bubble) else f"it is not weaved over {axis!r}"
    raise RewriteError(f"{box.name!r} makes the streamed axis {axis!r} from inputs that do not carry it, and {why}: "
                       f"made once, it would have the size of a whole slice even in a shorter last slice; make it "
                       f"a map weaved over {axis!r} (run per slice) or compute it outside the stream")


def _chunk_role(plan, i, box, ins, outs, reasons):
    axis = plan.axis
    spec = box.data
    if axis in spec.weave_names:
        return "body"
    out_carry = [j for j, arr in enumerate(box.cod.inside) if _has_axis(arr, axis)]
    if out_carry:
        raise RewriteError(_no_form(box, axis, out_carry[0], reasons))
    acc = kind_of(spec.kind).accumulator
    if acc is None:
        raise RewriteError(f"{box.name!r} reduces {axis!r} but its kind {spec.kind!r} declares no "
                           "accumulator, so it is not streamable" + (f" ({reasons[0]})" if reasons else ""))
    out = box.cod.inside[0]
    init = float(acc.identity(()))
    plan.reducers.append(Reducer((i,), tuple(ins), (StateArray(acc.name, out, init),), (outs[0],), accumulator=acc))
    return "body"


def is_streamable(region: Diagram, axis: str, sliced: bool = False) -> bool:
    """Whether ``region`` streams along ``axis`` (:func:`analyse` finds every box a role), ``sliced``: writing its
    outputs slice by slice.

    >>> import napkin_cat as nc
    >>> is_streamable(nc.library.matmul(), "b"), is_streamable(nc.library.matmul(), "z")
    (True, False)
    """
    try:
        analyse(region, axis, sliced)
        return True
    except RewriteError:
        return False
