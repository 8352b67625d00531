"""A plan's loops read at its sizes without sympy's ``subs``: ``cost.exact_arithmetic.rational_at`` (the exact walk
the search uses) decides which loops are ragged (``Plan.masked``) and ``plan.ir.trips_at`` which run no trip (liveness
skips their body), the answers ``subs`` gives (the GPU derive plans every candidate kernel: 292 of these per saved
backward, each milliseconds in sympy).

Checked against sympy's ``subs`` of each loop's extent, tile and trips, on plans with ragged tiles, tiles that divide,
and split streams with more parts than slices (loops that run no trip), and on expressions ``rational_at`` must
refuse (a symbol missing, an irrational value, a division by zero)."""
from __future__ import annotations

import random

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.cost.exact_arithmetic import rational_at
from napkin_cat.plan.ir import GridLoop, StreamLoop, trips_at, walk

L = nc.library

#: algorithm, the axes its tiles cut (tile name -> axis)
ALGORITHMS = [
    (lambda: nc.group(nc.stream(nc.kernel(L.attention()), "x", "s"), "q", "t"), {"s": "x", "t": "q"}),
    (lambda: nc.stream(nc.stream(nc.kernel(L.attention()), "x", "s", parts="P"), "d", "t"), {"s": "x", "t": "d"}),
    (lambda: nc.stream(nc.stream(nc.kernel(L.matmul()), "c", "t", sliced=True), "b", "s", parts="P"),
     {"t": "c", "s": "b"}),
]


def loops(p):
    return [s for s in walk(p.body) if isinstance(s, (GridLoop, StreamLoop))]


def by_subs(expr, sizes):
    """``expr.subs(sizes)``: the rational number it is there, or None (the second route)."""
    v = sympy.sympify(expr).subs(sizes)
    return (int(v) if v.is_Integer else sympy.Rational(v)) if v.is_Rational else None


def test_the_loops_read_exactly_as_subs_reads_them():
    rng = random.Random(35)
    seen = {"ragged": 0, "whole": 0, "no trip": 0}
    for k in range(9):
        make, tiles = ALGORITHMS[k % len(ALGORITHMS)]
        d = make()
        sizes = {a.name: rng.randint(1, 7) for arr in d.dom.inside for a in arr.axes}
        sizes.update({t: rng.randint(1, sizes[axis]) for t, axis in tiles.items()})
        if k % len(ALGORITHMS):     # a split stream: P parts, more than its slices at times
            sizes["P"] = rng.randint(1, 4)
        p = nc.plan(d, sizes)
        ragged = set()
        for loop in loops(p):
            for expr in (loop.full, loop.tile, loop.trips):
                assert rational_at(expr, p.sizes) == by_subs(expr, p.sizes)
            assert trips_at(loop, p.sizes) == by_subs(loop.trips, p.sizes)
            full, tile = sympy.sympify(loop.full).subs(p.sizes), sympy.sympify(loop.tile).subs(p.sizes)
            if not (full.is_Integer and tile.is_Integer and int(full) % int(tile) == 0):
                ragged.add(loop.index)
            seen["ragged" if loop.index in ragged else "whole"] += 1
            seen["no trip"] += by_subs(loop.trips, p.sizes) == 0
        assert p.masked == ragged
    assert all(seen.values()), seen      # each case met: ragged tiles, whole tiles, a loop with no trip


def test_what_is_no_rational_number_is_refused():
    q, g = nc.symbol("q"), nc.symbol("g_q")
    assert rational_at(q / g, {q: 10}) is None                 # g missing: subs leaves a symbol
    assert rational_at(sympy.sqrt(q), {q: 2}) is None          # irrational
    assert rational_at(q / g, {q: 3, g: 0}) is None            # 3/0: no number
    assert rational_at(sympy.ceiling(q / g) * g, {q: 10, g: 4}) == 12 == (sympy.ceiling(q / g) * g).subs({q: 10, g: 4})


def test_a_loop_that_runs_no_trip_is_not_sampled_as_the_run_does_not_run_it():
    """``logsumexp`` over ``d`` split in ``P`` parts inside a sliced stream: at ``P = 1`` the merge runs no trip
    (its trips a number, 0, read exactly); the plan's peak read off its text is the instrumented run's."""
    d = nc.stream(nc.stream(nc.kernel(nc.reduce("logsumexp", "d l -> l")), "l", "t", sliced=True), "d", "s", parts="P")
    for P in (1, 2):
        p = nc.plan(d, {"d": 4, "l": 4, "t": 2, "s": 2, "P": P})
        assert any(by_subs(loop.trips, p.sizes) == 0 for loop in loops(p)) == (P == 1)
        _, n = p.run(np.random.default_rng(P).normal(size=(4, 4)))
        assert p.peak == n.peak, (P, p.peak, n.peak)
