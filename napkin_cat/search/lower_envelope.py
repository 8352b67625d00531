"""The lower envelope of a symbolic derive's candidates in ``M``: on a geometric grid of memories from the least
start to 2⁴⁴ (4,001 points) the cheapest candidate that fits and whose form still holds wins; between two winners
the piece ends where the first stops holding, where the next starts, or where the two forms cross (a closed root of
``H₁(M) = H₂(M)`` where sympy finds one, else the crossing at the reference sizes, noted).

``pieces = [(candidate index, lower, upper, note)]`` with ``lower``/``upper`` breakpoints in ``M``: the answer's
``Piecewise`` (:mod:`napkin_cat.search.envelope`).

>>> winner([0, 1], [lambda m: 10 / m, lambda m: 5 / m], [1, 4], 2)    # only the first fits at M = 2
0
>>> winner([0, 1], [lambda m: 10 / m, lambda m: 5 / m], [1, 4], 8)    # both fit: the cheaper
1
>>> guarded(lambda m: 1 / (m - 3))(3)
inf
"""
from __future__ import annotations

import math

import sympy

from napkin_cat.search.crossings import crossing, crossing_root


def winner(cands, fs, ts, m, us=None):
    """The cheapest candidate that fits at ``m`` (and whose form holds there, ``us``: where each stops holding)."""
    if us is not None:
        held = winner(cands, fs, [t if m <= u else math.inf for t, u in zip(ts, us)], m)
        if held is not None:
            return held
    best = None
    for i, (f, t) in enumerate(zip(fs, ts)):
        if t <= m:
            v = f(m)
            if best is None or v < best[0] * (1 - 1e-12):
                best = (v, i)
    return None if best is None else best[1]



def guarded(f):
    """``f`` where it evaluates to a count, else ``inf`` (a form shifted by what it holds, :mod:`.held_alike`, at or
    below that memory: its tiles have nothing left, no algorithm)."""
    def at(m):
        try:
            v = f(m)
        except (ValueError, ZeroDivisionError):
            return math.inf
        return v if v >= 0 else math.inf
    return at



def lower_envelope(cands, M, ref):
    """``[(candidate index, lower, upper)]``: the cheapest candidate per interval of ``M`` (module docstring)."""
    fs = [c.at_ref for c in cands]
    ts = [c.start.at for c in cands]
    us = [c.until_at for c in cands]
    start = min(ts)
    grid = [start * (2 ** 44 / start) ** (k / 4000) for k in range(4001)] if start < 2 ** 44 else [start]
    seq = []
    for m in grid:
        w = winner(cands, fs, ts, m, us)
        if w is not None and (not seq or seq[-1][0] != w):
            seq.append((w, m))
    pieces, lower = [], cands[seq[0][0]].smallest
    for j, (w, m) in enumerate(seq):
        if j + 1 == len(seq):
            pieces.append((w, lower, sympy.oo, None))
            break
        nxt, m_next = seq[j + 1]
        prev_m = grid[grid.index(m_next) - 1]
        note = None
        if prev_m < us[w] <= m_next:
            upper = cands[w].until
        elif ts[nxt] > prev_m and fs[nxt](ts[nxt]) <= fs[w](ts[nxt]):
            upper = cands[nxt].smallest
        else:
            target = crossing(fs[w], fs[nxt], prev_m, m_next)
            upper = crossing_root(cands[w].H, cands[nxt].H, M, ref, target)
            if upper is None:
                upper, note = sympy.Float(target, 6), "breakpoint found numerically at the reference sizes"
        pieces.append((w, lower, upper, note))
        lower = upper
    return pieces
