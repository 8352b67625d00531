"""The tiling program of a cost: ``min_g H(g)  s.t.  C_j(g) ≤ M`` for every column j (paper §4.1, App. A.2).

The tiles are those of **every** group partition of the algorithm (nested Grids over several
axes, several partitions), in order of appearance; stream sizes are fixed (the paper's s = 1).
``H`` (transfers) and every column ``C_j`` (live values) are *posynomials* in the tiles: sums of
monomials ``α g^e`` with positive coefficients. In log coordinates ``u = log g`` a posynomial is
a log-sum-exp of affine maps, hence convex: the program is a geometric program, its KKT points
are its global minima (the solvers in :mod:`.lagrange`, :mod:`.geometric`, :mod:`.integer_search` rely on it).

>>> import napkin_cat as nc
>>> att = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
>>> p = program(nc.cost(att), level=1)
>>> p.tiles, p.H
((g_q,), 2*d*q + 2*d*q*x/g_q)
>>> p.fixed
((s_x, 1),)
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import sympy

from napkin_cat.cost.exact_arithmetic import monomials_at
from napkin_cat.cost.polynomial import sympified
from napkin_cat.errors import NapkinError
from napkin_cat.cost.expanded import expand


@dataclass(frozen=True)
class Monomials:
    """A posynomial ``Σ_k α_k Π_i g_i^E[k,i]`` over fixed tiles: coefficients (sympy) and exponents."""

    coeffs: tuple
    exponents: tuple    # one tuple of ints per term

    def numeric(self, env: dict) -> tuple:
        """``(log α, E)`` as numpy arrays, every size substituted from ``env`` (a posynomial needs α > 0)."""
        alphas = [float(sympy.sympify(a).subs(env)) for a in self.coeffs]
        if any(not alpha > 0 for alpha in alphas):
            raise NapkinError(f"not a posynomial at {env}: coefficients {alphas} must be positive")
        return np.log(np.array(alphas)), np.array(self.exponents, dtype=float).reshape(len(alphas), -1)


def monomials(expr, tiles) -> Monomials:
    """``expr`` as a sum of monomials in ``tiles`` (integer exponents; coefficients free of tiles)."""
    coeffs, exps = {}, []
    for term in sympy.Add.make_args(expand(expr)):
        powers = term.as_powers_dict()
        e = tuple(powers.get(t, 0) for t in tiles)
        if any(not sympy.sympify(k).is_integer for k in e):
            raise NapkinError(f"{expr} is not a sum of monomials in the tiles {tiles}")
        e = tuple(int(k) for k in e)
        alpha = term / sympy.Mul(*[t ** k for t, k in zip(tiles, e)])
        if alpha.free_symbols & set(tiles):
            raise NapkinError(f"{expr} is not a sum of monomials in the tiles {tiles}")
        if e not in coeffs:
            exps.append(e)
        coeffs[e] = coeffs.get(e, 0) + alpha
    return Monomials(tuple(coeffs[e] for e in exps), tuple(exps))


def dominates(big, small) -> bool:
    """``small ≤ big`` for all positive sizes and tiles: every term of ``big − small`` is non-negative."""
    diff = expand(big - small)
    return all(t.is_nonnegative for t in sympy.Add.make_args(diff))


def binding(columns) -> tuple:
    """The columns no other column dominates: a dominated column never binds alone (equal ones: the first).

    >>> from napkin_cat import symbol
    >>> g, d = symbol("g_q"), symbol("d")
    >>> binding([d * g, 2 * d * g + d + 3 * g, 2 * d * g + 2 * d + 2 * g])
    (2*d*g_q + d + 3*g_q, 2*d*g_q + 2*d + 2*g_q)
    """
    out = []
    for j, col in enumerate(columns):
        if not any(k != j and dominates(other, col) and not (dominates(col, other) and k > j)
                   for k, other in enumerate(columns)):
            out.append(col)
    return tuple(out)


@dataclass(frozen=True)
class TilingProgram:
    """``min H  s.t.  columns ≤ M`` over ``tiles`` (each at most its axis size ``fulls[i]``).

    ``fixed``: stream sizes (and whatever the caller pinned), as ``((symbol, value), ...)``.
    """

    H: sympy.Expr
    columns: tuple
    tiles: tuple
    axes: tuple
    fulls: tuple
    fixed: tuple = ()
    held: tuple = ()   # the paper's memory model: per group, H_g with each streamed axis relabelled to its slice

    def reduced(self) -> tuple:
        """``(free, ones)``: the tiles to optimise over, and those the optimum may set to 1.

        A tile that ``H`` ignores costs memory and saves nothing: 1. A tile that ``H`` and every
        column see only through products with earlier tiles spans no new direction in log-tile
        space (the exponent vectors' rank); the optimum is then a continuum, and setting the
        later tile to 1 picks one of its points (GQA: ``g_q g_g`` is what counts; ``g_g = 1``).
        """
        seen = [t for t in self.tiles if self.H.has(t)]
        ones = [t for t in self.tiles if t not in seen]
        rows = []
        for expr in (self.H,) + self.columns:
            rows += list(monomials(expr, tuple(seen)).exponents)
        matrix = np.array(rows, dtype=float).reshape(len(rows), len(seen))
        free, rank = [], 0
        for i, t in enumerate(seen):
            cols = [seen.index(f) for f in free] + [i]
            r = np.linalg.matrix_rank(matrix[:, cols]) if len(rows) else 0
            if r > rank:
                free.append(t)
                rank = r
            else:
                ones.append(t)
        return tuple(free), tuple(ones)

    def restricted(self) -> tuple:
        """``(H, columns, free, ones)``: the program over the free tiles only, the others set to 1."""
        return _restricted(self)

    def smallest_memory(self, env: dict):
        """``max_j C_j`` with every tile 1: below it no tiling fits."""
        ones = {t: 1 for t in self.tiles}
        return max((sympy.sympify(col).subs(ones).subs(env) for col in self.columns), default=sympy.Integer(0))


def held(c, level: int) -> tuple:
    """The paper's memory model of each group partition (§2.3-2.4, App. A.2): what one group holds at once.

    A group moves ``H_g`` values (its inputs and outputs, streamed axes whole); it holds them with every
    streamed axis relabelled to its stream size ("we use the full axis size b for transfer costs ... the
    stream size s_b for memory").  For attention ``H_g = 2 g_q d + 2 x d`` gives ``2 g_q d + 2 s_x d``, the
    paper's ``M ≥ 2 g_q d + 2 s_x d``; for matmul ``g_a g_c + g_a s_b + s_b g_c``.  Temporaries inside a
    group (a score tile, a product before it is accumulated) are not in it: they are in the exact model's
    columns.  Empty when a streamed axis has a concrete size (its value cannot be told from other numbers).

    >>> import napkin_cat as nc
    >>> att = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
    >>> held(nc.cost(att), 1)
    (2*d*g_q + 2*d*s_x,)
    """
    return _held(_held_key(c, level))


def _held_key(c, level: int):
    """What :func:`held` reads of ``c``: ``(relabelling, what each group holds)`` as it is in the record, or None
    where the model is empty (a streamed axis with a concrete size, a group with nothing held at ``level``)."""
    relabel = {}
    for rec in c.streams:
        _, size, full = rec
        if getattr(rec, "level", 1) != level:
            continue
        if not isinstance(sympy.sympify(full), sympy.Symbol):
            return None
        relabel[sympy.sympify(full)] = sympy.sympify(size)
    out = []
    for grp in _groups_at(c, level):
        if level not in grp.H_g:
            return None
        out.append(grp.H_g[level])
    return tuple(relabel.items()), tuple(out)


def _held(key) -> tuple:
    """:func:`held` of its :func:`_held_key`."""
    if key is None:
        return ()
    relabel = dict(key[0])
    return tuple(expand(sympy.sympify(h).subs(relabel)) for h in key[1])


def program(c, level: int, streams=1) -> TilingProgram:
    """The tiling program of cost ``c`` at ``level``; ``streams``: one size for all, or ``{name: size}``.

    A stream held at ``level`` whose trips re-read data (the transfers fall as its size grows: an inner stream
    along another axis reads its inputs again on every trip, :mod:`napkin_cat.algorithms.inner_streams`) is a
    tile of the program, at most its axis, unless ``streams`` names it; every other stream is fixed.
    """
    tiles, axes, fulls, fixed = _frame(c, level, streams)
    key = (c.H[level], tuple(c.columns.get(level, ())), tiles, axes, fulls, fixed, _held_key(c, level))
    return _program(*key)     # (what each group holds expanded on a miss only: a program asked for again is read)


def unexpanded(c, level: int, streams=1) -> TilingProgram:
    """:func:`program` as the cost holds it: ``H`` and the columns neither expanded nor pooled, the streams in
    ``fixed`` only (not substituted), no paper memory model (``held``).  The same program (each expression equal
    to :func:`program`'s once ``fixed`` is substituted), built without symbolic work: what a search at concrete
    sizes reads (:func:`napkin_cat.cost.exact_arithmetic.monomials_at` expands it at the sizes).

    >>> import napkin_cat as nc
    >>> att = nc.cost(nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q"))
    >>> p, u = program(att, 1), unexpanded(att, 1)
    >>> u.tiles == p.tiles and u.fixed == p.fixed, sympy.expand(u.H.subs(dict(u.fixed)) - p.H)
    (True, 0)
    """
    tiles, axes, fulls, fixed = _frame(c, level, streams)
    return TilingProgram(sympified(c.H[level]), tuple(c.columns.get(level, ())), tiles, axes, fulls, fixed)


def _frame(c, level: int, streams) -> tuple:
    """``(tiles, axes, fulls, fixed)`` of the program of ``c`` at ``level`` (see :func:`program`)."""
    tiles, axes, fulls = [], [], []
    for grp in _groups_at(c, level):
        for axis, tile, full in zip(grp.axes, grp.tiles, grp.fulls or (None,) * len(grp.tiles)):
            if tile in tiles:
                continue
            tiles.append(tile)
            axes.append(axis)
            fulls.append(sympy.sympify(full) if full is not None else sympy.oo)
    for rec in tiled_streams(c, level, streams):
        tiles.append(rec[1])
        axes.append(rec[0])
        fulls.append(sympy.sympify(rec[2]))
    stream_sizes = {s: sympy.sympify(streams if not isinstance(streams, dict) else streams.get(str(s), 1))
                    for _, s, _ in c.streams if not isinstance(s, int) and s not in tiles}
    return tuple(tiles), tuple(axes), tuple(fulls), tuple(sorted(stream_sizes.items(), key=str))


def tiled_streams(c, level: int, streams=None) -> list:
    """The stream records of ``c`` that are tiles of its program at ``level`` (see :func:`program`)."""
    named = streams if isinstance(streams, dict) else {}
    out, seen = [], set()
    for rec in c.streams:
        s = rec[1]
        if isinstance(s, sympy.Symbol) and str(s) not in named and getattr(rec, "level", 1) == level \
                and s not in seen and rereads(c.H.get(level, 0), s):
            seen.add(s)
            out.append(rec)
    return out


@lru_cache(maxsize=4096)
def rereads(H, s) -> bool:
    """Whether the transfers ``H`` fall as the stream size ``s`` grows (a term with ``s`` in its denominator).

    A pure function of its two arguments, compared by value (the process's memo, bounded: a record's program is
    framed again each time it is asked for, :func:`program`).

    ``H`` is expanded over all its symbols in exact arithmetic (:func:`~.exact_arithmetic.monomials_at`), or by
    sympy where it is not a sum of monomials (a ceiling, a root).

    >>> from napkin_cat import symbol
    >>> x, s, d = symbol("x"), symbol("s_x"), symbol("d")
    >>> rereads(d * x * (1 + x / s), s), rereads(d * x * (1 + s / x), s), rereads(sympy.ceiling(x / s) * d, s)
    (True, False, False)
    """
    H = sympified(H)
    symbols = tuple(sorted(H.free_symbols, key=_name))     # (the order only pairs symbols with exponents)
    if s not in symbols:
        return False
    try:
        _, exponents = monomials_at(H, symbols, {})
    except NapkinError:
        return any(sympy.sympify(t).as_powers_dict().get(s, 0) < 0 for t in sympy.Add.make_args(expand(H)))
    i = symbols.index(s)
    return any(e[i] < 0 for e in exponents)


def _name(s) -> str:
    """``str(s)`` of a size symbol without sympy's printer (a Symbol prints as its name)."""
    return s.name if type(s) is sympy.Symbol else str(s)


def _groups_at(c, level: int) -> list:
    """The group partitions whose tiles level ``level`` holds: the Grids of its kernels (a single-level
    algorithm's groups serve every level, the paper's eq. levels)."""
    mine = [g for g in c.groups if getattr(g, "level", 1) == level]
    return mine or [g for g in c.groups if getattr(g, "level", 1) == 1]


@lru_cache(maxsize=512)
def _program(H, columns, tiles, axes, fulls, fixed, held_key) -> TilingProgram:
    kept = _held(held_key)
    subs = dict(fixed)
    cols = []
    for col in columns:
        col = expand(sympy.sympify(col).subs(subs))
        if col not in cols:
            cols.append(col)
    kept = tuple(expand(k.subs(subs)) for k in kept)
    return TilingProgram(expand(H.subs(subs)), tuple(cols), tiles, axes, fulls, fixed, kept)


@lru_cache(maxsize=512)
def _restricted(prog: TilingProgram) -> tuple:
    free, ones = prog.reduced()
    at_one = {t: sympy.Integer(1) for t in ones}
    columns = []
    for col in prog.columns:
        col = expand(col.subs(at_one))
        if col not in columns:
            columns.append(col)
    return expand(prog.H.subs(at_one)), tuple(columns), free, ones
