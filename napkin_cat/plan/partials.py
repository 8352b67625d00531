"""A split stream expanded into the plan: ``P`` parts in parallel, each saving its partial state, then the combine.

The expander's handler for a stream run in parts (:mod:`napkin_cat.algorithms.splits`)::

    alloc partials[P × state]                          (in global memory, level 0)
    parallel for i_P in 0 … P − 1:                     (a part: one block)
      head; state ← empty                              (the head runs in every part)
      for i_x over slices ⌈i_P·T/P⌉ … ⌈(i_P+1)·T/P⌉ − 1:   the trip
      partials[i_P] ← store state
    combine (for the part axis, tile 1, P − 1 trips):
      head: state ← load partials[0]
      body: other ← load partials[i + 1]; state ← state ⊕ other     (each reducer's merge)
      tail: the finishes, the tail, the copies out

``T = ⌈b/s⌉`` slices; part ``p`` runs slices ``⌈pT/P⌉ … ⌈(p+1)T/P⌉ − 1`` (:func:`~.splits.part_bounds`): part 0
always holds a slice, and an empty part stores the empty state, which every merge leaves unchanged.  So the
plan moves what the cost says: ``P`` heads, each trip once, ``P·|state|`` values stored and as many loaded
back, ``P − 1`` merges, the finishes and the tail once.  The partials live in global memory whatever the
state's level: the one memory every part and the combine reach, and the only one that outlives a launch (a split
that is the whole of its kernel launches its combine after its parts: :func:`fission`); the cost's ``M[0]`` counts
them (:func:`napkin_cat.cost.partials.partial_values`), and their moves count at the state's level, as every
transfer counts at its deeper end.

>>> import napkin_cat as nc
>>> d = nc.group(nc.stream(nc.library.matmul(), "b", "s_b", parts="P"), "a", "g_a")
>>> S = {"a": 3, "b": 7, "c": 2, "g_a": 2, "s_b": 2, "P": 3}
>>> p = nc.plan(d, S)
>>> import numpy as np
>>> A, B = np.arange(21.).reshape(3, 7), np.ones((7, 2))
>>> C, n = p.run(A, B)
>>> np.allclose(C, A @ B), n.transfers == nc.cost(d, sizes=S).H
(True, True)
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace

import sympy

from napkin_cat.algorithms.launches import in_every_state
from napkin_cat.algorithms.schedule import Phases, schedule_of
from napkin_cat.syntax.adapter import Ty
from napkin_cat.syntax.relabel import map_arrays

from napkin_cat.errors import LoweringError
from napkin_cat.plan.ir import Alloc, Copy, GridLoop, Kernel, Load, Range, Ref, Store, StreamLoop, loop_index


def part_axis(axis: str) -> str:
    """The name of the axis a split stream's parts (and its partial states) run along."""
    return f"parts_{axis}"


def _check(node):
    """Refuse a split stream whose combine would need a value its head makes (the tail reads it, or it is an
    output of the stream): every part runs the head in its own launch, and the combine, launched after them,
    holds none of their values."""
    made = {v for op in node.head for v in op.outs}
    needed = made & ({v for op in node.tail for v in op.ins} | set(node.cod))
    if needed:
        raise LoweringError(f"{node.region.name}: the stream's tail reads or outputs values its head "
                            f"({'; '.join(op.box.name for op in node.head)}) makes: "
                            f"{', '.join(str(node.arrays[v]) for v in sorted(needed))}; split in parts, each part runs "
                            f"the head, and the combine holds none of them: stream it unsplit, or move those "
                            f"operations out of the stream's kernel")


