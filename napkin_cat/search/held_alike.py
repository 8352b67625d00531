"""What a kernel holds whatever its tiles: the memory a symbolic form's free tiles do not get.

The paper's memory model keeps a column's leading terms, those of the column's highest total degree (tiles and sizes
counted alike, the degree ``D`` of ``M`` as sizes and memory grow together).  In a form whose tiles all grow with
``M`` a term without a tile is of lower degree (a row ``d`` beside ``2d·g_q``) and dropping it is what the mode
states.  Setting a tile whole (:func:`~napkin_cat.cost.optimum.clamped`) turns a leading term into one without a
tile of the same degree: the fused chain ``X·W₁·W₂`` with its row tile whole holds the whole intermediate ``a·c``
beside its ``c·g_e`` weight tile (column ``c·a + c·g_e + c + a``).  That term is no lower order, yet the large-M
form ``g_e = M/c`` left it out: its algorithm needs ``M + ca`` where the form says ``M`` (at the reference sizes the
all-whole form past it started at 1,400,832 where its algorithm needs 2,582,656).

**Law.** :func:`held_alike` is ``K``: of each column (free tiles, the others 1 as the form sets them), the terms with
no free tile whose total degree is the columns' highest ``D``; the largest at the reference sizes.  The form's
tiles are solved for what remains (:func:`shifted`: ``t(M − K)``, ``H(M − K)``), so every column, its leading terms
at most the form's and its tile-free terms of degree ``D`` at most ``K``, is within ``M`` up to its terms of lower
degree (stated by the mode, as for every form).  ``K = 0`` (nothing changes) where no column has such a term:
matmul, attention, a form with every tile free.  ``K`` is the largest over the columns, also where the column that
holds it is not the one that binds: sound, and looser there (the transformer block's shifted parent reaches its
axis only at 4,730,880, past the 3,760,128 its all-whole child needs; a form with no tile left to grow therefore
starts where its algorithm fits, :func:`~napkin_cat.search.envelope.start_whole`).

>>> import napkin_cat as nc
>>> from napkin_cat.cost.tiling import TilingProgram
>>> a, c, g, M = (nc.symbol(n) for n in ("a", "c", "g_e", "M"))
>>> p = TilingProgram(a * c / g, (c * a + c * g + c + a, a * g), (g,), ("e",), (nc.symbol("e"),))
>>> held_alike(p, {a: 1024, c: 1152})
a*c
>>> shifted(c * 5 / M, {g: M / c}, a * c, M)
(5*c/(M - a*c), {g_e: (M - a*c)/c})
"""
from __future__ import annotations

import sympy

from napkin_cat.cost.growth import total_degree
from napkin_cat.cost.expanded import expand


def held_alike(prog, ref: dict):
    """``K`` of the tiling program ``prog`` (module docstring): the tile-free terms of the columns' highest total
    degree, the column whose ``K`` is largest at the reference sizes ``ref`` (symbols → numbers); 0 if none."""
    _, columns, free, _ = prog.restricted()
    free = set(free)
    terms = [[t for t in sympy.Add.make_args(expand(col)) if not t.is_Number] for col in columns]
    degrees = [total_degree(t) for ts in terms for t in ts]
    if not degrees:
        return sympy.Integer(0)
    top = max(degrees)
    best, value = sympy.Integer(0), 0.0
    for ts in terms:
        k = sympy.Add(*[t for t in ts if not (t.free_symbols & free) and total_degree(t) == top])
        if k == 0:
            continue
        try:
            v = float(k.xreplace({s: sympy.sympify(n) for s, n in ref.items()}))
        except TypeError:
            continue
        if v > value:
            best, value = k, v
    return best


def shifted(H, tiles: dict, K, M):
    """``(H(M − K), tiles(M − K))``: a form whose tiles get the memory ``M − K``, ``K`` held whatever they are."""
    if K == 0:
        return H, tiles
    at = {M: M - K}
    return (sympy.sympify(H).xreplace(at),
            {k: (sympy.sympify(v).xreplace(at) if sympy.sympify(v).has(M) else v) for k, v in tiles.items()})


def leading_need(need, at: dict) -> float:
    """The terms of ``need`` (a memory in the sizes, or a ``Max`` of such) of its highest total degree, at the sizes
    ``at`` (symbols → numbers): what is no lower order in it (the need ``ce + ca + c + a`` of the all-whole chain:
    ``ce + ca``), the largest over a ``Max``'s arguments, each read as a number (sympy's ``Max`` of expressions
    compares them symbolically, seconds for a block's columns).

    >>> import napkin_cat as nc
    >>> a, c, e = (nc.symbol(n) for n in "ace")
    >>> leading_need(sympy.Max(c * e + c * a + c + a, a * e), {a: 2, c: 3, e: 5})
    21.0
    """
    need = sympy.sympify(need)
    if isinstance(need, sympy.Max):
        return max(leading_need(a, at) for a in need.args)
    terms = [t for t in sympy.Add.make_args(expand(need)) if not t.is_Number]
    if not terms:
        return float(need)
    top = max(total_degree(t) for t in terms)
    return float(sympy.Add(*[t for t in terms if total_degree(t) == top]).xreplace(at))
