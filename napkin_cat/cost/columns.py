"""The columns of a stream's expansion: what is live at each step of head, trips and tail (paper §5.1, §5.4).

A stream runs as the paper's loop (Fig. streamed_algorithm_loop): the head once, each reducer's
state set to its empty value, per trip the maps and each reducer's accumulator (a monoid's box,
or a form's step diagram ``B`` op by op), then each form's finish and the tail.  A column is the
set of values live before a step: defined earlier and read at or after it (values read by the
body and made outside it stay live through every trip, the state from trip to trip).  This is the
order in which data is actually held, so head computations never meet a slice, and the step's
own intermediates (δ, the rescaled output) are counted.

>>> import napkin_cat as nc
>>> from napkin_cat.syntax.axis import symbol
>>> s = nc.stream(nc.library.attention(), "x", "s_x").boxes[0].arg.boxes[0]
>>> cols = stream_columns(s, s.plan)
>>> max(c[1].subs({symbol("q"): 4, symbol("d"): 2, symbol("s_x"): 3}) for c in cols if 1 in c)
46
"""
from __future__ import annotations

import sympy

from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.wiring import trace_values


def in_place(step: Diagram, n_state: int) -> list:
    """Per new state value of a step diagram: whether it may overwrite the old one (read no later)."""
    ops, dom, cod = trace_values(step)
    last_read = {}
    for k, (_, ins, _) in enumerate(ops):
        for v in ins:
            last_read[v] = k
    made = {v: k for k, (_, _, outs) in enumerate(ops) for v in outs}
    return [cod[j] in made and last_read.get(dom[j], -1) <= made[cod[j]] for j in range(n_state)]


def _numel(arr):
    n = sympy.Integer(1)
    for a in arr.axes:
        n = n * a.size
    return n


def _sub(diagram, ins: list, outs: dict, tag):
    """Items of a sub-diagram run in place: its dom ids are ``ins``; ``outs`` renames chosen cod ids."""
    ops, dom, cod = trace_values(diagram)
    name = dict(zip(dom, ins))
    arrays = {}
    for box, i_ids, o_ids in ops:
        for v, arr in zip(o_ids, box.cod.inside):
            name[v] = outs.get(v, (tag, v))
            arrays[name[v]] = arr
    items = [([name[v] for v in i_ids], [name[v] for v in o_ids]) for _, i_ids, o_ids in ops]
    return items, arrays, [name[v] for v in cod]


def stream_columns(box, plan) -> list:
    """Columns (dicts level → live values) of a stream, in the order its expansion runs."""
    arrays = dict(plan.arrays)
    head, body, tail = [], [], []
    for i in sorted(plan.role):
        if plan.role[i] == "head":
            _, ins, outs = plan.ops[i]
            head.append((list(ins), list(outs)))
    covered = {i: r for r in plan.reducers for i in r.ops}
    state = {}
    for k, r in enumerate(plan.reducers):
        if r.step is None:
            state[k] = [r.outputs[0]]
        else:
            state[k] = [("state", k, j) for j in range(len(r.state))]
            for sid, s in zip(state[k], r.state):
                arrays[sid] = s.array
        for sid in state[k]:
            head.append(([], [sid]))
    for i in sorted(plan.role):
        if plan.role[i] != "body":
            continue
        _, ins, outs = plan.ops[i]
        r = covered.get(i)
        if r is None:
            body.append((list(ins), list(outs)))
        elif i == max(r.ops):
            k = plan.reducers.index(r)
            if r.step is None:
                body.append((list(ins) + state[k], state[k]))
                continue
            ops, dom, cod = trace_values(r.step)
            ok = in_place(r.step, len(state[k]))
            rename = {cod[j]: state[k][j] for j in range(len(state[k])) if ok[j]}
            items, arrs, new = _sub(r.step, state[k] + list(r.inputs), rename, ("step", k))
            arrays.update(arrs)
            body += items
            body += [([v], [s]) for v, s in zip(new, state[k]) if v != s]
    alias = {}
    for k, r in enumerate(plan.reducers):
        if r.step is not None:
            items, arrs, new = _sub(r.finish, state[k], {}, ("finish", k))
            arrays.update(arrs)
            tail += items
            alias.update(zip(r.outputs, new))
    for i in sorted(plan.role):
        if plan.role[i] == "tail":
            _, ins, outs = plan.ops[i]
            tail.append(([alias.get(v, v) for v in ins], list(outs)))
    live_out = {alias.get(v, v) for v in plan.cod}
    return _columns(head, body, tail, live_out, arrays)


def _block_in(items, live):
    live = set(live)
    for uses, defs in reversed(items):
        live = (live - set(defs)) | set(uses)
    return live


def _columns(head, body, tail, live_out, arrays) -> list:
    tail_in = _block_in(tail, live_out)
    body_in = _block_in(body, tail_in)
    while True:
        nxt = _block_in(body, tail_in | body_in)
        if nxt == body_in:
            break
        body_in = nxt
    cols = []

    def sample(items, live):
        out = []
        for uses, defs in reversed(items):
            live = (live - set(defs)) | set(uses)
            out.append(set(live))
        return list(reversed(out))
    for live_sets in (sample(head, body_in | tail_in), sample(body, tail_in | body_in), sample(tail, live_out),
                      [live_out]):
        for live in live_sets:
            col = {}
            for v in live:
                arr = arrays[v]
                col[arr.level] = col.get(arr.level, sympy.Integer(0)) + _numel(arr)
            cols.append(col)
    return cols
