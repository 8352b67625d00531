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
from napkin_cat.algorithms.nesting import nest_of_diagram
from napkin_cat.algorithms.streaming import StreamPlan, analyse
from napkin_cat.errors import ShapeError
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.syntax.adapter import Bubble, Diagram
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


def fold(region: Diagram, plan: StreamPlan, xs: list, env, size: int, total: int, interpret) -> list:
    """Evaluate ``region`` as a fold over slices of ``size`` along the streamed axis.

    head once; per slice the maps, then every reducer's accumulator (a monoid's combine, a form's
    step diagram on its state, a nested region advanced on its state); after the last slice each
    reducer's finish, then the tail.  A sliced output (``plan.sliced``) is made by the maps slice by
    slice: its slices are concatenated along the axis, ``y = y₁ ⧺ y₂ ⧺ …``.
    """
    values = {v: x for v, x in zip(plan.dom, xs)}
    for i in plan.indices("head"):
        _run(plan, i, values, env, interpret)
    state = [_initial(r, env) for r in plan.reducers]
    pieces = {v: [] for v in plan.sliced_values}   # a sliced output: its slices, concatenated after the trips
    state = _slices_of(plan, values, state, env, size, total, interpret, pieces)
    for j, v in zip(plan.sliced, plan.sliced_values):
        values[v] = np.concatenate(pieces[v], axis=plan.cod_array(j).names.index(plan.axis))
    for k, r in enumerate(plan.reducers):
        finished = state[k] if r.finish is None else interpret(r.finish, state[k], env)
        values.update(zip(r.outputs, finished))
    for i in plan.indices("tail"):
        _run(plan, i, values, env, interpret)
    return [values[v] for v in plan.cod]


def _run(plan, i, vals, env, interpret):
    box, ins, outs = plan.ops[i]
    res = run_region(box, [vals[v] for v in ins], env, interpret) if isinstance(box, Bubble) else \
        run_primitive(box, [vals[v] for v in ins], env)
    for v, r in zip(outs, res):
        vals[v] = r


def _slices_of(plan, values, state, env, size, total, interpret, pieces=None) -> list:
    """The reducers' states after the body has run on every slice of ``size`` of ``total``; the slices of the
    sliced outputs are appended to ``pieces`` (value id -> list)."""
    positions = {v: plan.arrays[v].names.index(plan.axis) for k, v in enumerate(plan.dom)
                 if k in plan.streamed_inputs}
    maps = plan.maps
    for start in range(0, total, size):
        vals = dict(values)
        for v, p in positions.items():
            sl = [slice(None)] * values[v].ndim
            sl[p] = slice(start, start + size)
            vals[v] = values[v][tuple(sl)]
        for i in maps:
            _run(plan, i, vals, env, interpret)
        for v in pieces or ():
            pieces[v].append(vals[v])
        state = [_accumulate(plan, r, state[k], vals, env, interpret) for k, r in enumerate(plan.reducers)]
    return state


def _initial(r, env):
    """The state of an empty stream: each state array filled with its ``init`` (a monoid starts empty)."""
    if r.step is None and r.nest is None:
        return None
    return [np.full(tuple(env.size(a.size, f"axis {a.name!r} of the state {s.name!r}") for a in s.array.axes),
                    s.init) for s in r.state]


def _accumulate(plan, r, state, vals, env, interpret):
    """One trip of a reducer: ``combine(state, F(chunk))`` for a monoid, ``B(state, chunk)`` for a form,
    the nested region advanced on the state (:func:`advance`)."""
    if r.nest is not None:
        return advance(r.nest, state, [vals[v] for v in r.inputs], env, interpret)
    if r.step is not None:
        return interpret(r.step, list(state) + [vals[v] for v in r.inputs], env)
    box, ins, _ = plan.ops[r.op]
    part = run_primitive(box, [vals[v] for v in ins], env)[0]
    return [part] if state is None else [r.accumulator.combine(state[0], part)]


def advance(nest, state: list, xs: list, env, interpret) -> list:
    """A nested reducer's trip (:mod:`napkin_cat.algorithms.nesting`): the region's inside run on one slice
    ``xs`` with its accumulators carried in ``state``; returns the new state.  A Kernel's inside is
    advanced as is (its Loads and Saves are identities), a Grid's on each group's slice of the state, a
    sub-loop's per sub-slice."""
    region = nest.region
    kind = getattr(region, "region", None)
    if kind == "kernel":
        return advance(nest.child, state, xs, env, interpret)
    if kind == "grid":
        return _advance_grid(nest, state, xs, env, interpret)
    plan = nest.plan
    values = {v: x for v, x in zip(plan.dom, xs)}
    for i in plan.indices("head"):
        _run(plan, i, values, env, interpret)
    mine = [list(state[a:b]) for a, b in nest.parts]
    total = max([values[v].shape[plan.arrays[v].names.index(plan.axis)]      # the slice's real extent
                 for k, v in enumerate(plan.dom) if k in plan.streamed_inputs] + [1])
    size = total
    if kind == "stream":
        _, size, env = bind(region, env, "stream")
    mine = _slices_of(plan, values, mine, env, size, total, interpret)
    return [x for part in mine for x in part]


def _advance_grid(nest, state, xs, env, interpret):
    box = nest.region
    total, g, inner_env = bind(box, env, "group")
    pos_in = [arr.names.index(box.axis) if box.axis in arr.names else None for arr in box.dom.inside]
    pos_st = [s.array.names.index(box.axis) for s in nest.state]
    new = [np.array(x, copy=True) for x in state]

    def cut(x, p, sl):
        idx = [slice(None)] * x.ndim
        idx[p] = sl
        return tuple(idx)
    for sl in _slices(total, g):
        n = sl.stop - sl.start
        inside, group_env = (box.arg, inner_env) if n == g else _short_group(box, inner_env, n)
        child = nest.child if inside is box.arg else nest_of_diagram(inside, nest.axis, analyse)
        chunk = [x if p is None else x[cut(x, p, sl)] for x, p in zip(xs, pos_in)]
        res = advance(child, [x[cut(x, p, sl)] for x, p in zip(new, pos_st)], chunk, group_env, interpret)
        for x, p, y in zip(new, pos_st, res):
            x[cut(x, p, sl)] = y
    return new


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
