"""``nc.plan(diagram, sizes)``: the executable plan of an algorithm at concrete sizes (paper §5.1-5.3).

A :class:`Plan` holds the loop nest (``body``), its variables, and the sizes it was made for.
``str(p)`` is pseudocode, ``p.variables`` the allocations (size expression, dtype, level, bytes),
``p.run(*arrays)`` the instrumented run, ``p(*arrays)`` the fast one.

>>> import numpy as np, napkin_cat as nc
>>> p = plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...          {"a": 4, "b": 6, "c": 5, "s_b": 3, "g_a": 2})
>>> [(v.name, v.level, v.role) for v in p.variables if v.level]
[('sum0', 1, 'state'), ('x0_1', 1, 'tile'), ('x1_1', 1, 'tile')]
>>> p.peak, p.smem_bytes
({1: 31}, 124)
>>> A, B = np.ones((4, 6)), np.ones((6, 5))
>>> np.array_equal(p(A, B), A @ B)
True
"""
from __future__ import annotations

import math

import numpy as np
import sympy

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.algorithms.blockmask import BlockMask
from napkin_cat.algorithms.records import built
from napkin_cat.cost.exact_arithmetic import rational_at
from napkin_cat.cost.memory import LARGEST_MEMORY
from napkin_cat.errors import BlockMaskError, LevelError, MemoryLimitError, ShapeError
from napkin_cat.plan.condition import derived, tables
from napkin_cat.plan.expand import Expander
from napkin_cat.plan.ir import PlanError, walk, GridLoop, StreamLoop
from napkin_cat.plan.liveness import with_frees
from napkin_cat.plan.printer import Printer, variable_table
from napkin_cat.plan.runner import Machine
from napkin_cat.plan.static import static_peak
from napkin_cat.semantics.footprint import check_room
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.sizes import as_sizes, symbols_of


#: the most elements an array of a printed kernel may hold: the printers index in 32 bits (C ``int``, CUDA ``int``,
#: Triton ``int32``), so a larger array's indices would wrap
LARGEST_INDEX = 2 ** 31 - 1


