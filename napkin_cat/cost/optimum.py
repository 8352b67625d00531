"""Optimal transfers: ``H*(a, M) = min_g (Π a / Π g) H_g  s.t.  M_ℓ ≤ M`` (paper §4.1, App. A.2).

The program is over the tiles of every group partition (:mod:`.tiling`). Two answers, side by
side (errata D-12):

* the paper's **large-M form**: stream sizes set to 1, the paper's memory model (what each group
  holds: its per-group transfers with every streamed axis relabelled to its stream size,
  :func:`.tiling.held`) cut to its leading terms (highest total degree), solved by Lagrange
  multipliers; where the result is a sum of power terms ``Σ α_t M^-β_t`` they are ``.terms``;
* the **exact** optimum under the full memory model (every column of ``c.M``), ``.exact``: a
  closed form where the bounded elimination of :mod:`.lagrange` finds one (a ``Piecewise`` when
  the binding column changes, checked against every column and against the numeric optimum
  before it is returned), else implicit: its KKT system as a sympy set and a numeric function
  of the sizes (:mod:`.geometric`). With concrete ``sizes=`` and a number for ``memory``, the
  exact integer optimum over divisor tiles (:mod:`.integer_search`).

>>> import napkin_cat as nc
>>> mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
>>> o = optimal(nc.cost(mm), memory="M")
>>> o.H, o.sizes
(a*c + 2*a*b*c/sqrt(M), {g_a: sqrt(M), g_c: sqrt(M), s_b: 1})
>>> o.exact_sizes
{g_a: sqrt(M + 1) - 1, g_c: sqrt(M + 1) - 1}
"""
from __future__ import annotations

import copy
import dataclasses
from functools import lru_cache

import sympy

from napkin_cat.cost.at_sizes import counts_kept
from napkin_cat.cost.exact import exact_optimum
from napkin_cat.cost.growth import growth, total_degree
from napkin_cat.cost.lagrange import kept, kkt_points, tidy
from napkin_cat.cost.memory import LARGEST_MEMORY, memory_limit  # noqa: F401  (nc.optimal's memory, read here)
from napkin_cat.cost.optimum_record import Deferred, Optimum, is_monomial, power_terms  # noqa: F401  (the record, read here)
from napkin_cat.cost.sized_optimum import counted, integer_optimum, optima  # noqa: F401  (at sizes, read here)
from napkin_cat.cost.tiling import dominates, TilingProgram, program, tiled_streams
from napkin_cat.errors import LevelError, NapkinError
from napkin_cat.syntax.array import as_level
from napkin_cat.syntax.sizes import Sizes, as_sizes
from napkin_cat.cost.expanded import expand


@kept
def _leading(expr, tiles):
    """The terms of highest total degree among those that involve a tile symbol."""
    poly_terms = [t for t in sympy.Add.make_args(expand(expr)) if t.free_symbols & set(tiles)]
    if not poly_terms:
        return expand(expr)

    degrees = [total_degree(t) for t in poly_terms]
    top = max(degrees)
    return sympy.Add(*[t for t, k in zip(poly_terms, degrees) if k == top])


@kept
def dominant_column(columns, tiles):
    """The column that is largest as every tile grows (compare by leading, then next terms)."""
    if len(columns) == 1:
        return columns[0]
    best = None
    for col in columns:
        key = growth(col, tiles)
        if best is None:
            best = (col, key)
            continue
        a, b = key, best[1]
        if len(a) != len(b):
            if len(a) > len(b):
                best = (col, key)
            continue
        for x, y in zip(a, b):
            diff = expand(x - y)
            if diff.is_positive:
                best = (col, key)
                break
            if diff.is_negative or diff != 0:
                break
    return best[0]


