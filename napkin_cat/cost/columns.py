"""The columns of a stream's expansion: what is live at each step of head, trips and tail (paper §5.1, §5.4).

A stream runs as the paper's loop (Fig. streamed_algorithm_loop): the head once, each reducer's
state set to its empty value, per trip the maps and each reducer's accumulator (a monoid's box,
or a form's step diagram ``B`` op by op), then each form's finish and the tail.  A column is the
set of values live before a step: defined earlier and read at or after it (values read by the
body and made outside it stay live through every trip, the state from trip to trip).  This is the
order in which data is actually held, so head computations never meet a slice, and the step's
own intermediates (δ, the rescaled output) are counted.

The steps are an algebra of the schedule fold (:mod:`napkin_cat.algorithms.schedule`) whose values
are names and whose context collects *items* ``(uses, defs)``; liveness over the items gives the columns.
A split stream (:mod:`napkin_cat.algorithms.splits`) is one part standing for all, then its combine, whose
merges run only where ``P ≥ 2``: their items ``(uses, defs, Min(1, P − 1))`` weigh their columns so, wherever
the stream sits (a region of its own, or inline in another stream's trip).

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.schedule import schedule_of
>>> from napkin_cat.syntax.axis import symbol
>>> s = nc.stream(nc.library.attention(), "x", "s_x").boxes[0].arg.boxes[0]
>>> cols = stream_columns(schedule_of(s))
>>> max(c[1].subs({symbol("q"): 4, symbol("d"): 2, symbol("s_x"): 3}) for c in cols if 1 in c)
46
"""
from __future__ import annotations

import itertools

import sympy

from napkin_cat.algorithms.nesting import state_moves
from napkin_cat.algorithms.reuse import accumulated_addends, finish_in_place, step_in_place
from napkin_cat.algorithms.schedule import Phases, advance, fold, schedule_of
from napkin_cat.cost.polynomial import SYMPY
from napkin_cat.syntax.relabel import PLAIN, Relabelling
from napkin_cat.syntax.wiring import trace_values


class Items:
    """The context of the columns algebra: the ``items`` being collected, each name's array (as seen through
    ``view``, the relabelling of the partition records around: :class:`~napkin_cat.syntax.relabel.Relabelling`),
    the name ``tag`` of the loop being expanded (``()`` for the stream itself: its values keep their ids), the
    ``arithmetic`` the columns are totalled in (:mod:`napkin_cat.cost.polynomial`)."""

    def __init__(self, arrays: dict, tag=(), counter=None, view: Relabelling = PLAIN, arithmetic=SYMPY):
        self.arrays, self.tag, self.items, self.view, self.arithmetic = arrays, tag, [], view, arithmetic
        self.counter = counter if counter is not None else itertools.count()
        self.columns: list = []

    def name(self, v, arr):
        n = (self.tag, v) if self.tag else v
        self.arrays[n] = self.view.array(arr)
        return n

    def named(self, v):
        """The name value ``v`` has in this context (:meth:`name`'s, nothing recorded)."""
        return (self.tag, v) if self.tag else v

    def seen(self, arrays: dict) -> dict:
        """``arrays`` as this context sees them."""
        return {n: self.view.array(a) for n, a in arrays.items()} if self.view else arrays

    def nested(self, *what, region=None) -> "Items":
        """A context for a loop nested in this one (inside ``region``, if a region): names of its own, items
        collected apart."""
        return Items(self.arrays, self.tag + what + (next(self.counter),), self.counter,
                     self.view if region is None else region.inside_view(self.view), self.arithmetic)


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


