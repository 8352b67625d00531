"""The cost functor at concrete sizes, ceil-aware: ragged tiles count what they hold.

The symbolic cost multiplies a tile's cost by ``a/g`` trips; at sizes that ``g`` does not divide
the last tile is smaller.  Evaluated structurally instead, a partition of ``a`` into tiles of ``g``
costs ``⌊a/g⌋ · C(g) + C(a mod g)``, where ``C(e)`` is the cost of its inside with the tile's extent
bound to ``e`` (a stream's head and tail once, its trip per slice).  This is the schedule fold
(:mod:`napkin_cat.algorithms.schedule`) with the algebra :class:`Concrete`, whose context is the
sizes and a running total (:class:`~napkin_cat.cost.at_sizes.At`, with the tiles a masked stream runs on); the
per-box costs are iocost's (:func:`~napkin_cat.cost.iocost.box_pieces`), a device region's and a ring's are counted
per device (:mod:`napkin_cat.cost.devices_at`).
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

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.algorithms.nesting import state_moves
from napkin_cat.algorithms.schedule import Phases, advance, fold_region, relabelled, schedule_of
from napkin_cat.algorithms.devices import Shard
from napkin_cat.algorithms.splits import part_bounds, partial_moves
from napkin_cat.cost.at_sizes import (At, add, counts_kept, integer, reads_positions_inside, running_slices, skip_axes,
                                      tile_extents, whole_slices)
from napkin_cat.cost.devices_at import DevicesAt, collective_link, largest_shards
from napkin_cat.cost.iocost import box_pieces, cost
from napkin_cat.cost.live_at import SympyAt
from napkin_cat.cost.record import Cost, Density
from napkin_cat.cost.scope import inside_view, interned
from napkin_cat.cost.trip_kinds import TripKinds, loop_skip
from napkin_cat.errors import ArgumentError, AxisError, ShapeError
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.relabel import PLAIN, Relabelling
from napkin_cat.syntax.sizes import as_sizes
from napkin_cat.syntax.wiring import computes

#: the record at concrete sizes is the cost record (one record: see :mod:`napkin_cat.cost.record`)
NumericCost = Cost


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


class Concrete(DevicesAt):
    """The cost algebra at concrete sizes: each box adds its integers to ``ctx.total`` (``ctx.count`` times); a
    partition's inside is folded once per distinct tile extent and counted as many times as there are such
    tiles, and a masked stream's trip once per distinct slice extent, counted on every tile where it runs.
    ``block_mask`` (:class:`~napkin_cat.algorithms.blockmask.BlockMask`, the data's): a mask read from data
    skips the trips where it allows no pair, as the runner given it does; without one such a mask skips nothing,
    and ``density`` (``{symbol: number}``, :attr:`~napkin_cat.algorithms.skipping.Skip.density`) scales the trips
    it lets run: ``ρ`` of them (a fraction, not a count: the cost then says what it assumes).  A device region
    and a ring are counted on each device (:class:`~napkin_cat.cost.devices_at.DevicesAt`)."""

    def __init__(self, block_mask=None, density=None, ring_tiles=None, kinds: TripKinds | None = None):
        self.block_mask, self.density = block_mask, dict(density or {})
        self.ring_tiles = dict(ring_tiles) if ring_tiles else None
        self.kinds = kinds      # where given, each masked loop's trips noted (:class:`~.trip_kinds.TripKinds`)

    def box(self, box, ctx: At, view: Relabelling | None = None):
        """``box`` run ``ctx.count`` times, seen through ``ctx.view`` (or ``view``, where given)."""
        H, H_bytes, flops, _ = box_pieces(box, ctx.view if view is None else view)
        env = ctx.env
        add(ctx.total, Cost({l: integer(h, env) for l, h in H}, {l: integer(h, env) for l, h in H_bytes}, {},
                            {p: integer(f, env) for p, f in flops}, link=collective_link(box, ctx)), ctx.count)

    def diagram(self, d: Diagram, ctx: At):
        for _, box in layers(d):
            if computes(box):
                if isinstance(box, Bubble):
                    fold_region(box, self, [None] * len(box.dom), ctx)
                else:
                    self.box(box, ctx)

    def _tiled(self, region, ctx: At, run_tile):
        """``run_tile(inner ctx, extent)`` once per distinct extent, counted per tile, the inner context seeing the
        inside as the tile holds it (:func:`inside_at`).  Where a mask inside reads the positions of the region's
        axis (its trips that run depend on the tile), the inner context stands for every tile of that extent at
        once (:meth:`At.bound` with their starts)."""
        positions = region.axis in skip_axes(region, data=self.block_mask is not None)
        for extent, starts in tile_extents(region, ctx.env, region.seen(ctx.view)[1]):
            inner = ctx.bound(region, extent, starts if positions else None).seeing(inside_at(region, ctx.view, extent))
            run_tile(inner, extent)
            add(ctx.total, inner.total, 1 if positions else len(starts))

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
        short = lambda e: node.inside if e == node.tile or not isinstance(node.tile, int) or is_record(node.region) \
            else relabelled(node.region, e).arg  # noqa: E731       (a record's short tile: its view, inside_at)
        self._tiled(node.region, ctx, lambda inner, e: self.diagram(short(e), inner))
        return dests

    def _trips(self, node, vals, states, ctx, run, skip=None):
        """Each distinct slice's trip, counted per slice; ``vals`` gets the sliced outputs the trips make.
        With ``skip`` (the loop's :func:`~napkin_cat.cost.trip_kinds.loop_skip`, which the plan reads too: its masks'
        :class:`~napkin_cat.algorithms.skipping.Skip`, or its sub-loops' :class:`~napkin_cat.cost.trip_kinds.
        SubLoops`), the slices it skips are not."""
        made = {}
        rho = self.density.get(skip.density, 1) if skip is not None and self.block_mask is None else 1
        if rho != 1:            # the trips' totals apart, then ρ of them added (a fraction of the trips run)
            outer, ctx.total = ctx.total, Cost()

        def trip(inner, e):
            r = run if e == node.region.size or not isinstance(node.region.size, int) or is_record(node.region) \
                else Phases(schedule_of(relabelled(node.region, e)), self)
            made.update(r.trip(vals, states, inner)[1])
            return r.schedule
        if skip is None or not skip.active(self.block_mask):
            self._tiled(node.region, ctx, trip)
        else:         # each slice runs on the tiles where the mask may be true: one test over every pair
            positions = reads_positions_inside(node.region, self.block_mask is not None)
            for e, starts in tile_extents(node.region, ctx.env, node.region.seen(ctx.view)[1]):
                inner = running_slices(skip, ctx, node.region, e, starts, positions, self.block_mask) \
                    .seeing(inside_at(node.region, ctx.view, e))
                whole = 0
                if inner.count:
                    whole = self._whole(skip, trip(inner, e), ctx, inner, node.region, e, starts)
                    add(ctx.total, inner.total)
                if self.kinds is not None:
                    self.kinds.note(node.region, inner.env, partial=inner.count > whole, whole=whole > 0)
        if rho != 1:
            trips, ctx.total = ctx.total, outer
            for mine, theirs in ((outer.H, trips.H), (outer.H_bytes, trips.H_bytes), (outer.flops, trips.flops)):
                for k, v in theirs.items():
                    mine[k] = mine.get(k, 0) + rho * v
        vals.update((v, made[v]) for v in node.sliced)

    def _whole(self, skip, schedule, ctx: At, inner: At, region, extent: int, starts):
        """The ops a trip makes only for its mask taken back from ``inner``'s total on the running trips the mask
        allows whole (:meth:`~napkin_cat.algorithms.skipping.Skip.whole`): a kernel runs those without the mask
        (the plan's full trips, the C kernel's ``if``), so they are charged on the partial trips only.  How many
        trips ran whole (0: every trip as written)."""
        items = schedule.trip
        whole = (schedule.skip or skip).whole(items)      # a ragged slice's schedule numbers its own values
        if whole is None:
            return 0
        if not whole.data and skip.data and self.block_mask is not None:
            return 0  # the data's table decides the trip (a kernel reading it tests no positions): as written
        n = whole_slices(skip, whole, ctx, inner, region, extent, starts, self.block_mask)
        if not n:
            return 0
        less = At(inner.env, count=n, device=inner.device, view=inner.view)
        for k in whole.ops:
            self.box(items[k].box, less)
        for mine, theirs in ((inner.total.H, less.total.H), (inner.total.H_bytes, less.total.H_bytes),
                             (inner.total.flops, less.total.flops)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) - v
        return n

    def stream(self, node, ins, ctx, dests, run):
        within = ctx.seeing(inside_at(node.region, ctx.view))     # head, finish and tail: the inside as drawn there
        vals = run.head(ins, within)
        states = run.init(within)
        self._trips(node, vals, states, ctx, run, loop_skip(node))
        if node.parts is not None:      # a split stream (.splits): P heads, P partials moved, P − 1 merges
            parts = integer(node.parts, ctx.env)
            part_bounds(1, parts)
            for _ in range(parts - 1):
                run.head(ins, within)
                run.merge(states, states, within)
            for _ in range(parts):
                for b in partial_moves(node):
                    self.box(b, within)
        return run.tail(run.finish(vals, states, within), within)

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
                for step in state_moves(ctx.view.array(s.array), node.level, direction):
                    self.box(step, ctx, PLAIN)      # (made on the array as seen)
        return state

    def advance_grid(self, node, state, ins, ctx):
        record = is_record(node.region)
        self._tiled(node.region, ctx, lambda inner, e: advance(node.child if record else node.short_child(e), self,
                                                               state, ins, inner))
        return state

    def advance_loop(self, node, state, ins, ctx, run):
        within = ctx if node.region is None else ctx.seeing(inside_at(node.region, ctx.view))
        vals = run.head(ins, within)
        parts = node.split(state)
        if node.region is None:
            run.trip(vals, parts, ctx)
        else:
            self._trips(node.schedule, vals, parts, ctx, run, loop_skip(node.schedule))
        return state


CONCRETE = Concrete()


def is_record(region) -> bool:
    """Whether ``region`` is a partition record (:attr:`~napkin_cat.algorithms.bubbles.Partition.relabelled` False):
    its inside drawn as it was, seen through the relabelling it stands for."""
    return not getattr(region, "relabelled", True)


def inside_at(region, view: Relabelling, extent: int | None = None) -> Relabelling:
    """The relabelling ``region``'s inside is seen through, where the region is seen through ``view``, in a tile of
    ``extent`` (None: a whole tile, or what runs once inside a stream).  ``view`` itself but for a partition record,
    whose inside is seen as the partition built holds it (:func:`~napkin_cat.cost.scope.inside_view`, the symbolic
    functor's view): its axis read as its tile, bound to the extent at sizes, or a concrete tile's shorter last one
    read as ``extent`` (where the built partition's last tile is its inside relabelled to it)::

        box_pieces(b, inside_at(record, v, e)) == box_pieces(b')     (b' the box in the built partition's tile)

    >>> import napkin_cat as nc
    >>> g = nc.group(nc.kernel(nc.library.matmul()), "a", 4, relabelled=False).boxes[0]
    >>> x = g.arg.dom.inside[0]
    >>> inside_at(g, PLAIN).array(x), inside_at(g, PLAIN, 3).array(x), inside_at(g.arg.boxes[0], PLAIN) is PLAIN
    (Array(a[4]×b), Array(a[3]×b), True)
    """
    if not is_record(region):
        return region.inside_view(view)
    if extent is None or not isinstance(region.size, int) or extent == region.size:
        return inside_view(region, view)
    full = region.seen(view)[1]
    return interned(view.then(region.axis, extent, full if region.carrier == "cod" else None))


def _partitions(diagram: Diagram):
    """The Grids and Streams of ``diagram``, not those inside a device region (each device's are on its shard)."""
    for _, box in layers(diagram):
        if isinstance(box, (Grid, Stream)):
            yield box
        if isinstance(box, Region) and not isinstance(box, Shard):
            yield from _partitions(box.arg)


def _seen_partitions(diagram: Diagram, view: Relabelling = PLAIN):
    """``(partition, view)``: :func:`_partitions` each with the relabelling it is seen through (a record's inside is
    seen through its own: a group inside a record of its axis partitions the outer tile, as the built one does)."""
    for _, box in layers(diagram):
        if isinstance(box, (Grid, Stream)):
            yield box, view
        if isinstance(box, Region) and not isinstance(box, Shard):
            yield from _seen_partitions(box.arg, inside_at(box, view))


def bind(diagram: Diagram, sizes, *, strict: bool = True) -> dict:
    """``sizes`` (a :class:`~napkin_cat.syntax.sizes.Sizes`, or names or symbols → positive ints) as an env,
    checked: every size given, every value a positive int; ``strict``: every name one of the diagram's axes or
    tiles and every tile within its axis (else the names the diagram lacks are left out: the sizes of a whole
    algorithm given for one of its kernels, :meth:`~napkin_cat.syntax.sizes.Sizes.restrict`)."""
    given = as_sizes(sizes)
    env = (given if strict else given.restrict(diagram)).require(diagram, "the cost at concrete sizes").env
    for box, view in _seen_partitions(diagram) if strict else ():
        full, tile = integer(box.seen(view)[1], env), integer(box.size, env)
        if tile > full:
            what = "group" if isinstance(box, Grid) else "stream"
            raise AxisError(f"the {what} size of {box.axis!r} ({box.size} = {tile}) exceeds the axis "
                            f"({box.axis} = {full}); legal sizes are 1 … {full}")
    return env


def folded(diagram: Diagram, env: dict, block_mask=None, density=None, ring_tiles=None,
           kinds: TripKinds | None = None) -> Cost:
    """The transfers (values and bytes) and FLOPs of ``diagram`` at an environment already bound (:func:`bind`),
    without its memory: what a search that counts many tilings of one algorithm calls, binding its sizes once.
    ``block_mask``: the data's, for the masks read from data; else ``density`` (``{symbol: number}``) scales the
    trips they let run; ``ring_tiles``: the tiles a ring's folds are charged by in ``Link.work`` (:class:`Concrete`);
    ``kinds`` (a :class:`~napkin_cat.cost.trip_kinds.TripKinds`): where given, which trips each masked loop runs, noted
    there (what the memory at the sizes reads)."""
    ctx = At(env)
    plain = block_mask is None and not density and not ring_tiles and kinds is None
    with counts_kept():      # a masked stream's running counts: the enclosing call's store, else this fold's
        (CONCRETE if plain else Concrete(block_mask, density, ring_tiles, kinds)).diagram(diagram, ctx)
    out = ctx.total
    out.H = {l: v for l, v in out.H.items() if v}
    out.H_bytes = {l: v for l, v in out.H_bytes.items() if v}
    out.flops = {p: v for p, v in out.flops.items() if v}
    return out


def at(diagram: Diagram, sizes, *, strict: bool = False, block_mask=None, density=None, ring_tiles=None) -> Cost:
    """The cost of ``diagram`` at ``sizes`` (axis and tile names → ints), ragged tiles counted exactly:
    a :class:`~napkin_cat.cost.record.Cost` of ints (``M`` the largest column at those sizes).  ``strict``:
    refuse a name the diagram lacks and a tile larger than its axis (:func:`bind`).  ``block_mask``: the data's
    (over the axes of the diagram's masks read from data, at ``sizes``): what a run given it skips is not counted.
    Without one, a mask from data runs a fraction ``density`` (a number for all, or ``{symbol: number}``; default
    1, dense) of the trips the positions allow, and :attr:`~napkin_cat.cost.record.Cost.assumptions` says so.
    ``ring_tiles`` (axis → tile size): the tiles each device's algorithm runs its rings' folds in, by which a fold
    a mask allows in part is charged in ``Link.work`` (:class:`~napkin_cat.cost.devices_at.DevicesAt`)."""
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
    kinds = TripKinds()
    out = folded(diagram, env, block_mask, rho, ring_tiles, kinds)
    out.assumptions = tuple(a if a.value is not None else Density(a.symbol, 1) for a in assumed.assumptions)
    # the symbolic columns at the sizes, each level's live data a running number (LiveAt: linear in the boxes); a
    # masked loop's trip counted as its trips run at the sizes (none, or whole only: without the mask's maps)
    # masked loop's trip counted as it runs there (none, or whole only: without the mask's maps); walked again at the
    # extents of each short tile a masked loop ran in (TripKinds: each column held is in the walk at its extents)
    out.columns = {}
    for walk in kinds.walks(env):
        columns = cost(largest_shards(diagram, walk), arithmetic=SympyAt(walk, kinds.at(walk, env)), ops=False).columns
        for l, cols in columns.items():
            out.columns[l] = [max([integer(col, walk) for col in cols] + out.columns.get(l, []))]
    return out
