"""Pass ``recolour``: each computation in a kernel on its level, relabelled per unit, its values piped.

Steps 3-5 on the placed plan (:mod:`~napkin_cat.plan.lowering.placement`), group by group:

* **recolouring**: a group (consecutive computations on one level) becomes ``kernel @level``;
* **relabelling**: a level's kernel runs in a parallel loop over the scaling axis with the level's tile
  (``g_q`` → ``w_q`` per warpgroup, ``t_q`` per thread); what it makes is one tile per unit, and a value
  kept across the level's kernels (the stream's state μ, z, o; SoftMax's δ) is *spread*: allocated whole on
  the level, each unit holding its rows;
* **piping** (:mod:`~napkin_cat.plan.lowering.pipes`): a value made on one level and read on another goes
  through the block level; a level reads a block-level value in its operand pool in place, else loads it;
* **splits** (:mod:`~napkin_cat.plan.lowering.splits`): the block's runs and a unit's kernel in loops over
  a split axis's tiles;
* **in place**: a computation writes over an input tile of its own shape and format that nothing after it
  reads::

    kernel @1: S ← Q·Kᵀ; P ← softmax(S)
      ⟶   kernel @1: alloc S_1
               for i_q' (w_q):  kernel @3: S ← Q[i_q']·Kᵀ; S_1[i_q'] ← store S
               for i_q'' (t_q): kernel @2: S_1_2 ← load S_1[i_q'']; S_1_2 ← softmax(S_1_2) …

>>> import napkin_cat as nc
>>> from napkin_cat.plan.ir import Kernel, walk
>>> from napkin_cat.plan.lowering import lower, Options
>>> mm = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
>>> p = nc.plan(mm, {"a": 256, "b": 128, "c": 64, "s_b": 64, "g_a": 256}, accumulate=False)
>>> s = lower(p, nc.hardware.load_hierarchy("hopper"), Options(given={"w_a": 128, "t_a": 1}))
>>> sorted({k.level for k in walk(s.plan.body) if isinstance(k, Kernel)})
[1, 3]
"""
from __future__ import annotations

from dataclasses import replace

from napkin_cat.plan.ir import (LOOPS, Alloc, Compute, Copy, Fill, GridLoop, Kernel, Load, Ref, Store, StreamLoop,
                                Variable, blocks, reads, walk, with_blocks, writes)
from napkin_cat.plan.lowering.pipes import PipeOut, Pipes
from napkin_cat.plan.lowering.splits import Group, Run, computes, items, unit_split
from napkin_cat.plan.lowering.state import frozen, map_block_kernels
from napkin_cat.plan.lowering.views import Scope, Variables, shape_in
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.relabel import map_box


def recolour(state):
    """The pass."""
    taken = {str(s.index) for s in walk(state.base.body) if isinstance(s, LOOPS)}
    variables = Variables(state.variables, state.sizes, state.options.given, taken, state.what, state.tail)
    pipes = Pipes(variables, state.block)
    shapes = {n: v.shape for n, v in state.variables.items()}      # the two-level shapes (after hoisting)
    placements = iter(state.placements)

    def kernel(k, grids):
        emit = _Emit(state, next(placements), variables, pipes, shapes, _extents(k, variables))
        return Kernel(k.level, tuple(emit.block(list(k.body), Scope())), k.origin)
    body = map_block_kernels(state.body, state.block, kernel)
    return replace(state, body=body, variables=frozen(variables.vars), sizes=frozen(variables.sizes),
                   what=frozen(variables.what), tail=frozenset(variables.tail), pipes=state.pipes + pipes.records())


def _extents(k, variables) -> dict:
    """Each axis's extent in the kernel: the first on-chip variable's that has it."""
    out = {}
    for s in walk(k.body):
        for name in dict.fromkeys((*reads(s), *writes(s))):
            v = variables.vars.get(name)
            if v is not None and v.level > 0:
                for a, e in v.shape:
                    out.setdefault(a, e)
    return out