class Columns:
    """The columns algebra: each phase's items, in the order the stream's expansion runs them."""

    def op(self, op, ins, ctx, dests):
        if getattr(op.box, "region", None) == "stream":
            return self._inline(op, ins, ctx)
        outs = [ctx.name(v, arr) for v, arr in zip(op.outs, op.box.cod.inside)]
        ctx.items.append((list(ins), outs))
        return outs

    def _inline(self, op, ins, ctx):
        """A stream run inside this one's phase (a 2-D loop, :mod:`napkin_cat.algorithms.inner_streams`): its
        head, one trip standing for all, its finish and tail, inline, under names of its own.  Split in parts:
        one part standing for all (its head, trips and state saved), then the combine (:meth:`_combine`)."""
        node = schedule_of(op.box)
        inner = ctx.nested("stream", region=op.box)
        run = Phases(node, self)
        vals = run.head(ins, inner)
        states = run.init(inner)
        head, inner.items = inner.items, []
        run.trip(vals, states, inner)
        body, inner.items = _as_run(inner.items, node, op.box, inner), []
        if node.parts is None:
            outs = run.tail(run.finish(vals, states, inner), inner)
            ctx.items += head + _looped(body) + inner.items
            return outs
        c_head, c_body, tail, outs = self._combine(node, vals, inner, run)
        ctx.items += _looped(head + _looped(body) + _saved(states)) + c_head + _merging(_looped(c_body), node) + tail
        return outs

    def stream(self, node, ins, ctx, dests, run):
        """The columns of the head (with the reducers' states made), one trip, and the finish and tail."""
        head, body, tail = ctx.items, [], []
        vals = run.head(ins, ctx)
        states = run.init(ctx)
        ctx.items = body
        _, made = run.trip(vals, states, ctx)
        vals.update((v, made[v]) for v in node.sliced)     # a sliced output: made by the trips
        body = _as_run(body, node, node.region, ctx)
        if node.parts is not None:
            return self._split(node, vals, ctx, run, head, body, states)
        ctx.items = tail
        outs = run.tail(run.finish(vals, states, ctx), ctx)
        ctx.columns = _columns(head, body, tail, set(outs), ctx.arrays, ctx.arithmetic)
        return outs

    #: a ring's columns are its stream's (the slot its next slice arrives in is the cost functor's to add)
    ring = stream

    def _split(self, node, vals, ctx, run, head, body, states):
        """A split stream (:mod:`napkin_cat.plan.partials`): a part's columns (its head, trips, and its state
        saved), then the combine's (:meth:`_combine`)."""
        part = _columns(head, body, _saved(states), set(), ctx.arrays, ctx.arithmetic)
        saved = ctx.view
        for a, tile in getattr(ctx, "rows", {}).items():   # the combine on one row of the groups
            ctx.view = ctx.view.then(a, sympy.Integer(1), full=tile)
        try:
            c_head, c_body, tail, outs = self._combine(node, vals, ctx, run)
        finally:
            ctx.view = saved
        ctx.columns = part + _columns(c_head, _merging(c_body, node), tail, set(outs), ctx.arrays, ctx.arithmetic)
        return outs

    def _combine(self, node, vals, ctx, run) -> tuple:
        """The items of a split stream's combine, ``(head, body, tail, outputs)``: the first partial loaded (the
        head), per other part its partial loaded and merged (the body: the two states held at once, and the
        merge's own intermediates), the finishes and the tail (a head value the tail reads is held through the
        combine)."""
        merged = [[ctx.name(("merged", r.k, j), s.array) for j, s in enumerate(r.state)] for r in node.reducers]
        other = [[ctx.name(("other", r.k, j), s.array) for j, s in enumerate(r.state)] for r in node.reducers]
        c_head = [([], [v]) for m in merged for v in m]
        ctx.items = [([], [v]) for o in other for v in o]
        run.merge(merged, other, ctx)
        c_body, ctx.items = ctx.items, []
        outs = run.tail(run.finish(vals, merged, ctx), ctx)
        tail, ctx.items = ctx.items, []
        return c_head, c_body, tail, outs

    def init(self, r, ctx, dests):
        if r.finish is None:       # the state is the output (a stream's own reducers: names are ids)
            state = [ctx.name(v, s.array if ctx.tag else ctx.arrays.get(v, s.array))
                     for v, s in zip(r.outputs, r.state)]
        else:
            state = [ctx.name(("state", r.k, j), s.array) for j, s in enumerate(r.state)]
        ctx.items += [([], [sid]) for sid in state]
        return state

    def monoid(self, r, state, ins, ctx):
        ctx.items.append((list(ins) + list(state), list(state)))
        return state

    def step(self, r, state, ins, ctx):
        """``B`` op by op, each new state written over the old where it may be, each sum accumulated in place."""
        return self._update(r.step, state, ins, ctx)

    def _update(self, step, state, ins, ctx):
        _, _, cod = trace_values(step)
        ok = step_in_place(step, len(state))
        rename = {cod[j]: state[j] for j in range(len(state)) if ok[j]}
        sub, arrs, new = _sub(step, list(state) + list(ins), rename, ctx.nested("step").tag)
        ctx.arrays.update(ctx.seen(arrs))
        ctx.items += _accumulated(sub, accumulated_addends(step, len(state)))
        ctx.items += [([v], [s]) for v, s in zip(new, state) if v != s]
        return state

    def merge(self, r, diagram, state, other, ctx):
        """A split stream's merge of two parts' states, run as a step is (over the first)."""
        return self._update(diagram, state, other, ctx)

    def finish(self, r, state, ctx, dests):
        _, _, fcod = trace_values(r.finish)
        over = {fcod[j]: state[i] for j, i in finish_in_place(r.finish).items()}
        items, arrs, new = _sub(r.finish, list(state), over, ctx.nested("finish").tag)
        ctx.arrays.update(ctx.seen(arrs))
        ctx.items += items
        return new

    def advance_kernel(self, node, state, ins, ctx):
        """The state loaded to the kernel's level and saved back around the inside's trip."""
        inner = ctx.nested("kernel")
        loads, saves, moved = [], [], []
        for j, (sid, s) in enumerate(zip(state, node.state)):
            cur = sid
            for step in state_moves(ctx.view.array(s.array), node.level, "load"):
                arr = step.cod.inside[0]
                nid = (inner.tag, "state", j, arr.level)
                ctx.arrays[nid] = arr
                loads.append(([cur], [nid]))
                saves.insert(0, ([nid, cur], []))
                cur = nid
            moved.append(cur)
        advance(node.child, self, moved, ins, inner)
        ctx.items += loads + inner.items + saves
        return state

    def advance_grid(self, node, state, ins, ctx):
        """One group stands for all (its slices are views: the same names)."""
        inner = ctx.nested("grid", region=node.region)
        advance(node.child, self, state, ins, inner)
        ctx.items += _looped(inner.items)
        return state

    def advance_loop(self, node, state, ins, ctx, run):
        """A sub-loop's head and one sub-slice standing for all (a diagram's head and its one slice)."""
        inner = ctx.nested("loop", region=node.region)
        vals = run.head(ins, inner)
        head, inner.items = inner.items, []
        run.trip(vals, node.split(state), inner)
        if node.region is None:
            ctx.items += head + inner.items
        else:
            ctx.items += head + _looped(_as_run(inner.items, node.schedule, node.region, inner))
        return state


