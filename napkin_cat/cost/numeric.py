"""The cost functor at concrete sizes, ceil-aware: ragged tiles count what they hold.

The symbolic cost multiplies a tile's cost by ``a/g`` trips; at sizes that ``g`` does not divide
the last tile is smaller.  Evaluated structurally instead, a partition of ``a`` into tiles of ``g``
costs ``⌊a/g⌋ · C(g) + C(a mod g)``, where ``C(e)`` is the cost of its inside with the tile's extent
bound to ``e`` (a stream's head and tail once, its trip per slice).  This is the schedule fold
(:mod:`napkin_cat.algorithms.schedule`) with the algebra :class:`Concrete`, whose context is the
sizes and a running total; the per-box costs are iocost's (:func:`~napkin_cat.cost.iocost.box_cost`).
Memory is the symbolic columns at the sizes: the most live data is held while the tiles are full.

It is what the instrumented plan runner counts, at any tiles; where the tiles divide, it is the
symbolic cost substituted::

    at(d, sizes).H[ℓ] == p.run(...)[1].transfers[ℓ]       (p = nc.plan(d, sizes))
    at(d, sizes).H[ℓ] == cost(d).H[ℓ].subs(sizes)          (every tile divides its axis)

>>> import napkin_cat as nc
>>> mm = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
>>> c = at(mm, {"a": 5, "b": 7, "c": 3, "g_a": 2, "s_b": 3})
>>> c.H, c.M, c.flops
({1: 113}, {0: 56, 1: 21}, {'tensor': 210})
>>> at(mm, {"a": 5, "b": 7, "c": 3, "g_a": 2})
Traceback (most recent call last):
...
napkin_cat.errors.AxisError: the cost at concrete sizes needs every axis and tile size; missing ['s_b'] ...
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.algorithms.nesting import state_moves
from napkin_cat.algorithms.schedule import Phases, advance, fold_region, relabelled, schedule_of
from napkin_cat.cost.iocost import box_cost, cost
from napkin_cat.cost.record import Cost
from napkin_cat.errors import AxisError, NapkinError
from napkin_cat.syntax.adapter import Bubble, Diagram, layers
from napkin_cat.syntax.sizes import as_sizes
from napkin_cat.syntax.wiring import computes

#: the record at concrete sizes is the cost record (one record: see :mod:`napkin_cat.cost.record`)
NumericCost = Cost


def _value(expr, env) -> int:
    if isinstance(expr, int):
        return expr
    v = sympy.sympify(sympy.sympify(expr).xreplace(env))
    if not v.is_Integer:
        raise NapkinError(f"{expr} is {v} at the sizes {env}, not an integer: a size is missing or not an int")
    return int(v)


def _add(total: Cost, part: Cost, times: int = 1) -> Cost:
    for mine, theirs in ((total.H, part.H), (total.H_bytes, part.H_bytes), (total.flops, part.flops)):
        for k, v in theirs.items():
            mine[k] = mine.get(k, 0) + v * times
    return total


class At:
    """The context of :class:`Concrete`: the sizes (symbol → int), the running total, and ``tiles``: each
    partitioned axis's tile ``(start, extent)``, where a mask decides which trips are skipped."""

    def __init__(self, env: dict, tiles: dict | None = None):
        self.env, self.total, self.tiles = env, Cost(), dict(tiles or {})

    def bound(self, region, extent: int, start: int | None = None) -> "At":
        """A context for a tile of ``extent`` (at ``start`` within the enclosing tile, if it matters): the
        tile's symbol reads the extent."""
        env = dict(self.env)
        if isinstance(region.size, sympy.Symbol):
            env[region.size] = extent
        tiles = dict(self.tiles)
        if start is not None:
            tiles[region.axis] = (self.tiles.get(region.axis, (0, None))[0] + start, extent)
        return At(env, tiles)

    def tile_of(self, axis: str, size) -> tuple:
        """The tile ``axis`` is in: its partition's ``(start, extent)``, or the whole axis."""
        return self.tiles.get(axis) or (0, _value(size, self.env))


