"""The cost functor: transfers H, memory M and FLOPs per level, read off the diagram (§2.2-2.4).

* ``H[ℓ]``: values moved into or out of level ℓ (Loads/Saves whose lower end is ℓ),
  times the trip counts of enclosing Grids (``a/g``) and Streams (``b/s``).
* ``M[ℓ]``: the maximum over columns of the live data at ℓ, with relabelled
  sizes inside bubbles, plus what a Stream maintains (its accumulated outputs and
  the auxiliaries of online softmax) while its body runs.
* ``flops[pipeline]``: item FLOPs × weave sizes × trips; ``ops`` breaks them down per box
  (:class:`OpCost`: one record per box and pipeline, with the box's FLOPs per execution and its
  trips), so that ``flops[p] == Σ r.flops · r.trips`` over the records of pipeline ``p``.
  A stream's body counts its accumulator's step diagram once per trip (the online-softmax
  δ = exp(μ′ − μ) and the running output's rescale-and-accumulate included), its finish once.

A region's cost is a fold over its schedule (:mod:`napkin_cat.algorithms.schedule`) with the algebra
:class:`Symbolic`: a stream's head and tail once, its trip (maps and each reducer's accumulate) ``b/s``
times, each reducer's finish once; its memory is the columns of its expansion (:mod:`.columns`), with a split
stream's partial buffers (:mod:`.partials`).  A device region and a ring cost per device (:mod:`.devices`).
A primitive box's own cost is :mod:`.boxes`'s; the context of the walk (views, tiles, arithmetic) :mod:`.scope`'s.

It is a monoid-valued functor: composition adds H and FLOPs and takes the max of M::

    cost(f >> g) == cost(f).then(cost(g))

>>> import napkin_cat as nc
>>> q, x, d, g = nc.symbol("q"), nc.symbol("x"), nc.symbol("d"), nc.symbol("g_q")
>>> c = cost(nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q"))
>>> c.N_g, c.H_g[1]
(q/g_q, 2*d*g_q + 2*d*x)
"""

from __future__ import annotations

from dataclasses import replace

import sympy

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.algorithms.nesting import state_moves
from napkin_cat.algorithms.schedule import advance, fold_region, schedule_of
from napkin_cat.algorithms.splits import partial_moves
from napkin_cat.algorithms.launches import split_of
from napkin_cat.cost.boxes import PIECES, box_cost, box_pieces
from napkin_cat.cost.columns import stream_columns
from napkin_cat.cost.devices import Devices
from napkin_cat.cost.live import numel
from napkin_cat.cost.partials import partial_values
from napkin_cat.cost.polynomial import SYMPY
from napkin_cat.cost.record import ZERO, Cost, Density, GroupCost, OpCost, StreamRecord
from napkin_cat.cost.scope import Sink, trips as trips_of
from napkin_cat.cost.seeded import factor
from napkin_cat.cost.trip_kinds import loop_skip
from napkin_cat.cost.trips import running_trips, whole_trips
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.relabel import PLAIN, Relabelling
from napkin_cat.syntax.wiring import computes, trace_values, traverse

__all__ = ["Cost", "OpCost", "GroupCost", "StreamRecord", "box_cost", "box_pieces", "cost", "region_cost", "numel",
           "partial_values", "Symbolic", "Sink", "PIECES"]


def _plus(col: dict, extra: dict) -> dict:
    out = dict(col)
    for l, v in extra.items():
        out[l] = out[l] + v if l in out else v
    return out


def _dead(diagram: Diagram) -> frozenset:
    """The ids of values no box reads and the diagram does not output: dead as they are made, never held.  Read off
    the diagram alone, so kept on it (immutable: a kernel's inside is walked once per partition of it)."""
    found = diagram.__dict__.get("_dead_values")
    if found is None:
        ops, _, cod = trace_values(diagram)
        read = set(cod).union(*(ins for _, ins, _ in ops))
        found = diagram.__dict__["_dead_values"] = frozenset(v for _, _, outs in ops for v in outs if v not in read)
    return found