class Plan:
    """An executable plan: ``body`` (statements), ``variables``, ``inputs``/``outputs`` (names), ``sizes``."""

    def __init__(self, diagram, sizes, body, variables, inputs, outputs):
        self.diagram, self.sizes, self.body = diagram, sizes, tuple(body)
        self.variable_map = dict(variables)
        self.inputs, self.outputs = tuple(inputs), tuple(outputs)
        self.masked = {s.index for s in walk(self.body) if isinstance(s, (GridLoop, StreamLoop))
                       and _ragged(s, self.sizes)}
        self._peaks = None
        self._fits = False

    @property
    def variables(self) -> list:
        """The variables in order of creation (inputs, outputs, then as the program makes them)."""
        return list(self.variable_map.values())

    def _static(self):
        if self._peaks is None:
            self._peaks = static_peak(self)
        return self._peaks

    @property
    def peak(self) -> dict:
        """Values live at once per on-chip level (the most over the program's columns), at full tiles."""
        return dict(self._static()[0])

    @property
    def peak_bytes(self) -> dict:
        return dict(self._static()[1])

    @property
    def smem_bytes(self) -> int:
        """Bytes the plan keeps at level 1 per thread block (one index of the Grid loops)."""
        return self._static()[1].get(1, 0)

    @property
    def widest(self) -> tuple:
        """``(name, elements)`` of the array with the most elements at the plan's sizes (``("", 0)`` if none is
        numeric): a kernel printed from the plan indexes it, so it must hold at most :data:`LARGEST_INDEX`.

        >>> import napkin_cat as nc
        >>> plan(nc.library.matmul(), {"a": 4, "b": 8, "c": 16}).widest
        ('x1', 128)
        """
        return self.widest_at(self.sizes)

    def widest_at(self, sizes) -> tuple:
        """:attr:`widest` at other ``sizes`` (names or symbols to numbers): the same arrays (a structure's at another
        tiling: the hardware search reads one plan per structure), each size read at them; an array whose size
        ``sizes`` does not fix is left out."""
        named = {str(k): v for k, v in dict(sizes).items()}
        sized = [(v.name, int(n)) for v in self.variables for e in [sympy.sympify(v.size)]
                 for n in [e.subs({s: named[str(s)] for s in e.free_symbols if str(s) in named})] if n.is_Integer]
        return max(sized, key=lambda e: e[1], default=("", 0))

    def pseudocode(self) -> str:
        return Printer(self.variable_map, self.masked).block(self.body)

    def __str__(self):
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        ins = ", ".join(f"{v}[{'×'.join(a for a in self.variable_map[v].axes)}]" for v in self.inputs)
        outs = ", ".join(f"{v}[{'×'.join(a for a in self.variable_map[v].axes)}]" for v in self.outputs)
        return (f"plan at {sizes}\ninputs: {ins}\noutputs: {outs}\n\n{self.pseudocode()}\n\n"
                f"variables:\n{variable_table(self.variables, self.sizes)}")

    def __repr__(self):
        return f"Plan({len(self.variables)} variables, sizes={ {str(k): v for k, v in self.sizes.items()} })"

    # ------------------------------------------------------------------ running
    def _check(self, arrays):
        if len(arrays) != len(self.inputs):
            raise ShapeError(f"the plan takes {len(self.inputs)} array(s) "
                             f"{[str(a) for a in self.diagram.dom.inside]}, got {len(arrays)}")
        self._check_room()
        out = []
        for k, (name, x) in enumerate(zip(self.inputs, arrays)):
            x = np.asarray(x)
            if not (np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.bool_)):
                raise ShapeError(f"argument {k} ({name}): expected a numeric array, got dtype {x.dtype}")
            v = self.variable_map[name]
            want = tuple(_whole_at(e, self.sizes) for _, e in v.shape)
            if x.shape != want:
                bad = [f"{a}: {w} (got {g})" for (a, _), w, g in zip(v.shape, want, x.shape) if w != g] \
                    if x.ndim == len(want) else [f"rank {len(want)} (got {x.ndim})"]
                raise ShapeError(f"argument {k} ({name}, axes {list(v.axes)}) must have shape {want} at the "
                                 f"plan's sizes; mismatched: {', '.join(bad)}")
            out.append(x)
        return out

    def _check_room(self):
        """Every array the run holds, at full tiles, within this machine's memory (checked once per plan): a run
        that cannot hold one is refused before any is made (:mod:`napkin_cat.semantics.footprint`)."""
        if not self._fits:
            for v in self.variables:
                check_room(math.prod(_whole_at(e, self.sizes) for _, e in v.shape),
                           f"the variable {v.name}[{'×'.join(v.axes)}]")
            self._fits = True

    def run(self, *arrays, block_mask=None):
        """``(outputs, counters)``: the instrumented run (see :mod:`napkin_cat.plan.runner`).  ``block_mask``: a
        stream whose mask reads data skips the trips where it allows no pair; the data's block mask of that mask
        (:meth:`block_mask`, or one equal to it at the plan's tiles: :func:`~napkin_cat.plan.condition.tables`),
        or ``"data"`` to derive it here."""
        arrays = self._check(arrays)
        machine = Machine(self, instrument=True, tables=self.block_states(block_mask, arrays))
        outs, counters = machine.run(arrays)
        return (outs[0] if len(outs) == 1 else tuple(outs)), counters

    def __call__(self, *arrays, threads: int = 1, block_mask=None):
        """The fast run: tiles as numpy (BLAS) calls, the groups of a Grid on ``threads`` threads."""
        arrays = self._check(arrays)
        machine = Machine(self, threads=threads, tables=self.block_states(block_mask, arrays))
        outs, _ = machine.run(arrays)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def block_mask(self, *arrays) -> BlockMask:
        """The data's block mask of the mask this plan's streams drop on a full trip, derived from ``arrays`` (the
        plan's inputs) by the plan's own statements (:mod:`napkin_cat.plan.condition`): FlexAttention's
        ``create_block_mask``, made once per batch of data and given to every run on it."""
        return derived(self, self._check(arrays))

    @property
    def data_axes(self) -> tuple:
        """The axes of the masks read from data that decide this plan's trips (what a block mask is over)."""
        seen: dict = {}
        for s in walk(self.body):
            if isinstance(s, StreamLoop) and s.data is not None:
                seen.update((a, None) for a in s.data.axes)
        return tuple(seen)

    def block_states(self, block_mask, arrays):
        """The states of each block table (:func:`~napkin_cat.plan.blocks.block_tables`) by ``block_mask`` on the
        data ``arrays`` (the plan's inputs), checked (:func:`~napkin_cat.plan.condition.tables`); None where
        ``block_mask`` is None."""
        if block_mask is None:
            return None
        axes = self.data_axes
        if not axes:
            raise BlockMaskError("a block mask was given, but no stream of this plan has a mask read from data (a "
                                 "mask from positions alone is decided by interval arithmetic); give none")
        if not isinstance(block_mask, str):
            if set(block_mask.axes) != set(axes):
                raise BlockMaskError(f"the block mask is over axes {list(block_mask.axes)}; this plan's mask from "
                                     f"data is over {list(axes)}")
            block_mask.check({str(k): v for k, v in self.sizes.items()}, "the plan")
        return tables(self, arrays, block_mask)

    # ------------------------------------------------------------------ for the CLI and the tables
    def to_dict(self) -> dict:
        return {"sizes": {str(k): v for k, v in self.sizes.items()}, "pseudocode": self.pseudocode(),
                "variables": [{"name": v.name, "shape": [[a, str(e)] for a, e in v.shape], "size": str(v.size),
                               "dtype": v.dtype, "level": v.level, "role": v.role, "buffers": v.buffers,
                               "bytes": str(v.bytes), "bytes_at_sizes": int(sympy.sympify(v.bytes).subs(self.sizes)),
                               "origin": v.origin} for v in self.variables],
                "peak": {str(k): v for k, v in self.peak.items()}, "smem_bytes": self.smem_bytes}