@counts_kept()
def optimal(c, memory="M", level: int = 1, *, streams=1, sizes: dict | None = None,
            candidates: dict | None = None, exact: bool = True, whole=()) -> Optimum:
    """Optimal tile sizes and transfers at ``level`` under ``memory`` (a symbol name, an expression or a number).

    ``streams``: the stream sizes (default 1, the paper's choice: no extra transfers, least memory).
    ``sizes``: concrete axis sizes; with a number for ``memory`` this runs the exact integer search
    over the tiles of every group, each a divisor of its axis, or one of ``candidates[tile name]``
    (legal values, e.g. from the hardware's divisor constraints; each must divide its axis).  Its ``.sizes``
    is then a :class:`~napkin_cat.syntax.sizes.Sizes`: the sizes given, the tiles and the streams, so that
    ``nc.plan(d, o.sizes)`` plans the algorithm at them (a name the cost does not read is left out: the
    sizes of a whole algorithm can be given for the cost of one of its kernels).
    ``exact=False`` (symbolic memory): the large-M form only, without the exact optimum (``o.exact``
    is None), which is the slow part.  A cost whose every axis is a number (``nc.substitute``), at a number for
    ``memory``, is searched as with ``sizes={}`` (its tiles whole numbers 1 … their axes) unless ``exact=False``
    asks for the large-M form.
    ``whole``: tiles (symbols or names) set to their axis sizes, the program over the other tiles
    (:func:`clamped`): the large-M form past the memory where those tiles' own forms reach their axes.
    """
    level = as_level(level, least=1, what="the level of the optimum")
    if level not in c.H:
        raise LevelError(f"the algorithm moves nothing at level {level}; levels with transfers: {sorted(c.H)}")
    if not c.groups and not tiled_streams(c, level):
        raise NapkinError("the algorithm has no group partition to optimise: apply nc.group first")
    M = memory_limit(memory)
    if sizes is None and exact and getattr(sympy.sympify(M), "is_Integer", False) and cost_names(c) <= _tile_names(c):
        sizes = {}     # every axis a number, the memory one: the exact integer search (the relaxation's tile may
        #                exceed its axis, or be below 1, and its H fall below reading the inputs once)
    if sizes is not None:
        legal = cost_names(c)     # a kernel's cost is optimised with its algorithm's sizes: keep the kernel's
        sizes = Sizes({k: v for k, v in as_sizes(sizes).items() if k in legal})
        streams = _streams_with_sizes(c, streams, sizes, level)
    if whole and sizes is not None:
        raise NapkinError(f"whole={list(map(str, whole))} sets tiles to their axes in the symbolic large-M form; at "
                          f"concrete sizes= the integer search already tries every tile up to its axis")
    prog = clamped(program(c, level, streams), whole)
    if sizes is not None:
        legal = tuple(sorted((str(k), tuple(sorted(set(v)))) for k, v in (candidates or {}).items()))
        o = integer_optimum(prog, M, level, tuple(sorted(sizes.items())), legal, counted(c, prog, level, sizes))
        return dataclasses.replace(o, sizes=sizes | o.sizes, notes=list(o.notes))
    if candidates is not None:
        raise NapkinError("candidates= restricts the integer search: give sizes= (every axis) and a number for memory")
    out = copy.copy(symbolic_optimum(prog, M, bool(exact)))   # memoised: the caller gets its own dicts and lists
    out.sizes, out.notes = dict(out.sizes), list(out.notes)
    out.exact_sizes = dict(out.exact_sizes) if out.exact_sizes is not None else None
    return out


def _tile_names(c) -> set:
    """The names of the tiles and streams of a cost record (what the optimum chooses)."""
    return {str(t) for g in c.groups for t in g.tiles} | {str(s[1]) for s in c.streams}


def cost_names(c) -> set:
    """The names of the sizes a cost record reads: its transfers, columns, FLOPs, tiles and streams."""
    exprs = [*c.H.values(), *c.H_bytes.values(), *(v for cols in c.columns.values() for v in cols),
             *c.flops.values(), *(t for g in c.groups for t in (*g.tiles, *g.fulls)),
             *(v for s in c.streams for v in s[1:])]
    return {str(s) for e in exprs if isinstance(e, sympy.Basic) for s in e.free_symbols}


def _streams_with_sizes(c, streams, sizes: dict, level: int = 1):
    """The stream sizes: ``streams`` (one size for all, or by name), each overridden by its entry in ``sizes`` when
    there is one; a stream given in both with different values is refused.  A stream that is a tile of the
    program (:func:`~napkin_cat.cost.tiling.tiled_streams`) stays one unless it is given by name."""
    tiled = {str(r[1]) for r in tiled_streams(c, level, streams)}
    names = [str(s) for _, s, _ in c.streams if not isinstance(s, int)
             and (str(s) not in tiled or str(s) in sizes)]
    out = {n: (streams.get(n, 1) if isinstance(streams, dict) else streams) for n in names}
    for n in names:
        if n in sizes:
            if isinstance(streams, dict) and n in streams and streams[n] != sizes[n]:
                raise NapkinError(f"stream size {n!r} is given twice: sizes={{'{n}': {sizes[n]}}} and "
                                  f"streams={{'{n}': {streams[n]}}}; give it once")
            out[n] = sizes[n]
    return out


def clamped(prog: TilingProgram, whole) -> TilingProgram:
    """``prog`` with each tile of ``whole`` (symbols or names) set to its axis size: ``H``, the columns and what each
    group holds read at ``g = n``, the tile moved to ``fixed`` (so an optimum's ``sizes`` report it), the program
    over the other tiles.  A tile's large-M form ``g(M)`` describes an algorithm only while ``g(M) ≤ n``; past it
    the tile is whole and this is the program that remains (every tile whole: a constant ``H``).

    >>> import napkin_cat as nc
    >>> mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    >>> p = clamped(program(nc.cost(mm), 1), ["g_c"])
    >>> p.tiles, p.H
    ((g_a,), a*b*c/g_a + a*b + a*c)
    >>> clamped(p, ["g_a"]).H
    a*b + a*c + b*c
    """
    names = {str(w) for w in whole}
    if not names:
        return prog
    return _clamped(prog, frozenset(names))


