"""The trips of a masked stream that run, counted symbolically (the tiles a mask skips are not paid for).

A stream along ``b`` in slices of ``s`` runs ``b/s`` trips per enclosing tile.  When a mask skips the
trips on which it is never true (:mod:`napkin_cat.algorithms.skipping`), the trips that run over a tile
of the enclosing Grids are the slices that meet the *active positions* of ``b``: the positions ``X`` at
which the mask may be true somewhere in the tile.  For a mask affine in the positions they are an
interval ``[L, U]``, read off the mask by interval arithmetic with a tile of one position ``X``; so

    trips(tile) = (U − L + 1) / s            summed over the tiles, averaged: the trips per tile

The count is affine in each tile index, so its mean over the tiles is a closed form (Faulhaber's power sums,
:func:`mean_over`), exact for symbols and numbers alike (sympy's ``summation`` only for a count not polynomial in it).

This is the symbolic cost's reading of ``⌈·⌉`` (it reads ``⌈b/s⌉`` as ``b/s``): exact when the slices
line up with the interval's ends (causal attention with ``s_x`` dividing ``g_q``: at each q-block ``i``
the ``(i + 1)·g_q/s_x`` slices at or below the diagonal); the clamps of ``[L, U]`` to the axis are left out
where sympy cannot decide them (the band is taken to lie inside the axis: a window's first and last tiles
are over-counted, a band that starts past the axis on some tiles under-counted).  A mask that is not a
conjunction of bounds on ``X`` (a union, a difference, or bounds that cannot be ordered) is counted as not
skipping: every trip.  So the count is an **estimate**, and the cost record says so
(:attr:`~napkin_cat.cost.record.Cost.estimated`): at concrete sizes ``nc.cost(d, sizes=...)`` counts every
tile and slice as a run does, and the integer search (``nc.optimal`` and ``nc.derive`` with ``sizes=``) ranks
each candidate tiling by that count (:func:`napkin_cat.cost.optimum.counted`), so what they report is what the
algorithm moves at its tiles.  Symbolic mode reports the estimate and says so in its notes.

Of the trips that run, those on which the mask is always true run without the maps that make only the mask (the
plan's full trips; :meth:`~napkin_cat.algorithms.skipping.Skip.whole`, as the cost at sizes counts them):
:func:`whole_trips` counts them alike, the slices whose first position ``X`` makes the mask always true on a slice
of ``s`` positions, ``⌊(U − start)/s⌋ − ⌈(L − start)/s⌉ + 1`` read on the slices' grid so that it is never more than
the slices that lie there (:func:`slices_within`); the mask's maps are charged on the trips that run less those.

Where the slices do not line up (``s ∤ g``, a band whose ends are off the grid, as a window's ``q ± w`` in slices that
do not divide ``w``) the count is below the trips a run makes: ``n`` active positions meet at least ``⌈n/s⌉`` slices
(on random causal tilings with ``x ≥ q``, ``s_x ∤ g_q``: 27 of 27 below the cost at sizes, every FLOP kind); where a
band passes an end of the axis that sympy cannot order (``x < q``, a window's first tiles) it is above.  So it is
neither bound in general: an estimate, and the cost record says so.

>>> import sympy
>>> from napkin_cat.syntax.axis import symbol
>>> i, g, s, q = sympy.Symbol("i_q", integer=True, nonnegative=True), symbol("g_q"), symbol("s_x"), symbol("q")
>>> X = sympy.Symbol("X")
>>> per_tile(sympy.Le(X, i * g + g - 1), X, s, (0, symbol("x")))      # causal: x ≤ the tile's last q
g_q*(i_q + 1)/s_x
>>> averaged(g * (i + 1) / s, [(i, q / g)])
(g_q + q)/(2*s_x)
"""
from __future__ import annotations

import functools

import sympy
from sympy.logic.boolalg import BooleanFalse, BooleanTrue, to_nnf
from napkin_cat.cost.seeded import factor

#: the position a tile of one index holds, for reading the active positions off a mask
POINT = sympy.Symbol("X_pos", integer=True)


def _bounds(cond, X):
    """``(lowers, uppers)`` on ``X`` from a conjunction of linear inequalities, or None if it is not one."""
    if isinstance(cond, BooleanTrue):
        return [], []
    parts = cond.args if isinstance(cond, sympy.And) else (cond,)
    lowers, uppers = [], []
    for rel in parts:
        if not isinstance(rel, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt)):
            return None
        expr = rel.lhs - rel.rhs if isinstance(rel, (sympy.Le, sympy.Lt)) else rel.rhs - rel.lhs
        if isinstance(rel, (sympy.Lt, sympy.Gt)):
            expr = expr + 1                  # on integer positions a < b is a ≤ b − 1
        expr = sympy.expand(expr)
        c = expr.coeff(X)
        rest = sympy.expand(expr - c * X)
        if c == 0:
            return None if not rest.free_symbols else None
        if rest.has(X) or not c.is_number:
            return None
        (uppers if c > 0 else lowers).append(sympy.expand(-rest / c))
    return lowers, uppers


