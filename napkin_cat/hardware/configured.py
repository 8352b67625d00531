"""An algorithm configured for a toy hierarchy (§5, steps 3-5): recoloured, piped, relabelled, split, buffered.

Input: an algorithm whose kernels run at the block level (FlashAttention as the rules derive it: a Grid
over ``q``, a Stream over ``x``, its kernel at level 1 = SMEM), a toy hierarchy and sizes.  Its plan (the
two-level pseudocode, step 1) is rewritten statement by statement, the same way for every algorithm:

* **recolouring** (step 3): each computation runs on the level below the block that offers its pipelines
  (matmuls on the tensor cores, exponentials and elementwise maps on the threads); consecutive
  computations on one level form one kernel there;
* **relabelling**: a level's kernel runs in a parallel loop over the scaling axis with the level's tile
  (``g_q`` → ``w_q`` per warpgroup, ``t_q`` per thread); what it makes is one tile per unit;
* **piping**: a value made on one level and read on another goes through the block level (SMEM); a
  tensor operand that its level reads in its operand pool (wgmma reads SMEM) is read in place, anything
  else is loaded into the reading level;
* **state**: a value kept across a level's kernels (the stream's state μ, z, o; SoftMax's δ) lives on that
  level, spread over its units (``g_q`` rows over the block's threads);
* **splits** (step 2's degrees of freedom): ``splits={axis: {level name: tile}}`` splits the matmuls
  along an output axis and what accumulates them (``d → d′`` on the block level, ``d″`` on the threads);
* **buffers**: tiles a stream loads from GMEM on every trip are kept in the hierarchy's
  ``stream_buffers`` copies (asynchronous loads); a computation writes over an input of its own shape
  and format that it reads last (in place).

The configured plan runs (``configured.plan.run``), so what it computes is checked against the two-level
plan and numpy.  Its variables are the configuration table's rows (Tables 1-2): the **steady state**, what
the kernel holds for its loop (head, state and body); what a stream's tail makes after the loop reuses
their storage (§5.5, "we can reuse a variable at two points where it is not simultaneously required")
and is listed apart (``tail``).

>>> import napkin_cat as nc
>>> mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
>>> c = configure(mm, "hopper", {"g_a": 256, "g_c": 64, "s_b": 64, "w_a": 128, "t_a": 1})
>>> [(a.box, a.level) for a in c.assignments]
[('·', 'tensor-core')]
>>> [(v.name, str(v.size), v.level, v.buffers) for v in c.plan.variables if v.name in c.steady]
[('sum0', 'g_a*g_c', 3, 1), ('x0_1', 'g_a*s_b', 1, 2), ('x1_1', 'g_c*s_b', 1, 2)]
>>> t = c.table("h100-sxm5"); (t.n, t.pool("SMEM").M_TB, t.pool("SMEM").M_WG, t.pool("registers").M_WG)
(2, 32768, 65536, 32768)
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

import sympy

from napkin_cat.errors import LevelError
from napkin_cat.hardware.config import Variable as ConfigVariable, config_table
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.model import load
from napkin_cat.hardware.toy import load_hierarchy, pipelines_of
from napkin_cat.plan.ir import (Alloc, Compute, Copy, Fill, Free, GridLoop, Kernel, Load, Range, Ref, Store,
                                StreamLoop, Variable, loop_index, walk)
from napkin_cat.plan.liveness import with_frees
from napkin_cat.plan.program import Plan, plan as make_plan
from napkin_cat.syntax.adapter import Diagram, layers
from napkin_cat.syntax.axis import Axis, symbol
from napkin_cat.syntax.relabel import map_box

UNIT_LEVELS = ("warpgroup", "warp", "thread")


@dataclass(frozen=True)
class Assignment:
    """Step 3 for one computation: the ``box`` (its label and kind), the pipelines it uses, the ``level``."""

    box: str
    kind: str
    pipelines: tuple
    level: str


@dataclass(frozen=True)
class Pipe:
    """A value made on ``source`` and read on ``targets``, moved through the block level in ``var``."""

    value: str
    var: str
    source: str
    targets: tuple


@dataclass
class Configured:
    """The configured algorithm: the two-level ``base`` plan, the configured ``plan`` and how it was made.

    ``steady``: the variables of the loop's steady state (the configuration table's rows), ``tail``: those
    made after the loop in reused storage; ``partition``: the scaling axis's tile per unit
    (``{'block': 'g_q', 'warpgroup': 'w_q', 'thread': 't_q'}``).
    """

    algorithm: object
    base: Plan
    plan: Plan
    hierarchy: object
    axis: str | None
    partition: dict
    assignments: list
    pipes: list
    steady: tuple
    tail: tuple
    splits: dict = field(default_factory=dict)
    what: dict = field(default_factory=dict)

    @property
    def sizes(self) -> dict:
        """The sizes of the configuration, by name."""
        return {str(k): int(v) for k, v in self.plan.sizes.items()}

    def variable(self, name: str):
        try:
            return self.plan.variable_map[name]
        except KeyError:
            raise HardwareError(f"the configured plan has no variable {name!r}; its variables are "
                                f"{sorted(self.plan.variable_map)}") from None

    def describe(self, v) -> str:
        """What a variable of the configured plan holds, in words."""
        return self.what.get(v.name, v.origin.rsplit("/", 1)[-1] if v.origin else v.name)

    def variables(self, *, tail: bool = False) -> list:
        """The configuration table's variables: the steady state's (or the tail's) on-chip variables."""
        names = self.tail if tail else self.steady
        out = []
        for name in names:
            v = self.plan.variable_map[name]
            out.append(ConfigVariable(v.name, v.size, v.dtype, v.level, buffers=v.buffers,
                                      description=self.describe(v)))
        return out

    def table(self, gpu, *, n: int | str | None = None, printed: dict | None = None, strict: bool = True):
        """Tables 1-2 of this configuration on ``gpu`` (a model, its name or a file).

        ``n``: the scaling units per block for the excess columns; default the block tile over the unit's
        tile as configured (``g_q / w_q``), ``"fit"`` the most that fit."""
        gpu = load(gpu) if not hasattr(gpu, "capacity") else gpu
        if not self.partition:
            raise HardwareError("this configuration has no partitioned axis, so no scaling unit to count "
                                "(group the algorithm along an axis first)")
        used = {str(x) for v in self.variables() for x in sympy.sympify(v.size).free_symbols}
        sizes = {k: v for k, v in self.sizes.items() if k in used or k in self.partition.values()}
        if n == "fit":
            sizes.pop(self.partition["block"], None)
            n = None
        return config_table(self.variables(), gpu, sizes, partition=self.partition, n=n, printed=printed,
                            hierarchy=self.hierarchy, strict=strict)

    def pipelined(self, program) -> "Configured":
        """This configuration with the values an overlap program (:mod:`~napkin_cat.hardware.overlap`) keeps in
        flight buffered: a program runs column ``k`` of iteration ``j`` in slot ``j + stage_k``, so a value made
        in stage ``s`` and last read in stage ``s′`` of the same iteration lives through ``1 + s′ − s`` slots,
        one copy each (FlashAttention-3's intra-warpgroup overlap holds the next iteration's scores).

        The program's tasks are the stream body's computations in order (Table 3's columns, conversions
        excluded: a conversion runs in the stage of the computation before it)."""
        stream = next((x for x in walk(self.plan.body) if isinstance(x, StreamLoop)), None)
        if stream is None:
            raise HardwareError("this configuration has no stream, so no iterations to pipeline")
        computes = [x for x in walk(stream.body) if isinstance(x, Compute)]
        columns = [x for x in computes if x.kind != "cast"]
        names = [t.name for t in program.tasks]
        if [x.box.name for x in columns] != names:
            raise HardwareError(f"the program's tasks {names} are not the stream body's computations "
                                f"{[x.box.name for x in columns]}")
        stage_of, stage = {}, {k: -offset for k, offset in program.slots}
        for x in computes:
            stage_of[id(x)] = stage[columns.index(x)] if x in columns else stage_of.get(id(computes[
                max(computes.index(x) - 1, 0)]), 0)
        made, read = {}, {}
        for x in computes:
            for r in x.outs:
                made.setdefault(r.var, stage_of[id(x)])
            for r in x.ins:
                read[r.var] = max(read.get(r.var, 0), stage_of[id(x)])
        variables = dict(self.plan.variable_map)
        for name, first in made.items():
            copies = 1 + read.get(name, first) - first
            if copies > 1 and name in self.steady:
                variables[name] = replace(variables[name], buffers=max(variables[name].buffers, copies))
        p = Plan(self.plan.diagram, self.plan.sizes, self.plan.body, variables, self.plan.inputs, self.plan.outputs)
        what = dict(self.what)
        for name, v in variables.items():
            if v.buffers != self.plan.variable_map[name].buffers and v.role != "tile":
                what[name] = f"{what.get(name, name)} ({v.buffers} iterations in flight: {program.name})"
        return replace(self, plan=p, what=what)

    def constraints(self, gpu):
        """Step 4's divisor constraints on ``gpu``: coalesced GMEM↔SMEM moves of the plan's tiles, the tensor-core
        shapes of its matmuls, the partition multiples (:mod:`~napkin_cat.hardware.divisors`)."""
        from napkin_cat.hardware.divisors import ArrayUse, MatmulUse, constraints
        gpu = load(gpu) if not hasattr(gpu, "capacity") else gpu
        variables = self.plan.variable_map
        arrays, matmuls = [], []
        for s in walk(self.plan.body):
            if isinstance(s, (Load, Store)):
                ends = (variables[s.src.var], variables[s.dst.var])
                levels = [self.hierarchy.level(v.level) for v in ends]
                if any(lv.coalesced_with and self.hierarchy.level(lv.coalesced_with) in levels for lv in levels):
                    tile = max(ends, key=lambda v: v.level)
                    arrays.append(ArrayUse(tile.name, tuple(_tile_name(e) for _, e in tile.shape), tile.dtype,
                                           moved=True))
            elif isinstance(s, Compute) and "tensor" in pipelines_of(s.box) and len(s.box.dom.inside) == 2:
                out = s.box.cod.inside[0]
                contracted = [a for a in s.box.dom.inside[0].axes if a.name not in out.names]
                if len(out.axes) == 2 and len(contracted) == 1:
                    m, n = (_tile_name(a.size) for a in out.axes)
                    wide = max((a.dtype for a in s.box.dom.inside), key=lambda d: d.bytes)
                    matmuls.append(MatmulUse(f"{s.box.name} → {s.outs[0].var}", m, n, _tile_name(contracted[0].size),
                                             wide.name))
        return constraints(gpu, arrays=arrays, matmuls=matmuls, partition=self.partition, hierarchy=self.hierarchy)

    def check(self, gpu) -> list:
        """Raise :class:`~napkin_cat.hardware.errors.DivisorError` (or HardwareError: no tensor-core instruction
        for a format) for the first violated constraint; return the constraints checked."""
        return self.constraints(gpu).check(self.sizes)

    def __str__(self):
        return str(self.plan)


def _tile_name(e) -> str:
    e = sympy.sympify(e)
    return str(e) if isinstance(e, sympy.Symbol) else str(e)


# ---------------------------------------------------------------------------------------------- entry point
def configure(algorithm, hierarchy, sizes: dict, *, axis: str | None = None, splits: dict | None = None,
              subloops: dict | None = None, stream_buffers: int | None = None, in_place: bool = True,
              hoist: bool = True) -> Configured:
    """Configure ``algorithm`` (a diagram with kernels at the block level, or its plan) for ``hierarchy``.

    ``sizes``: axis and tile sizes by name, the units' tiles of the scaling axis included (``w_q``,
    ``t_q`` on Hopper) and the split tiles; a grouped axis missing from ``sizes`` is one block, a
    streamed one two trips (a configuration is per block).  ``axis``: the scaling axis (default: the
    outermost grouped axis).  ``splits``: ``{axis: {level name: tile name}}``.  ``subloops``:
    ``{streamed axis: sub-tile name}``, the stream's body streamed again (step 2: ``u_x`` of ``s_x``).
    ``stream_buffers``: copies of each tile a stream loads per trip (default: the hierarchy's).
    ``hoist``: the maps that open a sub-loop run once on the stream's whole tile (the sub-loop keeps the
    accumulator, as in the paper); ``in_place``: a computation may write over an input it reads last.
    """
    h = load_hierarchy(hierarchy)
    sizes = dict(sizes)
    splits = _check_splits(splits or {}, h)
    if isinstance(algorithm, Plan):
        base = algorithm
    elif isinstance(algorithm, Diagram):
        algorithm = _with_subloops(algorithm, subloops or {})
        # a sum accumulated in place (o ← fma(o, δ, P·V)) is stored first here: recolouring puts the
        # contraction on the tensor cores and the rest on the threads, and a value lives on one level
        base = make_plan(algorithm, _planning_sizes(algorithm, sizes, splits, subloops or {}, h), accumulate=False)
    else:
        raise HardwareError(f"configure takes an algorithm diagram or its plan, got {type(algorithm).__name__}")
    buffers = h.stream_buffers if stream_buffers is None else stream_buffers
    if isinstance(buffers, bool) or not isinstance(buffers, int) or buffers < 1:
        raise HardwareError(f"stream_buffers = {buffers!r} must be a positive integer (copies of a streamed tile)")
    c = _Configurer(base, h, axis, splits, buffers, in_place, sizes, hoist)
    return c.run(algorithm)


def _with_subloops(algorithm, subloops: dict):
    """Each stream's body streamed again along its axis: a sub-loop is ``nc.stream`` on a streamed axis."""
    from napkin_cat.algorithms.partitions import stream
    from napkin_cat.errors import RewriteError
    for axis, tile in subloops.items():
        streams = {b.axis for b in _partitions(algorithm) if b.region == "stream"}
        if axis not in streams:
            raise HardwareError(f"sub-loop {tile} of {axis!r}: the algorithm does not stream {axis!r}; its streams "
                                f"are {sorted(streams)}")
        try:
            algorithm = stream(algorithm, axis, tile)
        except RewriteError as e:
            raise HardwareError(f"the sub-loop {tile} of {axis!r} cannot be built: {e}") from None
    return algorithm


def _partitions(diagram) -> list:
    from napkin_cat.algorithms.bubbles import Grid, Stream
    out = []
    for _, box in layers(diagram):
        if isinstance(box, (Grid, Stream)):
            out.append(box)
        if hasattr(box, "arg") and hasattr(box, "region"):
            out += _partitions(box.arg)
    return out


def _planning_sizes(diagram, sizes, splits, subloops, h) -> dict:
    """Sizes for the plan: the diagram's, plus a grouped axis = one block and a streamed axis = two trips.

    A size the diagram does not name must be a tile of the configuration (a unit's tile, a split tile or
    a sub-loop's tile)."""
    from napkin_cat.plan.program import _symbols
    needed, parts = set(), []
    _symbols(diagram, needed, parts)
    names = {str(s) for s in needed}
    full = {}
    for box in _partitions(diagram):
        size, tile = sympy.sympify(box.full_size()), sympy.sympify(box.size)
        value = tile.subs({symbol(k): v for k, v in sizes.items()})
        if isinstance(size, sympy.Symbol) and str(size) not in sizes and value.is_Integer:
            full.setdefault(str(size), int(value) * (1 if box.region == "grid" else 2))
    extra = sorted(k for k in sizes if k not in names and not _is_configuration_tile(k, splits, subloops, h))
    if extra:
        raise HardwareError(f"size given for {', '.join(map(repr, extra))}, which neither the algorithm (its axes "
                            f"and tiles are {sorted(names)}) nor the configuration's unit, split or sub-loop tiles "
                            f"name")
    return {k: v for k, v in {**sizes, **full}.items() if k in names}


def _is_configuration_tile(name, splits, subloops, h) -> bool:
    """Tiles that exist only in the configured plan (unit tiles, split tiles, sub-loop tiles)."""
    if any(name in tiles.values() for tiles in splits.values()) or name in subloops.values():
        return True
    prefixes = {lv.tile for lv in h.levels if lv.tile and lv.unit in UNIT_LEVELS}
    return any(name.startswith(f"{p}_") for p in prefixes)


def _check_splits(splits: dict, h) -> dict:
    out = {}
    for axis, tiles in splits.items():
        if not isinstance(tiles, dict):
            raise HardwareError(f"splits[{axis!r}] must map level names to tile names, e.g. "
                                f"{{'SMEM': \"{axis}'\", 'registers': \"{axis}''\"}}; got {tiles!r}")
        for level, tile in tiles.items():
            h.level(level)
            if not isinstance(tile, str) or not tile:
                raise HardwareError(f"splits[{axis!r}][{level!r}] must be a tile name, got {tile!r}")
        out[axis] = dict(tiles)
    return out


# ---------------------------------------------------------------------------------------------- the rewrite
@dataclass
class _Loop:
    """A loop the configuration adds: ``axis`` in tiles of ``tile`` (index ``index``), on the block or a unit."""

    axis: str
    tile: sympy.Expr
    index: sympy.Symbol


@dataclass
class _Group:
    """Consecutive computations on one level: one kernel there."""

    level: object
    stmts: list


class _Configurer:
    def __init__(self, base: Plan, h, axis, splits, buffers, in_place, sizes, hoisting=True):
        self.base, self.h, self.axis_wanted, self.splits = base, h, axis, splits
        self.hoisting = hoisting
        self.buffers, self.in_place, self.given = buffers, in_place, sizes
        self.block = h.unit_level("block")
        if self.block is None:
            raise HardwareError(f"toy hierarchy {h.name!r} has no level whose unit is 'block' to configure from")
        self.vars = dict(base.variable_map)
        self.shapes = {n: v.shape for n, v in base.variable_map.items()}
        self.order = list(base.variable_map)
        self.sizes = dict(base.sizes)
        self.taken = {str(s.index) for s in walk(base.body) if isinstance(s, (GridLoop, StreamLoop))}
        self.birth: dict = {}
        self.assignments: list = []
        self.pipes: dict = {}
        self.pipe_info: dict = {}
        self.what: dict = {}
        self.tail_vars: set = set()
        self.partition: dict = {}
        self.axis = None

    # ------------------------------------------------------------------ sizes and symbols
    def tile(self, name: str, why: str) -> sympy.Symbol:
        s = symbol(name)
        if s not in self.sizes:
            if name not in self.given:
                raise HardwareError(f"the configuration needs the size of {name} ({why}); pass sizes={{{name!r}: …}}")
            v = self.given[name]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise HardwareError(f"the size of {name} must be a positive int, got {v!r}")
            self.sizes[s] = v
        return s

    def value(self, e) -> int:
        return int(sympy.sympify(e).subs(self.sizes))

    # ------------------------------------------------------------------ levels of computations
    def level_of(self, box):
        pipes = pipelines_of(box) or ("general",)
        able = [lv for lv in self.h.levels if lv.unit in UNIT_LEVELS and all(p in lv.offers for p in pipes)]
        if not able:
            offer = {p: [lv.name for lv in self.h.levels if p in lv.offers] for p in pipes}
            raise LevelError(f"box {box.name!r} uses the pipeline(s) {list(pipes)}, which no level below "
                             f"{self.block.name} of {self.h.name!r} offers together ({offer}); split it or "
                             f"describe a level that offers them")
        return able[0], pipes

    # ------------------------------------------------------------------ the whole plan
    def run(self, algorithm) -> Configured:
        body = self.top(_strip(self.base.body), [])
        used = {name for s in walk(body) for name in _names(s)} | set(self.base.inputs) | set(self.base.outputs)
        variables = {n: self.vars[n] for n in self.order if n in used}
        outs = set(self.base.outputs)
        p = Plan(self.base.diagram, self.sizes, with_frees(body, outs), variables, self.base.inputs,
                 self.base.outputs)
        on_chip = [n for n in variables if variables[n].level > 0]
        steady = tuple(n for n in on_chip if n not in self.tail_vars)
        tail = tuple(n for n in on_chip if n in self.tail_vars)
        pipes = [Pipe(v, var, *self.pipe_info[var]) for v, var in self.pipes.items()]
        return Configured(algorithm, self.base, p, self.h, self.axis, dict(self.partition), self.assignments,
                          pipes, steady, tail, self.splits, self.describe(variables))

    def describe(self, variables) -> dict:
        """A line per on-chip variable: where its value comes from and where it lives."""
        out = {}
        for name, v in variables.items():
            if v.level == 0:
                continue
            lv = self.h.level(v.level).name
            if name in self.what:
                out[name] = self.what[name]
            elif v.role == "state":
                label = v.origin.rsplit("/", 1)[-1]
                out[name] = f"stream state {label}" + ("" if v.level == self.block.index else f", spread over {lv}")
            else:
                label = v.origin.rsplit("/", 1)[-1]
                out[name] = f"{label} on {lv}"
        return out

    def top(self, stmts, grids):
        out = []
        for s in stmts:
            if isinstance(s, GridLoop):
                out.append(replace(s, body=tuple(self.top(s.body, grids + [s]))))
            elif isinstance(s, Kernel):
                if s.level != self.block.index:
                    raise HardwareError(f"configure starts from kernels at the block level {self.block.index} "
                                        f"({self.block.name}); this plan has a kernel at level {s.level}")
                out.append(self.kernel(s, grids))
            else:
                out.append(s)
        return out

    # ------------------------------------------------------------------ one block-level kernel
    def kernel(self, k: Kernel, grids) -> Kernel:
        axes = [g.axis for g in grids]
        if self.axis_wanted is not None and self.axis_wanted not in axes:
            raise HardwareError(f"scaling axis {self.axis_wanted!r} is not grouped around the kernel; its grouped "
                                f"axes are {axes}")
        axis = self.axis_wanted or (axes[0] if axes else None)
        self.axis = axis
        if axis is not None:
            grid = grids[axes.index(axis)]
            self.partition = {"block": str(grid.tile)}
            for lv in self.h.levels:
                if lv.unit in UNIT_LEVELS and lv.tile:
                    self.partition[lv.unit] = f"{lv.tile}_{axis}"
        stmts = self.hoist(list(k.body)) if self.hoisting else list(k.body)
        self.extents = self._extents(k)
        self.analyse(stmts)
        body = self.emit(stmts, [], in_stream=False, in_tail=False)
        return Kernel(k.level, tuple(body), k.origin)

    # ------------------------------------------------------------------ sub-loops wrap the accumulator only
    def hoist(self, stmts, outer=None):
        """The maps that open a sub-loop (a stream along the axis its enclosing stream already streams) run once
        per trip of the enclosing stream, on its whole tile: the sub-loop keeps the accumulator (§5.2: "the B
        component always allows for a subloop"; Table 1: S is w_q×s_x, P′ is t_q×u_x)."""
        out = []
        for s in stmts:
            if isinstance(s, StreamLoop):
                body = []
                for t in s.body:
                    if isinstance(t, StreamLoop) and t.axis == s.axis:
                        maps, t = self.hoist_maps(t, s)
                        body += maps
                    body.append(t)
                s = replace(s, head=tuple(self.hoist(list(s.head))), body=tuple(self.hoist(body)),
                            tail=tuple(self.hoist(list(s.tail))))
            elif isinstance(s, GridLoop):
                s = replace(s, body=tuple(self.hoist(list(s.body))))
            out.append(s)
        return out

    def hoist_maps(self, inner: StreamLoop, outer: StreamLoop):
        axis = inner.axis
        written = {n for x in walk(inner.body) for n in _written(x)}
        writers = {}
        for x in walk(self.base.body):
            for n in _written(x):
                writers[n] = writers.get(n, 0) + 1
        maps, rng = [], None
        body = list(inner.body)
        while body:
            c = body[0]
            if not isinstance(c, Compute) or c.accumulate or axis not in c.box.data.weave_names:
                break
            if any(r.var in written for r in c.ins):
                break
            outs = [self.vars[r.var] for r in c.outs]
            if any(v.role != "temp" or writers.get(v.name, 0) != 1 for v in outs):
                break
            ranges = [r.range(axis) for r in c.ins if r.range(axis) is not None
                      and inner.index in sympy.sympify(r.range(axis).start).free_symbols]
            if not ranges:
                break
            rng = ranges[0]
            ins = tuple(Ref(r.var, tuple((a, x) for a, x in r.index if a != axis))
                        if r.range(axis) is not None and inner.index in sympy.sympify(r.range(axis).start).free_symbols
                        else r for r in c.ins)
            for v in outs:
                shape = tuple((a, outer.tile if a == axis else e) for a, e in v.shape)
                self.vars[v.name] = replace(v, shape=shape)
                self.shapes[v.name] = shape

            def fa(arr, tile=outer.tile):
                return arr.replace(axes=tuple(Axis(a.name, tile) if a.name == axis else a for a in arr.axes))
            maps.append(Compute(map_box(c.box, fa, lambda n: n), c.outs, ins, None, c.origin))
            hoisted = {r.var for r in c.outs}
            body = [_sliced(x, hoisted, axis, rng) for x in body[1:]]
        return maps, replace(inner, body=tuple(body))

    def _extents(self, k) -> dict:
        out = {}
        for s in walk(k.body):
            for name in _names(s):
                v = self.vars.get(name)
                if v is not None and v.level > 0:
                    for a, e in v.shape:
                        out.setdefault(a, e)
        return out

    # ------------------------------------------------------------------ analysis: levels, homes, groups
    def analyse(self, stmts):
        self.level = {}        # id(Compute) -> ToyLevel
        self.pipelines = {}    # id(Compute) -> pipelines
        self.writers, self.readers, self.filled = {}, {}, set()
        self.group_of = {}     # id(stmt) -> group number
        counter = itertools.count()

        def scan(block):
            current, cur_level = None, None
            for s in block:
                if isinstance(s, Compute):
                    lv, pipes = self.level_of(s.box)
                    self.level[id(s)], self.pipelines[id(s)] = lv, pipes
                    self.assignments.append(Assignment(s.box.name, s.kind, pipes, lv.name))
                    if current is None or cur_level is not lv:
                        current, cur_level = next(counter), lv
                    self.group_of[id(s)] = current
                    for r in s.ins:
                        self.readers.setdefault(r.var, []).append(s)
                    for r in s.outs:
                        self.writers.setdefault(r.var, []).append(s)
                        if s.accumulate:
                            self.readers.setdefault(r.var, []).append(s)
                    continue
                current = None
                if isinstance(s, StreamLoop):
                    scan(s.head), scan(s.body), scan(s.tail)
                elif isinstance(s, GridLoop):
                    scan(s.body)
                elif isinstance(s, Kernel):
                    raise HardwareError(f"configure: the block kernel already holds a kernel at level {s.level}")
                elif isinstance(s, (Load, Store, Copy)):
                    self.readers.setdefault(s.src.var, []).append(s)
                    self.writers.setdefault(s.dst.var, []).append(s)
                elif isinstance(s, Fill):
                    self.filled.add(s.var)
        scan(stmts)
        self.home = {}
        for name, ws in self.writers.items():
            v = self.vars[name]
            if v.level == 0:
                continue
            computes = [w for w in ws if isinstance(w, Compute)]
            if computes:
                self.home[name] = self.level[id(computes[0])]
            else:
                self.home[name] = self.block
        for name, ws in self.writers.items():     # a state moved by Copy lives where its value is made
            for w in ws:
                if isinstance(w, Copy) and self.home.get(w.src.var, self.block) is not self.block:
                    self.home[name] = self.home[w.src.var]
        for name, ws in self.writers.items():
            if name in self.home and self.home[name] is not self.block:
                lv = self.home[name]
                others = [w for w in ws if isinstance(w, Compute) and self.level[id(w)] is not lv]
                if others:
                    raise HardwareError(f"variable {name!r} is written on {lv.name} and on "
                                        f"{self.level[id(others[0])].name}; configure keeps each value on one level")

    def per_unit(self, name) -> bool:
        """A value made once and read only inside its kernel (or piped out): one tile per unit."""
        ws = self.writers.get(name, [])
        if name in self.filled or len(ws) != 1 or not isinstance(ws[0], Compute) or ws[0].accumulate:
            return False
        lv, g = self.home[name], self.group_of[id(ws[0])]
        for r in self.readers.get(name, []):
            if isinstance(r, Compute) and self.level[id(r)] is lv and self.group_of[id(r)] != g:
                return False
            if isinstance(r, Copy):
                return False
        return True

    def reader_levels(self, name) -> set:
        out = set()
        for r in self.readers.get(name, []):
            out.add(self.level[id(r)].name if isinstance(r, Compute) else self.block.name)
        return out

    def needs_pipe(self, name) -> bool:
        home = self.home.get(name, self.block)
        return home is not self.block and bool(self.reader_levels(name) - {home.name})

    # ------------------------------------------------------------------ variables and views
    def new_var(self, base: str, shape, dtype, level, role, origin, depth) -> str:
        name, k = base, 1
        while name in self.vars:
            k += 1
            name = f"{base}_{k}"
        self.vars[name] = Variable(name, tuple(shape), dtype, level, role, origin)
        self.order.append(name)
        self.birth[name] = depth
        return name

    def shape_in(self, shape, ctx, since=0):
        """A shape with each axis that the loops ``ctx[since:]`` partition cut to the innermost tile."""
        out = []
        for a, e in shape:
            tiles = [lp.tile for lp in ctx[since:] if lp.axis == a]
            out.append((a, tiles[-1] if tiles else e))
        return tuple(out)

    def view(self, name, ctx, orig: Ref | None = None) -> Ref:
        """The part of ``name`` that the current iteration of the loops ``ctx`` (since its birth) sees, inside
        the slice ``orig`` of the two-level plan (a sub-loop's slice) when given."""
        v = self.vars[name]
        since = self.birth.get(name, 0)
        base = dict(orig.index) if orig is not None else {}
        index = []
        for a, e in v.shape:
            loops = [lp for lp in ctx[since:] if lp.axis == a]
            r0 = base.get(a)
            if not loops:
                if r0 is not None:
                    index.append((a, r0))
                continue
            origin = r0.start if r0 is not None else sympy.Integer(0)
            start = origin + sum((lp.index * lp.tile for lp in loops), sympy.Integer(0))
            if len(loops) > 1:
                end = origin + sum((lp.index * lp.tile for lp in loops[:-1]), sympy.Integer(0)) + loops[-2].tile
            else:
                end = r0.end if r0 is not None else e
            index.append((a, Range(start, loops[-1].tile, end)))
        return Ref(name, tuple(index))

    def view_shape(self, name, ctx, orig: Ref | None = None) -> tuple:
        """The shape of :meth:`view`: each sliced axis at its innermost tile."""
        v = self.vars[name]
        since = self.birth.get(name, 0)
        base = dict(orig.index) if orig is not None else {}
        out = []
        for a, e in v.shape:
            tiles = [lp.tile for lp in ctx[since:] if lp.axis == a]
            out.append((a, tiles[-1] if tiles else base[a].tile if a in base else e))
        return tuple(out)

    def extent(self, axis, ctx):
        tiles = [lp.tile for lp in ctx if lp.axis == axis]
        return tiles[-1] if tiles else self.extents[axis]

    def loop(self, axis, tile) -> _Loop:
        index = loop_index(axis, self.taken)
        return _Loop(axis, tile, index)

    # ------------------------------------------------------------------ emission
    def emit(self, stmts, ctx, *, in_stream, in_tail):
        items = self.items(stmts)
        out = []
        for kind, item in items:
            if kind == "run":
                out += self.emit_run(item, ctx, in_tail=in_tail)
            elif kind == "group":
                out += self.emit_group(item, ctx, in_tail=in_tail)
            else:
                out += self.emit_simple(item, ctx, in_stream=in_stream, in_tail=in_tail)
        return out

    def items(self, stmts):
        """The statements as groups (consecutive computations on one level), block-level split runs, others."""
        groups, current = [], None
        for s in stmts:
            if isinstance(s, Compute):
                lv = self.level[id(s)]
                if current is not None and current.level is lv and self.group_of[id(s)] == self.group_of[
                        id(current.stmts[-1])]:
                    current.stmts.append(s)
                else:
                    current = _Group(lv, [s])
                    groups.append(("group", current))
                continue
            current = None
            groups.append(("stmt", s))
        block_splits = [(a, t[self.block.name]) for a, t in self.splits.items() if self.block.name in t]
        for axis, tile in block_splits:
            groups = self.runs(groups, axis, tile)
        return groups

    def runs(self, items, axis, tile):
        """Maximal runs of consecutive groups weaved over ``axis`` that hold a tensor-pipeline computation."""
        out, run = [], []

        def close():
            if run and any("tensor" in self.pipelines[id(s)] for _, g in run for s in _computes(g)):
                out.append(("run", (axis, tile, list(run))))
            else:
                out.extend(run)
            run.clear()
        for kind, item in items:
            if kind in ("group", "run") and all(axis in s.box.data.weave_names for s in _computes(item)):
                run.append((kind, item))
                continue
            close()
            out.append((kind, item))
        close()
        return out

    def emit_simple(self, s, ctx, *, in_stream, in_tail):
        if isinstance(s, StreamLoop):
            head = self.emit(list(s.head), ctx, in_stream=False, in_tail=in_tail)
            body = self.emit(list(s.body), ctx, in_stream=True, in_tail=in_tail)
            tail = self.emit(list(s.tail), ctx, in_stream=False, in_tail=True)
            return [replace(s, head=tuple(head), body=tuple(body), tail=tuple(tail))]
        if isinstance(s, GridLoop):
            return [replace(s, body=tuple(self.emit(list(s.body), ctx, in_stream=in_stream, in_tail=in_tail)))]
        if isinstance(s, Load):
            v = self.vars[s.dst.var]
            if self.vars[s.src.var].level == 0:
                when = "every trip" if in_stream else "once"
                self.what[v.name] = f"tile of {s.src.var} loaded {when} from GMEM"
                if in_stream and self.buffers != 1:
                    self.vars[v.name] = replace(v, buffers=self.buffers)
                    self.what[v.name] += f" ({self.buffers} buffers: asynchronous loads)"
            self._born(s.dst.var, ctx, in_tail)
            return [s]
        if isinstance(s, Store):
            pre, src = self.block_read(s.src, ctx, in_tail)
            return pre + [replace(s, src=src)]
        if isinstance(s, Copy):
            home = self.home.get(s.dst.var, self.block)
            if home is self.block:
                pre, src = self.block_read(s.src, ctx, in_tail)
                return pre + [replace(s, src=src)]
            return self.unit_kernel(home, [s], ctx, in_tail=in_tail)
        if isinstance(s, Fill):
            home = self.home.get(s.var, self.block)
            if home is not self.block:
                v = self.vars[s.var]
                self.vars[s.var] = replace(v, level=home.index)
            self._born(s.var, ctx, in_tail)
            return [s]
        return [s]

    def _born(self, name, ctx, in_tail):
        self.birth.setdefault(name, len(ctx))
        if in_tail:
            self.tail_vars.add(name)

    def block_read(self, ref, ctx, in_tail):
        """A block-level statement reading ``ref``: from its pipe when it lives on a unit level."""
        name = ref.var
        home = self.home.get(name, self.block)
        if home is self.block:
            return [], ref
        if name in self.pipes:
            return [], self.view(self.pipes[name], ctx) if not ref.index else replace(ref, var=self.pipes[name])
        # a value spread over a unit level: its own kernel pipes it to the block level first
        pre = self.alloc_pipe(name, ctx, in_tail)
        pre += self.unit_kernel(home, [("pipe", name)], ctx, in_tail=in_tail)
        return pre, self.view(self.pipes[name], ctx)

    def alloc_pipe(self, name, ctx, in_tail) -> list:
        v = self.vars[name]
        home = self.home[name]
        shape = self.shape_in(self.original_shape(name), ctx)
        var = self.new_var(f"{name}_{self.block.index}", shape, v.dtype, self.block.index, "temp",
                           f"{v.origin} → {self.block.name}", len(ctx))
        self.pipes[name] = var
        targets = sorted(self.reader_levels(name) - {home.name})
        self.pipe_info[var] = (home.name, tuple(targets))
        self.what[var] = f"{self.label(name)} piped from {home.name} to {', '.join(targets)}"
        if in_tail:
            self.tail_vars.add(var)
        return [Alloc(var)]

    def label(self, name) -> str:
        """A value by the box that makes it (``SoftMax₁ output 0``) or its variable's name."""
        ws = [w for w in self.writers.get(name, []) if isinstance(w, Compute)]
        if not ws:
            return name
        w = ws[0]
        j = [r.var for r in w.outs].index(name)
        return f"{w.box.name} output" + (f" {j}" if len(w.outs) > 1 else "") + f" ({name})"

    def original_shape(self, name):
        """The shape a value has in the two-level plan (after hoisting maps out of sub-loops)."""
        return self.shapes.get(name, self.vars[name].shape)

    def spread(self, name, ctx, in_tail) -> list:
        """A value kept on a unit level across kernels, allocated whole on that level (spread over its units)."""
        if name in self.birth or name in self.filled:
            return []
        v = self.vars[name]
        home = self.home[name]
        self.vars[name] = replace(v, shape=self.shape_in(self.original_shape(name), ctx), level=home.index)
        self.what[name] = f"{self.label(name)}, spread over {home.name}"
        self._born(name, ctx, in_tail)
        return [Alloc(name)]

    def prepare(self, group_stmts, ctx, in_tail) -> list:
        """Allocations before a group: pipes of its tiles, and its spread values."""
        pre = []
        for s in group_stmts:
            for r in s.outs:
                name = r.var
                if self.home.get(name, self.block) is self.block:
                    continue
                if not self.per_unit(name):
                    pre += self.spread(name, ctx, in_tail)
                if self.needs_pipe(name) and name not in self.pipes and self.per_unit(name):
                    pre += self.alloc_pipe(name, ctx, in_tail)
        return pre

    def emit_group(self, g: _Group, ctx, *, in_tail):
        pre = self.prepare(g.stmts, ctx, in_tail)
        for s in g.stmts:   # inputs spread on another unit level: piped before the group
            for r in s.ins:
                home = self.home.get(r.var, self.block)
                if home is not self.block and home is not g.level and r.var not in self.pipes:
                    pre += self.alloc_pipe(r.var, ctx, in_tail)
                    pre += self.unit_kernel(home, [("pipe", r.var)], ctx, in_tail=in_tail)
        return pre + self.unit_kernel(g.level, g.stmts, ctx, in_tail=in_tail)

    def emit_run(self, run, ctx, *, in_tail):
        axis, tile_name, items = run
        tile = self.tile(tile_name, f"the {self.block.name} split of {axis}")
        lp = self.loop(axis, tile)
        inner = ctx + [lp]
        stmts_in = [s for _, it in items for s in _computes(it)]
        inside = set(map(id, stmts_in))
        pre = []
        for s in stmts_in:    # values also read after the run are allocated whole before it
            for r in s.outs:
                name = r.var
                if self.home.get(name, self.block) is self.block or self.per_unit(name):
                    continue
                if any(id(x) not in inside for x in self.readers.get(name, [])):
                    pre += self.spread(name, ctx, in_tail)
        body = []
        for kind, it in items:
            body += self.emit_run(it, inner, in_tail=in_tail) if kind == "run" else \
                self.emit_group(it, inner, in_tail=in_tail)
        full = self.extent(axis, ctx)
        return pre + [GridLoop(axis, tile, full, lp.index, tuple(body), f"split {axis} ({self.block.name})")]

    # ------------------------------------------------------------------ one kernel on a unit level
    def unit_kernel(self, lv, stmts, ctx, *, in_tail):
        """``parallel for`` over the scaling axis in the level's tiles, around ``kernel @level``."""
        axis = self.axis
        computes = [s for s in stmts if isinstance(s, Compute)]
        outer = list(ctx)
        wrap = None
        carries = axis is not None and lv.tile and all(axis in dict(self.original_shape(n))
                                                       for s in stmts for n in _made(s))
        if carries:
            tile = self.tile(f"{lv.tile}_{axis}", f"the {lv.unit} tile of {axis}")
            wrap = self.loop(axis, tile)
            outer = outer + [wrap]
        inner = list(outer)
        split = None
        for a, tiles in self.splits.items():
            if lv.name in tiles and computes and all(a in s.box.data.weave_names for s in computes):
                split = self.loop(a, self.tile(tiles[lv.name], f"the {lv.name} split of {a}"))
                inner = inner + [split]
                break
        body = self.kernel_body(lv, stmts, inner, in_tail)
        if split is not None:
            body = [GridLoop(split.axis, split.tile, self.extent(split.axis, outer), split.index, tuple(body),
                             f"split {split.axis} ({lv.name})")]
        node = Kernel(lv.index, tuple(body), f"{lv.name}")
        if wrap is None:
            return [node]
        return [GridLoop(axis, wrap.tile, self.extent(axis, ctx), wrap.index, (node,), f"{lv.unit}s of {axis}")]

    def kernel_body(self, lv, stmts, ctx, in_tail):
        body, loaded, current = [], {}, {}
        stmts = list(stmts)
        for k, s in enumerate(stmts):
            if isinstance(s, tuple):          # ("pipe", name): a spread value stored to its pipe
                _, name = s
                body.append(Store(self.view(self.pipes[name], ctx), self.view(name, ctx), lv.index,
                                  f"pipe {name} → {self.block.name}"))
                continue
            if isinstance(s, Copy):
                body.append(Copy(self.view(s.dst.var, ctx, s.dst), self.read(s.src, None, lv, ctx, body, loaded,
                                                                             current, in_tail), s.origin))
                continue
            ins = [self.read(r, s, lv, ctx, body, loaded, current, in_tail) for r in s.ins]
            outs = []
            for r in s.outs:
                name = r.var
                if not self.per_unit(name):
                    outs.append(self.view(name, ctx, r))
                    continue
                v = self.base.variable_map.get(name, self.vars[name])
                shape = self.shape_in(self.original_shape(name), ctx)
                reuse = self.in_place_candidate(s, shape, v.dtype, ins, stmts[k + 1:], loaded, current) \
                    if self.in_place and not s.accumulate else None
                if reuse is not None:
                    current[name] = reuse
                    self.what[reuse] += f", then {self.label(name)} in place"
                    outs.append(Ref(reuse))
                    continue
                self.vars[name] = Variable(name, shape, v.dtype, lv.index, v.role, v.origin)
                self.what[name] = f"{self.label(name)} on {lv.name}"
                self.birth[name] = len(ctx)
                if in_tail:
                    self.tail_vars.add(name)
                current[name] = name
                outs.append(Ref(name))
            box = self.relabel(s.box, lv, ctx)
            body.append(Compute(box, tuple(outs), tuple(ins), s.accumulate, f"{s.origin} @{lv.name}"))
            for r in s.outs:
                if self.per_unit(r.var) and self.needs_pipe(r.var):
                    body.append(Store(self.view(self.pipes[r.var], ctx), Ref(current[r.var]), lv.index,
                                      f"pipe {r.var} → {self.block.name}"))
        return body

    def read(self, ref, s, lv, ctx, body, loaded, current, in_tail) -> Ref:
        name = ref.var
        home = self.home.get(name, self.block)
        if home is lv:
            return Ref(current[name]) if name in current else self.view(name, ctx, ref)
        src = name if home is self.block else self.pipes[name]
        operand = s is not None and "tensor" in self.pipelines[id(s)]
        if operand and lv.operand_pool is not None and lv.operand_pool == self.block.pool:
            return self.view(src, ctx, ref)       # read in place (wgmma takes its operands from SMEM)
        key = (src, ref.index)
        if key in loaded:
            return Ref(loaded[key])
        v = self.vars[src]
        shape = self.view_shape(src, ctx, ref)
        dst = self.new_var(f"{src}_{lv.index}", shape, v.dtype, lv.index, "tile", f"{v.origin} → {lv.name}",
                           len(ctx))
        self.what[dst] = f"{self.label(name)} loaded into {lv.name}"
        if in_tail:
            self.tail_vars.add(dst)
        body.append(Load(Ref(dst), self.view(src, ctx, ref), lv.index, f"load {src} → {lv.name}"))
        loaded[key] = dst
        return Ref(dst)

    def in_place_candidate(self, s, shape, dtype, ins, later, loaded, current):
        """An input tile of this kernel with the output's shape and format that nothing later reads."""
        later_reads = {r.var for x in later if isinstance(x, Compute) for r in x.ins}
        for r in ins:
            if not r.whole:
                continue
            v = self.vars[r.var]
            if v.dtype != dtype or tuple(e for _, e in v.shape) != tuple(e for _, e in shape):
                continue
            keys = [key for key, dst in loaded.items() if dst == r.var]
            made = [n for n, cur in current.items() if cur == r.var]
            if keys and not any(self.pipes.get(x) == keys[0][0] or x == keys[0][0] for x in later_reads):
                del loaded[keys[0]]
                return r.var
            if made and not (set(made) & later_reads) and not any(self.needs_pipe(m) and m not in current
                                                                   for m in made):
                return r.var
        return None

    def relabel(self, box, lv, ctx):
        tiles = {}
        for lp in ctx:
            tiles[lp.axis] = lp.tile

        def fa(arr):
            axes = tuple(Axis(a.name, tiles[a.name]) if a.name in tiles else a for a in arr.axes)
            return arr.replace(axes=axes, level=lv.index)
        return map_box(box, fa, lambda n: n)


def _computes(item):
    if isinstance(item, _Group):
        return list(item.stmts)
    axis, tile, items = item
    return [s for _, it in items for s in _computes(it)]


def _written(s) -> set:
    if isinstance(s, (Load, Store, Copy)):
        return {s.dst.var}
    if isinstance(s, Compute):
        return {r.var for r in s.outs}
    if isinstance(s, Fill):
        return {s.var}
    return set()


def _sliced(s, names, axis, rng):
    """``s`` reading the slice ``rng`` along ``axis`` of the values ``names`` (made whole outside its loop)."""
    def cut(r):
        return Ref(r.var, r.index + ((axis, rng),)) if r.var in names and r.range(axis) is None else r
    if isinstance(s, Compute):
        return replace(s, ins=tuple(map(cut, s.ins)))
    if isinstance(s, (Load, Store, Copy)):
        return replace(s, src=cut(s.src))
    if isinstance(s, StreamLoop):
        return replace(s, head=tuple(_sliced(x, names, axis, rng) for x in s.head),
                       body=tuple(_sliced(x, names, axis, rng) for x in s.body),
                       tail=tuple(_sliced(x, names, axis, rng) for x in s.tail))
    if isinstance(s, (GridLoop, Kernel)):
        return replace(s, body=tuple(_sliced(x, names, axis, rng) for x in s.body))
    return s


def _made(s) -> list:
    """The variables a statement of a unit kernel makes (a pipe request names the value it stores)."""
    if isinstance(s, tuple):
        return [s[1]]
    if isinstance(s, Compute):
        return [r.var for r in s.outs]
    return [s.dst.var]


def _strip(stmts):
    """The statements without their Frees (liveness is recomputed on the configured plan)."""
    out = []
    for s in stmts:
        if isinstance(s, Free):
            continue
        if isinstance(s, StreamLoop):
            s = replace(s, head=tuple(_strip(s.head)), body=tuple(_strip(s.body)), tail=tuple(_strip(s.tail)))
        elif isinstance(s, (GridLoop, Kernel)):
            s = replace(s, body=tuple(_strip(s.body)))
        out.append(s)
    return out


def _names(s) -> set:
    if isinstance(s, (Load, Store, Copy)):
        return {s.src.var, s.dst.var}
    if isinstance(s, Compute):
        return {r.var for r in (*s.ins, *s.outs)}
    if isinstance(s, (Fill, Alloc, Free)):
        return {s.var}
    return set()
