"""Tiles a kernel's large-M memory model does not bind: at their axes from the first memory on.

A grouped kernel's large-M form minimises its ``H`` over the free tiles subject to the leading terms of what it
holds ``= M`` (:func:`~napkin_cat.cost.optimum.optimal`, ``exact=False``).  A free tile that ``H`` falls in but that
no leading memory term holds has no finite optimum there: the KKT system has no point, and the form was left out of
the symbolic mode's candidates (its algorithm, the least memory at the reference sizes for self-attention with its
projections, then missing: ``nan`` below the next candidate's start).  Projections → MHA → ``· W_o``: the output
projection's kernel grouped along ``n`` and ``h``, streamed along ``e``, holds ``g_n·h·n`` (its scores) whatever
``g_e``; ``g_e`` moves ``e·h·n²/g_e`` and holds only terms of lower degree.

**Law.** Such a tile's optimum at every memory is its axis (``H`` falls in it; what it adds to the memory is of lower
degree than ``M``'s, the mode's allowance, :mod:`napkin_cat.search.envelope`): :func:`unbound` names it, and the
envelope's candidate sets it whole from its first memory on, its other tiles at their large-M forms
(``tests/search/test_outside_35s.py``: the projected attention's first piece from 508, ``g_e = e``, where it was
``nan`` below 916).
"""
from __future__ import annotations

import sympy

from napkin_cat.cost.optimum import optimal


def unbound(made, M) -> list:
    """Per kernel of ``made`` (``made.parts``), the free tiles of its program (its own names) that its large-M
    optimum in ``M`` leaves unbounded: ``H`` holds them and the leading memory model does not (module docstring);
    ``()`` for a kernel whose large-M optimum exists."""
    out = []
    for curve, _ in made.parts:
        if not curve.grouped:
            out.append(())
            continue
        o = optimal(curve.cost, memory=M, level=curve.level, exact=False)
        if o.H is not None:
            out.append(())
            continue
        lead = o.constraint
        held = set().union(*(sympy.sympify(c).free_symbols for c in (lead if isinstance(lead, tuple) else (lead,))))
        prog = curve.program
        H, _, free, _ = prog.restricted()
        axes = dict(zip(prog.tiles, prog.fulls))
        out.append(tuple(t for t in free if t not in held and t in H.free_symbols and axes.get(t) != sympy.oo))
    return out