def _sign(d) -> str | None:
    """``"zero"``, ``"positive"`` or ``"negative"`` if sympy can tell the sign of ``d``, else None: on ``d`` expanded
    (a difference of affine bounds: its terms' signs decide), then factored (a common factor's sign, ``g·(x − 1)``).
    Not simplified: on random affine masks' bounds and clamps (symbolic and at numbers, 463 signs), ``simplify``
    decided no sign that these two did not, at many times their time."""
    for form in (sympy.expand, factor):      # (factor: sympy's, its points seeded)
        e = form(d)
        if e.is_zero:
            return "zero"
        if e.is_positive:
            return "positive"
        if e.is_negative:
            return "negative"
    return None


def _tightest(bounds, clamp, pick):
    """The tightest of the mask's bounds (None if they cannot be ordered), then the axis ``clamp`` where sympy
    can tell it is tighter (else the band is taken to lie inside the axis)."""
    tighter, looser = ("negative", "positive") if pick == "min" else ("positive", "negative")
    best = None
    for b in bounds:
        if best is None:
            best = b
            continue
        sign = _sign(b - best)
        if sign == "zero":
            continue
        if sign == tighter:
            best = b
        elif sign != looser:
            return None
    if best is None:
        return clamp
    return clamp if _sign(clamp - best) == tighter else best


#: the most conditions (and counts) whose trips are kept: a search costs the same mask on many candidates
CACHED = 4096
#: the most trips a count that is no polynomial of its index is summed over term by term (a number of trips)
TERMS = 4096


@functools.lru_cache(maxsize=CACHED)
def per_tile(running, X, slice_size, axis_range):
    """The trips that run on one tile: ``(U − L + 1)/s`` for the active positions ``[L, U]`` of ``running``
    (a condition on the position ``X``), within ``axis_range = (start, extent)``; None if not a bound."""
    if isinstance(running, BooleanFalse):
        return sympy.Integer(0)
    found = _bounds(to_nnf(running), X)
    if found is None:
        return None
    lowers, uppers = found
    start, extent = axis_range
    lo = _tightest(lowers, sympy.sympify(start), "max")
    hi = _tightest(uppers, sympy.sympify(start + extent - 1), "min")
    if lo is None or hi is None:
        return None
    return factor(sympy.expand((hi - lo + 1) / slice_size))


def power_sum(k: int, n):
    """``Σ_{i=0}^{n−1} i^k`` in closed form (Faulhaber: ``(B_{k+1}(n) − B_{k+1}(0))/(k+1)``, Bernoulli polynomials):
    a polynomial in ``n``, exact for a symbol and for a number alike.

    >>> power_sum(1, sympy.Symbol("n")), power_sum(2, 10), sum(i ** 2 for i in range(10))
    (n**2/2 - n/2, 285, 285)
    """
    return sympy.expand((sympy.bernoulli(k + 1, n) - sympy.bernoulli(k + 1, 0)) / (k + 1))


def mean_over(count, index, trips):
    """The mean of ``count`` over ``index = 0, …, trips − 1``: where ``count`` is a polynomial in ``index`` (an affine
    mask's per-tile count is affine in it), ``Σ_k c_k·power_sum(k, trips)/trips`` from its coefficients, no
    summation to solve; else, at a number of trips (at most :data:`TERMS`), its terms summed; else sympy's
    ``summation``.

    >>> i, n = sympy.Symbol("i", integer=True, nonnegative=True), sympy.Symbol("n", positive=True)
    >>> mean_over(3 + 2 * i, i, n), mean_over(3 + 2 * i, i, 4), mean_over(sympy.floor(8 * i / 9), i, 3)
    (n + 2, 6, 1/3)
    """
    split = _periods(count, index, trips)
    if split is not None:
        return split
    try:
        poly = sympy.Poly(count, index)
    except sympy.PolynomialError:
        trips = sympy.sympify(trips)
        if trips.is_Integer and 0 < trips <= TERMS:    # at sizes: the terms themselves (sympy's summation of a
            return sympy.Add(*(count.subs(index, k) for k in range(int(trips)))) / trips   # floor solves: seconds)
        return sympy.summation(count, (index, 0, trips - 1)) / trips
    return sympy.expand(sum((c * power_sum(k, trips) for (k,), c in poly.terms()), sympy.Integer(0)) / trips)


