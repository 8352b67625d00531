"""The pseudocode functor: an algorithm diagram expanded into the plan IR (paper §5.1-5.3).

Structural recursion over the diagram, with destination passing (a value that leaves a region
is written straight into the slice of the array that receives it):

=====================  ======================================================================
diagram                plan
=====================  ======================================================================
``f >> g``, ``f @ g``  the statements of ``f`` then those of ``g`` (layer order)
swap, copy, discard    nothing: views are renamed, copied or dropped
Load / Save box        ``Load`` / ``Store`` of a tile between its two levels
primitive box          ``Compute`` (tied to the box)
``Kernel(ℓ)``          ``Kernel`` around the expansion of its inside
``Grid(a, g)``         ``GridLoop``: inputs and outputs sliced along ``a`` at ``i_a·g``
``Stream(b, s)``       ``StreamLoop``: head ops; each reducer's state filled with its empty
                       value; per slice the maps and each reducer's step (a monoid folds
                       its box into the state, a form runs its step diagram ``B``); then
                       each form's finish and the tail (Fig. streamed_algorithm_loop)
=====================  ======================================================================

The regions are expanded by the schedule fold (:mod:`napkin_cat.algorithms.schedule`): the
:class:`Expander` is its algebra whose values are refs and whose context is the list of statements
being written.

>>> import napkin_cat as nc
>>> e = Expander({})
>>> stmts, outs = e.top(nc.stream(nc.library.matmul(), "b", "s_b"))
>>> [type(s).__name__ for s in stmts], [v.role for v in e.variables.values()]
(['Alloc', 'Kernel'], ['input', 'input', 'output', 'state', 'tile', 'tile'])
"""
from __future__ import annotations

from contextlib import contextmanager

import sympy

from napkin_cat.algorithms.bubbles import Kernel
from napkin_cat.algorithms.launches import split_of
from napkin_cat.algorithms.nesting import state_moves
from napkin_cat.algorithms.reuse import accumulated_addends, finish_in_place, step_in_place
from napkin_cat.algorithms.schedule import advance, fold_region
from napkin_cat.cost.trip_kinds import loop_skip
from napkin_cat.plan.ir import (Alloc, Compute, Copy, Fill, GridLoop, Kernel as KernelNode, Load, Range, Ref, Store,
                                StreamLoop, Variable, loop_index)
from napkin_cat.plan.skips import BlockSkip, FullTrips
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.wiring import trace_values

from napkin_cat.plan.partials import fission, split_stream


def _ascii(name: str) -> str:
    table = {"μ": "mu", "δ": "delta", "σ": "sigma", "·": "dot"}
    out = "".join(table.get(c, c) for c in name)
    return "".join(c if c.isalnum() or c == "_" else "_" for c in out) or "v"


def _condition(c):
    """A trip's condition as a sympy boolean, simplified (``true`` when no trip is skipped)."""
    from sympy.logic.boolalg import to_nnf
    c = sympy.sympify(c)
    return c if isinstance(c, (sympy.logic.boolalg.BooleanTrue, sympy.logic.boolalg.BooleanFalse)) else to_nnf(c)


