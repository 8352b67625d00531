"""The optimum at concrete sizes: the exact integer search over divisor tiles (or any tile, a shorter last one),
every memory column within the memory, for one memory (:func:`integer_optimum`, what
:func:`napkin_cat.cost.optimum.optimal` runs with ``sizes=`` and a number) or many in one pass (:func:`optima`),
on the tiling program compiled at the sizes in exact arithmetic (:func:`compiled`), each candidate ranked by the
transfers counted at it where the symbolic ones are an estimate (:func:`counted`).

>>> import napkin_cat as nc
>>> mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
>>> o = optima(nc.cost(mm), [1024], sizes={"a": 64, "b": 64, "c": 64})[0]
>>> o.H, o.exact_sizes
(28672, {g_a: 32, g_c: 16})
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import sympy

from napkin_cat.cost import integer_search
from napkin_cat.cost.at_sizes import counts_kept
from napkin_cat.cost.exact_arithmetic import monomials_at
from napkin_cat.cost.memory import memory_limit
from napkin_cat.cost.numeric import bind, folded
from napkin_cat.cost.optimum_record import Optimum
from napkin_cat.cost.polynomial import as_expr
from napkin_cat.cost.tiling import TilingProgram, monomials, tiled_streams, unexpanded
from napkin_cat.errors import LevelError, MemoryLimitError, NapkinError
from napkin_cat.syntax.array import as_level
from napkin_cat.syntax.sizes import Sizes


def _fraction(value, what) -> Fraction:
    value = sympy.nsimplify(value) if isinstance(value, sympy.Float) else value
    if not (isinstance(value, sympy.Rational) or isinstance(value, int)):
        missing = sorted(map(str, getattr(value, "free_symbols", ())))
        raise NapkinError(f"{what} is {value}, not a number: give sizes for {missing} (sizes={{'name': …}})")
    return Fraction(int(value.p), int(value.q)) if isinstance(value, sympy.Rational) else Fraction(value)


@lru_cache(maxsize=2048)
def compiled(prog: TilingProgram, sizes: tuple):
    """The program at concrete sizes: exact posynomials over the tiles, and each tile's axis size.

    Each expression is expanded at the sizes in exact arithmetic (:func:`.exact_arithmetic.monomials_at`, its
    streams fixed as ``prog.fixed`` says), or, where it is not a sum of monomials there, by sympy, whose error
    names what is wrong.  Columns equal at the sizes are pooled, and a column another bounds term by term is dropped
    (:func:`~.integer_search.undominated`: the largest is what binds, the same at every tiling).

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
    cols = integer_search.undominated(tuple(dict.fromkeys(exact(col, "a memory coefficient") for col in prog.columns)))
    smallest = max((sum(a for a in col[0]) for col in cols), default=Fraction(0))
    return H, cols, tuple(fulls), smallest


def _legal_values(prog: TilingProgram, fulls, legal) -> list:
    """Per tile: ``candidates[tile]`` (checked to divide the axis), else the divisors of the axis."""
    if not legal:     # (every tile's divisors: no tile's name read)
        return [integer_search.divisors(n) for n in fulls]
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
    made, note = _answers(c, memories, level, sizes, streams, tiles, caps, count)
    return [None if m is None else Optimum(m[0], dict(m[2]), [(m[0], sympy.Integer(0))], M, m[0], dict(m[1]), None,
                                           None, [note]) for M, m in made]


@counts_kept()
def optimum_values(c, memories, level: int = 1, *, sizes: dict, streams=1, tiles: str = "divisors", caps=(),
                   count: bool = True) -> list:
    """:func:`optima`'s answers as plain values, without an :class:`Optimum` per memory: per memory ``None`` where
    no tiling fits, else ``(H, tiles)``, ``H`` a :class:`~fractions.Fraction` and ``tiles`` a dict of the tiles and
    fixed streams (symbols → sympy integers: ``optima(…)[i].sizes``), the same answer as :func:`optima`'s
    ``(o.H, o.sizes)`` (one search, each distinct answer's sympy numbers made once; each memory its own dict).

    >>> import napkin_cat as nc
    >>> mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    >>> optimum_values(nc.cost(mm), [2, 1024], sizes={"a": 64, "b": 64, "c": 64})
    [None, (Fraction(28672, 1), {g_a: 32, g_c: 16, s_b: 1})]
    """
    made, _ = _answers(c, memories, level, sizes, streams, tiles, caps, count, plain=True)
    return [None if m is None else (m[0], dict(m[2])) for _, m in made]


def _answers(c, memories, level, sizes, streams, tiles, caps, count, plain=False):
    """``([(M, answer or None)], note)``: the integer search of :func:`optima` at each memory, each distinct answer
    ``(H, tiles, tiles and fixed streams)`` made once (H a sympy number, or a Fraction where ``plain``)."""
    _checked(c, level)
    Ms = [memory_limit(m) for m in memories]
    if not all(M.is_number for M in Ms):
        raise MemoryLimitError(f"the exact integer search needs numbers for the memory limits, got {memories}")
    search = _Prepared(c, level, sizes, streams, tiles, caps, count)
    found = search.found([_fraction(M, "the memory limit") for M in Ms])
    made: dict = {}     # an answer found at several memories (every tiling fits) made into sympy numbers once
    out = []
    for M, f in zip(Ms, found):
        if f is None:
            out.append((M, None))
            continue
        if f not in made:
            h, combo = f
            h = h if plain else sympy.Rational(h.numerator, h.denominator)
            exact_sizes = {t: sympy.Integer(g) for t, g in zip(search.prog.tiles, combo)}
            made[f] = h, exact_sizes, {**exact_sizes, **dict(search.prog.fixed)}
        out.append((M, made[f]))
    return out, search.note


