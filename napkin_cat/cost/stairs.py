"""A block of candidate tilings as the exact integer search reads it at any memory: its **staircase**, the few
candidates that can be settled first at some memory, kept once, so that each further memory is a bisection.

The search (:func:`~napkin_cat.cost.integer_search.best_many`) reads a block of the grid (:func:`~.grid_scores.scored`:
each tiling's transfers ``s`` and peak ``p`` as floats, and whether it is within the caps) at a memory ``m`` as
follows: the tilings that fit, ``F(m) = {k within the caps : p_k ≤ m (1 + 10⁻¹²)}``, and of them those within
rounding of the least transfers, ``N(m) = {k ∈ F(m) : s_k ≤ (1 + 10⁻⁹) min_F s}``, settled exactly first.
With the candidates ordered by peak, ``F(m)`` is a prefix, so a tiling ``k`` is in some ``N(m)`` only where

    s_k ≤ max(μ_k, (1 + 10⁻⁹) μ_k),   μ_k = the least ``s`` before ``k`` in that order (∞ for the first)

(``min_F s ≤ μ_k`` as ``F(m)`` holds every tiling before ``k``; the ``max`` keeps a negative score, whose
tolerance lies below it).  Those tilings are the staircase: ``N(m)`` is the staircase's own within its prefix
``F(m)``, and ``min_F s`` the least of the staircase's prefix (the first least of a prefix is on the stair), so
a search at a memory reads the staircase alone, in the same floats, and settles the same tilings in the same order.
A block of 2^16 tilings has a staircase of a few dozen (ties of tiles the transfers do not see included).

>>> import numpy as np
>>> block = np.array([[1.0], [2.0], [4.0], [8.0]])
>>> peak, scores = np.array([1.0, 2.0, 4.0, 8.0]), np.array([8.0, 9.0, 2.0, 2.0])    # 2.0 ties at 4 and 8
>>> stair = Stair(block, peak, scores, np.ones(4, dtype=bool))
>>> stair.rows.tolist(), stair.fitting(3.0), stair.fitting(100.0)
([0, 2, 3], 1, 3)
>>> [row for row, _, _ in stair.near(3)[0]]        # at a memory that fits every tiling: the tie, settled in order
[2, 3]
"""
from __future__ import annotations

import bisect
from functools import lru_cache

import numpy as np

from napkin_cat.cost.grid_scores import KEPT_GRIDS, scored

#: candidates within rounding of the best that a search settles exactly (:mod:`.integer_search`'s ``NEAR``)
NEAR = 64
#: the longest prefix of a staircase :meth:`Stair.near` reads in Python lists (numpy's per-call cost exceeds a short
#: list's; a longer prefix is read in numpy)
SHORT = 256


