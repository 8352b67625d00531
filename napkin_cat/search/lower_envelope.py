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



def folded(fs, ts, us, grid, memo=None) -> list:
    """:func:`winner` at each memory of ``grid`` (``us`` given), the candidates folded in in order: per memory the
    best that holds there and the best that fits, each ``(value, index)``, the later replacing the earlier only
    where cheaper beyond rounding, as :func:`winner` compares (the best that fits is read only while none holds: a
    memory where one holds keeps one, and :func:`winner` reads no other there).  ``memo`` keeps the folds so far
    under the grid's first memory; a call with more candidates on the same grid folds in only the new ones (the
    same answers: a fold is its prefix's fold continued).

    >>> fs, ts, us, memo = [lambda m: 10 / m, lambda m: 5 / m], [1, 4], [16, 64], {}
    >>> folded(fs[:1], ts[:1], us[:1], [2, 8, 32], memo), folded(fs, ts, us, [2, 8, 32], memo)
    ([0, 0, 0], [0, 1, 1])
    >>> [winner([0, 1], fs, ts, m, us) for m in (2, 8, 32)]
    [0, 1, 1]
    """
    kept = None if memo is None else memo.get(grid[0])
    n, held, fits = kept if kept is not None and len(kept[1]) == len(grid) else (0, [None] * len(grid),
                                                                                 [None] * len(grid))
    new = range(n, len(fs))
    for k, m in enumerate(grid):
        h, a = held[k], fits[k]
        for i in new:
            if ts[i] <= m and (h is None or m <= us[i]):   # (once one holds, one always holds: no fit read)
                v = fs[i](m)
                if h is None and (a is None or v < a[0] * (1 - 1e-12)):
                    a = (v, i)
                if m <= us[i] and (h is None or v < h[0] * (1 - 1e-12)):
                    h = (v, i)
        held[k], fits[k] = h, a
    if memo is not None:
        memo.clear()
        memo[grid[0]] = (len(fs), held, fits)
    return [h[1] if h is not None else a[1] if a is not None else None for h, a in zip(held, fits)]


def lower_envelope(cands, M, ref, memo=None):
    """``[(candidate index, lower, upper)]``: the cheapest candidate per interval of ``M`` (module docstring).

    ``memo`` (a dict the caller keeps between calls on one list of candidates that only grows): each grid memory's
    winner so far, so that a call after candidates were appended folds only the new ones in (:func:`folded`)."""
    fs = [c.at_ref for c in cands]
    ts = [c.start.at for c in cands]
    us = [c.until_at for c in cands]
    start = min(ts)
    grid = [start * (2 ** 44 / start) ** (k / 4000) for k in range(4001)] if start < 2 ** 44 else [start]
    seq = []
    for m, w in zip(grid, folded(fs, ts, us, grid, memo)):
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