class Expander:
    """Builds the statements and the variables of a plan; ``variables`` keeps their order of creation.

    The regions' algebra of the schedule fold: values are refs, the context the statement list written."""

    def __init__(self, sizes: dict, *, accumulate: bool = True):
        self.sizes = sizes
        self.accumulate = accumulate   # sums read at an addend of an in-place state update accumulate into it
        self.variables: dict[str, Variable] = {}
        self.indices: set = set()
        self.context: dict[str, Range] = {}   # axis -> the range enclosing loops give it
        self.whole: dict[str, sympy.Expr] = {}  # axis -> where the outermost enclosing loop's range ends (the axis)
        self.offsets: dict[str, dict] = {}    # variable -> {axis: where its first value sits on the axis}
        self.path: tuple = ()
        self.hoisted: list = []               # Allocs made inside that belong at the top (a split's partials)
        self.split_kernel = None              # the split stream that is the whole of the kernel expanded, if one

    # ----------------------------------------------------------------- variables
    def new_var(self, base: str, array, role: str, origin: str, *, extra: tuple = (), level=None) -> Ref:
        """A new variable holding ``array`` (``extra`` ``(axis, extent)`` pairs before its axes; ``level``: another
        level than the array's)."""
        name, k = _ascii(base), 1
        while name in self.variables:
            k += 1
            name = f"{_ascii(base)}_{k}"
        shape = tuple(extra) + tuple((a.name, sympy.sympify(a.size)) for a in array.axes)
        self.variables[name] = Variable(name, shape, array.dtype.name, array.level if level is None else level, role,
                                        origin)
        self.offsets[name] = {a.name: self.context[a.name].start for a in array.axes if a.name in self.context}
        return Ref(name)

    def slice(self, ref: Ref, axis: str, rng: Range) -> Ref:
        """``ref`` narrowed to the absolute range ``rng``, indexed from its variable's first value (a tile made
        inside a loop holds that loop's range: a level-2 group reads its part of a level-1 tile)."""
        o = self.offsets.get(ref.var, {}).get(axis, 0)
        return ref.sliced(axis, rng if o == 0 else Range(rng.start - o, rng.tile, rng.end - o))

    def origin(self, label: str) -> str:
        return "/".join(self.path + (label,))

    # ----------------------------------------------------------------- the whole diagram
    def top(self, diagram: Diagram):
        """Statements for the whole diagram: its inputs given, its outputs allocated."""
        ins = [self.new_var(f"x{i}", a, "input", "input") for i, a in enumerate(diagram.dom.inside)]
        dests = [self.new_var(f"y{j}", a, "output", "output") for j, a in enumerate(diagram.cod.inside)]
        stmts = [Alloc(d.var) for d in dests]
        body, outs = self.diagram(diagram, ins, dests)
        return stmts + self.hoisted + list(fission(body)), outs

    def diagram(self, d: Diagram, ins: list, dests: list, inlined=()):
        """``(statements, output refs)`` of a flat diagram on input refs, writing into ``dests`` where given;
        the ops at the indices ``inlined`` are computed into the op reading them (never stored)."""
        ops, dom, cod = trace_values(d)
        refs = dict(zip(dom, ins))
        dest_of = {}
        for v, dst in zip(cod, dests):
            if dst is not None and v not in dest_of and v not in refs:
                dest_of[v] = dst
        stmts = []
        for k, (box, i_ids, o_ids) in enumerate(ops):
            if k in inlined:
                refs[o_ids[0]] = Compute(box, (), tuple(refs[v] for v in i_ids), None, self.origin(box.name),
                                         self.at(box))
                continue
            s, outs = self.box(box, [refs[v] for v in i_ids], [dest_of.get(v) for v in o_ids])
            stmts += s
            refs.update(zip(o_ids, outs))
        return stmts + self.copies_out(cod, refs, dests), [refs[v] for v in cod]

    def copies_out(self, cod, refs, dests):
        """A ``Copy`` into each given destination whose value was computed elsewhere (the diagram's outputs,
        where the boxes did not write them in place)."""
        out = []
        for v, dst in zip(cod, dests):
            if dst is not None and refs[v] != dst:
                out.append(Copy(dst, refs[v], self.origin("output")))
        return out

    # ----------------------------------------------------------------- one box
    def box(self, box, ins: list, dests: list):
        """``(statements, output refs)`` of one box: a transfer, a computation, or a region (its schedule folded)."""
        if isinstance(box, Bubble):
            return self.region(box, ins, dests)
        kind = box.data.kind
        if kind in ("load", "save"):
            src, dst_arr = box.dom.inside[0], box.cod.inside[0]
            dst = dests[0]
            stmts = []
            if dst is None:
                role = "tile" if kind == "load" else "temp"
                dst = self.new_var(f"{ins[0].var}_{dst_arr.level}", dst_arr, role, self.origin(box.name))
                if dst_arr.level == 0:
                    stmts.append(Alloc(dst.var))
            node = Load if kind == "load" else Store
            return stmts + [node(dst, ins[0], max(src.level, dst_arr.level), self.origin(box.name))], [dst]
        outs, stmts = [], []
        for j, (arr, dst) in enumerate(zip(box.cod.inside, dests)):
            if dst is None:
                dst = self.new_var(f"{kind}{len(self.variables)}" + (f"_{j}" if len(box.cod) > 1 else ""),
                                   arr, "temp", self.origin(box.name))
                if arr.level == 0 and self.path:
                    stmts.append(Alloc(dst.var))
            outs.append(dst)
        return stmts + [Compute(box, tuple(outs), tuple(ins), None, self.origin(box.name), self.at(box))], outs

    def at(self, box) -> tuple:
        """``((axis, start), …)`` for a box that reads positions: where index 0 of the axis it numbers (a
        ``position``) or gathers along (a ``gather``) sits on the whole axis, from the loops around it."""
        locates = kind_of(box.data.kind).locates
        if locates is None:
            return ()
        axis = locates(box)
        return ((axis, self.context[axis].start),) if axis in self.context else ()

    def tile_of(self, axis: str, size) -> tuple:
        """The tile ``axis`` is in: the enclosing loop's ``(start, extent)``, or the whole axis."""
        rng = self.context.get(axis)
        return (rng.start, rng.extent) if rng is not None else (sympy.Integer(0), sympy.sympify(size))

    @contextmanager
    def _entered(self, region):
        saved = self.path
        p = region.params
        self.path = self.path + (f"{region.region}({p['level']})" if region.region == "kernel"
                                 else f"{region.region}({p.get('axis', '')})",)
        try:
            yield
        finally:
            self.path = saved

    def region(self, box, ins: list, dests: list):
        stmts = []
        if not isinstance(box, Kernel):  # a partition writes slices: its outputs exist before it runs
            dests = list(dests)
            for j, (arr, dst) in enumerate(zip(box.cod.inside, dests)):
                if dst is None:
                    dests[j] = self.new_var("t", arr, "temp", self.origin(box.name))
                    stmts.append(Alloc(dests[j].var))
        with self._entered(box):
            outs = fold_region(box, self, ins, stmts, dests)
        return stmts, outs

    def partition_trip(self, box, ins, arrays):
        """The loop index of ``box``'s axis, the tile, the extent, the range of one trip (one tile) within the
        axis's current range, and the inputs sliced to it: ``(index, tile, full, rng, sliced)``."""
        axis = box.axis
        tile = sympy.sympify(box.size)
        outer = self.context.get(axis)
        full = outer.extent if outer is not None else sympy.sympify(box.full_size())
        base = outer.start if outer is not None else sympy.Integer(0)
        index = loop_index(axis, self.indices)
        rng = Range(base + index * tile, tile, base + full)
        sliced = [self.slice(r, axis, rng) if axis in arr.names else r for r, arr in zip(ins, arrays)]
        return index, tile, full, rng, sliced

    @contextmanager
    def within(self, axis, rng):
        """Inside the block, ``axis`` ranges over ``rng`` (one tile of its loop): a nested partition along it reads
        its part of that tile; the range before is restored after."""
        saved = self.context.get(axis)
        self.context[axis] = rng
        if saved is None:
            self.whole[axis] = rng.end
        try:
            yield
        finally:
            if saved is None:
                del self.context[axis], self.whole[axis]
            else:
                self.context[axis] = saved

    # ----------------------------------------------------------------- the algebra of the schedule fold
    def op(self, op, ins, sink, dests):
        stmts, outs = self.box(op.box, ins, dests)
        sink += stmts
        return outs

    def kernel(self, node, ins, sink, dests):
        saved, self.split_kernel = self.split_kernel, split_of(node.region)    # a split alone: its combine by rows
        try:
            body, outs = self.diagram(node.inside, ins, dests)
        finally:
            self.split_kernel = saved
        sink.append(KernelNode(node.level, tuple(body), self.origin("")))
        return outs

    def grid(self, node, ins, sink, dests):
        """``GridLoop``: inputs and outputs sliced along the axis at ``i_a·g``."""
        index, tile, full, rng, sliced = self.partition_trip(node.region, ins, node.region.dom.inside)
        with self.within(node.axis, rng):
            body, _ = self.diagram(node.inside, sliced, [self.slice(d, node.axis, rng) for d in dests])
        sink.append(GridLoop(node.axis, tile, full, index, tuple(body), self.origin("")))
        return dests

    def stream(self, node, ins, sink, dests, run):
        """``StreamLoop``: the head and the reducers' ``Fill``; the trip at the slice's range (a sliced output
        written straight into its destination's slice); the finish, the tail and the copies out."""
        box = node.region
        if node.parts is not None:
            return split_stream(self, node, ins, sink, dests, run)
        index, tile, extent, rng, sliced = self.partition_trip(box, ins, box.dom.inside)
        dest_of = {}
        for v, dst in zip(node.cod, dests):
            if dst is not None and v not in dest_of:
                dest_of[v] = dst
        head, body, tail = [], [], []
        vals = run.head(ins, head, dest_of)
        states = run.init(head, dest_of)
        into = {v: self.slice(dest_of[v], node.axis, rng) for v in node.sliced}
        with self.within(node.axis, rng):
            _, made = run.trip({**vals, **dict(zip(node.dom, sliced))}, states, body, into)
            when, data, full_trips = self._skips(loop_skip(node), made, tuple(body))
        vals.update((v, dest_of[v]) for v in node.sliced)
        outs = run.tail(run.finish(vals, states, tail, dest_of), tail, dest_of)
        tail += self.copies_out(node.cod, dict(zip(node.cod, outs)), dests)
        sink.append(StreamLoop(node.axis, tile, extent, index, tuple(head), tuple(body), tuple(tail), self.origin(""),
                               when, data, full_trips))
        return dests

    def _skips(self, skip, made: dict, body: tuple) -> tuple:
        """``(when, data, full_trips)`` of a stream loop (its own, or a sub-loop's) whose trip ``body`` makes
        ``made`` (value id → ref), with the tiles as they are now entered: the trips ``skip`` leaves out, the data's
        block test, the trips run whole.  One test for a stream and a sub-loop: a sub-loop's trip the mask never
        allows is as neutral as a stream's (:mod:`napkin_cat.algorithms.skipping`), and is left out alike; ``skip``
        is the loop's :func:`~napkin_cat.cost.trip_kinds.loop_skip` (the cost at sizes reads the same), so a loop
        whose sub-loops skip every trip on its tile is skipped whole."""
        when = sympy.true if skip is None else _condition(sympy.Not(skip.skipped(self.tile_of)))
        data = None
        if skip is not None and skip.data:
            box = tuple((a, *self.tile_of(a, n)) for a, n in skip.data_axes)
            # the block mask is of the first mask from data (each alone makes a trip neutral where never true);
            # its table is derived from exactly that mask (:mod:`napkin_cat.plan.condition`), so a full trip
            # reads it as true and makes the others as written
            first = skip.data[0]
            mask = made.get(first.value)
            copies = [getattr(made.get(v), "var", None) for v in first.copies]
            data = BlockSkip.of(box, getattr(mask, "var", None), body, copies)
        return when, data, self._full_trips(skip, made, body, data)

    def _full_trips(self, skip, made: dict, body: tuple, data) -> FullTrips | None:
        """The trips on which the first mask from positions of ``skip`` is true on every pair (interval arithmetic
        on the trip's tiles), with what the trip makes only for it: a kernel runs them without the mask.  None
        where no mask from positions decides, where a mask from data does with a full state of its own (its block
        table's full trips drop that mask; one trip drops one), or where no trip can be full."""
        if skip is None or not skip.masks or (data is not None and data.condition is not None):
            return None
        first = skip.masks[0]
        when = _condition(first.truth(self.tile_of).always)
        mask = made.get(first.value)
        if when is sympy.false or getattr(mask, "var", None) is None:
            return None
        copies = [getattr(made.get(v), "var", None) for v in first.copies]
        full = BlockSkip.of((), mask.var, body, copies)
        return FullTrips(when, full) if full.condition is not None else None

    def init(self, r, sink, dests):
        """Each state array ``Fill``ed with its empty value; a monoid's (or a nested region's) state that is the
        stream's output lives in the output's destination."""
        state = []
        for j, s in enumerate(r.state):
            own = dests[j] if r.kind != "step" and r.finish is None and j < len(dests) else None
            ref = own if own is not None else self.new_var(f"{s.name}{r.k}", s.array, "state", self.origin(s.name))
            state.append(ref)
            sink.append(Fill(ref.var, float(s.init), self.origin(f"{s.name} = {s.init}")))
        return state

    def monoid(self, r, state, ins, sink):
        """``o ← o ⊕ F(chunk)``: the box folded into the state."""
        box = r.op.box
        sink.append(Compute(box, (state[0],), tuple(ins), r.accumulator.name, self.origin(box.name), self.at(box)))
        return state

    def step(self, r, state, ins, sink):
        """The step diagram ``B`` on ``state ⊗ chunk``, each new state written over the old where it may be (else
        copied back), each sum accumulated in place."""
        return self._update(r.step, r.name, state, ins, sink)

    def merge(self, r, diagram, state, other, sink):
        """A split stream's merge ``⊕`` on ``state ⊗ other`` (another part's state), run as a step is."""
        return self._update(diagram, f"{r.name} merge", state, other, sink)

    def _update(self, diagram, name, state, ins, sink):
        ok = step_in_place(diagram, len(state))
        stmts, outs = self.diagram(diagram, list(state) + list(ins), [s if k else None for s, k in zip(state, ok)],
                                   {a.maker for a in accumulated_addends(diagram, len(state))} if self.accumulate
                                   else ())
        sink += stmts
        sink += [Copy(s, o, self.origin(f"{name} state")) for s, o, k in zip(state, outs, ok) if not k]
        return state

    def finish(self, r, state, sink, dests):
        dests = list(dests)
        for j, i in finish_in_place(r.finish).items():
            if dests[j] is None:
                dests[j] = state[i]
        stmts, outs = self.diagram(r.finish, list(state), dests)
        sink += stmts
        return outs

    def advance_kernel(self, node, state, ins, sink):
        """The state loaded to the kernel's level, the inside advanced, the state stored back."""
        with self._entered(node.region):
            loads, saves, inner = [], [], []
            for ref, s in zip(state, node.state):
                cur, chain = ref, []
                for step in state_moves(s.array, node.level, "load"):
                    arr = step.cod.inside[0]
                    dst = self.new_var(f"{s.name}_{arr.level}", arr, "state", self.origin(f"{s.name} (loaded)"))
                    loads.append(Load(dst, cur, arr.level, self.origin(f"load {s.name}")))
                    chain.append((cur, dst, arr.level))
                    cur = dst
                inner.append(cur)
                saves = [Store(src, dst, lvl, self.origin(f"save {s.name}")) for src, dst, lvl in reversed(chain)] \
                    + saves
            body = []
            advance(node.child, self, inner, ins, body)
            sink.append(KernelNode(node.level, tuple(loads + body + saves), self.origin("")))
        return state

    def advance_grid(self, node, state, ins, sink):
        """A ``GridLoop`` over the groups, each advancing on its slice of the state."""
        region = node.region
        with self._entered(region):
            index, tile, full, rng, sliced = self.partition_trip(region, ins, region.dom.inside)
            body = []
            with self.within(region.axis, rng):
                advance(node.child, self, [self.slice(r, region.axis, rng) for r in state], sliced, body)
            sink.append(GridLoop(region.axis, tile, full, index, tuple(body), self.origin("")))
        return state

    def advance_loop(self, node, state, ins, sink, run):
        """A sub-loop: a ``StreamLoop`` of its head and trip on the state (a diagram: its head and one trip)."""
        if node.region is None:
            run.trip(run.head(ins, sink), node.split(state), sink)
            return state
        region = node.region
        with self._entered(region):
            index, tile, full, rng, sliced = self.partition_trip(region, ins, region.dom.inside)
            head, body = [], []
            with self.within(region.axis, rng):
                vals = run.head(ins, head)
                _, made = run.trip({**vals, **dict(zip(node.schedule.dom, sliced))}, node.split(state), body)
                when, data, full_trips = self._skips(loop_skip(node.schedule), made, tuple(body))
            sink.append(StreamLoop(region.axis, tile, full, index, tuple(head), tuple(body), (), self.origin(""),
                                   when, data, full_trips))
        return state
