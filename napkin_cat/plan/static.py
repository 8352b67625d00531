"""The plan's memory read off its text: live values per level at every column, at full tiles.

The same discipline as the instrumented run (a value is live from the statement that writes it
whole to its ``Free``; the live set is sampled between statements) walked once over the program
without data: one trip of each loop stands for all (every trip has the same live pattern).

>>> import napkin_cat as nc
>>> p = nc.plan(nc.stream(nc.library.matmul(), "b", "s_b"), {"a": 4, "b": 6, "c": 5, "s_b": 3})
>>> static_peak(p)
({1: 47}, {1: 188})
"""
from __future__ import annotations

import sympy

from napkin_cat.plan.liveness import columns
from napkin_cat.syntax.dtype import as_dtype


def live_columns(p) -> list:
    """The distinct sets of variables live at once, sampled between statements (one trip of each loop), in the
    order they first occur (:func:`napkin_cat.plan.liveness.columns`)."""
    return list(dict.fromkeys(columns(p.body, p.inputs)))


def static_peak(p) -> tuple[dict, dict]:
    """``(values, bytes)`` per on-chip level: the most live at once over the program's columns."""
    sizes = {v.name: int(sympy.sympify(v.size).subs(p.sizes)) for v in p.variables}
    peak_v: dict = {}
    peak_b: dict = {}
    for column in live_columns(p):
        vals, byts = {}, {}
        for name in column:
            v = p.variable_map[name]
            if v.level > 0:
                vals[v.level] = vals.get(v.level, 0) + sizes[name]
                byts[v.level] = byts.get(v.level, 0) + sizes[name] * as_dtype(v.dtype).bytes * v.buffers
        for lvl in vals:
            peak_v[lvl] = max(peak_v.get(lvl, 0), vals[lvl])
            peak_b[lvl] = max(peak_b.get(lvl, 0), byts[lvl])
    return peak_v, peak_b
