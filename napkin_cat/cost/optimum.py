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
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import sympy

from napkin_cat.cost import integer_search
from napkin_cat.cost.at_sizes import counts_kept
from napkin_cat.cost.exact import ExactOptimum, exact_optimum
from napkin_cat.cost.exact_arithmetic import monomials_at
from napkin_cat.cost.growth import growth, total_degree
from napkin_cat.cost.lagrange import kept, kkt_points, tidy
from napkin_cat.cost.memory import LARGEST_MEMORY, memory_limit  # noqa: F401  (nc.optimal's memory, read here)
from napkin_cat.cost.numeric import bind, folded
from napkin_cat.cost.polynomial import as_expr
from napkin_cat.cost.tiling import dominates, TilingProgram, monomials, program, tiled_streams, unexpanded
from napkin_cat.errors import LevelError, MemoryLimitError, NapkinError
from napkin_cat.syntax.array import as_level
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.sizes import Sizes, as_sizes


class _PowerTerms:
    """The field ``terms``: a list of ``(α_t, β_t)``, or a :class:`NapkinError` on reading it when ``H`` has none.

    A descriptor keeps ``terms`` a dataclass field (``dataclasses.replace(o, terms=...)`` works) while a
    consumer of power terms (hierarchies, quantization) gets a typed error instead of iterating ``None``.
    """

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return None                    # the field's default
        value = obj.__dict__.get(self.slot)
        if value is None:
            raise NapkinError(f"the large-M optimum H* = {obj.H} is not a sum of powers of {obj.memory}: "
                              f"it has no power terms (the exact optimum is o.exact)")
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = None if isinstance(value, _PowerTerms) else value   # the default: none


@dataclass
class Optimum:
    """``H`` (large-M form), ``sizes``, ``terms`` [(α_t, β_t)], and the exact optimum (``exact``).

    ``sizes``: the tiles as expressions (symbols → expressions in the memory and the axes), or at concrete sizes
    a :class:`~napkin_cat.syntax.sizes.Sizes` of the axes, tiles and streams (what ``nc.plan`` takes)."""

    H: sympy.Expr | None
    sizes: dict
    terms: list | None = field(default=_PowerTerms(), repr=False, compare=False)
    memory: sympy.Expr | None = None
    exact_H: sympy.Expr | None = None
    exact_sizes: dict | None = None
    constraint: sympy.Expr | None = None
    exact_constraint: sympy.Expr | None = None
    notes: list = field(default_factory=list)
    exact: ExactOptimum | None = None

    @property
    def has_power_terms(self) -> bool:
        return self.__dict__.get("_terms") is not None

    def __str__(self):
        lines = [f"H* (paper's large-M form) = {self.H}   with {self.sizes}"]
        if self.has_power_terms:
            terms = " + ".join(f"({a})·M^-{b}" for a, b in self.terms)
            lines.append(f"   as power terms Σ α_t M^-β_t: {terms}")
        if self.exact_H is not None and self.exact_constraint is not None:
            lines.append(f"H* (exact, memory {self.exact_constraint} ≤ {self.memory}) = {self.exact_H}"
                         f"   with {self.exact_sizes}")
        lines += [f"   note: {n}" for n in self.notes]
        return "\n".join(lines)

    def at(self, **values):
        """``H`` with sizes and memory substituted (numbers)."""
        subs = {symbol(k): v for k, v in values.items()}
        return self.H.subs(subs)


def power_terms(expr, M) -> list:
    """``[(α_t, β_t)]`` with ``expr = Σ α_t M^-β_t`` (β_t ≥ 0, zero-exponent terms included), each ``α_t`` factored.

    >>> import napkin_cat as nc
    >>> M, a, c = nc.symbol("M"), nc.symbol("a"), nc.symbol("c")
    >>> power_terms(a * c + 2 * a * c / M + c / M, M)
    [(a*c, 0), (c*(2*a + 1), 1)]
    """
    out = {}
    for term in sympy.Add.make_args(sympy.expand(expr)):
        coeff, exp = term.as_coeff_exponent(M)
        if coeff.has(M):
            raise NapkinError(f"{expr} is not a sum of powers of {M}")
        beta = -exp if exp.is_Rational else sympy.nsimplify(-exp)
        out[beta] = out.get(beta, 0) + coeff
    return sorted(((a if is_monomial(a) else sympy.factor(a), b) for b, a in out.items()), key=lambda t: t[1])


