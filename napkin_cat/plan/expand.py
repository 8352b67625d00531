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

>>> import napkin_cat as nc
>>> e = Expander({})
>>> stmts, outs = e.top(nc.stream(nc.library.matmul(), "b", "s_b"))
>>> [type(s).__name__ for s in stmts], [v.role for v in e.variables.values()]
(['Alloc', 'Kernel'], ['input', 'input', 'output', 'state', 'tile', 'tile'])
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.bubbles import Grid, Kernel, Region, Stream
from napkin_cat.plan.ir import (Alloc, Compute, Copy, Fill, GridLoop, Kernel as KernelNode, Load, PlanError,
                                Range, Ref, Store, StreamLoop, Variable, loop_index)
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.wiring import trace_values
from napkin_cat.algorithms.nesting import state_moves
from napkin_cat.plan.reducers import ops_in, reducers_of
from napkin_cat.algorithms.reuse import accumulated_addends, finish_in_place, step_in_place


def _ascii(name: str) -> str:
    table = {"μ": "mu", "δ": "delta", "σ": "sigma", "·": "dot"}
    out = "".join(table.get(c, c) for c in name)
    return "".join(c if c.isalnum() or c == "_" else "_" for c in out) or "v"


class Expander:
    """Builds the statements and the variables of a plan; ``variables`` keeps their order of creation."""

    def __init__(self, sizes: dict, *, accumulate: bool = True):
        self.sizes = sizes
        self.accumulate = accumulate   # sums read at an addend of an in-place state update accumulate into it
        self.variables: dict[str, Variable] = {}
        self.indices: set = set()
        self.context: dict[str, Range] = {}   # axis -> the range enclosing loops give it
        self.offsets: dict[str, dict] = {}    # variable -> {axis: where its first value sits on the axis}
        self.path: tuple = ()

    # ----------------------------------------------------------------- variables
    def new_var(self, base: str, array, role: str, origin: str) -> Ref:
        name, k = _ascii(base), 1
        while name in self.variables:
            k += 1
            name = f"{_ascii(base)}_{k}"
        shape = tuple((a.name, sympy.sympify(a.size)) for a in array.axes)
        self.variables[name] = Variable(name, shape, array.dtype.name, array.level, role, origin)
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
        return stmts + body, outs

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
                refs[o_ids[0]] = Compute(box, (), tuple(refs[v] for v in i_ids), None, self.origin(box.name))
                continue
            s, outs = self.op(box, [refs[v] for v in i_ids], [dest_of.get(v) for v in o_ids])
            stmts += s
            refs.update(zip(o_ids, outs))
        return stmts + self._copies(cod, refs, dests), [refs[v] for v in cod]

    def _copies(self, cod, refs, dests):
        out = []
        for v, dst in zip(cod, dests):
            if dst is not None and refs[v] != dst:
                out.append(Copy(dst, refs[v], self.origin("output")))
        return out

    # ----------------------------------------------------------------- one box
    def op(self, box, ins: list, dests: list):
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
        return stmts + [Compute(box, tuple(outs), tuple(ins), None, self.origin(box.name))], outs

    # ----------------------------------------------------------------- regions
    def region(self, box: Region, ins: list, dests: list):
        stmts = []
        if not isinstance(box, Kernel):  # a partition writes slices: its outputs exist before it runs
            dests = list(dests)
            for j, (arr, dst) in enumerate(zip(box.cod.inside, dests)):
                if dst is None:
                    dests[j] = self.new_var("t", arr, "temp", self.origin(box.name))
                    stmts.append(Alloc(dests[j].var))
        saved_path = self.path
        p = box.params
        self.path = self.path + (f"{box.region}({p['level']})" if isinstance(box, Kernel)
                                 else f"{box.region}({p.get('axis', '')})",)
        try:
            if isinstance(box, Kernel):
                body, outs = self.diagram(box.arg, ins, dests)
                return [KernelNode(box.params["level"], tuple(body), self.origin(""))], outs
            if isinstance(box, Grid):
                return stmts + self.grid(box, ins, dests), dests
            if isinstance(box, Stream):
                return stmts + self.stream(box, ins, dests), dests
            raise PlanError(f"{box.name}: the plan has no expansion for regions of kind {box.region!r}")
        finally:
            self.path = saved_path

    def _partition(self, box, ins, arrays):
        """The loop index, the range of one tile, and the inputs sliced to it."""
        axis = box.axis
        tile = sympy.sympify(box.size)
        outer = self.context.get(axis)
        full = outer.extent if outer is not None else sympy.sympify(box.full_size())
        base = outer.start if outer is not None else sympy.Integer(0)
        index = loop_index(axis, self.indices)
        rng = Range(base + index * tile, tile, base + full)
        sliced = [self.slice(r, axis, rng) if axis in arr.names else r for r, arr in zip(ins, arrays)]
        return index, tile, full, rng, sliced

    def _inside(self, axis, rng, fn):
        saved = self.context.get(axis)
        self.context[axis] = rng
        try:
            return fn()
        finally:
            if saved is None:
                del self.context[axis]
            else:
                self.context[axis] = saved

    def grid(self, box: Grid, ins, dests):
        index, tile, full, rng, sliced = self._partition(box, ins, box.dom.inside)
        inner_dests = [self.slice(d, box.axis, rng) for d in dests]
        body, outs = self._inside(box.axis, rng, lambda: self.diagram(box.arg, sliced, inner_dests))
        return [GridLoop(box.axis, tile, full, index, tuple(body), self.origin(""))]

    def stream(self, box: Stream, ins, dests):
        index, tile, full, rng, sliced = self._partition(box, ins, box.dom.inside)
        plan = box.plan
        refs = dict(zip(plan.dom, ins))
        chunk = dict(zip(plan.dom, sliced))
        dest_of = {}
        for v, dst in zip(plan.cod, dests):
            if dst is not None and v not in dest_of:
                dest_of[v] = dst
        reds = reducers_of(plan)
        head, state = [], {}
        for i in ops_in(plan, "head"):
            head += self._emit(plan, i, refs, dest_of)
        for k, r in enumerate(reds):
            state[k] = []
            for j, (name, arr, init) in enumerate(r.state):
                own = dest_of.get(r.outputs[j]) if r.step is None and r.finish is None else None
                ref = own if own is not None else self.new_var(f"{name}{k}", arr, "state", self.origin(name))
                state[k].append(ref)
                head.append(Fill(ref.var, float(init), self.origin(f"{name} = {init}")))
        vals = dict(refs)
        vals.update(chunk)
        # a sliced output: the body writes its slice straight into the destination at the trip's range
        into = {v: self.slice(dest_of[v], box.axis, rng) for v in plan.sliced_values}
        refs.update((v, dest_of[v]) for v in plan.sliced_values)
        body = self._inside(box.axis, rng, lambda: self._trip(plan, reds, state, vals, into))
        tail = []
        for k, r in enumerate(reds):
            if r.finish is None:
                refs.update(zip(r.outputs, state[k]))
            else:
                fdests = [dest_of.get(v) for v in r.outputs]
                for j, i in finish_in_place(r.finish).items():
                    if fdests[j] is None:
                        fdests[j] = state[k][i]
                s, outs = self.diagram(r.finish, state[k], fdests)
                tail += s
                refs.update(zip(r.outputs, outs))
        for i in ops_in(plan, "tail"):
            tail += self._emit(plan, i, refs, dest_of)
        tail += self._copies(plan.cod, refs, dests)
        return [StreamLoop(box.axis, tile, full, index, tuple(head), tuple(body), tuple(tail), self.origin(""))]

    def _trip(self, plan, reds, state, vals, into=None):
        """One slice: the maps, then each reducer's step on its state (``state[k]``, refs); ``into``: value id ->
        the destination slice a map writes (a sliced output)."""
        covered = {i: r for r in reds for i in r.ops}
        out = []
        vals = dict(vals)
        for i in ops_in(plan, "body"):
            r = covered.get(i)
            if r is None:
                out.extend(self._emit(plan, i, vals, into or {}))
            elif i == max(r.ops):
                out.extend(self._step(plan, r, state[reds.index(r)], vals))
        return out

    def _advance(self, nest, state: list, ins: list):
        """A nested reducer's trip (:mod:`napkin_cat.algorithms.nesting`) on the state refs: a Kernel loads the
        state to its level, advances its inside and saves the state back; a Grid loops over its groups on the
        state's slices; a sub-loop streams the slice again; a diagram runs its head and one slice."""
        region = nest.region
        kind = getattr(region, "region", None)
        if region is None:
            return self._advance_plan(nest, state, ins, None)
        saved_path = self.path
        p = region.params
        self.path = self.path + (f"kernel({p['level']})" if kind == "kernel" else f"{kind}({p.get('axis', '')})",)
        try:
            if kind == "kernel":
                return self._advance_kernel(nest, state, ins)
            index, tile, full, rng, sliced = self._partition(region, ins, region.dom.inside)
            if kind == "grid":
                part = [self.slice(r, region.axis, rng) for r in state]
                body = self._inside(region.axis, rng, lambda: self._advance(nest.child, part, sliced))
                return [GridLoop(region.axis, tile, full, index, tuple(body), self.origin(""))]
            head, body = self._inside(region.axis, rng, lambda: self._advance_plan(nest, state, ins, sliced))
            return [StreamLoop(region.axis, tile, full, index, tuple(head), tuple(body), (), self.origin(""))]
        finally:
            self.path = saved_path

    def _advance_kernel(self, nest, state, ins):
        level = nest.region.params["level"]
        loads, saves, inner = [], [], []
        for ref, s in zip(state, nest.state):
            cur = ref
            chain = []
            for step in state_moves(s.array, level, "load"):
                arr = step.cod.inside[0]
                dst = self.new_var(f"{s.name}_{arr.level}", arr, "state", self.origin(f"{s.name} (loaded)"))
                loads.append(Load(dst, cur, arr.level, self.origin(f"load {s.name}")))
                chain.append((cur, dst, arr.level))
                cur = dst
            inner.append(cur)
            saves = [Store(src_ref, dst, lvl, self.origin(f"save {s.name}")) for src_ref, dst, lvl in reversed(chain)] \
                + saves
        body = self._advance(nest.child, inner, ins)
        return [KernelNode(level, tuple(loads + body + saves), self.origin(""))]

    def _advance_plan(self, nest, state, ins, sliced):
        """A plan-level nest: its head on ``ins``; its trip on ``sliced`` (a sub-loop's slice) or on ``ins``."""
        plan = nest.plan
        reds = reducers_of(plan)
        refs = dict(zip(plan.dom, ins))
        head = []
        for i in ops_in(plan, "head"):
            head += self._emit(plan, i, refs, {})
        parts = {k: list(state[a:b]) for k, (a, b) in enumerate(nest.parts)}
        vals = dict(refs)
        if sliced is not None:
            vals.update(zip(plan.dom, sliced))
            return head, self._trip(plan, reds, parts, vals)
        return head + self._trip(plan, reds, parts, vals)

    def _emit(self, plan, i, vals, dest_of):
        box, i_ids, o_ids = plan.ops[i]
        s, outs = self.op(box, [vals[v] for v in i_ids], [dest_of.get(v) for v in o_ids])
        vals.update(zip(o_ids, outs))
        return s

    def _step(self, plan, r, state, vals):
        """One trip of a reducer: a monoid folds its box into the state; a form runs its step diagram."""
        if r.nest is not None:
            return self._advance(r.nest, list(state), [vals[v] for v in r.inputs])
        if r.step is None:
            box, i_ids, _ = plan.ops[r.ops[0]]
            return [Compute(box, (state[0],), tuple(vals[v] for v in i_ids), r.monoid, self.origin(box.name))]
        dests = step_in_place(r.step, len(state))
        stmts, outs = self.diagram(r.step, list(state) + [vals[v] for v in r.inputs],
                                   [state[j] if ok else None for j, ok in enumerate(dests)],
                                   {a.maker for a in accumulated_addends(r.step, len(state))} if self.accumulate
                                   else ())
        return stmts