def _walk(diagram: Diagram, scope: "Sink | None" = None) -> Cost:
    """Cost of ``diagram``: the boxes' costs add up; a column of live data is read after every layer.

    One pass of :func:`~napkin_cat.syntax.wiring.traverse` whose values are ``(id, array)``: the
    wiring moves them (a copy keeps the id, so the copied variable is counted once), a box's outputs
    get fresh ids; an output nothing reads (discarded) is dead as it is made and never held.  Inside a
    region, every column of the region is counted on top of what lies beside it outside (the live data
    minus the region's inputs).  ``scope`` (a :class:`Sink`): the enclosing partitions, which a masked stream
    inside counts its trips on, and the relabelling the arrays are seen through (inside partition records).
    """
    scope = Sink() if scope is None else scope
    view, arithmetic = scope.view, scope.arithmetic
    total, parts = Cost(), []
    live = arithmetic.live()
    fresh = [len(diagram.dom)]
    dead = _dead(diagram)
    values = list(enumerate(map(view.array, diagram.dom.inside)))
    live.put(values)
    last = [live.column()]
    total.add_column(last[0], expanded=True)

    def on_box(step):
        box = step.box
        if isinstance(box, Region):
            inner = region_cost(box, scope)
            base = None
            # a partition's arrays are whole at its own level (0 for a top-level Grid, 1 for a level-2
            # kernel's Grid in a level-1 tile): its groups' columns count only the levels below it
            whole = max((a.level for a in (*box.dom.inside, *box.cod.inside)), default=0) \
                if isinstance(box, (Grid, Stream)) else 0
            partials = partial_values(box) if not whole else ZERO
            if partials != 0:   # a split's partial states in global memory, beside what the region reads
                total.add_column(_plus(live.column(), {0: arithmetic.of(partials)}), expanded=True)
            if whole:
                base = live.column(without=step.ins)
                for arrays in _held_phases(box, view):
                    held = {}
                    for a in arrays:
                        if 0 < a.level <= whole:
                            n = arithmetic.numel(a)
                            held[a.level] = held[a.level] + n if a.level in held else n
                    total.add_column(_plus(base, held))
            for lvl, cols in inner.columns.items():
                if lvl <= whole or lvl == 0 or not cols:  # global arrays are whole at level 0: the outer columns
                    continue                                # count them
                base = live.column(without=step.ins) if base is None else base
                # each column is base + v at lvl (its other levels base's): a level's pool is its own, so base's
                # other levels are pooled once, and lvl's values each on top of base's (both expanded: so the sum)
                total.add_column({l: b for l, b in base.items() if l != lvl}, expanded=True)
                under = base.get(lvl)
                for v in cols:
                    total.add_column({lvl: v if under is None else under + v}, expanded=True)
            inner.columns = {}
            parts.append(inner)
        else:
            parts.append(box_cost(box, view, arithmetic, ops=scope.ops))
        outs = [(fresh[0] + j, view.array(arr)) for j, arr in enumerate(box.cod.inside)]
        fresh[0] += len(outs)
        _after(step, outs)
        return outs

    def _after(step, outs):
        live.take([x for x in step.ins if x[0] not in dead])
        live.put([x for x in outs if x[0] not in dead])
        col = live.column()
        if col is not last[0]:     # the very column pooled last (Live.column: no level changed) adds nothing
            last[0] = col
            total.add_column(col, expanded=True)
    traverse(diagram, values, on_box, on_wiring=_after)
    return total.absorb_all(parts)


def _held_phases(box: Region, view: Relabelling) -> list:
    """The region's own inputs and outputs held at once, phase by phase.  A Grid writes its output group by group,
    so it holds every input and output throughout.  A Stream holds all its inputs in its head, then only those
    its body or tail still reads (the slices it streams, what the tail uses), and its outputs from its tail on
    (they are made there), with the inputs the tail reads; a sliced stream's sliced outputs throughout
    (each trip writes its slice into them, so they exist before the first).  Arrays as seen through ``view``."""
    ins, outs = list(map(view.array, box.dom.inside)), list(map(view.array, box.cod.inside))
    if not isinstance(box, Stream):
        return [ins + outs]
    s = schedule_of(box)
    reads = s.reads()
    dom = list(zip(s.dom, ins))
    body = [a for v, a in dom if reads.get(v, set()) & {"body", "tail"} or v in s.streamed]
    sliced = [a for v, a in zip(s.cod, outs) if v in s.sliced]   # written trip by trip: held whole
    tail = [a for v, a in dom if "tail" in reads.get(v, ())] + outs
    return [ins + sliced, body + sliced, tail]


def region_cost(box: Region, scope: Sink | None = None) -> Cost:
    """The cost of a region: the fold of its schedule with :class:`Symbolic` (one summed part); ``scope``: what
    encloses it (:class:`Sink`)."""
    sink = Sink() if scope is None else scope.again()
    fold_region(box, SYMBOLIC, [None] * len(box.dom), sink)
    (part,) = sink
    return part


