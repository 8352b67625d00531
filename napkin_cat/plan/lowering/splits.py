"""How the recolouring pass cuts a kernel's statements: groups on one level, and runs split along an axis.

Step 2's degrees of freedom: ``splits = {axis: {level name: tile name}}`` splits the matmuls along an
output axis and what accumulates them.  On the block level a *run* (maximal consecutive groups weaved over
the axis, holding a tensor-pipeline computation) goes into a loop over the axis's tiles (``d → d′``); on a
unit level the kernel's computations, when all are weaved over the axis, go into one (``d″``)::

    [S ← …]  [O += P·V]  [O ← fma(O, δ, PV)]      ⟶      [S ← …]  for d′: [PV ← P·V[d′]]  [O[d′] ← fma(…)]

>>> import napkin_cat as nc
>>> from napkin_cat.plan.ir import Compute
>>> exp = Compute(nc.elementwise("exp", "q d").boxes[0], (), ())
>>> unit_split({"d": {"registers": "d''"}}, "registers", [exp]), unit_split({"d": {"SMEM": "d'"}}, "registers", [exp])
(('d', "d''"), None)
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.plan.ir import Compute


@dataclass(frozen=True)
class Group:
    """Consecutive computations on one ``level``: one kernel there."""

    level: object
    stmts: tuple


@dataclass(frozen=True)
class Run:
    """Consecutive groups (or runs) split along ``axis`` in tiles named ``tile`` on the block level."""

    axis: str
    tile: str
    items: tuple


def computes(item) -> list:
    """The computations of a group or a run, in order."""
    if isinstance(item, Group):
        return list(item.stmts)
    return [s for it in item.items for s in computes(it)]


def items(stmts, placement, splits, block) -> list:
    """``stmts`` as groups (consecutive computations of one group on one level), runs split on the block
    level, and the other statements as they are."""
    out, current = [], None
    for s in stmts:
        if isinstance(s, Compute):
            lv = placement.level[s]
            if current is not None and current.level is lv and placement.group[s] == placement.group[current.stmts[-1]]:
                current = Group(lv, current.stmts + (s,))
                out[-1] = current
            else:
                current = Group(lv, (s,))
                out.append(current)
            continue
        current = None
        out.append(s)
    for axis, tiles in splits.items():
        if block.name in tiles:
            out = _runs(out, axis, tiles[block.name], placement)
    return out


def _runs(items, axis, tile, placement) -> list:
    """Maximal runs of consecutive groups weaved over ``axis`` that hold a tensor-pipeline computation."""
    out, run = [], []

    def close():
        if run and any("tensor" in placement.pipelines[s] for it in run for s in computes(it)):
            out.append(Run(axis, tile, tuple(run)))
        else:
            out.extend(run)
        run.clear()
    for item in items:
        if isinstance(item, (Group, Run)) and all(axis in s.box.data.weave_names for s in computes(item)):
            run.append(item)
            continue
        close()
        out.append(item)
    close()
    return out


def unit_split(splits, level_name, computations):
    """``(axis, tile name)`` that a unit level's kernel of ``computations`` is split along, or None: the first
    split naming the level along an axis every computation is weaved over."""
    for a, tiles in splits.items():
        if level_name in tiles and computations and all(a in s.box.data.weave_names for s in computations):
            return a, tiles[level_name]
    return None