def fixed_at(prog: TilingProgram, at: dict) -> TilingProgram:
    """``prog`` with the tiles of ``at`` set to its values (an axis size: clamped; 1: pinned to a face): they leave
    the free tiles for the program's fixed ones, ``H``, the columns (equal ones once) and the held terms substituted.

    >>> import napkin_cat as nc
    >>> g, h, M = nc.symbol("g"), nc.symbol("h"), nc.symbol("M")
    >>> p = fixed_at(TilingProgram(1 / g + 1 / h, (g * h,), (g, h), ("a", "b"), (8, 8)), {h: sympy.Integer(1)})
    >>> p.H, p.columns, p.tiles
    (1 + 1/g, (g,), (g,))
    """
    keep = [i for i, t in enumerate(prog.tiles) if t not in at]
    cols = []
    for col in prog.columns:
        col = expand(sympy.sympify(col).xreplace(at))
        if col not in cols:
            cols.append(col)
    return TilingProgram(expand(sympy.sympify(prog.H).xreplace(at)), tuple(cols),
                         tuple(prog.tiles[i] for i in keep), tuple(prog.axes[i] for i in keep),
                         tuple(prog.fulls[i] for i in keep), tuple(prog.fixed) + tuple(at.items()),
                         tuple(expand(sympy.sympify(k).xreplace(at)) for k in prog.held))


@lru_cache(maxsize=512)
def _clamped(prog: TilingProgram, names: frozenset) -> TilingProgram:
    """:func:`clamped` of the tiles named ``names``: a pure function of the frozen program and the names (the
    process's memo, bounded: a symbolic derive asks for a block's program with the same tiles whole once per
    candidate that holds it)."""
    unknown = sorted(names - {str(t) for t in prog.tiles})
    if unknown:
        raise NapkinError(f"whole={unknown}: not tiles of this program; its tiles are {[str(t) for t in prog.tiles]}")
    at = {t: n for t, n in zip(prog.tiles, prog.fulls) if str(t) in names}
    infinite = [str(t) for t, n in at.items() if n == sympy.oo]
    if infinite:
        raise NapkinError(f"whole={infinite}: these tiles have no axis size to be set to")
    return fixed_at(prog, at)


def _paper_memory(prog: TilingProgram, columns, free, at_one) -> list:
    """The leading terms of what each group holds (the paper's memory model, :func:`.tiling.held`), when that
    model relaxes the exact one: each is dominated, term by term, by the leading terms of some column (the
    paper leaves out a group's temporaries, so its bound is the looser).  Else ``[]`` (the caller falls back
    to the exact model's dominant column)."""
    leads = [_leading(k.subs(at_one), free) for k in prog.held if k.subs(at_one).free_symbols & set(free)]
    column_leads = [_leading(col, free) for col in columns]
    if leads and all(any(dominates(cl, lead) for cl in column_leads) for lead in leads):
        return leads
    return []


@lru_cache(maxsize=256)
def symbolic_optimum(prog: TilingProgram, M, exact: bool = True) -> Optimum:
    """The large-M and exact optima of ``prog`` under the memory ``M``: a pure function of the whole key, as
    :func:`~napkin_cat.cost.sized_optimum.compiled` is (the process's memo, bounded; :func:`optimal` hands each
    caller a copy of its dicts)."""
    H, columns, free, ones = prog.restricted()
    at_one = {t: sympy.Integer(1) for t in ones}
    notes = []

    def dominant():
        return dominant_column(columns, free) if columns else sympy.Integer(0)

    def memory_model():
        """The memory each KKT point binds: the paper's model where it relaxes the exact one, else the dominant
        column's leading terms; one of them as the record's ``constraint``, several as a tuple."""
        leads = _paper_memory(prog, columns, free, at_one) or [_leading(dominant(), free)]
        return leads, leads[0] if len(leads) == 1 else tuple(leads)
    # with no tile left nothing is solved: the memory model is only the record's constraint, made when read
    leads, lead = memory_model() if free else (None, Deferred(lambda: memory_model()[1]))
    Hform, sizes, terms = None, {}, None
    points = kkt_points(H, leads, list(free), M) if free else [{}]
    if points:
        sizes = {g: points[0][str(g)] for g in free}
        Hstar = expand(H.subs(sizes))
        try:
            terms = power_terms(Hstar, M)
            Hform = sympy.Add(*[a * M ** (-b) for a, b in terms])
        except NapkinError:
            Hform = tidy(Hstar)
            notes.append(f"the large-M optimum is not a sum of powers of {M}")
    else:
        notes.append(f"no closed form for the large-M optimum of {H} subject to {lead} = {M}")
    sizes.update(at_one)
    sizes.update({s: v for s, v in prog.fixed})
    if not exact:
        return Optimum(Hform, sizes, terms, M, None, None, lead, None, notes, None)
    exact = exact_optimum(prog, M, dominant=dominant())
    notes += exact.notes
    return Optimum(Hform, sizes, terms, M, exact.H, exact.sizes, lead, exact.constraint, notes, exact)