def _grid_cost(box: Grid, inner: Cost, nest: bool, view: Relabelling, arithmetic=SYMPY) -> Cost:
    """``a/g`` runs of the inside; its group partition (merged with a Grid directly inside: one group
    over several axes).  ``view``: the relabelling the Grid is seen through."""
    size, full = box.seen(view)
    trips = trips_of(size, full, arithmetic)
    nested = inner.groups[0] if inner.groups and nest else None
    out = inner.scaled(trips, region=("grid", box.axis))
    if nested is not None:
        out.groups = [GroupCost((box.axis,) + nested.axes, (size,) + nested.tiles, nested.N_g * trips,
                                nested.H_g, (full,) + nested.fulls, nested.level)] + out.groups[1:]
    else:
        out.groups = [GroupCost((box.axis,), (size,), trips, dict(inner.H), (full,),
                                _kernel_level(box.arg))] + out.groups
    return out


def _kernel_level(arg: Diagram) -> int:
    """The level of the kernel a Grid partitions (through Grids directly inside)."""
    for _, b in layers(arg):
        if isinstance(b, Region) and b.region == "kernel":
            return b.params["level"]
        if isinstance(b, Grid):
            return _kernel_level(b.arg)
    return 1


def _is_nest(arg: Diagram) -> bool:
    boxes = [b for _, b in layers(arg) if computes(b)]
    return len(boxes) == 1 and isinstance(boxes[0], Grid)


def _flop_cost(diagram: Diagram, scope: Sink) -> Cost:
    """FLOPs (and their per-op records) of a diagram run once; its memory is the stream's to count."""
    c = _walk(diagram, scope)
    c.columns = {}
    return c


def _held_at(box: Stream) -> int:
    """The level a stream's slices are held at: the deepest level on its inside's own wires (read off the inside
    alone: kept on it, shared by the candidates that stream it)."""
    found = box.arg.__dict__.get("_held_at")
    if found is None:
        levels = [a.level for a in box.arg.dom.inside]
        for _, b in layers(box.arg):
            levels += [a.level for a in b.cod.inside]
        found = box.arg.__dict__["_held_at"] = max(levels + [1])
    return found


def _op_cost(b, scope: Sink) -> Cost:
    c = region_cost(b, scope) if isinstance(b, Region) else box_cost(b, scope.view, scope.arithmetic, ops=scope.ops)
    c.columns = {}
    return c


def _phases(parts: list, trips, role: str, arithmetic=SYMPY) -> list:
    """The parts of one phase run ``trips`` times.  In sympy each is scaled alone (``b/s_b · a·s_b`` reads ``a·b``,
    where ``b/s_b · (a·s_b + …)`` would stay a product); in exact polynomials ``k·Σp = Σ k·p``, so the phase is
    summed once and scaled once (fewer products, one record), where no part runs on devices (their links scale
    apart)."""
    if arithmetic.name != SYMPY.name and len(parts) > 1 and all(p.link is None for p in parts):
        return [Cost().absorb_all(parts).scaled(trips, role=role)]
    return [p.scaled(trips, role=role) for p in parts]


def _in_stream(c: Cost, region, view: Relabelling, masked: bool = False, density=None) -> Cost:
    c.ops = [replace(o, region=(("stream", region.axis),) + o.region) for o in c.ops]
    size, full = region.seen(view)
    c.streams.append(StreamRecord(region.axis, size, full, _held_at(region), masked, density))
    return c


