"""The value the lowering passes thread: the plan as it stands and what the passes have found.

A pass is a function ``Lowering → Lowering`` (:mod:`napkin_cat.plan.lowering`); each returns a new value
(``dataclasses.replace``) and leaves the one it was given as it was.  ``variables`` keeps the plan's order:
the two-level plan's variables first, then those the passes make, in the order they appear.

>>> import napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 4, "b": 6, "c": 5, "s_b": 3, "g_a": 2})
>>> s = Lowering.start(p, None, Options())
>>> s.body == p.body, list(s.variables) == [v.name for v in p.variables]
(True, True)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from napkin_cat.errors import LoweringError
from napkin_cat.plan.ir import GridLoop, Kernel, with_blocks

#: the partition units below the block whose levels hold one tile each (warpgroups, warps, threads)
UNIT_LEVELS = ("warpgroup", "warp", "thread")


def frozen(mapping) -> MappingProxyType:
    """A read-only view of a copy of ``mapping`` (the passes' tables are values)."""
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Options:
    """What the caller chose: the scaling ``axis`` (default the outermost grouped one), ``splits``
    (``{axis: {level name: tile name}}``), ``buffers`` per streamed tile, ``in_place`` and ``hoist``, and the
    ``given`` sizes by name (the units', splits' and sub-loops' tiles among them)."""

    axis: str | None = None
    splits: MappingProxyType = field(default_factory=lambda: frozen({}))
    buffers: int = 1
    in_place: bool = True
    hoist: bool = True
    given: MappingProxyType = field(default_factory=lambda: frozen({}))


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


@dataclass(frozen=True)
class Lowering:
    """``base``: the two-level plan; ``body``, ``variables`` (name → Variable, in order), ``sizes`` (symbol →
    int): the plan as the passes leave it; ``placements``: one :class:`~.placement.Placement` per block-level
    kernel; ``assignments``, ``pipes``, ``what`` (variable → what it holds, in words), ``tail`` (variables
    made after a stream's loop), ``axis`` and ``partition`` (the scaling axis's tile per unit); ``plan``: the
    lowered :class:`~napkin_cat.plan.program.Plan`, once the last pass has made it."""

    base: object
    hierarchy: object
    options: Options
    body: tuple
    variables: MappingProxyType
    sizes: MappingProxyType
    placements: tuple = ()
    assignments: tuple = ()
    pipes: tuple = ()
    what: MappingProxyType = field(default_factory=lambda: frozen({}))
    tail: frozenset = frozenset()
    axis: str | None = None
    partition: MappingProxyType = field(default_factory=lambda: frozen({}))
    plan: object = None

    @classmethod
    def start(cls, base, hierarchy, options: Options) -> "Lowering":
        return cls(base, hierarchy, options, tuple(base.body), frozen(base.variable_map), frozen(base.sizes))

    @property
    def block(self):
        """The hierarchy's level whose unit is the thread block (the level the plan's kernels run at)."""
        lv = self.hierarchy.unit_level("block")
        if lv is None:
            raise LoweringError(f"toy hierarchy {self.hierarchy.name!r} has no level whose unit is 'block' to "
                                "configure from")
        return lv


def block_kernels(body, block) -> list:
    """``(kernel, grids)`` for each kernel of the plan, in program order, with the Grid loops around it
    (outermost first).  Every kernel must run at the block level."""
    out = []

    def top(stmts, grids):
        for s in stmts:
            if isinstance(s, GridLoop):
                top(s.body, grids + (s,))
            elif isinstance(s, Kernel):
                _check_level(s, block)
                out.append((s, grids))
    top(body, ())
    return out


def map_block_kernels(body, block, f) -> tuple:
    """``body`` with each block-level kernel replaced by ``f(kernel, grids)`` (a kernel); the rest as it was."""
    def top(stmts, grids):
        out = []
        for s in stmts:
            if isinstance(s, GridLoop):
                out.append(with_blocks(s, (top(s.body, grids + (s,)),)))
            elif isinstance(s, Kernel):
                _check_level(s, block)
                out.append(f(s, grids))
            else:
                out.append(s)
        return tuple(out)
    return top(tuple(body), ())


def _check_level(kernel, block):
    if kernel.level != block.index:
        raise LoweringError(f"configure starts from kernels at the block level {block.index} ({block.name}); this "
                            f"plan has a kernel at level {kernel.level}")
