"""Pass ``hoist``: the maps that open a sub-loop run once per trip of the enclosing stream, on its whole tile.

A sub-loop streams the same axis as the stream around it (step 2: ``u_x`` of ``s_x``).  The maps at the
start of its body that read only the sub-loop's slice of values made outside it, and make temporaries
written nowhere else, move before it and run on the enclosing stream's tile; the sub-loop reads its slice
of what they made, and keeps the accumulator (§5.2: "the B component always allows for a subloop";
Table 1: S is ``w_q×s_x``, P′ is ``t_q×u_x``)::

    for i_x:  for i_x':  S ← Q·K[i_x'];  …        ⟶        for i_x:  S ← Q·K;  for i_x':  … S[i_x'] …

>>> import napkin_cat as nc
>>> from rewrites import flash_attention
>>> from napkin_cat.plan.ir import StreamLoop, Compute, walk
>>> from napkin_cat.plan.lowering.state import Lowering, Options
>>> f = nc.stream(flash_attention(nc.library.attention()).diagram, "x", "u_x")
>>> p = nc.plan(f, {"q": 4, "x": 8, "d": 2, "g_q": 2, "s_x": 4, "u_x": 2}, accumulate=False)
>>> s = hoist(Lowering.start(p, nc.hardware.load_hierarchy("hopper"), Options()))
>>> inner = [x for x in walk(s.body) if isinstance(x, StreamLoop)][-1]
>>> [x.kind for x in walk(inner.body) if isinstance(x, Compute)], str(s.variables["contract10"].size)
(['softmax_unscaled', 'contract', 'fma'], 'g_q*s_x')
"""
from __future__ import annotations

from dataclasses import replace

import sympy

from napkin_cat.plan.ir import (Alloc, Compute, Copy, GridLoop, Load, Ref, Store, StreamLoop, rebuild, walk,
                                with_blocks, writes)
from napkin_cat.plan.lowering.state import frozen, map_block_kernels
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.relabel import map_box


def hoist(state):
    """The pass (a no-op when ``options.hoist`` is off)."""
    if not state.options.hoist:
        return state
    writers: dict = {}
    for x in walk(state.base.body):
        for n in _values_written(x):
            writers[n] = writers.get(n, 0) + 1
    variables = dict(state.variables)

    def kernel(k, grids):
        return with_blocks(k, (_hoist(list(k.body), variables, writers),))
    body = map_block_kernels(state.body, state.block, kernel)
    return replace(state, body=body, variables=frozen(variables))


def _values_written(s) -> tuple:
    """Variables a statement writes a value into (an ``Alloc`` brings one to life and writes none)."""
    return () if isinstance(s, Alloc) else writes(s)


def _hoist(stmts, variables, writers) -> list:
    out = []
    for s in stmts:
        if isinstance(s, StreamLoop):
            body = []
            for t in s.body:
                if isinstance(t, StreamLoop) and t.axis == s.axis:
                    maps, t = _hoist_maps(t, s, variables, writers)
                    body += maps
                body.append(t)
            s = with_blocks(s, (_hoist(list(s.head), variables, writers), _hoist(body, variables, writers),
                                _hoist(list(s.tail), variables, writers)))
        elif isinstance(s, GridLoop):
            s = with_blocks(s, (_hoist(list(s.body), variables, writers),))
        out.append(s)
    return out


def _opens_on(r, axis, index):
    """Whether ``r`` reads the sub-loop's slice (its range along ``axis`` moves with the sub-loop's index)."""
    rng = r.range(axis)
    return rng is not None and index in sympy.sympify(rng.start).free_symbols


def _hoist_maps(inner: StreamLoop, outer: StreamLoop, variables, writers):
    """``(maps moved before the sub-loop, the sub-loop reading their slices)``; ``variables`` takes the maps'
    outputs at the enclosing stream's tile."""
    axis = inner.axis
    written = {n for x in walk(inner.body) for n in _values_written(x)}
    maps, rng = [], None
    body = list(inner.body)
    while body:
        c = body[0]
        if not isinstance(c, Compute) or c.accumulate or axis not in c.box.data.weave_names:
            break
        if any(r.var in written for r in c.ins):
            break
        outs = [variables[r.var] for r in c.outs]
        if any(v.role != "temp" or writers.get(v.name, 0) != 1 for v in outs):
            break
        ranges = [r.range(axis) for r in c.ins if _opens_on(r, axis, inner.index)]
        if not ranges:
            break
        rng = ranges[0]
        ins = tuple(Ref(r.var, tuple((a, x) for a, x in r.index if a != axis)) if _opens_on(r, axis, inner.index)
                    else r for r in c.ins)
        for v in outs:
            variables[v.name] = replace(v, shape=tuple((a, outer.tile if a == axis else e) for a, e in v.shape))

        def whole_tile(arr, tile=outer.tile):
            return arr.replace(axes=tuple(Axis(a.name, tile) if a.name == axis else a for a in arr.axes))
        maps.append(Compute(map_box(c.box, whole_tile, lambda n: n), c.outs, ins, None, c.origin, c.at))
        hoisted = {r.var for r in c.outs}
        body = list(rebuild(body[1:], lambda x, names=hoisted: _sliced(x, names, axis, rng)))
    return maps, replace(inner, body=tuple(body))


def _sliced(s, names, axis, rng):
    """``s`` reading the slice ``rng`` along ``axis`` of the values ``names`` (made whole outside its loop)."""
    def cut(r):
        return Ref(r.var, r.index + ((axis, rng),)) if r.var in names and r.range(axis) is None else r
    if isinstance(s, Compute):
        return replace(s, ins=tuple(map(cut, s.ins)))
    if isinstance(s, (Load, Store, Copy)):
        return replace(s, src=cut(s.src))
    return s
