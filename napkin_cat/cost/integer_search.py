"""The exact integer optimum: every tile a legal value (a divisor of its axis), every column within memory.

``H*(a, M) = min { H(g) : g_i ∈ V_i,  C_j(g) ≤ M for every column j }`` over the tiles of every
group, where ``V_i`` is the divisors of the tile's axis ``n_i`` unless the caller gives the legal
values (the hardware's divisor constraints, say). The candidates (the product of the lists) are
scored at once with numpy in
log coordinates (``P(g) = Σ α_k exp(E_k · log g)``); the few candidates within rounding of the
best are then re-scored in exact rational arithmetic, so the answer is exact, and ties go to the
least memory, then to the smallest later tiles.

>>> from fractions import Fraction
>>> H = ((Fraction(1), Fraction(1)), ((-1, 0), (0, -1)))      # 1/g_a + 1/g_c
>>> C = [((Fraction(1), Fraction(1), Fraction(1)), ((1, 1), (1, 0), (0, 1)))]   # g_a g_c + g_a + g_c
>>> best(H, C, [divisors(8), divisors(8)], 30)
(Fraction(1, 2), (4, 4))
"""
from __future__ import annotations

import itertools
from fractions import Fraction
from functools import lru_cache

import numpy as np

CHUNK = 1 << 16


@lru_cache(maxsize=4096)
def divisors(n: int) -> tuple:
    """The divisors of ``n`` in increasing order.

    >>> divisors(12)
    (1, 2, 3, 4, 6, 12)
    """
    small = [g for g in range(1, int(n ** 0.5) + 1) if n % g == 0]
    return tuple(sorted(set(small + [n // g for g in small])))


def _exact(poly, combo) -> Fraction:
    coeffs, exps = poly
    total = Fraction(0)
    for alpha, e in zip(coeffs, exps):
        term = Fraction(alpha)
        for g, k in zip(combo, e):
            term *= Fraction(g) ** k
        total += term
    return total


def _scores(poly, logs):
    coeffs, exps = poly
    alpha = np.array([float(a) for a in coeffs])
    E = np.array(exps, dtype=float).reshape(len(coeffs), logs.shape[1])
    return np.exp(logs @ E.T) @ alpha


def _blocks(lists):
    """The candidate grid in blocks of at most ``CHUNK`` rows (the leading tiles looped, the rest meshed)."""
    split = len(lists)
    while split > 0 and np.prod([len(x) for x in lists[split - 1:]]) <= CHUNK:
        split -= 1
    for head in itertools.product(*lists[:split]):
        mesh = np.meshgrid(*([np.array([h]) for h in head] + lists[split:]), indexing="ij")
        yield np.stack(mesh, axis=-1).reshape(-1, len(lists))


def best(H, columns, values, memory):
    """``(H*, tiles)`` exactly, or ``None`` if no tiling fits; polynomials as ``(coeffs, exponents)``.

    ``values``: per tile, its legal values; ``coeffs`` are exact numbers (``int``/``Fraction``);
    ``memory`` a number.
    """
    lists = [np.array(sorted(v), dtype=float) for v in values]
    limit = Fraction(memory)
    found = None
    for block in _blocks(lists):
        logs = np.log(block)
        fits = np.ones(len(block), dtype=bool)
        for col in columns:
            fits &= _scores(col, logs) <= float(limit) * (1 + 1e-12)
        scores = _scores(H, logs)
        while fits.any():
            # rounding can only blur the float ranking near its floor: settle those exactly
            near = np.flatnonzero(fits & (scores <= scores[fits].min() * (1 + 1e-9)))
            for k in near:
                combo = tuple(int(g) for g in block[k])
                peak = max((_exact(col, combo) for col in columns), default=Fraction(0))
                if peak > limit:
                    fits[k] = False
                    continue
                key = (_exact(H, combo), peak, combo[::-1])
                if found is None or key < found:
                    found = key
            if fits[near].any():
                break
    return None if found is None else (found[0], found[2][::-1])


def best_many(H, columns, values, memories) -> list:
    """:func:`best` for several memory sizes at once: the candidates are scored once.

    >>> from fractions import Fraction
    >>> H = ((Fraction(1), Fraction(1)), ((-1, 0), (0, -1)))
    >>> C = [((Fraction(1), Fraction(1), Fraction(1)), ((1, 1), (1, 0), (0, 1)))]
    >>> best_many(H, C, [divisors(8), divisors(8)], [2, 30, 100])
    [None, (Fraction(1, 2), (4, 4)), (Fraction(1, 4), (8, 8))]
    """
    lists = [np.array(sorted(v), dtype=float) for v in values]
    limits = [Fraction(m) for m in memories]
    found = [None] * len(limits)
    for block in _blocks(lists):
        logs = np.log(block)
        peak = np.zeros(len(block))
        for col in columns:
            peak = np.maximum(peak, _scores(col, logs))
        scores = _scores(H, logs)
        for j, limit in enumerate(limits):
            fits = peak <= float(limit) * (1 + 1e-12)
            while fits.any():
                near = np.flatnonzero(fits & (scores <= scores[fits].min() * (1 + 1e-9)))
                for k in near:
                    combo = tuple(int(g) for g in block[k])
                    exact_peak = max((_exact(col, combo) for col in columns), default=Fraction(0))
                    if peak[k] > float(limit) * (1 - 1e-9) and exact_peak > limit:   # only near the limit
                        fits[k] = False
                        continue
                    key = (_exact(H, combo), exact_peak, combo[::-1])
                    if found[j] is None or key < found[j]:
                        found[j] = key
                if fits[near].any():
                    break
    return [None if f is None else (f[0], f[2][::-1]) for f in found]
