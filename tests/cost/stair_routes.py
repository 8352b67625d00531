"""The second routes of the exact integer search (tests/cost/test_stairs.py, test_product_classes.py): the search
that settles every tiling on its own, every block read whole (``whole_blocks``), the search with its memos cleared
(``fresh``), the least over every tiling by brute force (``brute``), and the memories to ask (``memories_of``)."""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from napkin_cat.cost import grid_scores, integer_search, stairs
from napkin_cat.cost.integer_search import best_many, exact_at
from napkin_cat.cost.stairs import NEAR

F = Fraction


def whole_blocks(H, C, values, memories, fulls=None, caps=()):
    """Each memory's answer, every block read whole (the search as it read each memory before sel-35): the tilings
    that fit in floats, those within rounding of the least transfers settled exactly (the caps, the peak where near
    the memory, the transfers; the first NEAR by float order where more tie), dropped where refused, until one fits."""
    key = (H, tuple(C), tuple(tuple(v) for v in values), fulls, tuple(caps))
    at_H, at_cols, at_caps = exact_at(H), [exact_at(c) for c in C], [exact_at(c) for c in caps]

    def trips(combo):
        return combo if fulls is None else tuple(F(n, -(-n // g)) for g, n in zip(combo, fulls))
    out = []
    for m in memories:
        fl, best = float(m), None
        for block, peak, scores, capped, top, least in grid_scores.scored(*key):
            fits = (peak <= fl * (1 + 1e-12)) & capped
            while fits.any():
                near = np.flatnonzero(fits & (scores <= scores[fits].min() * (1 + 1e-9)))
                if len(near) > NEAR:
                    near = near[np.lexsort(tuple(block[near, ::-1].T) + (peak[near], scores[near]))[:NEAR]]
                for k in near.tolist():
                    combo = tuple(int(g) for g in block[k])
                    p = float(peak[k])
                    if p > fl * (1 - 1e-9):
                        p = max(a(combo) for a in at_cols)
                    if any(c(trips(combo)) > 1 for c in at_caps) or p > m:
                        fits[k] = False
                        continue
                    got = (at_H(trips(combo)), p, combo[::-1])
                    best = got if best is None or got < best else best
                if fits[near].any():
                    break
        out.append(None if best is None else (best[0], best[2][::-1]))
    return out


def fresh(*args, **kw):
    integer_search.searched.cache_clear()
    stairs.kept_stairs.cache_clear()
    grid_scores.kept_scores.cache_clear()
    return best_many(*args, **kw)


def brute(H, C, values, memory, fulls=None, caps=()):
    def at(poly, tiles):
        return sum((F(a) * np.prod([F(t) ** k for t, k in zip(tiles, e)]) for a, e in zip(*poly)), F(0))
    best = None
    for combo in itertools.product(*values):
        read = combo if fulls is None else tuple(F(n, -(-n // g)) for g, n in zip(combo, fulls))
        if any(at(col, combo) > memory for col in C) or any(at(cap, read) > 1 for cap in caps):
            continue
        v = at(H, read)
        best = v if best is None or v < best else best
    return best


def memories_of(H, C, values, kw):
    """Every memory where some tiling's peak sits (the band: settled exactly), one below and one above, and a few
    between."""
    peaks = set()
    for combo in itertools.product(*values):
        p = max(sum(F(a) * np.prod([F(t) ** k for t, k in zip(combo, e)]) for a, e in zip(*col)) for col in C)
        peaks.add(p)
    ms = set()
    for p in sorted(peaks)[:: max(1, len(peaks) // 40)] + sorted(peaks)[-3:]:
        n = int(p)
        ms.update((max(1, n - 1), max(1, n), n + 1))
    return sorted(ms)