COLUMNS = Columns()


def stream_columns(node, view: Relabelling = PLAIN, arithmetic=SYMPY, rows: dict | None = None) -> list:
    """Columns (dicts level → live values, each expanded) of a stream schedule, in the order its expansion runs;
    ``view``: how its inside's arrays are seen (the relabelling of the partition records around it and its own);
    ``arithmetic``: what the live values are totalled in (:mod:`napkin_cat.cost.polynomial`); ``rows``: a split
    stream that is its kernel alone, the Grids around it (axis → tile): its combine holds one row of each
    (:func:`napkin_cat.plan.partials.fission`)."""
    ctx = Items({}, view=view, arithmetic=arithmetic)
    ctx.rows = dict(rows or {})
    ctx.arrays.update(ctx.seen(node.arrays))
    fold(node, COLUMNS, list(node.dom), ctx)
    return ctx.columns


def _as_run(body: list, schedule, region, ctx: Items) -> list:
    """The items of a loop's trip (``body``, of ``schedule``, the loop ``region``'s, named in ``ctx``) as its trips
    run at the sizes (``ctx.arithmetic.trip_kinds``, :meth:`~napkin_cat.cost.trip_kinds.TripKinds.at`): none where no
    trip runs; where every trip that runs is whole, without the maps that make only the mask (:meth:`~napkin_cat.
    algorithms.skipping.Skip.whole`) and without the mask read (a kernel reads it as true there); else as written::

        live(whole trip) = live(trip) − what only the mask's maps make          (never made on such a trip)

    What those maps read from outside the trip (the head's positions) stays live through the loop, as the plan
    holds it: a map left out keeps its reads of such values and makes nothing."""
    kinds = getattr(ctx.arithmetic, "trip_kinds", None)
    kind = None if kinds is None or region is None else kinds.kind(region)
    if kind is None:
        return body
    if kind == "none":
        return []
    whole = schedule.skip.whole(schedule.trip) if schedule.skip is not None else None
    if whole is None:
        return body
    gone = {ctx.named(v) for k in whole.ops for v in schedule.trip[k].outs}
    # a map left out still reads, as written, what is made outside the trip (the plan frees it where it is written)
    return [([v for v in uses if v not in gone], [] if defs and set(defs) <= gone else defs, *rest)
            for uses, defs, *rest in body]


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


