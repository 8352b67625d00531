"""How a memory column grows with its tiles: its terms by total degree, read off the expanded terms.

Scaling every tile by ``t`` turns a column polynomial in the tiles into a polynomial in ``t`` whose coefficient of
``t^k`` is the sum of the column's terms of total degree ``k`` in the tiles (:func:`growth`); the column that binds
for large tiles is the one whose coefficients are largest from the top (:func:`napkin_cat.cost.optimum.optimal`'s
dominant column).  The leading terms of a memory model are those of highest :func:`total_degree`.

>>> import napkin_cat as nc
>>> g, d = nc.symbol("g"), nc.symbol("d")
>>> growth(2 * d * g ** 2 + d, [g]), total_degree(2 * d * g ** 2)
([2*d*g**2, 0, d], 3)
"""
from __future__ import annotations

import sympy


def growth(col, tiles) -> list:
    """The coefficients of ``t`` in ``col`` with every tile scaled by ``t`` (``Poly(col(t·g), t).all_coeffs()``: the
    terms of each total degree in the tiles, highest first), read off ``col``'s expanded terms.

    >>> import napkin_cat as nc
    >>> g, h, d = nc.symbol("g"), nc.symbol("h"), nc.symbol("d")
    >>> growth(2 * g * h + d * g + 3 * d, [g, h])
    [2*g*h, d*g, 3*d]
    """
    tiles = set(tiles)
    by_degree = {}
    for term in sympy.Add.make_args(sympy.expand(col)):
        degree = 0
        for base, exp in term.as_powers_dict().items():
            if base in tiles and exp.is_Integer and exp >= 0:
                degree += int(exp)
            elif base in tiles or base.free_symbols & tiles:     # not a polynomial in the tiles: sympy's route
                t = sympy.Dummy("t", positive=True)
                poly = sympy.expand(col.subs({g: t * g for g in tiles}))
                return sympy.Poly(poly, t).all_coeffs() if poly.has(t) else [poly]
        by_degree.setdefault(degree, []).append(term)
    top = max(by_degree, default=0)
    return [sympy.Add(*by_degree.get(k, [])) for k in range(top, -1, -1)]


def total_degree(term) -> int:
    """``Σ_s degree(term, s)`` over its symbols; read off its powers where it is a monomial, else sympy's.

    >>> import napkin_cat as nc
    >>> total_degree(3 * nc.symbol("g") ** 2 * nc.symbol("d")), total_degree(nc.symbol("d") * (nc.symbol("g") + 1))
    (3, 2)
    """
    powers = term.as_powers_dict()
    if all((b.is_Symbol and e.is_Integer and e >= 0) or b.is_Number for b, e in powers.items()):
        return sum(int(e) for b, e in powers.items() if b.is_Symbol)
    return sum(sympy.degree(term, s) for s in term.free_symbols)