def is_monomial(expr) -> bool:
    """Whether ``expr`` is a rational number times powers of symbols with rational exponents: ``sympy.factor``
    returns such an expression as it is, so it is not factored (``tests/cost/test_power_terms.py``).

    >>> import napkin_cat as nc
    >>> d, e = nc.symbol("d"), nc.symbol("e")
    >>> is_monomial(-3 * sympy.sqrt(d) * e / 2), is_monomial(d * (e + 1)), is_monomial(sympy.sqrt(2) * d)
    (True, False, False)
    """
    def atom(x):
        return x.is_Rational or x.is_Symbol or (x.is_Pow and x.base.is_Symbol and x.exp.is_Rational)
    return atom(expr) or (expr.is_Mul and all(atom(x) for x in expr.args))


@kept
def _leading(expr, tiles):
    """The terms of highest total degree among those that involve a tile symbol."""
    poly_terms = [t for t in sympy.Add.make_args(sympy.expand(expr)) if t.free_symbols & set(tiles)]
    if not poly_terms:
        return sympy.expand(expr)

    degrees = [total_degree(t) for t in poly_terms]
    top = max(degrees)
    return sympy.Add(*[t for t, k in zip(poly_terms, degrees) if k == top])


@kept
def _dominant(columns, tiles):
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
            diff = sympy.expand(x - y)
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
        o = _integer_optimum(prog, M, level, tuple(sorted(sizes.items())), legal, counted(c, prog, level, sizes))
        return dataclasses.replace(o, sizes=sizes | o.sizes, notes=list(o.notes))
    if candidates is not None:
        raise NapkinError("candidates= restricts the integer search: give sizes= (every axis) and a number for memory")
    out = copy.copy(_symbolic_optimum(prog, M, bool(exact)))   # memoised: the caller gets its own dicts and lists
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
    unknown = sorted(names - {str(t) for t in prog.tiles})
    if unknown:
        raise NapkinError(f"whole={unknown}: not tiles of this program; its tiles are {[str(t) for t in prog.tiles]}")
    at = {t: n for t, n in zip(prog.tiles, prog.fulls) if str(t) in names}
    infinite = [str(t) for t, n in at.items() if n == sympy.oo]
    if infinite:
        raise NapkinError(f"whole={infinite}: these tiles have no axis size to be set to")
    keep = [i for i, t in enumerate(prog.tiles) if t not in at]
    cols = []
    for col in prog.columns:
        col = sympy.expand(sympy.sympify(col).xreplace(at))
        if col not in cols:
            cols.append(col)
    return TilingProgram(sympy.expand(sympy.sympify(prog.H).xreplace(at)), tuple(cols),
                         tuple(prog.tiles[i] for i in keep), tuple(prog.axes[i] for i in keep),
                         tuple(prog.fulls[i] for i in keep), tuple(prog.fixed) + tuple(at.items()),
                         tuple(sympy.expand(k.xreplace(at)) for k in prog.held))


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
def _symbolic_optimum(prog: TilingProgram, M, exact: bool = True) -> Optimum:
    """The large-M and exact optima of ``prog`` under the memory ``M``: a pure function of the whole key, as
    :func:`_compiled` is (the process's memo, bounded; :func:`optimal` hands each caller a copy of its dicts)."""
    H, columns, free, ones = prog.restricted()
    at_one = {t: sympy.Integer(1) for t in ones}
    notes = []
    dominant = _dominant(columns, free) if columns else sympy.Integer(0)
    leads = _paper_memory(prog, columns, free, at_one) or [_leading(dominant, free)]
    lead = leads[0] if len(leads) == 1 else tuple(leads)
    Hform, sizes, terms = None, {}, None
    points = kkt_points(H, leads, list(free), M) if free else [{}]
    if points:
        sizes = {g: points[0][str(g)] for g in free}
        Hstar = sympy.expand(H.subs(sizes))
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
    exact = exact_optimum(prog, M, dominant=dominant)
    notes += exact.notes
    return Optimum(Hform, sizes, terms, M, exact.H, exact.sizes, lead, exact.constraint, notes, exact)


