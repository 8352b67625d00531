"""The scores of a grid of candidate tilings, in blocks, in log coordinates: what the exact integer search
(:mod:`napkin_cat.cost.integer_search`) compares before it settles the few best in exact arithmetic.

A posynomial ``P(g) = Σ_k α_k Π_i g_i^{E_ki}`` over a block of tilings (rows of ``log g``) is
``exp(log g · Eᵀ) · α``: every candidate scored by two matrix products.  With a ragged last tile each trip factor
``n/g`` counts ``⌈n/g⌉`` trips (:func:`posynomial_scores_ragged`).

>>> import numpy as np
>>> from fractions import Fraction
>>> H = ((Fraction(1), Fraction(1)), ((-1, 0), (0, -1)))      # 1/g_a + 1/g_c
>>> [float(s) for s in posynomial_scores(H, np.log(np.array([[2.0, 4.0], [4.0, 4.0]])))]
[0.75, 0.5]
>>> [b.tolist() for b in grid_blocks([np.array([1.0, 2.0]), np.array([3.0])])]
[[[1.0, 3.0], [2.0, 3.0]]]
"""
from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

CHUNK = 1 << 16
#: A candidate grid of at most this many tilings keeps its scores between searches (:func:`kept_scores`) ...
KEPT_ROWS = 1 << 16
#: ... and at most this many such grids are kept.
KEPT_GRIDS = 2048


def posynomial_scores(poly, logs):
    coeffs, exps = poly
    alpha = np.array([float(a) for a in coeffs])
    E = np.array(exps, dtype=float).reshape(len(coeffs), logs.shape[1])
    return np.exp(exponents(logs, E.T)) @ alpha


#: rows of a block multiplied at once by :func:`exponents` (the last slice takes the rest: under twice this many, times
#: the tiles and terms, a product small enough that the BLAS runs it on one thread)
PRODUCT_ROWS = 2048


def exponents(logs, ET):
    """``logs @ ET`` (each tiling's log of each term), in slices of :data:`PRODUCT_ROWS` rows, the last one taking the
    rest.

    Why in slices: a product of tens of thousands of rows by a few tiles and terms is one the BLAS (OpenBLAS) splits
    over its threads, where starting and joining them costs ~50 times the product's own work (15.6 vs 0.2 ms of CPU for
    40,656 tilings of 5 tiles and 3 terms on this project's 2-core machine, OPENBLAS_NUM_THREADS unset); a slice is
    run on one thread.  Each element is its row's dot product, computed by the same kernel in one call as in slices
    so long as every slice is a matrix product (none of a single row, which numpy multiplies as a vector, rounding
    otherwise: hence the last slice takes the rest), at the same place in the kernel's panels (slices of a multiple of
    its rows): the same floats (``tests/cost/test_grid_exponents.py``; every product of the symbolic block, attention
    and MLP derives and a numeric block's with a ragged last tile, 2,488, equal to the unsliced one, with
    OPENBLAS_NUM_THREADS 1 and unset).

    >>> import numpy as np
    >>> logs, ET = np.log(np.arange(1.0, 20001.0)).reshape(10000, 2), np.array([[1.0, -1.0], [2.0, 0.0]])
    >>> np.array_equal(exponents(logs, ET), logs @ ET)
    True
    """
    n = len(logs)
    if n < 2 * PRODUCT_ROWS:
        return logs @ ET
    out = np.empty((n, ET.shape[1]))
    starts = list(range(0, n - PRODUCT_ROWS + 1, PRODUCT_ROWS))    # (the last slice: PRODUCT_ROWS and the rest)
    for i, j in zip(starts, starts[1:] + [n]):
        np.matmul(logs[i:j], ET, out=out[i:j])
    return out


def grid_blocks(lists):
    """The candidate grid in blocks of at most ``CHUNK`` rows (the leading tiles looped, the rest meshed)."""
    split = len(lists)
    while split > 0 and np.prod([len(x) for x in lists[split - 1:]]) <= CHUNK:
        split -= 1
    for head in itertools.product(*lists[:split]):
        mesh = np.meshgrid(*([np.array([h]) for h in head] + lists[split:]), indexing="ij")
        yield np.stack(mesh, axis=-1).reshape(-1, len(lists))


def posynomial_scores_ragged(poly, logs, logc):
    coeffs, exps = poly
    alpha = np.array([float(a) for a in coeffs])
    E = np.array(exps, dtype=float).reshape(len(coeffs), logs.shape[1])
    trips = (E == -1).astype(float)
    return np.exp(exponents(logs, (E + trips).T) + exponents(logc, trips.T)) @ alpha


def peaked_blocks(columns, values):
    """Per block of the grid of ``values`` (:func:`grid_blocks`): ``(tiles, their logs, the peak of the memory
    columns at each)``, the loop every scoring of the grid starts from."""
    lists = [np.array(sorted(v), dtype=float) for v in values]
    for block in grid_blocks(lists):
        logs = np.log(block)
        peak = np.zeros(len(block))
        for col in columns:
            peak = np.maximum(peak, posynomial_scores(col, logs))
        yield block, logs, peak


def scored(H, columns, values, fulls, caps):
    """Per block of the candidate grid (:func:`grid_blocks`): ``(tiles, peak, H, within the caps, the largest and the
    least peak within them)`` as floats, whatever the memory."""
    for block, logs, peak in peaked_blocks(columns, values):
        if fulls is None:
            scores = posynomial_scores(H, logs)
        else:
            n = np.array(fulls, dtype=float)
            scores = posynomial_scores_ragged(H, logs, np.log(np.ceil(n / block) / n))
        capped = np.ones(len(block), dtype=bool)
        trip_logs = logs if fulls is None else np.log(np.array(fulls, dtype=float) / np.ceil(np.array(fulls) / block))
        for cap in caps:
            capped &= posynomial_scores(cap, trip_logs) <= 1 + 1e-12
        top = peak[capped].max() if capped.any() else None
        least = peak[capped].min() if capped.any() else None
        yield block, peak, scores, capped, top, least


@lru_cache(maxsize=KEPT_GRIDS)
def kept_scores(H, columns, values, fulls, caps) -> tuple:
    """:func:`scored` of a grid of at most :data:`KEPT_ROWS` tilings, kept: what the search reads where it must look
    past a block's staircase (:mod:`.stairs`, which it reads first, and which is kept for a grid of any size), so a
    search asked again at other memories scores no candidate twice.

    Why this memo is the process's (issue 35): the scores are a pure function of the key, all numbers compared by
    value (the posynomials' exact coefficients and integer exponents, the legal values, the axis sizes of a ragged
    search, the caps); the memory is applied after.  Bounded: at most :data:`KEPT_GRIDS` grids of at most
    :data:`KEPT_ROWS` rows, least recently used first out, and locked (``lru_cache``); the arrays are read, never
    written.  The bound is by count, not bytes: a kept grid of ``r`` rows and ``k`` tiles holds about ``(k + 3)·8·r``
    bytes, so the worst case is gigabytes, while a symbolic transformer block keeps 554 grids and its peak resident
    memory grows by about 26 MiB (276 → 302)."""
    return tuple(scored(H, columns, values, fulls, caps))
