"""Pass ``place``: where every computation runs and every value lives, computed once, as a value.

Step 3's recolouring decided: each computation runs on the first level below the block that offers every
pipeline its FLOPs use (matmuls on the tensor cores, exponentials and elementwise maps on the threads);
consecutive computations on one level form a *group* (one kernel there); a value lives (its *home*) on
the level of the first computation that makes it (the block level for what a transfer or a copy makes;
a state moved by a copy lives where its new value is made).  The later passes only read this value.

    level(c) = first level ℓ under the block with pipelines(c) ⊆ offers(ℓ)
    home(v)  = level(first computation writing v)   (else the block)

>>> import napkin_cat as nc
>>> from napkin_cat.plan.lowering.state import Lowering, Options
>>> mm = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
>>> p = nc.plan(mm, {"a": 4, "b": 6, "c": 5, "s_b": 3, "g_a": 2}, accumulate=False)
>>> (pl,) = place(Lowering.start(p, nc.hardware.load_hierarchy("hopper"), Options())).placements
>>> pl.axis, dict(pl.partition), pl.home_of("sum0").name, pl.per_unit("sum0")
('a', {'block': 'g_a', 'thread': 't_a', 'warpgroup': 'w_a'}, 'tensor-core', False)
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from types import MappingProxyType

from napkin_cat.errors import LevelError
from napkin_cat.plan.ir import Alloc, Compute, Copy, Fill, Free, GridLoop, Kernel, Load, Store, StreamLoop
from napkin_cat.plan.lowering.state import UNIT_LEVELS, Assignment, LoweringError, block_kernels, frozen
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.weave import core_of

#: the kinds that move data between levels (they run on a level's ``transfer`` offer)
TRANSFERS = ("load", "save")


def pipelines_of(box) -> tuple:
    """The pipelines a primitive box runs on: ``transfer`` for loads/saves, else its FLOPs' pipelines."""
    spec = box.data
    if spec.kind in TRANSFERS:
        return ("transfer",)
    flops = kind_of(spec.kind).item_flops(core_of(spec, box.dom, box.cod))
    return tuple(p for p, f in flops.items() if f != 0)


@dataclass(frozen=True)
class Placement:
    """One block-level kernel placed on the hierarchy.

    ``axis``: the scaling axis (or None), ``partition``: its tile per unit; per computation (a statement of
    the kernel, by value) its ``level``, ``pipelines`` and ``group``; per variable its ``writers`` and
    ``readers`` (statements, in program order), whether a stream ``filled`` it, and its ``home`` level.
    """

    block: object
    axis: str | None
    partition: MappingProxyType
    level: MappingProxyType
    pipelines: MappingProxyType
    group: MappingProxyType
    writers: MappingProxyType
    readers: MappingProxyType
    filled: frozenset
    home: MappingProxyType

    def home_of(self, name):
        """The level a value lives on (the block level for what a transfer makes)."""
        return self.home.get(name, self.block)

    def per_unit(self, name) -> bool:
        """A value made once and read only inside its kernel (or piped out): one tile per unit."""
        ws = self.writers.get(name, ())
        if name in self.filled or len(ws) != 1 or not isinstance(ws[0], Compute) or ws[0].accumulate:
            return False
        lv, g = self.home[name], self.group[ws[0]]
        for r in self.readers.get(name, ()):
            if isinstance(r, Compute) and self.level[r] is lv and self.group[r] != g:
                return False
            if isinstance(r, Copy):
                return False
        return True

    def reader_levels(self, name) -> set:
        """Names of the levels that read a value (the block level for a transfer or a copy)."""
        return {self.level[r].name if isinstance(r, Compute) else self.block.name
                for r in self.readers.get(name, ())}

    def needs_pipe(self, name) -> bool:
        """A value made on a unit level and read on another goes through the block level."""
        home = self.home_of(name)
        return home is not self.block and bool(self.reader_levels(name) - {home.name})


def place(state):
    """The pass: a :class:`Placement` per block-level kernel, and the computations' assignments."""
    placements, assignments = [], []
    for k, grids in block_kernels(state.body, state.block):
        p, a = _place(k, grids, state)
        placements.append(p)
        assignments += a
    axis, partition = state.axis, state.partition
    for p in placements:
        axis = p.axis
        if p.axis is not None:
            partition = p.partition
    return replace(state, placements=tuple(placements), assignments=state.assignments + tuple(assignments),
                   axis=axis, partition=partition)