class Stair:
    """The staircase of one block (module docstring): its tilings that can be settled first at some memory, ordered
    by peak (ties by row), with their rows in the block, tiles, peaks and transfers; the block's ``top`` and ``least``
    peaks within the caps (None where no tiling is); and what a search keeps of it between memories (pure functions
    of the block): ``known`` (a row's exact settling), ``first`` (the tilings settled first at each prefix),
    ``answers`` (the block's answer at a prefix where no settled tiling is near the memory) and ``every`` (its answer
    where every tiling fits clearly)."""

    __slots__ = ("rows", "tiles", "peaks", "scores", "least_score", "top", "least", "known", "first", "answers",
                 "every", "_lists")

    def __init__(self, block, peak, scores, capped):
        order = np.argsort(peak, kind="stable")
        order = order[capped[order]]
        s = scores[order]
        before = np.empty_like(s)
        if len(s):
            before[0] = np.inf
            before[1:] = np.minimum.accumulate(s)[:-1]
        on = order[s <= np.maximum(before, before * (1 + 1e-9))]
        self.rows = on
        self.tiles = block[on].astype(np.int64)
        self.peaks = peak[on].tolist()
        self.scores = scores[on]
        self.least_score = np.minimum.accumulate(self.scores)
        self.top = peak[capped].max() if capped.any() else None
        self.least = peak[capped].min() if capped.any() else None
        self.known, self.first, self.answers, self.every = {}, {}, {}, None
        self._lists = None    # (scores, least scores, rows, tiles) as Python lists, made on the first short prefix

    def fitting(self, within: float) -> int:
        """How many of the staircase's tilings have a peak of at most ``within`` (its prefix in ``F(m)``)."""
        return bisect.bisect_right(self.peaks, within)

    def near(self, count: int) -> tuple:
        """``([(row, tiles, peak)], the largest peak)`` of the tilings the search settles first where ``count`` of the
        staircase fit: within rounding of the least transfers among them, by row, and where more than :data:`NEAR`
        tie, the first :data:`NEAR` by transfers, peak, then tiles (first tile first), as the search over the whole
        block orders them.  Kept per ``count``."""
        found = self.first.get(count)
        if found is None:
            peaks = self.peaks
            at = self._short(count) if count <= SHORT else None
            if at is None:
                scores = self.scores[:count]
                least = self.least_score[count - 1]
                at = np.flatnonzero(scores <= max(least, least * (1 + 1e-9)))   # (as the staircase's)
                at = at[np.argsort(self.rows[at], kind="stable")]
            if len(at) > NEAR:
                at = np.asarray(at, dtype=np.intp)
                order = np.lexsort(tuple(self.tiles[at, ::-1].T) + (np.asarray(peaks)[at], self.scores[at]))
                at = at[order[:NEAR]]
            if isinstance(at, list):
                _, _, rows, tiles = self._lists
                rows = [(rows[i], tuple(tiles[i]), peaks[i]) for i in at]
            else:     # (numpy's rows read as Python ints at once, not one element at a time)
                rows = [(r, tuple(t), peaks[i]) for r, t, i in zip(self.rows[at].tolist(), self.tiles[at].tolist(),
                                                                    at.tolist())]
            found = self.first[count] = (rows, max(p for _, _, p in rows))
        return found

    def _short(self, count: int) -> list:
        """The positions :meth:`near` reads first at a prefix of at most :data:`SHORT` tilings, in Python floats (the
        same doubles and comparisons as numpy's, without its per-call cost on a few dozen): those within rounding of
        the prefix's least transfers, by row (rows are distinct: a stable sort's order)."""
        if self._lists is None:
            self._lists = tuple(a[:SHORT].tolist() for a in (self.scores, self.least_score, self.rows, self.tiles))
        scores, least, rows, _ = self._lists
        limit = max(least[count - 1], least[count - 1] * (1 + 1e-9))
        at = [i for i in range(count) if scores[i] <= limit]
        at.sort(key=rows.__getitem__)
        return at


@lru_cache(maxsize=KEPT_GRIDS)
def kept_stairs(H, columns, values, fulls, caps) -> tuple:
    """The :class:`Stair` of each block of the grid (:func:`~.grid_scores.scored`'s arguments), kept: a search asked
    again at other memories (a symbolic derive's probes between its grid memories) scores no candidate twice, and
    settles no tiling twice (:attr:`Stair.known`).

    Why this memo is the process's (issue 35): a staircase is a pure function of the key (the posynomials' exact
    coefficients and integer exponents, the legal values, the axis sizes of a ragged search, the caps: numbers compared
    by value), and so is all it keeps between searches (exact settlings, the tilings settled first at a prefix, the
    answers that read no memory but through the prefix); the memory is applied after.  Bounded: at most
    :data:`~.grid_scores.KEPT_GRIDS` grids, least recently used first out, and locked (``lru_cache``).  A staircase
    holds a few dozen tilings of its block's thousands, so a grid of any size is kept (the whole block is scored
    again only where the search must look past its staircase, :func:`~.integer_search.best_many`)."""
    return tuple(Stair(block, peak, scores, capped) for block, peak, scores, capped, _, _ in
                 scored(H, columns, values, fulls, caps))


__all__ = ["NEAR", "SHORT", "Stair", "kept_stairs"]