class Symbolic(Devices):
    """The cost algebra of the schedule fold: ``ctx`` is a list that each op, reducer trip, finish and region
    appends its :class:`Cost` to (a region one summed part); values are not looked at.  A device region and a ring
    are counted per device (:class:`~napkin_cat.cost.devices.Devices`)."""

    def op(self, op, ins, sink, dests):
        masked = getattr(sink, "mask_ops", None)     # a masked trip's maps that make only its mask: apart (.stream)
        (masked[1] if masked is not None and id(op) in masked[0] else sink).append(_op_cost(op.box, sink))
        return [None] * len(op.outs)

    def kernel(self, node, ins, sink, dests):
        inner = sink.within(node.region)
        inner.split_rows = (split_of(node.region), sink.tiles) if split_of(node.region) is not None else None
        sink.append(_walk(node.inside, inner))
        return dests

    def grid(self, node, ins, sink, dests):
        sink.append(_grid_cost(node.region, _walk(node.inside, sink.inside(node.region)), _is_nest(node.inside),
                               sink.view, sink.arithmetic))
        return dests

    def stream(self, node, ins, sink, dests, run):
        """Head and tail once, the trip ``b/s`` times, each reducer's finish once; memory: the columns of the
        stream's expansion in the order it runs (:mod:`napkin_cat.cost.columns`): the head's, then each trip's
        with the reducers' state (e.g. μ, z and o for online softmax) and the values the trip re-reads, the
        step diagram's own intermediates included, then the tail's.  A masked stream (``node.skip``), or one whose
        sub-loops' masks skip its trips (:func:`~napkin_cat.cost.trip_kinds.loop_skip`, as the plan and the cost at
        sizes skip them), runs only the trips not skipped: :func:`~napkin_cat.cost.trips.running_trips` per tile; the
        maps that make only its mask (:meth:`~napkin_cat.algorithms.skipping.Skip.whole`, which the plan and the cost
        at sizes leave out of a trip the mask allows whole) run on those less the trips it allows whole
        (:func:`~napkin_cat.cost.trips.whole_trips`)::

            flops(mask's maps) = (running − whole) · flops(one trip's maps)     (causal: the diagonal blocks)

        exact at sizes where the tiles line up with the slices (``s_x | g_q``, ``s_x ≥ 2``) and the mask's offsets are
        within one position; elsewhere fewer whole trips are counted (a numeric window's or prefix's offsets, a union
        of bounds: none), never more: the mask's FLOPs are an upper bound of those its running trips make."""
        head, body, tail = sink.within(node.region), sink.inside(node.region), sink.within(node.region)
        vals = run.head(ins, head)
        states = run.init(head)
        skip = loop_skip(node)
        whole = node.skip.whole(node.trip) if node.skip is not None and skip is node.skip else None
        mask = sink.again(body.view)
        if whole is not None:     # the maps that make only the mask, counted apart: a trip run whole leaves them out
            body.mask_ops = (frozenset(id(node.trip[k]) for k in whole.ops), mask)
        _, made = run.trip(vals, states, body)
        body.mask_ops = None
        vals.update((v, made[v]) for v in node.sliced)     # a sliced output: made by the trips
        run.tail(run.finish(vals, states, tail), tail)
        total = Cost()
        arithmetic = sink.arithmetic
        last = None
        split = getattr(sink, "split_rows", None)       # a kernel that is this split alone: its combine by rows
        rows = {t[0]: t[2] for t in split[1]} if split is not None and split[0] is node.region else {}
        for col in stream_columns(node, head.view, arithmetic, rows=rows):
            if col is not last:    # (the very column again: the live data unchanged, Live.column)
                last = col
                total.add_column(col, expanded=True)
        size, full = node.region.seen(sink.view)
        trips = trips_of(size, full, arithmetic)
        density = None if skip is None else skip.density
        counted = None
        if skip is not None:
            counted = running_trips(skip, node.axis, sympy.sympify(size), sympy.sympify(full), sink.tiles)
            trips = trips if counted is None else arithmetic.of(counted)
        partial = trips
        if mask:     # the trips it allows whole run without the mask's maps (as the plan and the cost at sizes)
            w = whole_trips(whole, node.axis, sympy.sympify(size), sympy.sympify(full), sink.tiles)
            partial = trips - arithmetic.of(w) if counted is None else arithmetic.of(factor(counted - w))
        if density is not None:     # a mask from data: a fraction of the trips the positions allow, stated
            trips, partial = arithmetic.of(density) * trips, arithmetic.of(density) * partial
        parts = arithmetic.one if node.parts is None else arithmetic.of(node.parts)
        moves, merges = sink.again(head.view), sink.again(head.view)
        if node.parts is not None:     # each part's state written and read back, P − 1 merges (.splits)
            moves.extend(_op_cost(b, sink.again(head.view, ())) for b in partial_moves(node))
            run.merge(states, states, merges)
        total.absorb_all(_phases(head, parts, "head", arithmetic) + _phases(body, trips, "body", arithmetic)
                         + _phases(mask, partial, "body", arithmetic) + _phases(moves, parts, "partials", arithmetic)
                         + _phases(merges, parts - 1, "combine", arithmetic) + _phases(tail, 1, "tail", arithmetic))
        if density is not None:
            total.assumptions = (Density(density),)
        sink.append(_in_stream(total, node.region, sink.view, masked=skip is not None, density=density))
        return dests

    def merge(self, r, diagram, a, b, sink):
        sink.append(_flop_cost(diagram, sink))
        return a

    def init(self, r, sink, dests):
        return [None] * len(r.state)

    def monoid(self, r, state, ins, sink):
        sink.append(_op_cost(r.op.box, sink))
        return state

    def step(self, r, state, ins, sink):
        sink.append(_flop_cost(r.step, sink))
        return state

    def finish(self, r, state, sink, dests):
        sink.append(_flop_cost(r.finish, sink))
        return [None] * len(r.outputs)

    def advance_kernel(self, node, state, ins, sink):
        """The inside advanced, with the state loaded to the kernel's level and saved back.  No memory: the
        enclosing stream counts it."""
        inner = sink.within(node.region)
        advance(node.child, self, state, ins, inner)
        c = Cost().absorb_all(inner)
        for s in node.state:
            for direction in ("load", "save"):
                for step in state_moves(sink.view.array(s.array), node.level, direction):
                    c.absorb(box_cost(step, PLAIN, sink.arithmetic, ops=sink.ops))
        c.ops = [replace(o, region=(("kernel", node.level),) + o.region) for o in c.ops]
        sink.append(c)
        return state

    def advance_grid(self, node, state, ins, sink):
        inner = sink.inside(node.region)
        advance(node.child, self, state, ins, inner)
        sink.append(_grid_cost(node.region, Cost().absorb_all(inner), _is_nest(node.region.arg), sink.view,
                               sink.arithmetic))
        return state

    def advance_loop(self, node, state, ins, sink, run):
        """A sub-loop's head once and its trip ``b/u`` times (a diagram's: once), on each trip of the loop around it
        that runs.  A masked sub-loop's trips are counted by the loop around it: that loop skips a trip where every
        sub-trip is skipped (:func:`~napkin_cat.cost.trip_kinds.loop_skip`: the masks' range on its trip is the union
        of theirs) and counts its running trips by the masks (:func:`~napkin_cat.cost.trips.running_trips`), so::

            trips(outer) · s/u == (U − L + 1)/u       (per enclosing tile: a stream's count with slices of u)

        the closed form of a stream along the axis in slices of ``u`` (causal, a window: exact where the slices line
        up with the active positions' ends, as a stream's is; :mod:`napkin_cat.cost.trips`), times the density of its
        masks from data.  Where the masks have no such form (a union of bounds: prefix-LM, sinks with a window), or
        some reducer of the outer loop is not a masked sub-loop's, every trip is counted, an upper bound of the cost
        at sizes.  The sub-trips its mask allows whole are charged the mask's maps (a stream's are not,
        :func:`~napkin_cat.cost.trips.whole_trips`): an upper bound of the mask's FLOPs."""
        scope = sink if node.region is None else sink.within(node.region)
        head, body = scope.again(), scope.again()
        run.trip(run.head(ins, head), node.split(state), body)
        trips = trips_of(*node.region.seen(sink.view), sink.arithmetic) if node.region is not None else 1
        skip = loop_skip(node.schedule) if node.region is not None else None
        density = None if skip is None else skip.density
        if density is not None:     # a mask from data: a fraction of the sub-trips, stated (as a stream's)
            trips = sink.arithmetic.of(density) * trips
        c = Cost().absorb_all(_phases(head, 1, "head", sink.arithmetic) + _phases(body, trips, "body", sink.arithmetic))
        if density is not None:
            c.assumptions = tuple(dict.fromkeys(c.assumptions + (Density(density),)))
        sink.append(_in_stream(c, node.region, sink.view, masked=skip is not None, density=density)
                    if node.region is not None else c)
        return state


SYMBOLIC = Symbolic()


def _number_occurrences(ops: list) -> list:
    """Dense box indices 0, 1, … in the order of the walk (records of one box keep one index)."""
    dense = {}
    return [replace(r, index=dense.setdefault(r.index, len(dense))) for r in ops]


def cost(diagram: Diagram, hierarchy=None, *, arithmetic=SYMPY, ops: bool = True) -> Cost:
    """The IO cost of an algorithm (or of a function diagram, which moves nothing), symbolic: its values sympy
    expressions, or with ``arithmetic=POLYNOMIAL`` (:mod:`napkin_cat.cost.polynomial`) the same values as
    polynomials in Python numbers (a NotPolynomialError where one is not: a masked stream's ceiling, say).
    ``ops=False``: without the per-box breakdown ``ops`` (every other field as it is), what a reader of the
    transfers, memory and FLOPs alone (the search's candidates) needs."""
    c = _walk(diagram, Sink(arithmetic=arithmetic, ops=ops))
    c.ops = _number_occurrences(c.ops)
    c.source = diagram
    if hierarchy is not None:
        hierarchy.check_levels(c.levels)
    return c