def split_stream(e, node, ins, sink, dests, run):
    """The statements of the split stream ``node`` (an algebra handler of the Expander ``e``) into ``sink``."""
    _check(node)
    box, axis = node.region, node.axis
    outer = e.context.get(axis)
    full = outer.extent if outer is not None else sympy.sympify(box.full_size())
    base = outer.start if outer is not None else sympy.Integer(0)
    tile, P = sympy.sympify(box.size), sympy.sympify(node.parts)
    trips = sympy.ceiling(full / tile)
    pa = part_axis(axis)
    ip = loop_index(pa, e.indices)
    lo, hi = sympy.ceiling(ip * trips / P), sympy.ceiling((ip + 1) * trips / P)
    one = Range(ip, sympy.Integer(1), P)

    head, body, saves = [], [], []
    with e.within(axis, Range(base + lo * tile, (hi - lo) * tile, base + full)):
        index, _, extent, rng, sliced = e.partition_trip(box, ins, box.dom.inside)
        vals = run.head(ins, head)
        states = run.init(head)
        with e.within(axis, rng):
            run.trip({**vals, **dict(zip(node.dom, sliced))}, states, body)
    partials = []
    for r, refs in zip(node.reducers, states):
        mine = []
        for s, ref in zip(r.state, refs):
            buf = _partials(e, s, pa, P)
            saves.append(_move(Store, buf.sliced(pa, one), ref, s.array.level, e.origin(f"save {s.name}")))
            mine.append(buf)
        partials.append(mine)
    stream = StreamLoop(axis, tile, extent, index, tuple(head), tuple(body), tuple(saves), e.origin(""))
    sink.append(GridLoop(pa, sympy.Integer(1), P, ip, (stream,), e.origin(f"parts({P})")))

    rows = _rows(e, node) if getattr(e, "split_kernel", None) is box else {}
    if rows:        # a kernel that is the split alone: its combine launches one block per row of its groups
        return _combine_by_rows(e, node, box, rows, ins, partials, sink, dests, pa, P)
    sink.append(_combine(e, node, run, ins, partials, dests, pa, P))
    return dests


def _rows(e, node) -> dict:
    """The axes the Grids around a kernel that is a split stream alone cut (each in the context, its tile a size of
    the stream's arrays, and an axis of every reducer's state) → their group's range: the combine runs one row of
    each (the Grid law at tile 1).  An axis some state lacks (d of attention's m, l where the Grid cuts d) is no
    row: one block per row would load that state once per row, which the cost functor counts once."""
    sizes = {(a.name, a.size) for arr in (*node.region.dom.inside, *node.region.cod.inside) for a in arr.axes}
    return {a: rng for a, rng in e.context.items() if (a, rng.tile) in sizes and in_every_state(a, node.reducers)}


def _combine_by_rows(e, node, box, rows: dict, ins, partials, sink, dests, pa, P):
    """The combine on one row of the groups: the stream's arrays read with every tile of ``rows`` at 1 (its
    schedule relabelled), its inputs, outputs and partials sliced to the row, in Grids of tile 1 over each group's
    rows (one block each after :func:`fission`)."""
    def one(arr):
        return arr.replace(axes=tuple(a.relabel(1) if a.name in rows and a.size == rows[a.name].tile else a
                                      for a in arr.axes))
    region = type(box).rebuild(map_arrays(box.arg, one), Ty(*map(one, box.dom.inside)),
                               Ty(*map(one, box.cod.inside)), box.params)
    at = dict(rows)
    loops = []
    for a, rng in rows.items():
        j = loop_index(a, e.indices)
        at[a] = Range(rng.start + j, sympy.Integer(1), rng.start + rng.extent)
        loops.append((a, rng.extent, j))
    with ExitStack() as stack:
        for a, rng in at.items():
            stack.enter_context(e.within(a, rng))

        def row(ref, arr):
            for a, rng in at.items():
                if a in arr.names:
                    ref = e.slice(ref, a, rng) if ref.var not in partial_vars else ref.sliced(a, rng)
            return ref
        partial_vars = {b.var for bufs in partials for b in bufs}
        mine = schedule_of(region)
        r_ins = [row(r, arr) for r, arr in zip(ins, box.dom.inside)]
        r_dests = [None if d is None else row(d, arr) for d, arr in zip(dests, box.cod.inside)]
        r_partials = [[row(b, s.array) for b, s in zip(bufs, r.state)] for r, bufs in zip(node.reducers, partials)]
        stmt = _combine(e, mine, Phases(mine, e), r_ins, r_partials, r_dests, pa, P)
    for a, extent, j in reversed(loops):
        stmt = GridLoop(a, sympy.Integer(1), extent, j, (stmt,), e.origin(f"rows({a})"))
    sink.append(stmt)
    return dests


