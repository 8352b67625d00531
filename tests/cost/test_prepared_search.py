"""The integer search prepared once per cost record and sizes (cost/sized_optimum.prepared, sel-35): a curve asks
its kernel at new memories without compiling the program again.

The law: ``prepared(c, sizes=s).values_at(ms) == optimum_values(c, ms, sizes=s)`` for int memories, whatever it was
asked before; where the transfers are counted at each tiling (a masked stream) nothing is prepared (None).  The
second route is :func:`optimum_values`, which compiles and searches anew at each call.
"""
from __future__ import annotations

import random

import napkin_cat as nc
from napkin_cat.cost import sized_optimum
from napkin_cat.cost.sized_optimum import optimum_values, prepared
from napkin_cat.search.choice import Choice

SIZES = {"q": 96, "x": 80, "d": 24}


def test_prepared_answers_as_optimum_values_at_any_memories(monkeypatch):
    rng = random.Random(35)
    records = [(curve.search_cost, sizes) for f, sizes in ((nc.library.attention(), SIZES),
                                                            (nc.library.mlp(), {"n": 40, "i": 24, "f": 72, "o": 24}))
               for v, curve in Choice(f, 1).options if curve.grouped]
    mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    records.append((nc.cost(mm), {"a": 48, "b": 60, "c": 72}))
    compiled = []
    real = sized_optimum.compiled
    monkeypatch.setattr(sized_optimum, "compiled", lambda *a: compiled.append(a) or real(*a))
    for c, sizes in records:
        p = prepared(c, sizes=sizes)
        assert p is not None
        before = len(compiled)
        for _ in range(4):        # asked at new memories, in any order, a few at a time
            ms = sorted({rng.choice([2 ** rng.randint(2, 22), rng.randint(3, 2 ** 16)]) for _ in range(6)})
            rng.shuffle(ms)
            assert p.values_at(ms) == optimum_values(c, ms, sizes=sizes)
        assert sum(1 for a in compiled[before:] if a) == 4        # optimum_values compiled each call, prepared none
    assert len(records) > 2


def test_a_counted_record_is_not_prepared():
    masked = nc.library.causal_attention()
    counted = [curve.search_cost for _, curve in Choice(masked, 1).options
               if curve.grouped and curve.search_cost.estimated]
    assert counted, "a masked stream's record estimates its transfers"
    assert all(prepared(c, sizes=SIZES) is None for c in counted)
    assert all(prepared(c, sizes=SIZES, count=False) is not None for c in counted)