def _made(s) -> list:
    """The variables a statement of a unit kernel makes (a pipe request names the value it stores)."""
    if isinstance(s, PipeOut):
        return [s.name]
    if isinstance(s, Compute):
        return [r.var for r in s.outs]
    return [s.dst.var]


class _Emit:
    """The statements of one block-level kernel, recoloured; the variables and pipes are the pass's."""

    def __init__(self, state, placement, variables: Variables, pipes: Pipes, shapes: dict, extents: dict):
        self.top, self.options = state.block, state.options
        self.base = state.base.variable_map
        self.p, self.vs, self.pipes, self.shapes, self.extents = placement, variables, pipes, shapes, extents

    # ------------------------------------------------------------------ helpers
    def shape(self, name):
        """The shape a value has in the two-level plan (after hoisting)."""
        return self.shapes.get(name, self.vs[name].shape)

    def extent(self, axis, loops):
        tiles = [lp.tile for lp in loops if lp.axis == axis]
        return tiles[-1] if tiles else self.extents[axis]

    def label(self, name) -> str:
        """A value by the box that makes it (``SoftMax₁ output 0``) or its variable's name."""
        ws = [w for w in self.p.writers.get(name, ()) if isinstance(w, Compute)]
        if not ws:
            return name
        w = ws[0]
        j = [r.var for r in w.outs].index(name)
        return f"{w.box.name} output" + (f" {j}" if len(w.outs) > 1 else "") + f" ({name})"

    def pipe(self, name, scope) -> list:
        return self.pipes.alloc(self.p, name, scope, self.label(name), shape=self.shape(name))

    # ------------------------------------------------------------------ blocks of statements
    def block(self, stmts, scope: Scope) -> list:
        out = []
        for item in items(stmts, self.p, self.options.splits, self.top):
            if isinstance(item, Run):
                out += self.run(item, scope)
            elif isinstance(item, Group):
                out += self.group(item, scope)
            else:
                out += self.simple(item, scope)
        return out

    def simple(self, s, scope: Scope) -> list:
        if isinstance(s, (StreamLoop, GridLoop)):     # what a stream's tail makes is not the steady state
            tail = 2 if isinstance(s, StreamLoop) else None
            return [with_blocks(s, tuple(self.block(list(b), scope.tail() if k == tail else scope)
                                         for k, b in enumerate(blocks(s))))]
        if isinstance(s, Load):
            self.vs.born(s.dst.var, scope.depth, in_tail=scope.in_tail)
            return [s]
        if isinstance(s, Store):
            pre, src = self.block_read(s.src, scope)
            return pre + [replace(s, src=src)]
        if isinstance(s, Copy):
            home = self.p.home_of(s.dst.var)
            if home is self.top:
                pre, src = self.block_read(s.src, scope)
                return pre + [replace(s, src=src)]
            return self.unit_kernel(home, [s], scope)
        if isinstance(s, Fill):
            home = self.p.home_of(s.var)
            if home is not self.top:
                self.vs.vars[s.var] = replace(self.vs[s.var], level=home.index)
            self.vs.born(s.var, scope.depth, in_tail=scope.in_tail)
        return [s]

    def block_read(self, ref, scope):
        """A block-level statement reading ``ref``: from its pipe when it lives on a unit level."""
        name = ref.var
        home = self.p.home_of(name)
        if home is self.top:
            return [], ref
        if name in self.pipes.of:
            pipe = self.pipes.of[name]
            return [], self.vs.view(pipe, scope.loops) if not ref.index else replace(ref, var=pipe)
        # a value spread over a unit level: its own kernel pipes it to the block level first
        pre = self.pipe(name, scope) + self.unit_kernel(home, [PipeOut(name)], scope)
        return pre, self.vs.view(self.pipes.of[name], scope.loops)

    def spread(self, name, scope) -> list:
        """A value kept on a unit level across kernels, allocated whole on that level (spread over its units)."""
        if name in self.vs.births or name in self.p.filled:
            return []
        home = self.p.home[name]
        self.vs.vars[name] = replace(self.vs[name], shape=shape_in(self.shape(name), scope.loops), level=home.index)
        self.vs.what[name] = f"{self.label(name)}, spread over {home.name}"
        self.vs.born(name, scope.depth, in_tail=scope.in_tail)
        return [Alloc(name)]

    def group(self, g: Group, scope) -> list:
        """Allocations before a group (pipes of its tiles, its spread values, pipes of what it reads from another
        unit level), then its kernel."""
        pre = []
        for s in g.stmts:
            for r in s.outs:
                name = r.var
                if self.p.home_of(name) is self.top:
                    continue
                if not self.p.per_unit(name):
                    pre += self.spread(name, scope)
                if self.p.needs_pipe(name) and name not in self.pipes.of and self.p.per_unit(name):
                    pre += self.pipe(name, scope)
        for s in g.stmts:
            for r in s.ins:
                home = self.p.home_of(r.var)
                if home is not self.top and home is not g.level and r.var not in self.pipes.of:
                    pre += self.pipe(r.var, scope) + self.unit_kernel(home, [PipeOut(r.var)], scope)
        return pre + self.unit_kernel(g.level, list(g.stmts), scope)

    def run(self, run: Run, scope) -> list:
        """A block-level split: values also read after the run are allocated whole before its loop."""
        tile = self.vs.tile(run.tile, f"the {self.top.name} split of {run.axis}")
        lp = self.vs.loop(run.axis, tile)
        inside = set(computes(run))
        pre = []
        for s in computes(run):
            for r in s.outs:
                name = r.var
                if self.p.home_of(name) is self.top or self.p.per_unit(name):
                    continue
                if any(x not in inside for x in self.p.readers.get(name, ())):
                    pre += self.spread(name, scope)
        body = []
        for it in run.items:
            body += self.run(it, scope.inside(lp)) if isinstance(it, Run) else self.group(it, scope.inside(lp))
        full = self.extent(run.axis, scope.loops)
        return pre + [GridLoop(run.axis, tile, full, lp.index, tuple(body), f"split {run.axis} ({self.top.name})")]

    # ------------------------------------------------------------------ one kernel on a unit level
    def unit_kernel(self, lv, stmts, scope) -> list:
        """``parallel for`` over the scaling axis in the level's tiles, around ``kernel @level``."""
        axis = self.p.axis
        outer, wrap = scope, None
        if axis is not None and lv.tile and all(axis in dict(self.shape(n)) for s in stmts for n in _made(s)):
            wrap = self.vs.loop(axis, self.vs.tile(f"{lv.tile}_{axis}", f"the {lv.unit} tile of {axis}"))
            outer = outer.inside(wrap)
        inner, split = outer, None
        chosen = unit_split(self.options.splits, lv.name, [s for s in stmts if isinstance(s, Compute)])
        if chosen is not None:
            a, t = chosen
            split = self.vs.loop(a, self.vs.tile(t, f"the {lv.name} split of {a}"))
            inner = inner.inside(split)
        body = self.kernel_body(lv, stmts, inner)
        if split is not None:
            body = [GridLoop(split.axis, split.tile, self.extent(split.axis, outer.loops), split.index, tuple(body),
                             f"split {split.axis} ({lv.name})")]
        node = Kernel(lv.index, tuple(body), f"{lv.name}")
        if wrap is None:
            return [node]
        return [GridLoop(axis, wrap.tile, self.extent(axis, scope.loops), wrap.index, (node,), f"{lv.unit}s of {axis}")]

    def kernel_body(self, lv, stmts, scope) -> list:
        vs, loops = self.vs, scope.loops
        body, loaded, current = [], {}, {}
        for k, s in enumerate(stmts):
            if isinstance(s, PipeOut):          # a spread value stored to its pipe
                body.append(Store(vs.view(self.pipes.of[s.name], loops), vs.view(s.name, loops), lv.index,
                                  f"pipe {s.name} → {self.top.name}"))
                continue
            if isinstance(s, Copy):
                body.append(Copy(vs.view(s.dst.var, loops, s.dst),
                                 self.read(s.src, None, lv, scope, body, loaded, current), s.origin))
                continue
            ins = [self.read(r, s, lv, scope, body, loaded, current) for r in s.ins]
            outs = []
            for r in s.outs:
                name = r.var
                if not self.p.per_unit(name):
                    outs.append(vs.view(name, loops, r))
                    continue
                v = self.base.get(name, vs[name])
                shape = shape_in(self.shape(name), loops)
                reuse = self.in_place(s, shape, v.dtype, ins, stmts[k + 1:], loaded, current) \
                    if self.options.in_place and not s.accumulate else None
                if reuse is not None:
                    current[name] = reuse
                    vs.what[reuse] += f", then {self.label(name)} in place"
                    outs.append(Ref(reuse))
                    continue
                vs.vars[name] = Variable(name, shape, v.dtype, lv.index, v.role, v.origin)
                vs.what[name] = f"{self.label(name)} on {lv.name}"
                vs.births[name] = scope.depth
                if scope.in_tail:
                    vs.tail.add(name)
                current[name] = name
                outs.append(Ref(name))
            body.append(Compute(self.relabel(s.box, lv, loops), tuple(outs), tuple(ins), s.accumulate,
                                f"{s.origin} @{lv.name}", s.at))
            for r in s.outs:
                if self.p.per_unit(r.var) and self.p.needs_pipe(r.var):
                    body.append(Store(vs.view(self.pipes.of[r.var], loops), Ref(current[r.var]), lv.index,
                                      f"pipe {r.var} → {self.top.name}"))
        return body

    def read(self, ref, s, lv, scope, body, loaded, current) -> Ref:
        """What a unit kernel on ``lv`` reads for ``ref``: its own value, a block-level operand in place, or a
        tile it loads (once per kernel) from the block level or the value's pipe."""
        name = ref.var
        home = self.p.home_of(name)
        if home is lv:
            return Ref(current[name]) if name in current else self.vs.view(name, scope.loops, ref)
        src = name if home is self.top else self.pipes.of[name]
        operand = s is not None and "tensor" in self.p.pipelines[s]
        if operand and lv.operand_pool is not None and lv.operand_pool == self.top.pool:
            return self.vs.view(src, scope.loops, ref)       # read in place (wgmma takes its operands from SMEM)
        key = (src, ref.index)
        if key in loaded:
            return Ref(loaded[key])
        v = self.vs[src]
        dst = self.vs.new(f"{src}_{lv.index}", self.vs.view_shape(src, scope.loops, ref), v.dtype, lv.index, "tile",
                          f"{v.origin} → {lv.name}", scope.depth)
        self.vs.what[dst] = f"{self.label(name)} loaded into {lv.name}"
        if scope.in_tail:
            self.vs.tail.add(dst)
        body.append(Load(Ref(dst), self.vs.view(src, scope.loops, ref), lv.index, f"load {src} → {lv.name}"))
        loaded[key] = dst
        return Ref(dst)

    def in_place(self, s, shape, dtype, ins, later, loaded, current):
        """An input tile of this kernel with the output's shape and format that nothing later reads."""
        later_reads = {r.var for x in later if isinstance(x, Compute) for r in x.ins}
        for r in ins:
            if not r.whole:
                continue
            v = self.vs[r.var]
            if v.dtype != dtype or tuple(e for _, e in v.shape) != tuple(e for _, e in shape):
                continue
            keys = [key for key, dst in loaded.items() if dst == r.var]
            made = [n for n, cur in current.items() if cur == r.var]
            if keys and not any(self.pipes.of.get(x) == keys[0][0] or x == keys[0][0] for x in later_reads):
                del loaded[keys[0]]
                return r.var
            if made and not (set(made) & later_reads) and not any(self.p.needs_pipe(m) and m not in current
                                                                   for m in made):
                return r.var
        return None

    @staticmethod
    def relabel(box, lv, loops):
        """``box`` on ``lv``, each axis the loops partition at its innermost tile."""
        tiles = {lp.axis: lp.tile for lp in loops}

        def fa(arr):
            return arr.replace(axes=tuple(Axis(a.name, tiles[a.name]) if a.name in tiles else a for a in arr.axes),
                               level=lv.index)
        return map_box(box, fa, lambda n: n)
