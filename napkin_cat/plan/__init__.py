"""Layer 5, plan: the pseudocode functor (paper §5.1-5.3): a loop-nest IR, its printer and its runners.

``plan(diagram, sizes)`` expands an algorithm (Kernel / Grid / Stream bubbles) into a :class:`Plan`:
parallel grid loops, stream loops with head / body / tail, allocations per level, loads and stores,
computations tied to their primitives.  ``p.run`` counts what it moves (the independent check of
the cost functor); ``p(...)`` runs fast.  Every pass over the IR uses one toolkit (:mod:`~napkin_cat.plan.ir`:
``access``, ``walk``, ``rebuild``; :mod:`~napkin_cat.plan.liveness`); :mod:`~napkin_cat.plan.lowering` lowers
a plan onto a hierarchy of levels, as a list of passes.

May import: every layer up to rewriting.

>>> import napkin_cat as nc
>>> p = plan(nc.stream(nc.library.matmul(), "b", "s_b"), {"a": 4, "b": 6, "c": 5, "s_b": 3})
>>> p.peak
{1: 47}
"""
from napkin_cat.plan.ir import PlanError
from napkin_cat.plan.program import Plan, plan, render
from napkin_cat.plan.runner import Counters

__all__ = ["Plan", "plan", "render", "Counters", "PlanError"]
