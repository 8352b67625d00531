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

from napkin_cat.search.crossings import at_reference, crossing, crossing_root


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


def handed(at: dict, fs, ts, us) -> dict:
    """``at`` (memory → the winner there, :func:`winner`) with the memories where a winner stops holding between two
    of its memories added, and just past them, wherever the winner just past is not the one at the next memory: a
    form that stops holding hands over to the cheapest just past its end (its own form one tile whole, or
    another), not to the cheapest a grid step on.  Repeated until no hand-over is missed (a winner added may stop
    holding before the next memory too).

    >>> fs = [lambda m: 100 / m, lambda m: 100 / m + 0.001, lambda m: 101 / m - 0.099]     # 2 crosses 1 at 10
    >>> ts, us = [1, 1, 1], [8, 64, 64]
    >>> sorted(handed({4: 0, 16: 2}, fs, ts, us).items())
    [(4, 0), (8, 0), (8.000000008, 1), (16, 2)]
    """
    every = range(len(fs))
    while True:
        points, added = sorted(at), {}
        for a, b in zip(points, points[1:]):
            w = at[a]
            if w is None or at[b] == w or not a < us[w] < b:
                continue
            past = us[w] * (1 + 1e-9)
            v = winner(every, fs, ts, past, us)
            if v is not None and v != at[b]:
                added[us[w]], added[past] = winner(every, fs, ts, us[w], us), v
        if not added:
            return at
        at.update(added)


def memories(start: float, anchor: float | None = None) -> list:
    """The geometric grid of 4,001 memories from ``anchor`` to 2⁴⁴ (``anchor``: ``start`` where not given or not
    below it), continued below ``anchor`` at the same ratio down to ``start``: a candidate found later that starts
    lower (:mod:`.probes`) adds memories below, and the memories above stay those of the first drawing.

    >>> memories(2.0 ** 44), len(memories(1.0)), memories(1.0)[-1] == 2 ** 44
    ([17592186044416.0], 4001, True)
    >>> g = memories(10.0, 12.0)
    >>> g[0], g[-4001:] == memories(12.0), len(g)
    (10.0, True, 4028)
    """
    anchor = start if anchor is None or anchor <= start else anchor
    if anchor >= 2 ** 44:
        return [start]
    ratio = (2 ** 44 / anchor) ** (1 / 4000)
    grid = [anchor * (2 ** 44 / anchor) ** (k / 4000) for k in range(4001)]
    below, m = [], anchor / ratio
    while m > start * (1 + 1e-12):
        below.append(m)
        m /= ratio
    return ([start] if start < anchor else []) + below[::-1] + grid


def lower_envelope(cands, M, ref, memo=None, anchor=None):
    """``[(candidate index, lower, upper)]``: the cheapest candidate per interval of ``M`` (module docstring).

    The winner is read on the geometric grid and, where a winner stops holding between two grid memories, there and
    just past it (:func:`handed`): a form that stops holding hands over to the one that is cheapest just past it
    (the algorithm one tile whole, or another), never to the one cheapest a grid step on (the renamed block at
    ``seq 12 dm 20 nh 4 dh 5 hid 44``: a form ending at ``M = 120``, 12,442.4, handed to one at 12,442.6 there,
    where its own clamped form goes on from 12,442.4: ``H`` rose).  Pieces empty at the reference sizes are left out.

    ``memo`` (a dict the caller keeps between calls on one list of candidates that only grows): each grid memory's
    winner so far, so that a call after candidates were appended folds only the new ones in (:func:`folded`).
    ``anchor``: where the grid starts (:func:`memories`; the least start of the first drawing's candidates)."""
    fs = [c.at_ref for c in cands]
    ts = [c.start.at for c in cands]
    us = [c.until_at for c in cands]
    grid = memories(min(ts), anchor)
    at = handed(dict(zip(grid, folded(fs, ts, us, grid, memo))), fs, ts, us)
    points = sorted(at)
    seq = []
    for k, m in enumerate(points):
        w = at[m]
        if w is not None and (not seq or seq[-1][0] != w):
            seq.append((w, m, k))
    pieces, lower = [], cands[seq[0][0]].smallest
    for j, (w, m, _) in enumerate(seq):
        if j + 1 == len(seq):
            pieces.append((w, lower, sympy.oo, None))
            break
        nxt, m_next, k_next = seq[j + 1]
        prev_m = points[k_next - 1]
        note = None
        if prev_m <= us[w] < m_next:
            upper = cands[w].until
        elif ts[nxt] > prev_m and fs[nxt](ts[nxt]) <= fs[w](ts[nxt]):
            upper = cands[nxt].smallest
        else:
            target = crossing(fs[w], fs[nxt], prev_m, m_next)
            upper = crossing_root(cands[w].H, cands[nxt].H, M, ref, target)
            if upper is None:
                upper, note = sympy.Float(target, 6), "breakpoint found numerically at the reference sizes"
        if not empty(lower, upper, ref):    # (an event memory where one form hands straight on to the next)
            pieces.append((w, lower, upper, note))
            lower = upper
    return pieces


def empty(lower, upper, ref) -> bool:
    """Whether the interval ``[lower, upper)`` is empty at the reference sizes ``ref``.

    >>> n = sympy.Symbol("n")
    >>> empty(n ** 2, 4 * n, {n: 4}), empty(n, 4 * n, {n: 4})
    (True, False)
    """
    if lower == upper:
        return True
    return at_reference(upper, ref) <= at_reference(lower, ref)