def _looped(items) -> list:
    """One trip of a loop standing for all: what the trip reads from outside stays live to its end (the
    next trip reads it again)."""
    made, seen, outside = set(), set(), []
    for uses, defs, *_ in items:
        for v in uses:
            if v not in made and v not in seen:
                seen.add(v)
                outside.append(v)
        made |= set(defs)
    return items + [(outside, [])]


def _saved(states) -> list:
    """A split stream's part ends by saving its reducers' states (its partials): the item that reads them."""
    return [([v for st in states for v in st], [])]


def _merging(items, node) -> list:
    """The combine's merges, each column weighted by whether they run: ``Min(1, P − 1)`` (a split stream in one
    part merges nothing, so its combine holds no second state)."""
    runs = sympy.Min(1, sympy.sympify(node.parts) - 1)
    return [(uses, defs, runs) for uses, defs, *_ in items]


def _block_in(items, live) -> set:
    """What is live before ``items`` given ``live`` after them: ``live_in = (live_out − defs) ∪ uses``, item by
    item backwards (in place: each item costs its own uses and defs, not the live set)."""
    live = set(live)
    for uses, defs, *_ in reversed(items):
        live.difference_update(defs)
        live.update(uses)
    return live


def _sample(items, live, arrays, arithmetic) -> list:
    """The column before each item (dicts level → live values), given ``live`` after the last: the live data is
    kept up to date as the walk backwards kills and revives values (:class:`~napkin_cat.cost.live.Live`), so a
    column costs the values that change and the distinct monomials, not the values live.  An item ``(uses, defs,
    w)`` weighs its column by ``w`` (:func:`_merging`: 0 where it never runs)."""
    live, data, out = set(live), arithmetic.live(), []
    data.hold([arrays[v] for v in live])      # (a name is live or not: each held once)
    for uses, defs, *weight in reversed(items):
        uses = set(uses)
        dead = [v for v in set(defs) if v in live and v not in uses]
        born = [v for v in uses if v not in live]
        if dead:
            live.difference_update(dead)
            data.drop([arrays[v] for v in dead])
        if born:
            live.update(born)
            data.hold([arrays[v] for v in born])
        col = data.column()
        out.append({lvl: arithmetic.expand(n * arithmetic.of(weight[0])) for lvl, n in col.items()} if weight else col)
    return out[::-1]


def _columns(head, body, tail, live_out, arrays, arithmetic) -> list:
    tail_in = _block_in(tail, live_out)
    body_in = _block_in(body, tail_in)
    while True:
        nxt = _block_in(body, tail_in | body_in)
        if nxt == body_in:
            break
        body_in = nxt
    return (_sample(head, body_in | tail_in, arrays, arithmetic) + _sample(body, tail_in | body_in, arrays, arithmetic)
            + _sample(tail, live_out, arrays, arithmetic) + [_column(live_out, arrays, arithmetic)])


def _column(live, arrays, arithmetic) -> dict:
    data = arithmetic.live()
    data.hold([arrays[v] for v in live])
    return data.column()