def skip_axes(region) -> frozenset:
    """The axes whose positions decide a skipped trip in ``region`` or any region inside it (cached)."""
    cached = region.__dict__.get("_skip_axes")
    if cached is None:
        found = set()
        if isinstance(region, Stream) and schedule_of(region).skip is not None:
            found |= schedule_of(region).skip.axes
        for _, box in layers(region.arg):
            if isinstance(box, Region):
                found |= skip_axes(box)
        cached = region.__dict__["_skip_axes"] = frozenset(found)
    return cached


def _tiles(region, env):
    """``[(extent, count)]`` of a partition's tiles at ``env`` (full tiles, then the ragged one)."""
    full, tile = _value(region.full_size(), env), _value(region.size, env)
    out = [(tile, full // tile)] if full // tile else []
    if full % tile:
        out.append((full % tile, 1))
    return out


class Concrete:
    """The cost algebra at concrete sizes: each box adds its integers to ``ctx.total``; a partition's inside
    is folded once per distinct tile extent and counted as many times as there are such tiles."""

    def box(self, box, ctx: At):
        c = box_cost(box)
        env = ctx.env
        _add(ctx.total, Cost({l: _value(h, env) for l, h in c.H.items()},
                             {l: _value(h, env) for l, h in c.H_bytes.items()}, {},
                             {p: _value(f, env) for p, f in c.flops.items()}))

    def diagram(self, d: Diagram, ctx: At):
        for _, box in layers(d):
            if computes(box):
                if isinstance(box, Bubble):
                    fold_region(box, self, [None] * len(box.dom), ctx)
                else:
                    self.box(box, ctx)

    def _tiled(self, region, ctx: At, run_tile):
        """``run_tile(inner ctx, extent)`` once per distinct extent, counted per tile; once per tile where a mask
        inside reads the positions of the region's axis (its trips that run depend on the tile)."""
        if region.axis in skip_axes(region):
            full, tile = _value(region.full_size(), ctx.env), _value(region.size, ctx.env)
            for start in range(0, full, tile):
                inner = ctx.bound(region, min(tile, full - start), start)
                run_tile(inner, min(tile, full - start))
                _add(ctx.total, inner.total)
            return
        for extent, count in _tiles(region, ctx.env):
            inner = ctx.bound(region, extent)
            run_tile(inner, extent)
            _add(ctx.total, inner.total, count)

    def op(self, op, ins, ctx, dests):
        if isinstance(op.box, Region):
            fold_region(op.box, self, ins, ctx)
        else:
            self.box(op.box, ctx)
        return [None] * len(op.outs)

    def kernel(self, node, ins, ctx, dests):
        self.diagram(node.inside, ctx)
        return dests

    def grid(self, node, ins, ctx, dests):
        short = lambda e: node.inside if e == node.tile or not isinstance(node.tile, int) \
            else relabelled(node.region, e).arg  # noqa: E731
        self._tiled(node.region, ctx, lambda inner, e: self.diagram(short(e), inner))
        return dests

    def _trips(self, node, vals, states, ctx, run, skip=None):
        """Each distinct slice's trip, counted per slice; ``vals`` gets the sliced outputs the trips make.
        With ``skip`` (a stream's :class:`~napkin_cat.algorithms.skipping.Skip`), the slices it skips are not."""
        made = {}

        def trip(inner, e):
            r = run if e == node.region.size or not isinstance(node.region.size, int) \
                else Phases(schedule_of(relabelled(node.region, e)), self)
            made.update(r.trip(vals, states, inner)[1])
        if skip is None:
            self._tiled(node.region, ctx, trip)
        else:         # only the trips the mask does not skip, each distinct extent folded once
            full, tile = _value(node.region.full_size(), ctx.env), _value(node.region.size, ctx.env)
            runs = {}
            for start in range(0, full, tile):
                e = min(tile, full - start)
                if not skip.skipped(ctx.bound(node.region, e, start).tile_of):
                    runs.setdefault(e, []).append(start)
            for e, starts in runs.items():
                inner = ctx.bound(node.region, e, starts[0])
                trip(inner, e)
                _add(ctx.total, inner.total, len(starts))
        vals.update((v, made[v]) for v in node.sliced)

    def stream(self, node, ins, ctx, dests, run):
        vals = run.head(ins, ctx)
        states = run.init(ctx)
        self._trips(node, vals, states, ctx, run, node.skip)
        return run.tail(run.finish(vals, states, ctx), ctx)

    def init(self, r, ctx, dests):
        return [None] * len(r.state)

    def monoid(self, r, state, ins, ctx):
        self.box(r.op.box, ctx)
        return state

    def step(self, r, state, ins, ctx):
        self.diagram(r.step, ctx)
        return state

    def finish(self, r, state, ctx, dests):
        self.diagram(r.finish, ctx)
        return [None] * len(r.outputs)

    def advance_kernel(self, node, state, ins, ctx):
        advance(node.child, self, state, ins, ctx)
        for s in node.state:
            for direction in ("load", "save"):
                for step in state_moves(s.array, node.level, direction):
                    self.box(step, ctx)
        return state

    def advance_grid(self, node, state, ins, ctx):
        self._tiled(node.region, ctx, lambda inner, e: advance(node.short_child(e), self, state, ins, inner))
        return state

    def advance_loop(self, node, state, ins, ctx, run):
        vals = run.head(ins, ctx)
        parts = node.split(state)
        if node.region is None:
            run.trip(vals, parts, ctx)
        else:
            self._trips(node.schedule, vals, parts, ctx, run)
        return state


CONCRETE = Concrete()


def _partitions(diagram: Diagram):
    for _, box in layers(diagram):
        if isinstance(box, (Grid, Stream)):
            yield box
        if isinstance(box, Region):
            yield from _partitions(box.arg)


def bind(diagram: Diagram, sizes, *, strict: bool = True) -> dict:
    """``sizes`` (a :class:`~napkin_cat.syntax.sizes.Sizes`, or names or symbols → positive ints) as an env,
    checked: every size given, every value a positive int; ``strict``: every name one of the diagram's axes or
    tiles and every tile within its axis (else the names the diagram lacks are left out: the sizes of a whole
    algorithm given for one of its kernels, :meth:`~napkin_cat.syntax.sizes.Sizes.restrict`)."""
    given = as_sizes(sizes)
    env = (given if strict else given.restrict(diagram)).require(diagram, "the cost at concrete sizes").env
    for box in _partitions(diagram) if strict else ():
        full, tile = _value(box.full_size(), env), _value(box.size, env)
        if tile > full:
            what = "group" if isinstance(box, Grid) else "stream"
            raise AxisError(f"the {what} size of {box.axis!r} ({box.size} = {tile}) exceeds the axis "
                            f"({box.axis} = {full}); legal sizes are 1 … {full}")
    return env


def at(diagram: Diagram, sizes, *, strict: bool = False) -> Cost:
    """The cost of ``diagram`` at ``sizes`` (axis and tile names → ints), ragged tiles counted exactly:
    a :class:`~napkin_cat.cost.record.Cost` of ints (``M`` the largest column at those sizes).  ``strict``:
    refuse a name the diagram lacks and a tile larger than its axis (:func:`bind`)."""
    env = bind(diagram, sizes, strict=strict)
    ctx = At(env)
    CONCRETE.diagram(diagram, ctx)
    out = ctx.total
    out.H = {l: v for l, v in out.H.items() if v}
    out.H_bytes = {l: v for l, v in out.H_bytes.items() if v}
    out.flops = {p: v for p, v in out.flops.items() if v}
    out.columns = {l: [max(_value(col, env) for col in cols)] for l, cols in cost(diagram).columns.items()}
    return out
