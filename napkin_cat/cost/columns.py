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

from napkin_cat.syntax.wiring import trace_values
from napkin_cat.cost.live import numel
from napkin_cat.algorithms.nesting import state_moves
from napkin_cat.algorithms.reuse import accumulated_addends, finish_in_place, step_in_place


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
    head, tail = [], []
    for i in plan.indices("head"):
        _, ins, outs = plan.ops[i]
        head.append((list(ins), list(outs)))
    state = {}
    for k, r in enumerate(plan.reducers):
        if r.finish is None:
            state[k] = list(r.outputs)
        else:
            state[k] = [("state", k, j) for j in range(len(r.state))]
            for sid, s in zip(state[k], r.state):
                arrays[sid] = s.array
        for sid in state[k]:
            head.append(([], [sid]))
    body = _trip_items(plan, state, {v: v for v in plan.arrays}, arrays, ())
    alias = {}
    for k, r in enumerate(plan.reducers):
        if r.finish is not None:
            _, _, fcod = trace_values(r.finish)
            over = {fcod[j]: state[k][i] for j, i in finish_in_place(r.finish).items()}
            items, arrs, new = _sub(r.finish, state[k], over, ("finish", k))
            arrays.update(arrs)
            tail += items
            alias.update(zip(r.outputs, new))
    for i in plan.indices("tail"):
        _, ins, outs = plan.ops[i]
        tail.append(([alias.get(v, v) for v in ins], list(outs)))
    live_out = {alias.get(v, v) for v in plan.cod}
    return _columns(head, body, tail, live_out, arrays)


def _trip_items(plan, state: dict, name: dict, arrays: dict, tag) -> list:
    """The items of one slice of a stream plan: its maps, then each reducer's accumulator on ``state[k]``
    (ids); ``name`` maps the plan's value ids to the ids used here (its inputs: the caller's)."""
    def nm(v):
        if v not in name:
            name[v] = (tag, v)
            arrays[name[v]] = plan.arrays[v]
        return name[v]
    covered = {i: r for r in plan.reducers for i in r.ops}
    items = []
    for i in plan.indices("body"):
        _, ins, outs = plan.ops[i]
        r = covered.get(i)
        if r is None:
            items.append(([nm(v) for v in ins], [nm(v) for v in outs]))
        elif i == max(r.ops):
            k = plan.reducers.index(r)
            if r.nest is not None:
                items += nest_items(r.nest, state[k], [nm(v) for v in r.inputs], arrays, tag + (i,))
            elif r.step is None:
                items.append(([nm(v) for v in ins] + state[k], state[k]))
            else:
                ops, dom, cod = trace_values(r.step)
                ok = step_in_place(r.step, len(state[k]))
                rename = {cod[j]: state[k][j] for j in range(len(state[k])) if ok[j]}
                sub, arrs, new = _sub(r.step, state[k] + [nm(v) for v in r.inputs], rename, tag + ("step", k))
                arrays.update(arrs)
                items += _accumulated(sub, accumulated_addends(r.step, len(state[k])))
                items += [([v], [s]) for v, s in zip(new, state[k]) if v != s]
    return items


def _accumulated(items: list, sums: list) -> list:
    """A step's items with each sum accumulated in place (:func:`~napkin_cat.algorithms.reuse.accumulated_addends`):
    its maker runs after the consumer's rest, reading the state it adds into; the sum is never a value."""
    items = list(items)
    for a in sums:
        (m_ins, _), (f_ins, f_outs) = items[a.maker], items[a.consumer]
        rest = ([f_ins[p] for p in a.addend.operands], f_outs)
        items[a.consumer] = [rest, (m_ins + f_outs, f_outs)]
        items[a.maker] = []
    out = []
    for it in items:
        out += it if isinstance(it, list) else [it]
    return out


def nest_items(nest, state: list, ins: list, arrays: dict, tag) -> list:
    """The items of one trip of a nested reducer (:mod:`napkin_cat.algorithms.nesting`) on the ids ``state`` and
    ``ins``, as the plan runs it: a Kernel's state loaded to its level and saved back around its inside, a
    Grid's one group (its slices are views: the same ids), a sub-loop's head and one sub-slice."""
    region = nest.region
    kind = getattr(region, "region", None)
    if kind == "kernel":
        loads, saves, inner = [], [], []
        for j, (sid, s) in enumerate(zip(state, nest.state)):
            cur = sid
            for step in state_moves(s.array, region.params["level"], "load"):
                arr = step.cod.inside[0]
                nid = (tag, "state", j, arr.level)
                arrays[nid] = arr
                loads.append(([cur], [nid]))
                saves.insert(0, ([nid, cur], []))
                cur = nid
            inner.append(cur)
        return loads + nest_items(nest.child, inner, ins, arrays, tag + ("kernel",)) + saves
    if kind == "grid":
        return _looped(nest_items(nest.child, state, ins, arrays, tag + ("grid",)))
    plan = nest.plan
    name = dict(zip(plan.dom, ins))
    items = []
    for i in plan.indices("head"):
        _, i_ids, o_ids = plan.ops[i]
        for v in o_ids:
            name[v] = (tag, v)
            arrays[name[v]] = plan.arrays[v]
        items.append(([name[v] for v in i_ids], [name[v] for v in o_ids]))
    parts = {k: list(state[a:b]) for k, (a, b) in enumerate(nest.parts)}
    trip = _trip_items(plan, parts, name, arrays, tag)
    return items + (_looped(trip) if kind == "stream" else trip)


def _looped(items) -> list:
    """One trip of a loop standing for all: what the trip reads from outside stays live to its end (the
    next trip reads it again)."""
    made, outside = set(), []
    for uses, defs in items:
        outside += [v for v in uses if v not in made and v not in outside]
        made |= set(defs)
    return items + [(outside, [])]


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
                col[arr.level] = col.get(arr.level, sympy.Integer(0)) + numel(arr)
            cols.append(col)
    return cols
