"""Exact evaluations of a posynomial of the tiles remembered across tilings that tie in it (the exact integer search's
settling, :mod:`napkin_cat.cost.integer_search`): tiles no term reads (:func:`by_seen`), and tiles every term reads
alike, through their product (:func:`by_products`).
"""
from __future__ import annotations

import math
from operator import itemgetter


def by_seen(poly, at):
    """``at`` (a function of the tiles that reads them through ``poly``'s terms) remembered by the tiles ``poly``
    sees (a non-zero exponent in some term): tilings that differ only in tiles it does not see have one value,
    found once (the transfers tie across such tiles, and the search settles each tiling of the tie exactly).

    >>> from fractions import Fraction
    >>> from napkin_cat.cost.integer_search import exact_at
    >>> poly = ((Fraction(3), Fraction(1)), ((-1, 0), (0, 0)))      # 3/g₀ + 1: g₁ unseen
    >>> calls = []
    >>> at = by_seen(poly, lambda combo: calls.append(combo) or exact_at(poly)(combo))
    >>> at((4, 1)), at((4, 8)), at((2, 8)), len(calls)
    (Fraction(7, 4), Fraction(7, 4), Fraction(5, 2), 2)
    """
    width = len(poly[1][0]) if poly[1] else 0
    seen = tuple(i for i in range(width) if any(e[i] for e in poly[1]))
    if len(seen) == width:
        return at
    done: dict = {}

    def value(combo):
        key = tuple(combo[i] for i in seen)
        found = done.get(key)
        if found is None:
            found = done[key] = at(combo)
        return found
    return value


def by_products(polys, at):
    """``at`` (a function of the tiles that reads them through the terms of ``polys`` alone, as
    :func:`~.integer_search.exact_at` does) remembered by the products of the tiles that every term of every poly
    reads alike.

    **Law.** Tiles ``i, j`` whose exponents are equal in every term (``e_ki = e_kj`` for all ``k``) enter each
    monomial through their product, ``g_i^e · g_j^e = (g_i g_j)^e``, and a tile no term reads (every exponent 0)
    enters none; so each poly, and ``at``, is a function of the products of each class of such tiles (the unread
    tiles left out): tilings with equal products are one value, found once.  (A symbolic block's fused kernels group
    ``d, m, h`` and ``e, n`` of one program alike: their ties in transfers and peak are thousands of tilings of few
    products.)  Not for a ragged count ``⌈n/g⌉``, which reads each tile apart (:func:`by_seen`).

    >>> from fractions import Fraction
    >>> from napkin_cat.cost.integer_search import exact_at
    >>> poly = ((Fraction(3), Fraction(1)), ((-1, -1, 0), (0, 0, 0)))      # 3/(g₀ g₁) + 1: g₂ unseen
    >>> calls = []
    >>> at = by_products([poly], lambda combo: calls.append(combo) or exact_at(poly)(combo))
    >>> at((4, 1, 1)), at((2, 2, 8)), at((1, 4, 3)), at((2, 8, 1)), len(calls)
    (Fraction(7, 4), Fraction(7, 4), Fraction(7, 4), Fraction(19, 16), 2)
    """
    exps = [e for poly in polys for e in poly[1]]
    width = len(exps[0]) if exps else 0
    classes: dict = {}
    for i in range(width):
        column = tuple(e[i] for e in exps)
        if any(column):
            classes.setdefault(column, []).append(i)
    if len(classes) == width:
        return at
    # each class's tiles read at once (a class of one: a slice, a tuple of one)
    getters = [itemgetter(*g) if len(g) > 1 else itemgetter(slice(g[0], g[0] + 1)) for g in classes.values()]
    prod, done = math.prod, {}

    def value(combo):
        key = tuple([prod(get(combo)) for get in getters])
        found = done.get(key)
        if found is None:
            found = done[key] = at(combo)
        return found
    return value


__all__ = ["by_products", "by_seen"]