def _fraction(value, what) -> Fraction:
    value = sympy.nsimplify(value) if isinstance(value, sympy.Float) else value
    if not (isinstance(value, sympy.Rational) or isinstance(value, int)):
        missing = sorted(map(str, getattr(value, "free_symbols", ())))
        raise NapkinError(f"{what} is {value}, not a number: give sizes for {missing} (sizes={{'name': …}})")
    return Fraction(int(value.p), int(value.q)) if isinstance(value, sympy.Rational) else Fraction(value)


@lru_cache(maxsize=256)
def _compiled(prog: TilingProgram, sizes: tuple):
    """The program at concrete sizes: exact posynomials over the tiles, and each tile's axis size.

    Each expression is expanded at the sizes in exact arithmetic (:func:`.exact_arithmetic.monomials_at`, its
    streams fixed as ``prog.fixed`` says), or, where it is not a sum of monomials there, by sympy, whose error
    names what is wrong.  Columns equal at the sizes are pooled (the largest is what binds).

    Why this memo is the process's, not a call's (issue 35: a cache belongs to the call unless its result is a pure
    function of its key): the answer reads nothing but its two arguments, and the key is both whole.  ``prog`` is a
    frozen :class:`~.tiling.TilingProgram`, equal and hashed by every field (``H``, the columns, tiles, axes, axis
    sizes, the fixed streams, ``held``; sympy's and :class:`~.polynomial.Poly`'s equality is by value), and
    ``sizes`` the sorted ``(name, int)`` pairs.  What else could steer a search is bound in those or read elsewhere:
    a density from data is substituted into ``H`` and the columns (:meth:`~.record.Cost.at_density`), a masked
    stream's running trips are counted per tiling by :func:`counted` (in the call's store of counts,
    :func:`~.at_sizes.counts_kept`), and the memory, tile candidates and requirements are applied after.  So two
    calls, threads or hardware models asking the same key get the same program, and any other key its own
    (``tests/cost/test_compiled_key.py``); bounded (256, least recently used) and locked (``lru_cache``)."""
    env = Sizes(sizes).env
    at = {**env, **{s: int(v) for s, v in prog.fixed}}
    fulls = []
    for axis, full in zip(prog.axes, prog.fulls):
        n = sympy.sympify(sympy.sympify(full).xreplace(env))   # (a bare symbol becomes a Python int)
        if not n.is_Integer:
            raise NapkinError(f"give a concrete size for axis {axis!r} (sizes={{'{axis}': …}})")
        if n < 1:
            raise NapkinError(f"axis {axis!r} has size {n}: sizes are positive integers")
        fulls.append(int(n))

    def exact(expr, what):
        try:
            coeffs, exps = monomials_at(expr, prog.tiles, at)
            if all(isinstance(a, (int, Fraction)) for a in coeffs):
                return tuple(Fraction(a) for a in coeffs), exps
        except (NapkinError, TypeError):
            pass
        m = monomials(sympy.sympify(expr).xreplace(dict(prog.fixed)), prog.tiles)
        return tuple(_fraction(sympy.sympify(sympy.sympify(a).xreplace(env)), what) for a in m.coeffs), m.exponents
    H = exact(prog.H, "a transfer coefficient")
    cols = tuple(dict.fromkeys(exact(col, "a memory coefficient") for col in prog.columns))
    smallest = max((sum(a for a in col[0]) for col in cols), default=Fraction(0))
    return H, cols, tuple(fulls), smallest


def _legal_values(prog: TilingProgram, fulls, legal) -> list:
    """Per tile: ``candidates[tile]`` (checked to divide the axis), else the divisors of the axis."""
    given = dict(legal)
    unknown = sorted(set(given) - {str(t) for t in prog.tiles})
    if unknown:
        raise NapkinError(f"candidates for {unknown}: not tiles of this algorithm; its tiles are "
                          f"{[str(t) for t in prog.tiles]}")
    out = []
    for tile, axis, n in zip(prog.tiles, prog.axes, fulls):
        values = given.get(str(tile))
        if values is None:
            out.append(integer_search.divisors(n))
            continue
        bad = [v for v in values if not isinstance(v, (int, sympy.Integer)) or v < 1 or n % int(v)]
        if bad or not values:
            raise NapkinError(f"candidates for {tile}: {bad or 'none'} do not divide axis {axis!r} of size {n}; "
                              f"legal tiles are its divisors {list(integer_search.divisors(n))}")
        out.append(tuple(int(v) for v in values))
    return out