def _checked(c, level) -> int:
    """The level, checked: one ``c`` moves something at, with tiles to search."""
    level = as_level(level, least=1, what="the level of the optimum")
    if level not in c.H:
        raise LevelError(f"the algorithm moves nothing at level {level}; levels with transfers: {sorted(c.H)}")
    if not c.groups and not tiled_streams(c, level):
        raise NapkinError("the algorithm has no group partition to optimise: apply nc.group first")
    return level


class _Prepared:
    """What the integer search of a cost record at sizes reads whatever the memory (the program compiled at the
    sizes, each tile's legal values, the caps, the counting of a masked stream's trips), checked and made once;
    :meth:`found` searches it at memories (Fractions)."""

    def __init__(self, c, level, sizes, streams, tiles, caps, count):
        level = _checked(c, level)
        prog = self.prog = unexpanded(c, level, streams)     # expanded at the sizes, in exact arithmetic (compiled)
        if tiles not in ("divisors", "any"):
            raise NapkinError(f"tiles must be 'divisors' (each tile divides its axis) or 'any' (a shorter last "
                              f"tile), got {tiles!r}")
        skey = tuple(sorted(sizes.items()))
        self.H, self.cols, fulls, _ = compiled(prog, skey)
        env = Sizes(skey).env if caps else {}
        self.caps = [(tuple(_fraction(sympy.sympify(a).subs(env), "a requirement's coefficient") for a in m.coeffs),
                      m.exponents) for m in (monomials(_trip_factors(cap).subs(dict(prog.fixed)), prog.tiles)
                                             for cap in caps)]
        # the tiles' names (they word a refusal of too large a grid): a plain symbol's name is what str prints
        self.names = [t.name if type(t) is sympy.Symbol else str(t) for t in prog.tiles]
        self.exact = exact = counted(c, prog, level, sizes) if count else None
        if tiles == "any":
            if exact is None and any(e not in (-1, 0, 1) for exps in self.H[1] for e in exps):
                raise NapkinError(f"the transfers {as_expr(prog.H.xreplace(dict(prog.fixed)))} are not linear in "
                                  f"each tile's trips; use tiles='divisors'")
            self.values = [integer_search.ragged_values(n) for n in fulls]
        else:
            self.values = _legal_values(prog, fulls, ())
        self.fulls = fulls if tiles == "any" else None
        note = ("exact integer search over the divisors of every tile's axis" if tiles == "divisors" else
                "exact integer search over every tile size (a shorter last tile; ⌈n/g⌉ trips)")
        if exact is not None:
            note += ", each ranked by the transfers counted at it (a masked stream's trips that run)"
        elif c.estimated:
            note += ", ranked by the estimate of a masked stream's trips (count=False: not counted)"
        self.note = note + ", every column within memory"
        self._made: dict = {}

    def found(self, limits) -> list:
        """Per memory (a Fraction): ``(H, tiles)`` of :func:`~.integer_search.best_many`, or None."""
        return integer_search.best_many(self.H, self.cols, self.values, limits, fulls=self.fulls, caps=self.caps,
                                        names=self.names, exact=self.exact)

    def values_at(self, memories) -> list:
        """:func:`optimum_values` at the int ``memories``: per memory None, or ``(H, tiles and fixed streams)``,
        each memory its own dict (each distinct answer's sympy numbers made once, kept)."""
        out = []
        for f in self.found(list(memories)):     # (ints: exact, as the Fractions of optimum_values)
            if f is None:
                out.append(None)
                continue
            made = self._made.get(f)
            if made is None:
                made = self._made[f] = {**{t: sympy.Integer(g) for t, g in zip(self.prog.tiles, f[1])},
                                        **dict(self.prog.fixed)}
            out.append((f[0], dict(made)))
        return out


def prepared(c, level: int = 1, *, sizes: dict, tiles: str = "divisors", count: bool = True):
    """The integer search of ``c`` at ``sizes`` prepared for any memory, or None where the transfers are counted at
    each tiling (a masked stream's trips with ``count``: :func:`optimum_values` counts them in a store of its call):
    ``p.values_at(memories)`` is ``optimum_values(c, memories, level, sizes=sizes, tiles=tiles, count=count)`` for int
    memories, whatever memories it was asked at before (the program is compiled and checked once: a caller asking at
    new memories keeps it).

    >>> import napkin_cat as nc
    >>> mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    >>> p = prepared(nc.cost(mm), sizes={"a": 64, "b": 64, "c": 64})
    >>> p.values_at([2, 1024]) == optimum_values(nc.cost(mm), [2, 1024], sizes={"a": 64, "b": 64, "c": 64})
    True
    """
    found = _Prepared(c, level, sizes, 1, tiles, (), count)
    return None if found.exact is not None else found


def integer_optimum(prog: TilingProgram, M, level, sizes, legal=(), exact=None) -> Optimum:
    if not M.is_number:
        raise MemoryLimitError(f"the exact integer search needs a number for the memory limit, got {M}")
    H, cols, fulls, smallest = compiled(prog, sizes)
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
