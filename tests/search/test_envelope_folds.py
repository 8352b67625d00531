"""The symbolic envelope's winners per grid memory, folded in as candidates are added (probe-35).

The probes (:mod:`napkin_cat.search.probes`) add candidates and the envelope is drawn again over all of them on a
grid of 4,001 memories; :func:`~napkin_cat.search.lower_envelope.folded` keeps each memory's best so far, so a
drawing after candidates were appended evaluates only the new ones.  The second route is
:func:`~napkin_cat.search.lower_envelope.winner` over every candidate at each memory.
"""
from __future__ import annotations

import math

from napkin_cat.search.lower_envelope import folded, guarded, winner

GRID = [2 * (2 ** 30 / 2) ** (k / 400) for k in range(401)]


def candidates():
    """``(fs, ts, us)``: forms that tie (the first wins a tie), cross, start late and stop holding early."""
    fs = [lambda m: 1e6 / m, lambda m: 1e6 / m, lambda m: 4e3 / math.sqrt(m) + 5, lambda m: 2e5 / m + 90,
          lambda m: 3e3 / math.sqrt(m), guarded(lambda m: 1e5 / (m - 1e4)), lambda m: 40.0, lambda m: 40.0]
    ts = [2, 2, 16, 8, 4096, 2e4, 1e6, 1e6]
    us = [math.inf, math.inf, 1e5, math.inf, 1e7, math.inf, math.inf, math.inf]
    return fs, ts, us


def counting(fs, calls):
    def one(f):
        def at(m):
            calls.append(m)
            return f(m)
        return at
    return [one(f) for f in fs]


def test_folding_in_steps_gives_every_memorys_winner_and_evaluates_only_the_new():
    fs, ts, us = candidates()
    slow = [winner(list(range(len(fs))), fs, ts, m, us) for m in GRID]
    assert len(set(slow) - {None}) >= 4      # (several winners: the comparison says something)
    memo, calls = {}, []
    counted = counting(fs, calls)
    for n in (3, 5, len(fs)):
        got = folded(counted[:n], ts[:n], us[:n], GRID, memo)
        assert got == [winner(list(range(n)), fs[:n], ts[:n], m, us[:n]) for m in GRID]
    assert got == slow
    # three drawings folded in steps read no more forms than one drawing by winner() over every candidate
    once = []
    by_winner = counting(fs, once)
    assert [winner(list(range(len(fs))), by_winner, ts, m, us) for m in GRID] == slow
    assert 0 < len(calls) <= len(once)


def test_a_fold_on_another_grid_starts_again():
    fs, ts, us = candidates()
    memo = {}
    folded(fs[:4], ts[:4], us[:4], GRID, memo)
    other = GRID[100:]
    assert folded(fs, ts, us, other, memo) == [winner(list(range(len(fs))), fs, ts, m, us) for m in other]
