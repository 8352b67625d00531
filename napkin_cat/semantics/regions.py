"""The numpy meaning of the regions: a Kernel runs its inside, a Grid loops, a Stream folds.

These are the paper's equivalences read as programs (Figs. weaved_algorithm and
recursive_decomposition): a Grid splits its axis into groups, runs the inside on each and
joins the results; a Stream runs its head once, its body once per slice (folding the
reducers' accumulators, online softmax included), and its tail once.  A tile that does not
divide its axis leaves a shorter last group or slice (a ragged tile).  The interpreter of
the inside is passed in, so this module knows regions and nothing of the interpreter.

>>> import numpy as np, napkin_cat as nc
>>> flash = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
>>> Q, K, V = np.ones((4, 2)), np.ones((6, 2)), np.ones((6, 2))
>>> nc.evaluate(flash, Q, K, V, sizes={"g_q": 2, "s_x": 3}).shape
(4, 2)
>>> nc.evaluate(flash, Q, K, V, sizes={"g_q": 3, "s_x": 4}).shape   # ragged: groups 3 + 1, slices 4 + 2
(4, 2)
"""
from __future__ import annotations

import numpy as np

from napkin_cat.algorithms.bubbles import Grid, Kernel, Partition, Region, Stream
from napkin_cat.algorithms.streaming import StreamPlan
from napkin_cat.errors import ShapeError
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.primitive import Core, kind_of
from napkin_cat.syntax.relabel import map_arrays


def _slices(total: int, size: int):
    """Consecutive slices of ``size`` covering ``total``; the last one is shorter when ``size`` does
    not divide ``total`` (a ragged tile: the paper's recursive decomposition allows any split)."""
    return [slice(k, min(k + size, total)) for k in range(0, total, size)]


def bind(region: Partition, env, what: str):
    """``(full size, tile size, inner env)`` with the tile size bound inside."""
    total = env.size(region.full_size(), f"axis {region.axis!r}")
    tile = region.size if isinstance(region.size, int) else \
        env.size(region.size, f"the {what} size of {region.axis!r} ({region.size})")
    if tile < 1:
        raise ShapeError(f"the {what} size of {region.axis!r} ({region.size}) is {tile}; it must be a positive "
                         f"integer (any size from 1 up; one that does not divide {total} leaves a shorter last tile)")
    inner = env.child()
    if not isinstance(region.size, int):
        inner[region.size] = tile
    return total, tile, inner


def _short_group(box: Grid, env, n: int):
    """The inside and its env for a last group of ``n`` < the group size: the group size reads ``n``."""
    if not isinstance(box.size, int):
        inner = env.child()
        inner[box.size] = n
        return box.arg, inner

    def fa(arr):
        return arr.replace(axes=tuple(a.relabel(n) if a.name == box.axis and a.size == box.size else a
                                      for a in arr.axes))
    return map_arrays(box.arg, fa), env


def run_kernel(box: Kernel, xs: list, env, interpret) -> list:
    """A kernel computes what its inside computes (its Loads and Saves are identities)."""
    return interpret(box.arg, xs, env)


def run_grid(box: Grid, xs: list, env, interpret) -> list:
    """``split_a ; (F ⊗ … ⊗ F) ; join_a``: the inside on every group of the axis, results joined."""
    total, g, inner_env = bind(box, env, "group")
    pos_in = [arr.names.index(box.axis) if box.axis in arr.names else None for arr in box.dom.inside]
    pos_out = [arr.names.index(box.axis) for arr in box.cod.inside]
    parts = []
    for sl in _slices(total, g):
        inside, group_env = (box.arg, inner_env) if sl.stop - sl.start == g else \
            _short_group(box, inner_env, sl.stop - sl.start)
        chunk = []
        for x, p in zip(xs, pos_in):
            if p is None:
                chunk.append(x)
            else:
                idx = [slice(None)] * x.ndim
                idx[p] = sl
                chunk.append(x[tuple(idx)])
        parts.append(interpret(inside, chunk, group_env))
    return [np.concatenate([p[j] for p in parts], axis=pos_out[j]) for j in range(len(box.cod))]


def run_stream(box: Stream, xs: list, env, interpret) -> list:
    """Head once, the body folded over slices of the stream size, the tail once."""
    total, s, inner_env = bind(box, env, "stream")
    return fold(box.arg, box.plan, xs, inner_env, s, total, interpret)