def _periods(count, index, trips):
    """The mean of ``count`` over ``index < trips`` where ``count`` reads ``⌊α·index + β⌋`` (positions made of pieces,
    each an affine range: ``⌊·⌋`` counts the pieces before a tile) with ``0 ≤ β < α``, ``K = 1/α`` and
    ``trips/K`` an integer: ``index = K·m + j`` (``j < K``) makes the floor ``m`` (the tile lies in piece ``m``:
    its ``K`` tiles tile the piece exactly), the count a polynomial in ``m`` and ``j``, each averaged by
    :func:`mean_over`; where ``trips/K`` is a number but no integer, the last piece is shorter (a ragged chunk: its
    ``trips − ⌊trips/K⌋·K`` tiles have the floor ``⌊trips/K⌋``) and is averaged apart.  None where ``count`` reads no
    such floor, or ``K`` is a number but not a positive integer.
    Symbolic ``K`` (a piece over a tile) is taken to be an integer, as the symbolic cost takes a tile to divide its
    axis: the mean is exact where the tile divides the piece (at sizes the cost counts every tile).

    >>> i, g = sympy.Symbol("i", integer=True, nonnegative=True), sympy.Symbol("g", positive=True, integer=True)
    >>> count = i * g + g + 768 * sympy.floor((g * i + g - 1) / 128)      # 2 pieces of 128, the second 768 later
    >>> mean_over(count, i, 256 / g), sum(count.subs(g, 32).subs(i, k) for k in range(8)) / 8
    (g/2 + 512, 528)
    """
    floors = {f for f in count.atoms(sympy.floor) if f.has(index)}
    if len(floors) != 1:
        return None
    (f,) = floors
    u = sympy.expand(f.args[0])
    alpha = u.coeff(index)
    beta = sympy.expand(u - alpha * index)
    if beta.has(index) or alpha == 0:
        return None
    period, pieces = 1 / alpha, sympy.simplify(trips * alpha)
    if period.is_number and not (period.is_integer and period.is_positive):
        return None                                     # a tile across pieces: no affine range per tile
    if not pieces.is_positive or not factor(beta).is_nonnegative or _sign(alpha - beta) != "positive":
        return None
    m, j = sympy.Dummy("m", integer=True, nonnegative=True), sympy.Dummy("j", integer=True, nonnegative=True)
    inner = sympy.expand(count.xreplace({f: m}).subs(index, period * m + j))
    if pieces.is_integer:
        return mean_over(mean_over(inner, j, period), m, pieces)
    if not pieces.is_number:
        return None
    full = int(sympy.floor(pieces))             # a last piece shorter than the others (a ragged chunk): its tiles
    rest = sympy.simplify(trips - full * period)        # the rest, their floor ``full``
    last = mean_over(inner.subs(m, full), j, rest) * rest
    whole = mean_over(mean_over(inner, j, period), m, full) * full * period if full else 0
    return sympy.expand((whole + last) / trips)


def averaged(count, indices):
    """``count`` summed over each loop index ``(index, trips)`` it depends on, divided by those trips: the trips per
    tile (:func:`mean_over`, one index after the other), as one factored rational function."""
    return _averaged(count, tuple((index, trips) for index, trips in indices if count.has(index)))


@functools.lru_cache(maxsize=CACHED)
def _averaged(count, indices: tuple):
    for index, trips in indices:
        if count.has(index):
            count = mean_over(count, index, trips)
    return factor(count)


def running_trips(skip, axis: str, slice_size, full, tiles):
    """The trips per enclosing tile of a stream along ``axis`` whose ``skip`` says which are skipped.

    ``tiles``: the enclosing partitions, ``[(axis, start, extent, index, trips)]`` outermost first (a Grid's
    tile at ``start = base + index·tile``).  None when the mask cannot be counted (then every trip runs).
    """
    own = [t for t in tiles if t[0] == axis]
    axis_range = (own[-1][1], own[-1][2]) if own else (0, full)
    latest = {t[0]: t for t in tiles}

    def tile_of(a, size):
        if a == axis:
            return POINT, 1
        if a in latest:
            return latest[a][1], latest[a][2]
        return 0, size
    running = sympy.Not(skip.skipped(tile_of)) if not isinstance(skip.skipped(tile_of), bool) \
        else sympy.sympify(not skip.skipped(tile_of))
    count = per_tile(running, POINT, slice_size, axis_range)
    if count is None:
        return None
    return averaged(count, [(t[3], t[4]) for t in reversed(tiles)])


__all__ = ["POINT", "per_tile", "averaged", "running_trips", "slices_within", "whole_trips"]


