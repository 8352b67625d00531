"""The selection over many memories at once is the selection at each memory alone (issue 35, item 3).

A symbolic derive orders its candidates by a numeric selection over forty-one grid memories in one call
(:func:`napkin_cat.search.space.select` over :data:`~napkin_cat.search.envelope.GRID`), and a numeric derive over a
list of memories does the same: each curve is costed once over the whole list (:meth:`~napkin_cat.search.curves.
Curve.at_all`), the kernel splits searched for every memory in one pass over the space, segment by segment for a
large form (:mod:`napkin_cat.search.segments`, solved once per kind of segment for the whole list).  Whatever is
shared between the memories must not change any memory's answer.

Checked by two routes that share nothing with the list: each memory derived alone, in a kernel cache the list's
derive does not read (same H, algorithm, tiles and trace), and each answer's H read again off the algorithm it
names by the cost functor at its tiles.  On library functions and on random programs, whole and segment by segment
(a transformer block with ``NAPKIN_SLOW=1``).  Counted, never timed: a grouped curve's points over the whole list
come from one integer search (not one per memory).
"""
import os

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import MemoryLimitError
from napkin_cat.search import curves, segments
from napkin_cat.search.blocks import OpGraph
from napkin_cat.search.context import KernelCache
from napkin_cat.testing.programs import random_program

MEMORIES = [16, 128, 1024, 8192, 65536]
#: random programs (concrete sizes 2 … 5) whose algorithm changes with the memory: plain, a mask from data, masks
#: from positions
SEEDS = (15, 1, 8)
#: random programs with a seam (a value two readers take, nothing else crossing): cut into segments
SEAMED = (3,)


def _library(name, size=32):
    f = getattr(nc.library, name)()
    names = sorted({str(s) for arr in (*f.dom.inside, *f.cod.inside) for a in arr.axes
                    for s in sympy.sympify(a.size).free_symbols})
    return f, {n: size for n in names}, MEMORIES


def _random(seed):
    p = random_program(seed, concrete=True)
    return p.diagram, {str(k): int(v) for k, v in p.sizes.items()}, [4, 16, 64, 256, 1024]


CASES = {**{name: (lambda name=name: _library(name)) for name in ("attention", "swiglu_mlp", "linear_cross_entropy")},
         **{f"random_program({s})": (lambda s=s: _random(s)) for s in SEEDS + SEAMED}}
#: searched segment by segment: a random program with the segments' thresholds lowered (below), and a transformer
#: block (32 operations: its residual stream cut at its own thresholds) with ``NAPKIN_SLOW=1`` (about 6 s)
SEGMENTED = {f"random_program({s})" for s in SEAMED} | {"transformer_block"}
CASES["transformer_block"] = lambda: (*_library("transformer_block", 8)[:2], [64, 512, 4096])


def _answer(g) -> tuple:
    """What one memory's derivation answers: H, the algorithm, its tiles and the rules that made it."""
    return g.H, str(g.variant), dict(g.optimum.exact_sizes), tuple(s.rule for s in g.trace)


def _alone(f, sizes, memories) -> dict:
    """Each memory derived alone (memories where nothing fits left out), in a kernel cache the list's derive does not
    read (the curves' points are kept per memory there, so one memory's answer cannot lend another its points)."""
    out, cache = {}, KernelCache()
    for m in memories:
        try:
            out[m] = _answer(nc.derive(f, m, sizes=sizes, cache=cache))
        except MemoryLimitError:
            continue
    return out


def _together(f, sizes, memories) -> dict:
    r = nc.derive(f, memories, sizes=sizes, cache=KernelCache())
    for g in r.regimes:   # the H of each memory read again off its algorithm by the cost functor
        assert nc.cost(g.diagram, sizes=g.optimum.sizes).H[1] == g.H, (g.memory, g.variant)
    return {g.memory: _answer(g) for g in r.regimes}


def _check(case):
    f, sizes, memories = CASES[case]()
    alone = _alone(f, sizes, memories)
    assert len(alone) >= 3, (case, sorted(alone))   # the function fits at several memories of the list
    together = _together(f, sizes, sorted(alone))
    assert together == alone
    return alone


@pytest.mark.parametrize("case", sorted(c for c in CASES if c not in SEGMENTED))
def test_many_memories_answer_as_each_alone(case):
    alone = _check(case)
    assert len({a[1] for a in alone.values()}) > 1, case   # the memories choose differently: a shared answer shows


@pytest.fixture
def small_segments(monkeypatch):
    """Small functions searched segment by segment, as a model's are (segments solved once for the whole list)."""
    monkeypatch.setattr(segments, "SEGMENT_AT", 4)
    monkeypatch.setattr(segments, "MIN_SEGMENT", 2)


@pytest.mark.parametrize("case", [f"random_program({s})" for s in SEAMED])
def test_segment_by_segment_many_memories_answer_as_each_alone(small_segments, case):
    f, _, _ = CASES[case]()
    assert len(segments.cut(OpGraph(nc.engine.to_netlist(f)))[0]) > 1     # searched segment by segment
    _check(case)


@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="a transformer block at three memories: NAPKIN_SLOW=1")
def test_a_block_many_memories_answer_as_each_alone():
    f, _, _ = CASES["transformer_block"]()
    assert len(segments.cut(OpGraph(nc.engine.to_netlist(f)))[0]) > 1
    _check("transformer_block")


def test_a_curve_is_searched_once_for_all_memories(monkeypatch):
    """Counted: over a list of memories each grouped curve's integer search runs once (``Curve._values``, its
    prepared search or ``optimum_values``, over the list), whatever the number of memories — over the memories its
    least memory admits (``Curve.least``: below it no tiling fits and nothing is costed)."""
    calls, passes = [], []
    values, at_all = curves.Curve._values, curves.Curve.at_all   # (_values: every integer search of a curve, sel-35)

    def counting_values(self, sizes, skey, memories, *args, **kwargs):
        calls.append(len(memories))
        return values(self, sizes, skey, memories, *args, **kwargs)

    def counting_at_all(self, sizes, memories, *args, **kwargs):
        if self.grouped and (id(self), tuple(memories)) not in seen:
            seen.add((id(self), tuple(memories)))
            admitted = sum(self.least(sizes) <= m for m in memories)
            if admitted:
                passes.append(admitted)
        return at_all(self, sizes, memories, *args, **kwargs)
    seen: set = set()
    monkeypatch.setattr(curves.Curve, "_values", counting_values)
    monkeypatch.setattr(curves.Curve, "at_all", counting_at_all)
    f, sizes, _ = _library("swiglu_mlp")
    nc.derive(f, MEMORIES, sizes=sizes, cache=KernelCache())
    # one search per curve, not one per memory, each over every memory of the list the curve's least memory admits
    assert passes and calls == passes
    assert any(n == len(MEMORIES) for n in calls)     # and some curve over the whole list