def _whole_at(e, sizes) -> int:
    """``int(e.subs(sizes))`` of a size expression (a variable's extent), exact and without sympy's ``subs`` where
    ``e`` is a number at ``sizes`` (:func:`~napkin_cat.cost.exact_arithmetic.rational_at`)."""
    got = rational_at(e, sizes)
    return int(got) if got is not None else int(sympy.sympify(e).subs(sizes))


def _ragged(loop, sizes) -> bool:
    full, tile = rational_at(loop.full, sizes), rational_at(loop.tile, sizes)
    if full is not None and tile is not None:    # (exact, without sympy's subs, where both are numbers)
        return not (isinstance(full, int) and isinstance(tile, int) and full % tile == 0)
    full, tile = sympy.sympify(loop.full).subs(sizes), sympy.sympify(loop.tile).subs(sizes)
    return not (full.is_Integer and tile.is_Integer and int(full) % int(tile) == 0)


def render(p: Plan, *, fmt: str = "text") -> str:
    """The plan for a reader: ``text`` (pseudocode and the variable table) or ``json``."""
    if fmt == "json":
        import json
        return json.dumps(p.to_dict(), indent=2, ensure_ascii=False)
    if fmt != "text":
        raise PlanError(f"unknown plan format {fmt!r}; use 'text' or 'json'")
    return str(p)


# ---------------------------------------------------------------------- building
def _partitions(diagram: Diagram, found: list):
    for _, box in layers(diagram):
        if isinstance(box, Bubble):
            if isinstance(box, (Grid, Stream)):
                found.append(box)
            for d in box.size_parts()[1]:
                _partitions(d, found)


def sizes_needed(diagram: Diagram) -> tuple[set, list]:
    """``(symbols, partitions)``: the size symbols a plan of ``diagram`` needs (its axes and tiles, inside its
    regions and their reducers' steps too: :func:`~napkin_cat.syntax.sizes.symbols_of`) and its Grid and Stream
    boxes, outermost first.

    >>> import napkin_cat as nc
    >>> symbols, parts = sizes_needed(nc.stream(nc.library.matmul(), "b", "s_b"))
    >>> sorted(map(str, symbols)), [p.axis for p in parts]
    (['a', 'b', 'c', 's_b'], ['b'])
    """
    parts = []
    _partitions(diagram, parts)
    return set(symbols_of(diagram)), parts


def _check_partition(box, env):
    """A tile must fit its axis; an edge tile is masked unless the inside depends on the tile's exact size."""
    axis, tile = box.axis, sympy.sympify(box.size)
    full, t = int(sympy.sympify(box.full_size()).subs(env)), int(tile.subs(env))
    what = f"the {'group' if isinstance(box, Grid) else 'stream'} size of {axis!r} ({tile} = {t})"
    if t > full:
        raise PlanError(f"{what} exceeds the axis ({axis} = {full}); legal sizes are 1 … {full}")
    if full % t == 0:
        return
    legal = [g for g in range(1, full + 1) if full % g == 0]
    if tile.is_Integer:
        raise PlanError(f"{what} does not divide {axis!r} = {full} and is fixed in the diagram, so the plan cannot "
                        f"mask the last tile; legal sizes are the divisors {legal}")
    for _, b in layers(box.arg):
        if isinstance(b, Region) or getattr(b, "data", None) is None:
            continue
        deps = set().union(*(sympy.sympify(v).free_symbols for _, v in b.data.params
                             if isinstance(v, sympy.Basic))) if b.data.params else set()
        if tile in deps or (kind_of(b.data.kind).sized and any(axis in a.names for a in b.dom.inside)):
            raise PlanError(f"{what} does not divide {axis!r} = {full}, and {b.name!r} inside depends on the "
                            f"tile's exact size, so the plan cannot mask the last tile; legal sizes are {legal}")


