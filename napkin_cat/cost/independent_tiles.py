"""Independent tiles: a search over tiles that no term of ``H`` and no column share splits into one per group.

The kernels of an algorithm separated by global memory each have their own tiles, their own columns, their own
transfers: ``H* = Σ_k H*_k`` with every column of group ``k`` within memory, so the candidates of an integer search
(:mod:`~napkin_cat.cost.integer_search`) are the sum, not the product, of the groups' grids.  Polynomials are
``(coeffs, exponents)`` over the tiles ``0 … n-1``.

>>> H = ((1, 1, 1), ((-1, 0, 0), (0, -1, 0), (0, 0, -1)))       # 1/g₀ + 1/g₁ + 1/g₂
>>> [g for g, _, _ in independent_parts(H, [((1,), ((1, 1, 0),)), ((1,), ((0, 0, 1),))], 3)]
[(0, 1), (2,)]
"""
from __future__ import annotations

from fractions import Fraction


def independent(H, columns, n: int) -> list:
    """The tiles ``0 … n-1`` in independent groups: two tiles are in one group when a term of ``H`` or a column
    involves both (a column is one constraint on all its tiles; ``H`` is a sum over its terms).

    >>> H = ((1, 1, 1), ((-1, 0, 0), (0, -1, 0), (0, 0, -1)))       # 1/g₀ + 1/g₁ + 1/g₂
    >>> independent(H, [((1,), ((1, 1, 0),)), ((1,), ((0, 0, 1),))], 3)   # g₀g₁ ≤ M, g₂ ≤ M
    [(0, 1), (2,)]
    """
    parent = list(range(n))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(tiles):
        for t in tiles[1:]:
            parent[root(t)] = root(tiles[0])
    for e in H[1]:
        join([i for i, k in enumerate(e) if k])
    for col in columns:
        join(sorted({i for e in col[1] for i, k in enumerate(e) if k}))
    groups: dict = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    return sorted(tuple(g) for g in groups.values())


def restricted(poly, group, first: bool):
    """The terms of ``poly`` over the tiles of ``group`` (exponents restricted to them); a term with no tile goes
    with the ``first`` group."""
    coeffs, exps = [], []
    for alpha, e in zip(*poly):
        tiles = [i for i, k in enumerate(e) if k]
        if (tiles and set(tiles) <= set(group)) or (not tiles and first):
            coeffs.append(alpha)
            exps.append(tuple(e[i] for i in group))
    return tuple(coeffs), tuple(exps)


def independent_parts(H, columns, n: int):
    """Per independent group: ``(tiles, H over them, their columns)``; None when the tiles are one group."""
    groups = independent(H, columns, n)
    if len(groups) < 2:
        return None
    out = []
    for k, g in enumerate(groups):
        cols = [c for c in (restricted(col, g, k == 0) for col in columns) if c[0]]
        out.append((g, restricted(H, g, k == 0), cols))
    return out


def combined(parts, found: list, n: int):
    """The groups' optima ``(H*_k, tiles_k)`` as one: the sum, the tiles in place (None if a group has none)."""
    if any(f is None for f in found):
        return None
    combo = [0] * n
    for (g, _, _), (_, tiles) in zip(parts, found):
        for i, t in zip(g, tiles):
            combo[i] = t
    return sum((f[0] for f in found), Fraction(0)), tuple(combo)