def _on_grid(bound, start, slice_size, down: bool):
    """``⌊(bound − start)/s⌋`` (``down``) or ``⌈(bound − start)/s⌉``: the slices of ``s`` from ``start`` up to a bound,
    never more slices than lie there.  The bound's symbolic part (``i·g_q``, ``x − s_x``) is taken to lie on the
    slices' grid, as the symbolic cost takes a tile to divide what it tiles; its constant ``c`` (the ``+1`` of
    ``x ≤ q`` on a slice, a window's ``w + 1``) rounds, for a symbolic ``s``, to the bound of ``⌊c/s⌋`` from below
    (0 for ``c ≥ 0``, ``c`` for ``c < 0``) and of ``⌈c/s⌉`` from above (0 for ``c ≤ 0``, ``c`` for ``c > 0``): exact
    where ``|c| ≤ 1`` and ``s ≥ 2`` (causal), else fewer (a numeric window's or prefix's ``c``, not known to be a
    multiple of ``s``); at a number of ``s`` exactly.  None where ``c`` is no integer."""
    c, rest = sympy.expand(bound - start).as_coeff_Add()
    if not c.is_integer:
        return None
    s = sympy.sympify(slice_size)
    if s.is_number:
        return rest / s + (sympy.floor(c / s) if down else sympy.ceiling(c / s))
    if down:
        return rest / s + (0 if c >= 0 else c)
    return rest / s + (0 if c <= 0 else c)


@functools.lru_cache(maxsize=CACHED)
def slices_within(always, X, slice_size, axis_range):
    """The slices of ``s`` (from the axis' start, on its grid) lying where ``always`` holds, a condition on the first
    position ``X`` of a slice: ``⌊(U − start)/s⌋ − ⌈(L − start)/s⌉ + 1`` for its bounds ``[L, U]`` on ``X`` (within
    the axis: ``start ≤ X ≤ start + extent − s``), each read on the slices' grid by :func:`_on_grid` (never more
    slices than lie there).  0 where ``always`` is no conjunction of bounds on ``X`` (a union: prefix-LM's
    ``x < P ∨ x ≤ q``), or the count is negative (bounds that cross: a band narrower than a tile and a slice); a count
    whose sign sympy cannot tell (a window ``(2w − g_q)/s_x``) is kept, below the slices where it is negative.

    >>> from napkin_cat.syntax.axis import symbol
    >>> i, g, s = sympy.Symbol("i_q", integer=True, nonnegative=True), symbol("g_q"), symbol("s_x")
    >>> slices_within(sympy.Le(POINT + s - 1, i * g), POINT, s, (0, symbol("x")))   # causal: x ≤ the tile's first q
    g_q*i_q/s_x
    """
    if isinstance(always, BooleanFalse):
        return sympy.Integer(0)
    found = _bounds(to_nnf(always), X)
    if found is None:
        return sympy.Integer(0)
    lowers, uppers = found
    start, extent = axis_range
    lo = _tightest(lowers, sympy.sympify(start), "max")
    hi = _tightest(uppers, sympy.sympify(start + extent - slice_size), "min")
    if lo is None or hi is None:
        return sympy.Integer(0)
    up, down = _on_grid(hi, start, slice_size, True), _on_grid(lo, start, slice_size, False)
    if up is None or down is None:
        return sympy.Integer(0)
    count = factor(sympy.expand(up - down + 1))
    return sympy.Integer(0) if _sign(count) == "negative" else count     # bounds that cross: no slice


def whole_trips(whole, axis: str, slice_size, full, tiles):
    """The trips per enclosing tile of a stream along ``axis`` that its mask ``whole`` (a
    :class:`~napkin_cat.algorithms.skipping.Whole`, :meth:`~napkin_cat.algorithms.skipping.Skip.whole`: the trips run
    without the mask's maps, as the plan and the cost at sizes run them) allows on every pair: the slices on which
    interval arithmetic finds the mask always true (:func:`slices_within`), averaged over ``tiles`` as
    :func:`running_trips`.  0 for a mask from data (decided by its table at sizes only) or one that is no conjunction
    of bounds on the slice; never more than the trips that run whole where the symbolic parts lie on the slices' grid.
    """
    if whole is None or whole.data:
        return sympy.Integer(0)
    own = [t for t in tiles if t[0] == axis]
    axis_range = (own[-1][1], own[-1][2]) if own else (0, full)
    latest = {t[0]: t for t in tiles}

    def tile_of(a, size):
        if a == axis:
            return POINT, slice_size
        if a in latest:
            return latest[a][1], latest[a][2]
        return 0, size
    always = whole.always(tile_of)
    always = sympy.sympify(always) if isinstance(always, bool) else always
    count = slices_within(always, POINT, slice_size, axis_range)
    return averaged(count, [(t[3], t[4]) for t in reversed(tiles)])
