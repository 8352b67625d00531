"""A large-M optimum with no tile left to choose (every tile whole, :func:`napkin_cat.cost.optimum.clamped`) solves
nothing, so its memory model (the dominant column, the paper's held values) is only the record's ``constraint``: made
when read (issue 35 item 3), not on the search's path.

Counted, never timed: the dominant column is not worked out until ``constraint`` is read.  Second route: the
constraint read equals the memory model worked out here from the columns at the tiles' axes (the column largest at
every size: their maximum at sampled sizes), and the one an optimum with a tile left reports is unchanged.
"""
from __future__ import annotations

import random

import sympy

import napkin_cat as nc
from napkin_cat.cost import optimum

L = nc.library


def matmul():
    return nc.group(nc.group(nc.stream(L.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")


def test_whole_tiles_leave_the_memory_model_until_read(monkeypatch):
    calls = []
    real = optimum.dominant_column

    def counting(columns, tiles):
        calls.append(len(columns))
        return real(columns, tiles)
    monkeypatch.setattr(optimum, "dominant_column", counting)
    optimum.symbolic_optimum.cache_clear()
    c = nc.cost(matmul())
    o = nc.optimal(c, memory="M", exact=False, whole=["g_a", "g_c"])
    assert o.H == sympy.expand(o.H) and not o.H.has(nc.symbol("M"))     # every tile whole: a constant
    assert calls == []                                                   # nothing solved, nothing made
    lead = o.constraint
    assert calls, "the constraint is the dominant column, made when read"
    cols = optimum.clamped(optimum.program(c, 1), ["g_a", "g_c"]).columns
    rng = random.Random(35)
    for _ in range(5):
        at = {s: rng.randint(2, 500) for s in lead.free_symbols | set().union(*(k.free_symbols for k in cols))}
        at.update({nc.symbol("s_b"): 1})
        assert lead.subs(at) == max(k.subs(at) for k in cols)            # the largest column, at every size


def test_a_tile_left_keeps_its_constraint_at_once(monkeypatch):
    optimum.symbolic_optimum.cache_clear()
    o = nc.optimal(nc.cost(matmul()), memory="M", exact=False)
    assert "_constraint" in o.__dict__ and not isinstance(o.__dict__["_constraint"], optimum.Deferred)
    assert o.constraint.has(nc.symbol("g_a")) and o.constraint.has(nc.symbol("g_c"))