def _trip_factors(expr) -> sympy.Expr:
    """``expr`` with each trip count ``⌈n/g⌉`` read as its trip factor ``n/g`` (the integer search counts a trip
    factor ``⌈n/g⌉`` where tiles may be ragged)."""
    return sympy.sympify(expr).replace(sympy.ceiling, lambda x: x)


def counted(c, prog: TilingProgram, level: int, sizes):
    """``tiles ↦ H`` counted at concrete sizes where the symbolic transfers of ``c`` are an estimate (a masked
    stream's running trips, :attr:`~napkin_cat.cost.record.Cost.estimated`), else None: the cost at sizes of the
    algorithm ``c`` was read off (:func:`napkin_cat.cost.numeric.folded`, what a run counts), at the program's tiles
    (``tiles``, in the order of ``prog.tiles``) and fixed streams.  The integer search then ranks by it."""
    if not c.estimated:
        return None
    if c.source is None:
        raise NapkinError("this cost counts a masked stream's running trips by an estimate, and it was composed "
                          "of other records, so they cannot be counted at sizes: optimise the cost of the algorithm "
                          "itself (nc.optimal(nc.cost(d), ...))")
    given = {**{str(k): int(v) for k, v in dict(sizes).items()}, **{str(s): int(v) for s, v in prog.fixed},
             **{str(t): 1 for t in prog.tiles}}
    env = bind(c.source, given, strict=False)     # bound once; each tiling only sets its tiles

    rho = {a.symbol: a.value for a in c.assumptions if a.value is not None and a.value != 1}

    def count(tiles) -> Fraction:
        h = folded(c.source, {**env, **dict(zip(prog.tiles, map(int, tiles)))}, density=rho).H.get(level, 0)
        return Fraction(h) if isinstance(h, int) else Fraction(str(h))     # ρ of a stream's trips: a fraction
    return count


