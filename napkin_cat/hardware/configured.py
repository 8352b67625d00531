"""An algorithm configured for a toy hierarchy (§5, steps 3-5): ``configure()`` runs the lowering passes.

Input: an algorithm whose kernels run at the block level (FlashAttention as the rules derive it: a Grid
over ``q``, a Stream over ``x``, its kernel at level 1 = SMEM), a toy hierarchy and sizes.  The driver
builds the two-level plan (step 1; a stream's sub-loop, step 2, is a rewrite of the diagram before it),
then runs the passes of :mod:`napkin_cat.plan.lowering` over it, the same way for every algorithm:
recolouring (each computation on the level below the block that offers its pipelines), relabelling per
unit (``g_q`` → ``w_q``, ``t_q``), piping through the block level, splits, buffers, hoisting the maps that
open a sub-loop, and liveness.

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

from dataclasses import dataclass, field, replace

import sympy

from napkin_cat.hardware.config import Variable as ConfigVariable, config_table
from napkin_cat.hardware.errors import ConfigurationError, HardwareError
from napkin_cat.hardware.model import load
from napkin_cat.hardware.toy import load_hierarchy, pipelines_of
from napkin_cat.plan.ir import Compute, Load, Store, StreamLoop, walk
from napkin_cat.plan.lowering import PASSES, UNIT_LEVELS, Assignment, LoweringError, Options, Pipe, lower
from napkin_cat.plan.lowering.state import frozen
from napkin_cat.plan.program import Plan, plan as make_plan, sizes_needed
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.primitive import converts
from napkin_cat.syntax.sizes import Sizes
from napkin_cat.algorithms.bubbles import Grid, Stream
from napkin_cat.algorithms.partitions import stream
from napkin_cat.algorithms.records import built
from napkin_cat.errors import RewriteError
from napkin_cat.hardware.divisors import ArrayUse, MatmulUse, constraints

__all__ = ["Configured", "configure", "Assignment", "Pipe", "UNIT_LEVELS"]


@dataclass(frozen=True)
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
    assignments: tuple
    pipes: tuple
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
        columns = [k for k, x in enumerate(computes) if not converts(x.kind)]
        names = [t.name for t in program.tasks]
        if [computes[k].box.name for k in columns] != names:
            raise HardwareError(f"the program's tasks {names} are not the stream body's computations "
                                f"{[computes[k].box.name for k in columns]}")
        stage = {k: -offset for k, offset in program.slots}
        stages = []       # per computation (by position): a conversion runs in the stage of the one before it
        for k in range(len(computes)):
            stages.append(stage[columns.index(k)] if k in columns else stages[k - 1] if k else 0)
        made, read = {}, {}
        for x, st in zip(computes, stages):
            for r in x.outs:
                made.setdefault(r.var, st)
            for r in x.ins:
                read[r.var] = max(read.get(r.var, 0), st)
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
    return str(sympy.sympify(e))


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
        # partition records (relabelled=False): the partitions they stand for, which a plan reads
        algorithm = _with_subloops(built(algorithm), subloops or {})
        # a sum accumulated in place (o ← fma(o, δ, P·V)) is stored first here: recolouring puts the
        # contraction on the tensor cores and the rest on the threads, and a value lives on one level
        base = make_plan(algorithm, _planning_sizes(algorithm, sizes, splits, subloops or {}, h), accumulate=False)
    else:
        raise HardwareError(f"configure takes an algorithm diagram or its plan, got {type(algorithm).__name__}")
    buffers = h.stream_buffers if stream_buffers is None else stream_buffers
    if isinstance(buffers, bool) or not isinstance(buffers, int) or buffers < 1:
        raise HardwareError(f"stream_buffers = {buffers!r} must be a positive integer (copies of a streamed tile)")
    if h.unit_level("block") is None:
        raise HardwareError(f"toy hierarchy {h.name!r} has no level whose unit is 'block' to configure from")
    options = Options(axis, frozen({a: frozen(t) for a, t in splits.items()}), buffers, in_place, hoist, frozen(sizes))
    try:
        state = lower(base, h, options, passes=PASSES)
    except LoweringError as e:
        raise ConfigurationError(*e.args) from e
    return _configured(algorithm, state, splits)


def _configured(algorithm, state, splits) -> Configured:
    """The configuration the passes made: its plan, the steady state's and the tail's variables, in words."""
    variables = state.plan.variable_map
    on_chip = [n for n in variables if variables[n].level > 0]
    steady = tuple(n for n in on_chip if n not in state.tail)
    tail = tuple(n for n in on_chip if n in state.tail)
    return Configured(algorithm, state.base, state.plan, state.hierarchy, state.axis, dict(state.partition),
                      tuple(state.assignments), tuple(state.pipes), steady, tail, splits, _describe(variables, state))


def _describe(variables, state) -> dict:
    """A line per on-chip variable: where its value comes from and where it lives."""
    out = {}
    for name, v in variables.items():
        if v.level == 0:
            continue
        lv = state.hierarchy.level(v.level).name
        label = v.origin.rsplit("/", 1)[-1]
        if name in state.what:
            out[name] = state.what[name]
        elif v.role == "state":
            out[name] = f"stream state {label}" + ("" if v.level == state.block.index else f", spread over {lv}")
        else:
            out[name] = f"{label} on {lv}"
    return out


def _with_subloops(algorithm, subloops: dict):
    """Each stream's body streamed again along its axis: a sub-loop is ``nc.stream`` on a streamed axis."""
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
    needed, _ = sizes_needed(diagram)
    names = {str(s) for s in needed}
    full = {}
    for box in _partitions(diagram):
        size, tile = sympy.sympify(box.full_size()), sympy.sympify(box.size)
        value = tile.subs(Sizes(sizes).env)
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
