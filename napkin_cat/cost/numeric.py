"""The cost functor at concrete sizes, ceil-aware: ragged tiles count what they hold.

The symbolic cost multiplies a tile's cost by ``a/g`` trips; at sizes that ``g`` does not divide
the last tile is smaller.  Evaluated structurally instead, a partition of ``a`` into tiles of ``g``
costs ``⌊a/g⌋ · C(g) + C(a mod g)``, where ``C(e)`` is the cost of its inside with the tile's extent
bound to ``e`` (a stream's head and tail once, its trip per slice).  This is the schedule fold
(:mod:`napkin_cat.algorithms.schedule`) with the algebra :class:`Concrete`, whose context is the
sizes and a running total; the per-box costs are iocost's (:func:`~napkin_cat.cost.iocost.box_pieces`).
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

import numpy as np
import sympy

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.syntax.interval import negate
from napkin_cat.algorithms.nesting import state_moves
from napkin_cat.algorithms.splits import part_bounds, partial_moves
from napkin_cat.algorithms.schedule import Phases, advance, fold_region, relabelled, schedule_of
from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.algorithms.devices import (Shard, cut_extents, device_inside, device_shards,
                                           largest_shard)
from napkin_cat.algorithms.orders import Pieces
from napkin_cat.algorithms.orders import extent as span_extent
from napkin_cat.algorithms.ring import Ring, ring_extents, ring_link, ring_pieces, ring_shard
from napkin_cat.cost.iocost import box_link, box_pieces, cost, region_cost
from napkin_cat.cost.record import Cost, Density, Link, join_links
from napkin_cat.errors import ArgumentError, AxisError, DeviceError, NapkinError, ShapeError
from napkin_cat.syntax.collectives import whole_axes
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.adapter import Bubble, Diagram, from_layers, layers
from napkin_cat.syntax.sizes import as_sizes
from napkin_cat.syntax.wiring import computes

#: the record at concrete sizes is the cost record (one record: see :mod:`napkin_cat.cost.record`)
NumericCost = Cost


def _value(expr, env) -> int:
    """``expr`` at ``env``, an int: evaluated in exact Python arithmetic (:func:`.exact_arithmetic.value`, no
    sympy substitution per tiling); a size missing, or a value that is not an integer, is refused."""
    if isinstance(expr, int):
        return expr
    v = value(expr, env)
    if not isinstance(v, int):
        raise NapkinError(f"{expr} is {v} at the sizes {env}, not an integer: a size is missing or not an int")
    return v


def _add(total: Cost, part: Cost, times: int = 1) -> Cost:
    times = int(times)
    for mine, theirs in ((total.H, part.H), (total.H_bytes, part.H_bytes), (total.flops, part.flops)):
        for k, v in theirs.items():
            mine[k] = mine.get(k, 0) + v * times
    if part.link is not None:
        total.link = join_links(total.link, part.link if times == 1 else part.link.scaled(times))
    return total


#: the most tiles whose starts the cost at sizes holds at once (a masked stream decides each where it lies):
#: 2^26 starts are half a GiB of int64 per axis, the most a cost should ask of this machine
MAX_TILES = 1 << 26


class At:
    """The context of :class:`Concrete`: the sizes (symbol → int), the running total, and ``tiles``: each
    partitioned axis's tile ``(start, extent)``, where a mask decides which trips are skipped.

    A context may stand for ``count`` tiles at once, alike but for where they lie: a start is then an array with
    one entry per tile (every start an array of ``count`` entries, or one number for all).  Each box in it is
    counted ``count`` times, and a masked stream inside runs each of its slices on the tiles whose mask may be
    true there, decided for all of them at once (:func:`_count_running`)."""

    #: ``(p, A, empty, lane)``: device ``p`` of the ``A`` that hold a shard, whose shard this context counts (inside a
    #: device region: its collectives' link counts; ``empty``: ``(axis, shard size) → 0`` for its empty co-shards;
    #: ``lane``: which piece of the region's axis, under a non-contiguous order: its rings' link counted on lane 0), or
    #: None
    device = None

    def __init__(self, env: dict, tiles: dict | None = None, count: int = 1, device=None):
        self.env, self.total, self.tiles, self.count = env, Cost(), dict(tiles or {}), count
        self.device = device

    def bound(self, region, extent: int, start=None) -> "At":
        """A context for a tile of ``extent`` (at ``start`` within the enclosing tile, if it matters): the
        tile's symbol reads the extent.  ``start`` an array: the context for each of those tiles in each tile
        this one stands for (``count · len(start)`` of them, the tiles of this context repeated outermost)."""
        env = dict(self.env)
        if isinstance(region.size, sympy.Symbol):
            env[region.size] = extent
        tiles, count = dict(self.tiles), self.count
        if start is None:
            return At(env, tiles, count, self.device)
        base = self.tiles.get(region.axis, (0, None))[0]
        if isinstance(start, range):
            if len(start) * count > MAX_TILES:
                raise NapkinError(f"the cost at sizes of a masked stream decides each tile where it lies: "
                                  f"{len(start) * count} tiles along {region.axis} (and the axes around it) are "
                                  f"more than {MAX_TILES}; take larger tiles ({region.size}) or a smaller axis")
            start = np.arange(start.start, start.stop, start.step, dtype=np.int64)
        if isinstance(start, np.ndarray):
            k = len(start)
            tiles = {a: (_repeated(s, k), e) for a, (s, e) in tiles.items()}
            base, start, count = _repeated(base, k), np.tile(start, count), count * k
        tiles[region.axis] = (base + start, extent)
        return At(env, tiles, count, self.device)

    def running(self, keep) -> "At":
        """The context of the tiles where ``keep`` (a bool, or an array over this context's tiles) holds."""
        keep = np.broadcast_to(np.asarray(keep, dtype=bool), (self.count,))
        return At(self.env, {a: (s[keep] if isinstance(s, np.ndarray) else s, e)
                             for a, (s, e) in self.tiles.items()}, int(np.count_nonzero(keep)), self.device)

    def counting(self, count: int) -> "At":
        """This context standing for ``count`` tiles whose starts nothing reads."""
        return At(self.env, {a: t for a, t in self.tiles.items() if not isinstance(t[0], np.ndarray)}, count,
                  self.device)

    def tile_of(self, axis: str, size) -> tuple:
        """The tile ``axis`` is in: its partition's ``(start, extent)``, or the whole axis."""
        return self.tiles.get(axis) or (0, _value(size, self.env))


def _repeated(start, k: int):
    """Each entry of a start array ``k`` times in a row (a number stays: it is every tile's)."""
    return np.repeat(start, k) if isinstance(start, np.ndarray) else start


def skip_axes(region, *, data: bool = False) -> frozenset:
    """The axes whose positions decide a skipped trip in ``region`` or any region inside it (cached); with
    ``data`` (a block mask is given) the axes of the masks read from data too."""
    key = "_skip_axes_data" if data else "_skip_axes"
    cached = region.__dict__.get(key)
    if cached is None:
        found = set()
        skip = schedule_of(region).skip if isinstance(region, Stream) else None
        if skip is not None:
            found |= skip.axes | ({a for a, _ in skip.data_axes} if data else set())
        for _, box in layers(region.arg):
            if isinstance(box, Region):
                found |= skip_axes(box, data=data)
        cached = region.__dict__[key] = frozenset(found)
    return cached


def data_axes(diagram: Diagram) -> tuple:
    """The axes of the masks read from data that decide the trips of ``diagram``'s streams (a block mask's)."""
    seen: dict = {}
    for box in _partitions(diagram):
        skip = schedule_of(box).skip if isinstance(box, Stream) else None
        seen.update((a, None) for a, _ in (skip.data_axes if skip is not None else ()))
    return tuple(seen)


def densities(diagram: Diagram) -> tuple:
    """The density symbols of the masks read from data that decide the trips of ``diagram``'s streams (one per
    distinct condition, :attr:`~napkin_cat.algorithms.skipping.Skip.density`), in order."""
    seen: dict = {}
    for box in _partitions(diagram):
        skip = schedule_of(box).skip if isinstance(box, Stream) else None
        if skip is not None and skip.density is not None:
            seen[skip.density] = None
    return tuple(seen)


def _extents(region, env) -> list:
    """``[(extent, starts)]`` of a partition's tiles at ``env``: the full tiles, then the shorter last one (the
    starts within the enclosing tile, as a ``range``: nothing is held per tile until a mask reads where they lie).

    >>> from napkin_cat.algorithms.bubbles import Grid
    >>> import napkin_cat as nc
    >>> (g,) = [b for b in nc.group(nc.library.matmul(), "a", "g_a").boxes if isinstance(b, Grid)]
    >>> _extents(g, {sympy.Symbol(n, positive=True, integer=True): v for n, v in [("a", 2**62), ("g_a", 3)]})
    [(3, range(0, 4611686018427387903, 3)), (1, range(4611686018427387903, 4611686018427387904))]
    """
    full, tile = _value(region.full_size(), env), _value(region.size, env)
    whole = full // tile * tile
    out = [(tile, range(0, whole, tile))] if whole else []
    if full % tile:
        out.append((full % tile, range(whole, whole + 1)))
    return out


def _reads_positions_inside(region, data: bool) -> bool:
    """Whether a region nested in ``region`` skips trips on a mask (so it reads where its tiles lie)."""
    return any(skip_axes(box, data=data) for _, box in layers(region.arg) if isinstance(box, Region))


#: the most (tile, slice) pairs a masked stream's skip test takes in one array operation
PAIRS = 1 << 20


def _running(skip, ctx: At, region, extent: int, starts, positions: bool, block_mask=None) -> At:
    """The context of the slices of ``extent`` at ``starts`` (evenly spaced) that ``skip`` does not skip, over
    every tile ``ctx`` stands for.  With ``positions`` (a mask inside reads where they lie) each (tile, slice)
    pair is tested, in chunks of at most :data:`PAIRS`; else only how many run is kept (:func:`_count_running`).
    ``block_mask``: the data's, which decides the masks read from data (:meth:`~napkin_cat.algorithms.skipping.
    Skip.verdict`)."""
    if not positions:
        return ctx.bound(region, extent).counting(_count_running(skip, ctx, region, extent, starts, block_mask))
    per = max(1, PAIRS // max(ctx.count, 1))
    parts = []
    for k in range(0, len(starts), per):
        pairs = ctx.bound(region, extent, starts[k:k + per])
        parts.append(pairs.running(negate(skip.skipped(pairs.tile_of, block_mask))))
    first = parts[0]
    arrays = [a for a, (s, _) in first.tiles.items() if isinstance(s, np.ndarray)]
    tiles = dict(first.tiles)
    tiles.update({a: (np.concatenate([p.tiles[a][0] for p in parts]), first.tiles[a][1]) for a in arrays})
    return At(first.env, tiles, sum(p.count for p in parts), first.device)


def _count_running(skip, ctx: At, region, extent: int, starts, block_mask=None) -> int:
    """How many (tile, slice) pairs run, over the tiles ``ctx`` stands for and the slices of ``extent`` at
    ``starts`` (evenly spaced), each decided as the runner decides it (``skip.skipped`` on the slice).

    Runs of consecutive slices are decided at once: on a block of them, where some mask is never true no slice
    runs, and where every mask is always true every slice runs (:meth:`~napkin_cat.algorithms.skipping.Skip.
    verdict`: interval arithmetic is inclusion-monotone); a block neither is halved, down to single slices.
    A band or a half-plane costs a few tests per tile and boundary, not one per slice."""
    step = int(starts[1] - starts[0]) if len(starts) > 1 else extent
    base = ctx.tiles.get(region.axis, (0, None))[0]
    tile = np.arange(ctx.count)
    lo, hi = np.zeros(ctx.count, dtype=np.int64), np.full(ctx.count, len(starts), dtype=np.int64)
    total = 0
    while len(tile):
        def tile_of(axis, size, tile=tile, lo=lo, hi=hi):
            if axis == region.axis:
                first = (base[tile] if isinstance(base, np.ndarray) else base) + int(starts[0]) + lo * step
                return first, (hi - lo - 1) * step + extent
            s, e = ctx.tile_of(axis, size)
            return (s[tile] if isinstance(s, np.ndarray) else s), e
        verdict = skip.verdict(tile_of, block_mask)
        never, every = (np.broadcast_to(np.asarray(v, dtype=bool), tile.shape) for v in verdict)
        every = every & ~never
        width = hi - lo
        total += int(width[every].sum()) + int(np.count_nonzero(~never & ~every & (width == 1)))
        split = ~never & ~every & (width > 1)
        mid = (lo + hi) // 2
        tile, lo, hi = (np.concatenate([tile[split], tile[split]]), np.concatenate([lo[split], mid[split]]),
                        np.concatenate([mid[split], hi[split]]))
    return total


class Concrete:
    """The cost algebra at concrete sizes: each box adds its integers to ``ctx.total`` (``ctx.count`` times); a
    partition's inside is folded once per distinct tile extent and counted as many times as there are such
    tiles, and a masked stream's trip once per distinct slice extent, counted on every tile where it runs.
    ``block_mask`` (:class:`~napkin_cat.algorithms.blockmask.BlockMask`, the data's): a mask read from data
    skips the trips where it allows no pair, as the runner given it does; without one such a mask skips nothing,
    and ``density`` (``{symbol: number}``, :attr:`~napkin_cat.algorithms.skipping.Skip.density`) scales the trips
    it lets run: ``ρ`` of them (a fraction, not a count: the cost then says what it assumes)."""

    def __init__(self, block_mask=None, density=None):
        self.block_mask, self.density = block_mask, dict(density or {})

    def box(self, box, ctx: At):
        H, H_bytes, flops, _ = box_pieces(box)
        env = ctx.env
        link = None
        if kind_of(box.data.kind).collective is not None:
            if ctx.device is None:
                raise DeviceError(f"{box.name}: a collective moves values between devices; it runs inside a device "
                                  f"region (nc.shard) only")
            device, active, extents = ctx.device[:3]
            whole = whole_axes(box)       # an array held whole on its side: not the device's extent of its axis

            def numel(a, side="dom"):
                return _value(sympy.Mul(*[x.size if x.name in whole[side] else extents.get((x.name, x.size), x.size)
                                          for x in a.axes]), env)
            link = box_link(box, device, numel, active)
            link = Link(_value(box.data.param("devices"), env), link.sent, link.received, link.messages, None,
                        link.sent_bytes, link.received_bytes)
        _add(ctx.total, Cost({l: _value(h, env) for l, h in H}, {l: _value(h, env) for l, h in H_bytes}, {},
                             {p: _value(f, env) for p, f in flops}, link=link), ctx.count)

    def diagram(self, d: Diagram, ctx: At):
        for _, box in layers(d):
            if computes(box):
                if isinstance(box, Bubble):
                    fold_region(box, self, [None] * len(box.dom), ctx)
                else:
                    self.box(box, ctx)

    def _tiled(self, region, ctx: At, run_tile):
        """``run_tile(inner ctx, extent)`` once per distinct extent, counted per tile.  Where a mask inside reads
        the positions of the region's axis (its trips that run depend on the tile), the inner context stands
        for every tile of that extent at once (:meth:`At.bound` with their starts)."""
        positions = region.axis in skip_axes(region, data=self.block_mask is not None)
        for extent, starts in _extents(region, ctx.env):
            inner = ctx.bound(region, extent, starts if positions else None)
            run_tile(inner, extent)
            _add(ctx.total, inner.total, 1 if positions else len(starts))

    def op(self, op, ins, ctx, dests):
        if isinstance(op.box, Region):
            fold_region(op.box, self, ins, ctx)
        else:
            self.box(op.box, ctx)
        return [None] * len(op.outs)

    def kernel(self, node, ins, ctx, dests):
        self.diagram(node.inside, ctx)
        return dests

    def shard(self, node, ins, ctx, dests):
        """Each device's inside on its shard, counted apart: the record's H and FLOPs are the busiest device's (per
        level and pipeline), its link one count per device (sent, received, messages, the rings' ``trips`` and
        ``work`` per step, and ``held``: the device's level-0 memory, its inside's largest level-0 column at its
        shard's size).  Under a non-contiguous order a device counts its inside once per piece of the region's axis
        (its *lanes*: each at its own positions, where a mask decides the folds), its rings' exchanges once."""
        env = ctx.env
        P = _value(node.devices, env)
        shards = device_shards(node, lambda e: _value(e, env))
        active = sum(d is not None for d in shards)         # an idle device (an empty shard) counts 0
        per, held = [], []
        for mine in shards:
            empty = {(a, node.axes[a][0]): 0 for a, s in (mine or {}).items() if span_extent(s) == 0}   # no co-shard
            p = len(per)
            mycuts = cut_extents(node, lambda e: _value(e, env), p, active) if mine is not None else {}
            empty.update(mycuts)        # its shard of an axis a collective cuts inside: np.array_split's, not ⌈n/P⌉
            total = Cost()
            d = None if mine is None else device_inside(node, mine, mycuts)
            for lane, part in enumerate(lanes(node, mine)):
                tiles = {**ctx.tiles, **{a: (s[0], s[1] - s[0]) for a, s in part.items() if not isinstance(s, Pieces)}}
                inner = At(env, tiles, 1, (p, active, empty, lane))
                self.diagram(device_inside(node, part, mycuts), inner)
                _add(total, inner.total)
            per.append(total)
            gone = {t: 0 for (_, t) in empty if not isinstance(t, int)}      # an empty co-shard holds nothing
            rings = [] if d is None else [ring_held(b, env) for _, b in layers(d) if isinstance(b, Ring)]
            held.append(0 if d is None else max([_value(c.subs(gone) if gone else c, env)
                                                 for c in cost(d).columns.get(0, [])] + rings + [0]))
        out = Cost()
        for name in ("H", "H_bytes", "flops"):
            keys = {k for c in per for k in getattr(c, name)}
            setattr(out, name, {k: max(getattr(c, name).get(k, 0) for c in per) for k in keys})
        links = [c.link or Link(P, 0, 0, 0) for c in per]
        ringed = any(x.trips is not None for x in links)
        out.link = Link(P, tuple(x.sent for x in links), tuple(x.received for x in links),
                        tuple(x.messages for x in links), tuple(held), tuple(x.sent_bytes for x in links),
                        tuple(x.received_bytes for x in links),
                        tuple(x.trips or () for x in links) if ringed else None,
                        tuple(x.work or () for x in links) if ringed else None)
        _add(ctx.total, out, ctx.count)
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
        rho = self.density.get(skip.density, 1) if skip is not None and self.block_mask is None else 1
        if rho != 1:            # the trips' totals apart, then ρ of them added (a fraction of the trips run)
            outer, ctx.total = ctx.total, Cost()

        def trip(inner, e):
            r = run if e == node.region.size or not isinstance(node.region.size, int) \
                else Phases(schedule_of(relabelled(node.region, e)), self)
            made.update(r.trip(vals, states, inner)[1])
        if skip is None or not skip.active(self.block_mask):
            self._tiled(node.region, ctx, trip)
        else:         # each slice runs on the tiles where the mask may be true: one test over every pair
            positions = _reads_positions_inside(node.region, self.block_mask is not None)
            for e, starts in _extents(node.region, ctx.env):
                inner = _running(skip, ctx, node.region, e, starts, positions, self.block_mask)
                if inner.count:
                    trip(inner, e)
                    _add(ctx.total, inner.total)
        if rho != 1:
            trips, ctx.total = ctx.total, outer
            for mine, theirs in ((outer.H, trips.H), (outer.H_bytes, trips.H_bytes), (outer.flops, trips.flops)):
                for k, v in theirs.items():
                    mine[k] = mine.get(k, 0) + rho * v
        vals.update((v, made[v]) for v in node.sliced)

    def ring(self, node, ins, ctx, dests, run):
        """A ring on the device (and lane) ``ctx`` counts (:mod:`napkin_cat.algorithms.ring`): the head, at each step
        ``t`` a fold per piece of the shard ``(p − t) mod P`` at the piece's size and positions, skipped where the
        stream's masks are never true there (:attr:`~napkin_cat.algorithms.ring.RingSchedule.masks`), a nested
        stream's tiles where its own are, the finish and the tail; its steps' folds that do work and their FLOPs
        (``Link.trips``, ``Link.work``); the link (once per device, on its first
        lane): the shards it sends on and receives, one message per streamed input and exchange, and its ``held``
        (:func:`ring_held`)."""
        if ctx.device is None:
            raise DeviceError(f"{node.region.name}: a ring passes shards between devices; it runs inside a device "
                              f"region only")
        box, env = node.region, ctx.env
        extents = ring_extents(box, lambda e: _value(e, env))
        pieces = ring_pieces(box, lambda e: _value(e, env))
        P, device = len(extents), ctx.device[0]
        lane = ctx.device[3] if len(ctx.device) > 3 else 0
        masks = node.masks if node.masks is not None and node.masks.active(self.block_mask) else None
        positions = masks is not None or _reads_positions_inside(box, self.block_mask is not None)
        base = At(env, {a: t for a, t in ctx.tiles.items() if a != box.axis}, ctx.count, ctx.device)
        vals = run.head(ins, ctx)
        states = run.init(ctx)
        trips, work = [], []
        for t in range(P):
            runs = flops = 0
            for lo, hi in pieces[ring_shard(device, t, P)]:
                n = hi - lo
                if n == 0:
                    continue
                r = run if n == box.size else Phases(schedule_of(relabelled(box, n)), self)
                if masks is not None:        # the piece at its own positions, against this lane's
                    inner = _running(masks, base, box, n, range(lo, lo + 1), positions, self.block_mask)
                else:
                    inner = base.bound(box, n, range(lo, lo + 1) if positions else None)
                if not inner.count:
                    continue
                r.trip(vals, states, inner)
                _add(ctx.total, inner.total, 1)
                done = sum(inner.total.flops.values())      # 0: a mask inside skipped every tile of it
                runs, flops = runs + (inner.count if done else 0), flops + done
            trips.append(runs)
            work.append(flops)
        outs = run.tail(run.finish(vals, states, ctx), ctx)

        def numel_at(a, n):
            return _value(sympy.Mul(*[n if x.name == box.axis else x.size for x in a.axes]), env)
        if lane == 0:
            sent, received, messages = ring_link(box, numel_at, device=device, extents=extents)
            sb, rb, _ = ring_link(box, numel_at, lambda a: a.dtype.bytes, device=device, extents=extents)
        else:                        # another piece of the same device: its exchanges are counted once
            sent = received = messages = sb = rb = 0
        _add(ctx.total, Cost(link=Link(len(extents), sent, received, messages, ring_held(box, env), sb, rb,
                                       tuple(trips), tuple(work))), ctx.count)
        return outs

    def stream(self, node, ins, ctx, dests, run):
        vals = run.head(ins, ctx)
        states = run.init(ctx)
        self._trips(node, vals, states, ctx, run, node.skip)
        if node.parts is not None:      # a split stream (.splits): P heads, P partials moved, P − 1 merges
            parts = _value(node.parts, ctx.env)
            part_bounds(1, parts)
            for _ in range(parts - 1):
                run.head(ins, ctx)
                run.merge(states, states, ctx)
            for _ in range(parts):
                for b in partial_moves(node):
                    self.box(b, ctx)
        return run.tail(run.finish(vals, states, ctx), ctx)

    def merge(self, r, diagram, a, b, ctx):
        self.diagram(diagram, ctx)
        return a

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
            self._trips(node.schedule, vals, parts, ctx, run, node.schedule.skip)
        return state


CONCRETE = Concrete()


def lanes(node, mine) -> list:
    """A device's shard ``mine`` as the parts its inside is counted on: itself under the contiguous order, else one
    per piece of the region's axis (each a ``(start, stop)``, the co-sharded axes kept whole as their pieces); none
    for an idle device."""
    if mine is None:
        return []
    own = mine[node.axis]
    if not isinstance(own, Pieces):
        return [mine]
    return [{**mine, node.axis: (lo, hi)} for lo, hi in own if hi > lo]


def ring_held(box, env) -> int:
    """A ring's level-0 memory on a device at ``env``: its columns with the slice in use at its widest (the largest
    shard, which every device folds at some step) and the slot an incoming shard arrives in."""
    extents = ring_extents(box, lambda e: _value(e, env))

    def numel_at(a, n):
        return _value(sympy.Mul(*[n if x.name == box.axis else x.size for x in a.axes]), env)
    slot = sum(numel_at(box.dom.inside[i], max(extents)) for i in box.streamed())
    widest = box if box.size == max(extents) else relabelled(box, max(extents))
    return max([_value(c, env) for c in region_cost(widest).columns.get(0, [])] + [0]) + slot


def _partitions(diagram: Diagram):
    """The Grids and Streams of ``diagram``, not those inside a device region (each device's are on its shard)."""
    for _, box in layers(diagram):
        if isinstance(box, (Grid, Stream)):
            yield box
        if isinstance(box, Region) and not isinstance(box, Shard):
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


def folded(diagram: Diagram, env: dict, block_mask=None, density=None) -> Cost:
    """The transfers (values and bytes) and FLOPs of ``diagram`` at an environment already bound (:func:`bind`),
    without its memory: what a search that counts many tilings of one algorithm calls, binding its sizes once.
    ``block_mask``: the data's, for the masks read from data; else ``density`` (``{symbol: number}``) scales the
    trips they let run (:class:`Concrete`)."""
    ctx = At(env)
    (CONCRETE if block_mask is None and not density else Concrete(block_mask, density)).diagram(diagram, ctx)
    out = ctx.total
    out.H = {l: v for l, v in out.H.items() if v}
    out.H_bytes = {l: v for l, v in out.H_bytes.items() if v}
    out.flops = {p: v for p, v in out.flops.items() if v}
    return out


def at(diagram: Diagram, sizes, *, strict: bool = False, block_mask=None, density=None) -> Cost:
    """The cost of ``diagram`` at ``sizes`` (axis and tile names → ints), ragged tiles counted exactly:
    a :class:`~napkin_cat.cost.record.Cost` of ints (``M`` the largest column at those sizes).  ``strict``:
    refuse a name the diagram lacks and a tile larger than its axis (:func:`bind`).  ``block_mask``: the data's
    (over the axes of the diagram's masks read from data, at ``sizes``): what a run given it skips is not counted.
    Without one, a mask from data runs a fraction ``density`` (a number for all, or ``{symbol: number}``; default
    1, dense) of the trips the positions allow, and :attr:`~napkin_cat.cost.record.Cost.assumptions` says so."""
    env = bind(diagram, sizes, strict=strict)
    symbols = densities(diagram) if block_mask is None else ()
    if density is not None and block_mask is not None:
        raise ArgumentError("a block mask decides every trip exactly: give block_mask= or density=, not both")
    assumed = Cost(assumptions=tuple(Density(r) for r in symbols)).at_density(1 if density is None else density)
    rho = {a.symbol: a.value for a in assumed.assumptions if a.value is not None and a.value != 1}
    if block_mask is not None:
        axes = data_axes(diagram)
        if set(block_mask.axes) != set(axes):
            raise ShapeError(f"the block mask is over axes {list(block_mask.axes)}; the masks read from data of this "
                            f"algorithm are over {list(axes) or 'no axis (it has none: give no block mask)'}")
        block_mask.check({str(k): v for k, v in env.items()}, "the sizes")
    out = folded(diagram, env, block_mask, rho)
    out.assumptions = tuple(a if a.value is not None else Density(a.symbol, 1) for a in assumed.assumptions)
    out.columns = {l: [max(_value(col, env) for col in cols)]
                   for l, cols in cost(_largest_shards(diagram, env)).columns.items()}
    return out


def _largest_shards(diagram: Diagram, env: dict) -> Diagram:
    """``diagram`` with each device region's inside at its largest shard's size (an int): the memory its
    columns count at ``env``, where a shard ``a/P`` need not be an integer."""
    items, changed = [], False
    for layer in diagram.inside:
        left, box, right = layer.boxes_or_types[:3]
        if isinstance(box, Shard):
            node = schedule_of(box)
            mine, mycuts = largest_shard(node, lambda e: _value(e, env))
            inside = device_inside(node, mine, mycuts)
            if inside is not node.inside:
                size = span_extent(mine[box.axis])
                box, changed = Shard(inside, box.dom, box.cod, {**box.params, "size": size}), True
        items.append((left, box, right))
    return from_layers(diagram.dom, diagram.cod, items) if changed else diagram