@counts_kept()
def optima(c, memories, level: int = 1, *, sizes: dict, streams=1, tiles: str = "divisors", caps=(),
           count: bool = True) -> list:
    """The exact integer optimum over divisor tiles for each memory size of ``memories`` in one pass
    (the candidates scored once): a list of :class:`Optimum`, ``None`` where no tiling fits.

    ``tiles="any"``: a tile need not divide its axis (the last tile is shorter; ``H`` counts ``⌈n/g⌉``
    trips, memory what a full tile holds, as :func:`napkin_cat.cost.numeric.at` counts them).
    ``caps``: expressions in the tiles that must stay at most 1 (a requirement such as enough thread blocks,
    ``B / Π ⌈a/g_a⌉``); each trip count ``⌈a/g⌉`` in one is its trip factor ``a/g``, as in ``H``: exact on divisor
    tiles, and counted ``⌈a/g⌉`` with a shorter last tile (``tiles="any"``).
    Where the symbolic transfers are an estimate (a masked stream, :func:`counted`), every candidate is ranked by
    the transfers counted at it: ``o.H == nc.cost(d, sizes=o.sizes).H[level]``; ``count=False`` ranks them by the
    estimate instead (a caller that counts what it picks: the hardware derives, which time every tiling exactly).

    >>> import napkin_cat as nc
    >>> mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    >>> [o.H if o else None for o in optima(nc.cost(mm), [2, 1024], sizes={"a": 64, "b": 64, "c": 64})]
    [None, 28672]
    """
    level = as_level(level, least=1, what="the level of the optimum")
    if level not in c.H:
        raise LevelError(f"the algorithm moves nothing at level {level}; levels with transfers: {sorted(c.H)}")
    if not c.groups and not tiled_streams(c, level):
        raise NapkinError("the algorithm has no group partition to optimise: apply nc.group first")
    prog = unexpanded(c, level, streams)     # expanded at the sizes, in exact arithmetic (_compiled)
    Ms = [memory_limit(m) for m in memories]
    if not all(M.is_number for M in Ms):
        raise MemoryLimitError(f"the exact integer search needs numbers for the memory limits, got {memories}")
    if tiles not in ("divisors", "any"):
        raise NapkinError(f"tiles must be 'divisors' (each tile divides its axis) or 'any' (a shorter last "
                          f"tile), got {tiles!r}")
    H, cols, fulls, _ = _compiled(prog, tuple(sorted(sizes.items())))
    env = Sizes(tuple(sorted(sizes.items()))).env
    caps = [(tuple(_fraction(sympy.sympify(a).subs(env), "a requirement's coefficient") for a in m.coeffs),
             m.exponents) for m in (monomials(_trip_factors(cap).subs(dict(prog.fixed)), prog.tiles) for cap in caps)]
    exact = counted(c, prog, level, sizes) if count else None
    if tiles == "any":
        if exact is None and any(e not in (-1, 0, 1) for exps in H[1] for e in exps):
            raise NapkinError(f"the transfers {as_expr(prog.H.xreplace(dict(prog.fixed)))} are not linear in "
                              f"each tile's trips; use tiles='divisors'")
        values = [integer_search.ragged_values(n) for n in fulls]
    else:
        values = _legal_values(prog, fulls, ())
    found = integer_search.best_many(H, cols, values, [_fraction(M, "the memory limit") for M in Ms],
                                     fulls=fulls if tiles == "any" else None, caps=caps,
                                     names=[str(t) for t in prog.tiles], exact=exact)
    note = ("exact integer search over the divisors of every tile's axis" if tiles == "divisors" else
            "exact integer search over every tile size (a shorter last tile; ⌈n/g⌉ trips)")
    if exact is not None:
        note += ", each ranked by the transfers counted at it (a masked stream's trips that run)"
    elif c.estimated:
        note += ", ranked by the estimate of a masked stream's trips (count=False: not counted)"
    note += ", every column within memory"
    made: dict = {}     # an answer found at several memories (every tiling fits) made into sympy numbers once
    out = []
    for M, f in zip(Ms, found):
        if f is None:
            out.append(None)
            continue
        if f not in made:
            h, combo = f
            h = sympy.Rational(h.numerator, h.denominator)
            exact_sizes = {t: sympy.Integer(g) for t, g in zip(prog.tiles, combo)}
            made[f] = h, exact_sizes, {**exact_sizes, **dict(prog.fixed)}
        h, exact_sizes, sub = made[f]
        out.append(Optimum(h, dict(sub), [(h, sympy.Integer(0))], M, h, dict(exact_sizes), None, None, [note]))
    return out


def _integer_optimum(prog: TilingProgram, M, level, sizes, legal=(), exact=None) -> Optimum:
    if not M.is_number:
        raise MemoryLimitError(f"the exact integer search needs a number for the memory limit, got {M}")
    H, cols, fulls, smallest = _compiled(prog, sizes)
    found = integer_search.best(H, cols, _legal_values(prog, fulls, legal), _fraction(M, "the memory limit"),
                                [str(t) for t in prog.tiles], exact=exact)
    if found is None and not legal:
        shown = smallest.numerator if smallest.denominator == 1 else smallest
        raise MemoryLimitError(f"no tile sizes fit level {level} with memory {M}: even tiles of 1 need "
                               f"{shown} values; the smallest legal memory is {shown}")
    if found is None:
        raise MemoryLimitError(f"no tiling from the candidates {dict(legal)} fits level {level} with memory {M}")
    h, combo = found
    h = sympy.Rational(h.numerator, h.denominator)
    sub = {t: sympy.Integer(g) for t, g in zip(prog.tiles, combo)}
    exact_sizes = dict(sub)
    sub.update({s: v for s, v in prog.fixed})
    return Optimum(h, sub, [(h, sympy.Integer(0))], M, h, exact_sizes, None, None,
                   [f"exact integer search over {'the candidates given and ' if legal else ''}the divisors of "
                    f"every tile's axis, every column within memory"
                    + (", each ranked by the transfers counted at it (a masked stream's trips that run)"
                       if exact is not None else "")])