def _combine(e, node, run, ins, partials, dests, pa, P):
    """The combine: the first partial loaded, the others merged into it one by one, then finish and tail."""
    ic = loop_index(f"{pa}'", e.indices)
    c_head, c_body, c_tail = [], [], []
    merged, others = [], []
    for r, bufs in zip(node.reducers, partials):
        mine, theirs = [], []
        for s, buf in zip(r.state, bufs):
            ref = e.new_var(f"{s.name}{r.k}_merged", s.array, "state", e.origin(f"{s.name} (merged)"))
            c_head.append(_move(Load, ref, buf.sliced(pa, Range(sympy.Integer(0), sympy.Integer(1), P)),
                                s.array.level, e.origin(f"load {s.name}")))
            o = e.new_var(f"{s.name}{r.k}_part", s.array, "tile", e.origin(f"{s.name} (a part's)"))
            c_body.append(_move(Load, o, buf.sliced(pa, Range(ic + 1, sympy.Integer(1), P)), s.array.level,
                                e.origin(f"load {s.name}")))
            mine.append(ref)
            theirs.append(o)
        merged.append(mine)
        others.append(theirs)
    run.merge(merged, others, c_body)
    dest_of = {}
    for v, dst in zip(node.cod, dests):
        if dst is not None and v not in dest_of:
            dest_of[v] = dst
    outs = run.tail(run.finish(dict(zip(node.dom, ins)), merged, c_tail, dest_of), c_tail, dest_of)
    c_tail += e.copies_out(node.cod, dict(zip(node.cod, outs)), dests)
    return StreamLoop(pa, sympy.Integer(1), P - 1, ic, tuple(c_head), tuple(c_body), tuple(c_tail),
                      e.origin("combine"))


def _partials(e, s, pa: str, P) -> Ref:
    """The buffer of a state's ``P`` partials, in global memory (level 0), allocated once at the top: along an
    axis the loops around the stream cut (nested groups too), it spans the whole axis, where the outermost
    loop's range ends, and each group writes its own rows at their absolute place, so the groups may run in
    parallel and the combine, launched after them all, finds every group's partials; the view of this group's
    rows."""
    base = e.new_var(f"{s.name}_parts", s.array, "temp", e.origin(f"{s.name} partials"), extra=((pa, P),),
                     level=0)
    var, shape, ref = e.variables[base.var], [], base
    for a, extent in var.shape:
        rng = e.context.get(a) if a != pa else None
        if rng is not None:
            shape.append((a, sympy.sympify(e.whole[a])))
            ref = ref.sliced(a, rng)
            e.offsets[base.var].pop(a, None)
        else:
            shape.append((a, extent))
    e.variables[base.var] = replace(var, shape=tuple(shape))
    e.hoisted.append(Alloc(base.var))
    return ref


def fission(stmts) -> tuple:
    """The top-level statements with each kernel that runs a split stream's parts and then its combine cut in
    two launches over the same groups: the parts' loop joins the groups' (one block per group and part), the
    combine runs after all of them (a GPU has no barrier across blocks: a second kernel), one block per row of the
    groups (its Grids of tile 1 ``r``, :func:`split_stream`)::

        for g: kernel { for p: S ; for r: C }   ⟶   for g: for p: kernel { S } ;  for g: for r: kernel { C }
    """
    out = []
    for s in stmts:
        out += _cut(s) or [s]
    return tuple(out)


def _cut(s):
    if isinstance(s, GridLoop) and len(s.body) == 1:
        inner = _cut(s.body[0])
        return [replace(s, body=(x,)) for x in inner] if inner else None
    if isinstance(s, Kernel) and len(s.body) == 2:
        parts, combine = s.body
        rows = []
        while isinstance(combine, GridLoop) and len(combine.body) == 1:     # the combine's rows: Grids of tile 1
            rows.append(combine)
            combine = combine.body[0]
        if isinstance(parts, GridLoop) and isinstance(combine, StreamLoop) and parts.axis == combine.axis \
                and parts.axis.startswith("parts_"):
            out = replace(s, body=(combine,))
            for g in reversed(rows):
                out = replace(g, body=(out,))
            return [replace(parts, body=(replace(s, body=parts.body),)), out]
    return None


def _move(kind, dst: Ref, src: Ref, level: int, origin: str):
    """A partial state moved between the state's level and global memory; at level 0 a copy (nothing moves)."""
    return kind(dst, src, level, origin) if level >= 1 else Copy(dst, src, origin)


__all__ = ["split_stream", "part_axis", "fission"]
