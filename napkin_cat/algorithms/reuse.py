"""Storage reuse in a stream's state: which new value may be written over an old one (paper §5, columns).

The columns of a diagram count *values*, not buffers: a value is live from the operation that makes
it to the last one that reads it.  A state value read for the last time by the operation that makes a
new value of the same shape, at the same level, is dead as that value is born, so the new value takes
its storage.  Two places use the law, and every functor (cost columns, plan, runner) reads it from here:

* a reducer's **step** ``B(state ⊗ chunk) → state'``: new state ``j`` overwrites old state ``j`` when
  the old one is read no later than the new one is made (:func:`step_in_place`);
* a form's **finish** ``state → outputs``: an output overwrites a state value of its shape that the
  operation making it reads last (the online softmax's ``O = o / z`` divides ``o`` where it lies,
  so ``o`` and ``O`` are never held together; :func:`finish_in_place`);
* in a step, a **sum accumulated in place**: a value ``t`` made by an op whose kind's accumulator merges
  with ``add`` (``Accumulator.merge``: a contraction, a sum), read by one op ``f`` only, at a position
  ``f``'s kind declares an addend (``f(…, t) = rest(…) + t``), where ``f``'s output overwrites a state
  value in place, is never stored: the state is first set to ``rest(…)`` in place, then ``t`` is
  accumulated into it (the online softmax's ``o' = fma(o, δ, P·V)`` runs as ``o ← o·δ; o += P·V``, the
  mma with C of FlashAttention's kernels; :func:`accumulated_addends`).

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.streaming import analyse
>>> (r,) = analyse(nc.library.attention(), "x").reducers
>>> [s.name for s in r.state], step_in_place(r.step, len(r.state)), finish_in_place(r.finish)
(['μ', 'z', 'o'], [True, True, True], {0: 2})
>>> [(a.maker, a.consumer, a.addend.position, a.addend.rest, a.state) for a in accumulated_addends(r.step, 3)]
[(1, 2, 2, 'mul', 2)]
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.primitive import KINDS, Addend
from napkin_cat.syntax.wiring import trace_values


def _reads(ops) -> dict:
    last = {}
    for k, (_, ins, _) in enumerate(ops):
        for v in ins:
            last[v] = k
    return last


def step_in_place(step: Diagram, n_state: int) -> list:
    """Per new state value of a step diagram: whether it may overwrite the old one (read no later)."""
    ops, dom, cod = trace_values(step)
    last_read = _reads(ops)
    made = {v: k for k, (_, _, outs) in enumerate(ops) for v in outs}
    return [cod[j] in made and last_read.get(dom[j], -1) <= made[cod[j]] for j in range(n_state)]


def finish_in_place(finish: Diagram) -> dict:
    """``{output j: state i}``: the finish's output ``j`` may be written over state value ``i`` (its input
    ``i``): the operation making output ``j`` reads state ``i`` for the last time, and both are arrays of
    the same axes at the same level.  Each state value is given to one output at most."""
    ops, dom, cod = trace_values(finish)
    last_read = _reads(ops)
    arrays = dict(zip(dom, finish.dom.inside))
    for box, _, outs in ops:
        arrays.update(zip(outs, box.cod.inside))
    taken, out = set(), {}
    for j, v in enumerate(cod):
        maker = next((k for k, (_, _, outs) in enumerate(ops) if v in outs), None)
        if maker is None or cod.count(v) > 1:
            continue
        _, ins, _ = ops[maker]
        for i, s in enumerate(dom):
            a, b = arrays[s], arrays[v]
            if (i not in taken and s in ins and s not in cod and last_read.get(s) == maker
                    and a.axes == b.axes and a.level == b.level):
                out[j] = i
                taken.add(i)
                break
    return out


@dataclass(frozen=True)
class Accumulated:
    """A step's op ``maker`` (index in ``trace_values(step)``) whose one output is accumulated by the op
    ``consumer`` at its ``addend`` into new state ``state``, in place: never stored."""

    maker: int
    consumer: int
    addend: Addend
    state: int


def _kind(box):
    spec = getattr(box, "data", None)
    return KINDS.get(getattr(spec, "kind", None))


def accumulated_addends(step: Diagram, n_state: int) -> list:
    """The sums of a step diagram accumulated straight into the state (the law in the module docstring).

    ``t`` (the one output of an op whose kind's accumulator merges two states by ``add``: a sum, which may
    start from the ``rest`` already in the state instead of its identity 0) qualifies when it is read
    once, by an op ``f`` with one output, at an addend position of ``f``'s kind; ``f``'s output is new state
    ``j`` written over the old one (:func:`step_in_place`); ``t``'s maker reads no old state (it runs
    later, when the state is being overwritten), and ``t`` is not itself an output of the step; one sum
    per consumer (``add(t₁, t₂)`` accumulates ``t₁`` only)."""
    ops, dom, cod = trace_values(step)
    ok = step_in_place(step, n_state)
    uses = {}
    for k, (_, ins, _) in enumerate(ops):
        for p, v in enumerate(ins):
            uses.setdefault(v, []).append((k, p))
    out = []
    for m, (box, ins, outs) in enumerate(ops):
        kind = _kind(box)
        if kind is None or kind.accumulator is None or kind.accumulator.merge != "add" or len(outs) != 1:
            continue
        (t,) = outs
        if t in cod or len(uses.get(t, ())) != 1:
            continue
        ((f, pos),) = uses[t]
        fbox, _, fouts = ops[f]
        fkind = _kind(fbox)
        addend = next((a for a in (fkind.addends if fkind else ()) if a.position == pos), None)
        if addend is None or len(fouts) != 1:
            continue
        if any(a.consumer == f for a in out):
            continue
        js = [j for j in range(n_state) if cod[j] == fouts[0] and ok[j]]
        if len(js) != 1 or any(v in dom[:n_state] for v in ins) or cod.count(fouts[0]) != 1:
            continue
        out.append(Accumulated(m, f, addend, js[0]))
    return out