def _level_of(box, h, block):
    pipes = pipelines_of(box) or ("general",)
    able = [lv for lv in h.levels if lv.unit in UNIT_LEVELS and all(p in lv.offers for p in pipes)]
    if not able:
        offer = {p: [lv.name for lv in h.levels if p in lv.offers] for p in pipes}
        raise LevelError(f"box {box.name!r} uses the pipeline(s) {list(pipes)}, which no level below "
                         f"{block.name} of {h.name!r} offers together ({offer}); split it or "
                         f"describe a level that offers them")
    return able[0], pipes


def _scaling(grids, state):
    """The scaling axis (the one asked for, else the outermost grouped one) and its tile per unit."""
    axes = [g.axis for g in grids]
    wanted = state.options.axis
    if wanted is not None and wanted not in axes:
        raise LoweringError(f"scaling axis {wanted!r} is not grouped around the kernel; its grouped axes are {axes}")
    axis = wanted or (axes[0] if axes else None)
    partition = {}
    if axis is not None:
        partition = {"block": str(grids[axes.index(axis)].tile)}
        for lv in state.hierarchy.levels:
            if lv.unit in UNIT_LEVELS and lv.tile:
                partition[lv.unit] = f"{lv.tile}_{axis}"
    return axis, partition


def _place(kernel: Kernel, grids, state):
    h, block = state.hierarchy, state.block
    axis, partition = _scaling(grids, state)
    level, pipelines, group, assignments = {}, {}, {}, []
    writers, readers, filled = {}, {}, set()
    counter = itertools.count()

    def scan(stmts):
        current, cur_level = None, None
        for s in stmts:
            if isinstance(s, Compute):
                if s in level:     # placements are keyed by statement: the same one twice is ambiguous
                    raise LoweringError(f"the kernel runs {s.box.name!r} into {[r.var for r in s.outs]} twice, the "
                                        "same statement; configure places each computation once")
                lv, pipes = _level_of(s.box, h, block)
                level[s], pipelines[s] = lv, pipes
                assignments.append(Assignment(s.box.name, s.kind, pipes, lv.name))
                if current is None or cur_level is not lv:
                    current, cur_level = next(counter), lv
                group[s] = current
                for r in s.ins:
                    readers.setdefault(r.var, []).append(s)
                for r in s.outs:
                    writers.setdefault(r.var, []).append(s)
                    if s.accumulate:
                        readers.setdefault(r.var, []).append(s)
                continue
            current = None
            if isinstance(s, StreamLoop):
                scan(s.head), scan(s.body), scan(s.tail)
            elif isinstance(s, GridLoop):
                scan(s.body)
            elif isinstance(s, Kernel):
                raise LoweringError(f"configure: the block kernel already holds a kernel at level {s.level}")
            elif isinstance(s, (Load, Store, Copy)):
                readers.setdefault(s.src.var, []).append(s)
                writers.setdefault(s.dst.var, []).append(s)
            elif isinstance(s, Fill):
                filled.add(s.var)
            elif not isinstance(s, (Alloc, Free)):
                raise LoweringError(f"configure cannot place a {type(s).__name__} statement")
    scan(kernel.body)
    home = _homes(writers, level, state.variables, block)
    placement = Placement(block, axis, frozen(partition), frozen(level), frozen(pipelines), frozen(group),
                          frozen({k: tuple(v) for k, v in writers.items()}),
                          frozen({k: tuple(v) for k, v in readers.items()}), frozenset(filled), frozen(home))
    return placement, assignments


def _homes(writers, level, variables, block) -> dict:
    """Each on-chip value's level: where its first computation runs, else the block's; a state moved by a copy
    lives where its new value is made.  A value is made on one level only."""
    home = {}
    for name, ws in writers.items():
        if variables[name].level == 0:
            continue
        computes = [w for w in ws if isinstance(w, Compute)]
        home[name] = level[computes[0]] if computes else block
    for name, ws in writers.items():
        for w in ws:
            if isinstance(w, Copy) and home.get(w.src.var, block) is not block:
                home[name] = home[w.src.var]
    for name, ws in writers.items():
        if name in home and home[name] is not block:
            lv = home[name]
            others = [w for w in ws if isinstance(w, Compute) and level[w] is not lv]
            if others:
                raise LoweringError(f"variable {name!r} is written on {lv.name} and on {level[others[0]].name}; "
                                    "configure keeps each value on one level")
    return home
