"""Lowering: a two-level plan rewritten for a hierarchy of levels, as a list of passes (paper §5, steps 3-5).

Input: a plan whose kernels run at the block level (FlashAttention as the rules derive it: a Grid over
``q``, a Stream over ``x``, its kernel at level 1 = SMEM), a hierarchy (the levels, what each offers, the
unit that holds one copy, its tile prefix: :mod:`napkin_cat.hardware.toy` reads them from TOML) and the
caller's :class:`Options`.  Each pass is a function ``Lowering → Lowering``
(:class:`~napkin_cat.plan.lowering.state.Lowering`); :data:`PASSES` lists them in order and
:func:`lower` runs them:

=============  ===============================================================================================
pass           rewrite
=============  ===============================================================================================
``strip``      the plan without its ``Free`` statements (liveness is recomputed at the end)
``hoist``      the maps that open a sub-loop run once per trip of the stream around it, on its whole tile
``place``      a :class:`~.placement.Placement` per kernel: each computation's level (the first under the
               block that offers its pipelines), groups, each value's home level — a frozen value
``recolour``   groups become kernels on their levels in loops over the units' tiles; values piped through
               the block level; splits; in-place outputs (:mod:`~.recolour`, :mod:`~.pipes`, :mod:`~.splits`)
``buffer``     tiles a stream loads from global memory on every trip get the hierarchy's copies
``free``       the plan: the variables it uses, in order, and its ``Free`` statements (liveness)
=============  ===============================================================================================

The result runs (``state.plan.run``): what it computes is checked against the two-level plan and numpy.

>>> import napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 8, "b": 8, "c": 4, "s_b": 4, "g_a": 8}, accumulate=False)
>>> s = lower(p, nc.hardware.load_hierarchy("hopper"), Options(given={"w_a": 4, "t_a": 1}))
>>> [q.name for q in PASSES]
['strip', 'hoist', 'place', 'recolour', 'buffer', 'free']
>>> import numpy as np
>>> A, B = np.ones((8, 8)), np.ones((8, 4))
>>> np.array_equal(s.plan(A, B), A @ B)
True
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from napkin_cat.plan.ir import Free, rebuild, reads, walk, writes
from napkin_cat.plan.liveness import with_frees
from napkin_cat.plan.lowering.buffers import buffer
from napkin_cat.plan.lowering.hoist import hoist
from napkin_cat.plan.lowering.placement import Placement, pipelines_of, place
from napkin_cat.plan.lowering.recolour import recolour
from napkin_cat.plan.lowering.state import (UNIT_LEVELS, Assignment, Lowering, LoweringError, Options, Pipe,
                                            frozen)
from napkin_cat.plan.program import Plan


def strip(state: Lowering) -> Lowering:
    """The pass ``strip``: the statements without their Frees."""
    return replace(state, body=rebuild(state.body, lambda s: () if isinstance(s, Free) else s))


def free(state: Lowering) -> Lowering:
    """The pass ``free``: the plan, with the variables its statements use (in order) and its Frees."""
    base = state.base
    used = {n for s in walk(state.body) for n in (*reads(s), *writes(s))} | set(base.inputs) | set(base.outputs)
    variables = {n: v for n, v in state.variables.items() if n in used}
    body = with_frees(state.body, set(base.outputs))
    return replace(state, variables=frozen(variables),
                   plan=Plan(base.diagram, dict(state.sizes), body, variables, base.inputs, base.outputs))


@dataclass(frozen=True)
class Pass:
    """A lowering pass: its ``name`` and the function ``run: Lowering → Lowering``."""

    name: str
    run: Callable


#: the passes, in the order they run
PASSES = (Pass("strip", strip), Pass("hoist", hoist), Pass("place", place), Pass("recolour", recolour),
          Pass("buffer", buffer), Pass("free", free))


def lower(base, hierarchy, options: Options, *, passes=PASSES) -> Lowering:
    """``base`` (a plan with block-level kernels) lowered onto ``hierarchy`` by ``passes``."""
    state = Lowering.start(base, hierarchy, options)
    state.block      # a hierarchy without a block level is refused before any pass runs
    for p in passes:
        state = p.run(state)
    return state


__all__ = ["PASSES", "Pass", "lower", "Lowering", "LoweringError", "Options", "Placement", "Assignment", "Pipe",
           "pipelines_of", "UNIT_LEVELS", "strip", "hoist", "place", "recolour", "buffer", "free"]