def _align(x, names, target):
    """Transpose/expand ``x`` (axes ``names``) to broadcast against axes ``target``."""
    order = [n for n in target if n in names]
    x = np.transpose(x, [names.index(n) for n in order])
    shape = [x.shape[order.index(n)] if n in order else 1 for n in target]
    return x.reshape(shape)


def fold(region: Diagram, plan: StreamPlan, xs: list, env, size: int, total: int, interpret) -> list:
    """Evaluate ``region`` as a fold over slices of ``size`` along the streamed axis."""
    axis = plan.axis
    values = {v: x for v, x in zip(plan.dom, xs)}
    positions = {v: region.dom.inside[k].names.index(axis) for k, v in enumerate(plan.dom)
                 if k in plan.streamed_inputs}

    def run(i, vals):
        box, ins, outs = plan.ops[i]
        res = run_region(box, [vals[v] for v in ins], env, interpret) if isinstance(box, Bubble) else \
            run_primitive(box, [vals[v] for v in ins], env)
        for v, r in zip(outs, res):
            vals[v] = r

    for i in plan.indices("head"):
        run(i, values)
    state = {}
    order = sorted(plan.role)
    by_op = {r.op: r for r in plan.reducers}
    for start in range(0, total, size):
        vals = dict(values)
        for v, p in positions.items():
            sl = [slice(None)] * values[v].ndim
            sl[p] = slice(start, start + size)
            vals[v] = values[v][tuple(sl)]
        for i in order:
            role = plan.role[i]
            if role == "chunk":
                run(i, vals)
            elif role == "reduce":
                _accumulate(plan, by_op[i], vals, state, env, run_primitive)
    for r in plan.reducers:
        box, ins, outs = plan.ops[r.op]
        if r.kind == "softmax-contraction":
            y, mu, z, names = state[r.op]
            out_names = list(box.cod.inside[0].names)
            values[outs[0]] = y / _align(z, names, out_names)
        else:
            values[outs[0]] = state[r.op]
    for i in plan.indices("tail"):
        run(i, values)
    return [values[v] for v in plan.cod]


def _accumulate(plan, r, vals, state, env, run_primitive):
    box, ins, outs = plan.ops[r.op]
    if r.kind != "softmax-contraction":
        part = run_primitive(box, [vals[v] for v in ins], env)[0]
        acc = kind_of(box.data.kind).accumulator
        state[r.op] = part if r.op not in state else acc.combine(state[r.op], part)
        return
    sm, sm_ins, sm_outs = plan.ops[r.softmax]
    beta = Core((), (), {}, env).value(dict(sm.data.params).get("beta", 1))
    names = list(sm.dom.inside[0].names)
    ax = names.index(plan.axis)
    scores = beta * vals[sm_ins[0]]
    m_c = np.max(scores, axis=ax)
    safe = np.where(np.isfinite(m_c), m_c, 0.0)
    e = np.exp(scores - np.expand_dims(safe, ax))
    z_c = np.sum(e, axis=ax)
    args = [e if v == sm_outs[0] else vals[v] for v in ins]
    y_c = run_primitive(box, args, env)[0]
    row = [n for n in names if n != plan.axis]
    out_names = list(box.cod.inside[0].names)
    if r.op not in state:
        state[r.op] = (y_c, m_c, z_c, row)
        return
    y, m, z, _ = state[r.op]
    m_new = np.maximum(m, m_c)
    safe_new = np.where(np.isfinite(m_new), m_new, 0.0)
    with np.errstate(invalid="ignore"):
        a = np.where(np.isneginf(m), 0.0, np.exp(m - safe_new))
        b = np.where(np.isneginf(m_c), 0.0, np.exp(m_c - safe_new))
    state[r.op] = (y * _align(a, row, out_names) + y_c * _align(b, row, out_names), m_new, z * a + z_c * b, row)


#: region kind → its numpy meaning ``run(box, xs, env, interpret)``; a new region registers here.
REGION_SEMANTICS = {"kernel": run_kernel, "grid": run_grid, "stream": run_stream}


def run_region(box: Region, xs: list, env, interpret) -> list:
    """Run a region by its registered meaning, or say that it has none."""
    try:
        run = REGION_SEMANTICS[box.region]
    except (KeyError, AttributeError):
        raise ShapeError(f"{box.name}: no numpy meaning is registered for this region; register "
                         f"run(box, xs, env, interpret) in napkin_cat.semantics.regions.REGION_SEMANTICS "
                         f"(known: {sorted(REGION_SEMANTICS)})") from None
    return run(box, xs, env, interpret)