def plan(diagram: Diagram, sizes=None, *, memory: dict | int | None = None, accumulate: bool = True) -> Plan:
    """The plan of ``diagram`` at ``sizes`` (a :class:`~napkin_cat.syntax.sizes.Sizes`, or axis and tile names or
    their symbols → ints: ``nc.plan(d, nc.optimal(c, memory=m, sizes=s).sizes)``).  ``diagram`` may be a
    derivation at numbers: ``nc.plan(nc.derive(f, memory=m, sizes=s))`` plans its algorithm at its tiles (``memory=``
    picks one of a list's memories and is checked as below; ``sizes=`` may choose other tiles).  A partition record
    (``nc.group`` / ``nc.stream`` with ``relabelled=False``, a search variant's ``record``) is planned as the partition
    it stands for (:func:`~napkin_cat.algorithms.records.built`; its counts are the record's cost).

    ``accumulate``: a sum a step reads at an addend of an in-place state update is computed into it
    (:mod:`napkin_cat.algorithms.reuse`); ``False`` stores it first.

    ``memory``: capacity in values per level (``{1: 65536}``, or an int for level 1); a plan whose
    peak exceeds it raises :class:`~napkin_cat.errors.MemoryLimitError` naming the level.
    """
    if callable(getattr(diagram, "planned", None)):     # a derivation (nc.derive's answer): its algorithm, tiles
        diagram, sizes = diagram.planned(sizes, memory if isinstance(memory, int) else None)
    elif sizes is None:
        raise PlanError("nc.plan(diagram, sizes) needs the sizes of the diagram's axes and tiles (only a "
                        "derivation, nc.plan(nc.derive(...)), carries its own)")
    if not isinstance(diagram, Diagram):
        raise PlanError(f"nc.plan takes a napkin_cat Diagram or a derivation, got {type(diagram).__name__}")
    diagram = built(diagram)
    _, parts = sizes_needed(diagram)
    env = as_sizes(sizes).require(diagram, "the plan").env
    for box in parts:
        _check_partition(box, env)
    e = Expander(env, accumulate=accumulate)
    stmts, outs = e.top(diagram)
    body = with_frees(stmts, {o.var for o in outs})
    p = Plan(diagram, env, body, e.variables, [v.name for v in e.variables.values() if v.role == "input"],
             [o.var for o in outs])
    if memory is not None:
        _check_memory(p, memory)
    return p


def _check_memory(p: Plan, memory):
    caps = memory if isinstance(memory, dict) else {1: memory}
    for lvl, cap in caps.items():
        if isinstance(cap, bool) or not hasattr(cap, "__index__") or not 1 <= cap <= LARGEST_MEMORY or \
                isinstance(lvl, bool) or not hasattr(lvl, "__index__") or lvl < 1:
            raise MemoryLimitError(f"memory= gives a capacity in values per level below global memory (an int, 1 … "
                                   f"2^64), such as {{1: 65536}} or 65536 for level 1; got {lvl!r}: {cap!r}")
        levels = sorted({v.level for v in p.variables if v.level >= 1})
        if lvl not in levels:
            raise LevelError(f"memory= gives a capacity for level {lvl}, which this plan holds nothing at: its levels "
                             f"below global memory are {levels}; give capacities for those (or none)")
        used = p.peak.get(lvl, 0)
        if used > cap:
            big = sorted((v for v in p.variables if v.level == lvl),
                         key=lambda v: -int(sympy.sympify(v.size).subs(p.sizes)))[:3]
            names = ", ".join(f"{v.name}[{'×'.join(str(e) for _, e in v.shape)}]" for v in big)
            raise MemoryLimitError(f"level {lvl} holds up to {used} values at once in this plan, over its capacity "
                                   f"of {cap}; the largest variables there are {names}: choose smaller tiles")


def bytes_of(v, sizes) -> int:
    """The bytes of a plan variable ``v`` at ``sizes``: its shape's elements times its format's width."""
    return int(math.prod(int(sympy.sympify(e).subs(sizes)) for _, e in v.shape) * as_dtype(v.dtype).bytes)
