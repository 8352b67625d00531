"""Storage reuse in a stream's state: which new value may be written over an old one (paper §5, columns).

The columns of a diagram count *values*, not buffers: a value is live from the operation that makes
it to the last one that reads it.  A state value read for the last time by the operation that makes a
new value of the same shape, at the same level, is dead as that value is born, so the new value takes
its storage.  Two places use the law, and every functor (cost columns, plan, runner) reads it from here:

* a reducer's **step** ``B(state ⊗ chunk) → state'``: new state ``j`` overwrites old state ``j`` when
  the old one is read no later than the new one is made (:func:`step_in_place`);
* a form's **finish** ``state → outputs``: an output overwrites a state value of its shape that the
  operation making it reads last (the online softmax's ``O = o / z`` divides ``o`` where it lies,
  so ``o`` and ``O`` are never held together; :func:`finish_in_place`).

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.streaming import analyse
>>> (r,) = analyse(nc.library.attention(), "x").reducers
>>> [s.name for s in r.state], step_in_place(r.step, len(r.state)), finish_in_place(r.finish)
(['μ', 'z', 'o'], [True, True, True], {0: 2})
"""
from __future__ import annotations

from napkin_cat.syntax.adapter import Diagram
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
