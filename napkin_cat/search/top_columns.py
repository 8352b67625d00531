"""A growing form's tiles solved against the top-degree part of its exact memory columns (issue 35, symmem-35).

The cost functor's peak of a kernel is the ``Max`` of its columns ``C_j`` (every value live at one moment).  The
paper's memory model (what a group holds, :func:`~napkin_cat.cost.tiling.held`) leaves out a group's temporaries
of the leading degree: swiglu's fused kernel holds its gate and up tiles, ``2·g_n·g_f``, where that model holds
``g_n·g_f``; the fused chain ``X·W₁·W₂`` holds ``c·g_a + c·g_e`` (the intermediate tile and the ``W₂`` tile) at one
moment and ``g_a·g_e`` (the output tile) at another, and the model kept one.  A form solved against it needs up to
2-3× the memory it claims.

**Law.** Let ``T_j`` be the terms of column ``j`` (free tiles; the others as the program sets them) that hold a
tile and are of the highest total degree any such term has, the columns with ``T_j ≠ 0`` that no other dominates
(:func:`~napkin_cat.cost.tiling.binding`).  A form is ``min H  s.t.  T_j ≤ M − K`` for every ``j`` (``K``: the
tile-free terms of that degree, :mod:`.held_alike`); every column is then within ``M`` up to terms of lower degree.
It is a convex program in log-tiles (a geometric program): at each ``M`` its optimum is the KKT point of its
active columns.  Each set ``S`` of columns (at most as many as free tiles) has its KKT points of ``T_j = M`` for
``j`` in ``S`` (:func:`~napkin_cat.cost.lagrange.kkt_points`, closed forms in ``M`` and the sizes); at a memory,
the optimum is the cheapest point that satisfies every column there (a feasible point costs at least the optimum,
and the active set's point is feasible).  Which point that is changes with ``M`` (the chain near ``M = 4c²`` at
its default sizes: ``c·(g_a + g_e)`` binds below, ``g_a·g_e`` above, both between), so a form is one point, chosen
at the reference sizes at the memory where it starts (:func:`top_form`), and holds up to where another becomes the
optimum (a :class:`~napkin_cat.search.breakpoints.Breakpoint`, in closed form where sympy solves where a column
joins or leaves: ``T_j(t_A(M)) = M − K`` for ``A`` the smaller of the two sets).

>>> import napkin_cat as nc
>>> from napkin_cat.cost.tiling import TilingProgram
>>> f, n, e, g, h, M = (nc.symbol(s) for s in ("f", "n", "e", "g_f", "g_n", "M"))
>>> swiglu = TilingProgram(2 * e * f * n / h + e * f * n / g + f * n,
...                        (g * h, 2 * g * h + 2 * g + h), (g, h), ("f", "n"), (f, n))
>>> H, tiles, end = top_form(swiglu, M, 0, {f: 72, n: 64, e: 68}, 16.0)
>>> H, tiles[g], end          # 2·g_f·g_n = M, what the kernel holds; the paper's model held g_f·g_n
(f*n + 4*e*f*n/sqrt(M), sqrt(M)/2, None)
"""
from __future__ import annotations

import builtins
import functools
import itertools
import keyword
import math

import sympy
from sympy.printing.lambdarepr import LambdaPrinter

from napkin_cat.cost.growth import total_degree
from napkin_cat.cost.lagrange import kkt_points, tidy
from napkin_cat.cost.op_count import count_ops
from napkin_cat.cost.optimum_record import power_terms
from napkin_cat.cost.tiling import binding
from napkin_cat.errors import NapkinError
from napkin_cat.search.breakpoints import Breakpoint, bisected, solved_root
from napkin_cat.search.printed import printed, python_printer
from napkin_cat.cost.expanded import expand

#: the memories scanned for where a form stops being the optimum: ``start · 2^(k/STEPS)`` up to ``2^LAST``
STEPS, LAST = 16, 44
#: the column sets the scan keeps of the points solved at the sizes (the chosen one, the one that takes over)
KEPT = 2
#: how near the scans on points solved at the sizes and on symbolic points agree (:func:`_agree`)
AGREE = 1e-6
#: at most this many column sets are solved (the sets of up to as many columns as free tiles, smallest first)
MOST_SETS = 40


@functools.lru_cache(maxsize=2048)
def top_columns(prog) -> tuple:
    """``(H, tops, free, ones)``: the restricted program (:meth:`~napkin_cat.cost.tiling.TilingProgram.restricted`)
    and ``tops``, the top-degree tile terms ``T_j`` of its binding columns (module docstring; empty where no column
    holds a free tile)."""
    H, columns, free, ones = prog.restricted()
    free_set = set(free)
    terms = [[t for t in sympy.Add.make_args(expand(col)) if t.free_symbols & free_set] for col in columns]
    degrees = [total_degree(t) for ts in terms for t in ts]
    if not degrees:
        return H, (), free, ones
    top = max(degrees)
    tops = []
    for ts in terms:
        part = sympy.Add(*[t for t in ts if total_degree(t) == top])
        if part != 0 and part not in tops:
            tops.append(part)
    return H, binding(tops), free, ones


def options(prog, M, sets=None) -> tuple:
    """The KKT points of the top-degree model of ``prog`` (module docstring) that bind the column sets ``sets``
    (tuples of indices of the columns of :func:`top_columns`; None: each column alone): ``((set, H, tiles), …)``,
    ``H`` its transfers (a sum of powers of ``M`` where it is one), ``tiles`` every tile of ``prog`` (free ones in
    ``M``, the others 1 or as the program fixes them); empty where no column holds a free tile."""
    _, tops, _, _ = top_columns(prog)
    if sets is None:
        sets = tuple((j,) for j in range(len(tops)))
    return tuple(p for s in sets for p in _solved(prog, M, s))


def beyond_closed_forms(prog, M) -> bool:
    """Whether the elimination gave up (:func:`~napkin_cat.cost.lagrange.kkt_points` is None: an equation past the
    degree it solves in radicals) on one column of the top-degree model of ``prog``: its interior point, where it
    is the optimum, has no closed form here, and the form :func:`top_form` falls back on (a face of the tile box,
    :mod:`.faces`) bounds the optimum from above.  Causal attention's fused kernel ``d·q²/(2g_q) + d·q·g_q/(2g_d)
    + d·q²/(2g_d)`` s.t. ``g_d·g_q = M``: stationarity is the cubic ``2g_q³ + q·g_q² − q·M = 0``.

    >>> import napkin_cat as nc
    >>> from napkin_cat.cost.tiling import TilingProgram
    >>> d, q, M, gd, gq = (nc.symbol(s) for s in ("d", "q", "M", "g_d", "g_q"))
    >>> causal = TilingProgram(d * q ** 2 / (2 * gq) + d * q * gq / (2 * gd) + d * q ** 2 / (2 * gd),
    ...                        (gd * gq,), (gd, gq), ("d", "q"), (d, q))
    >>> dense = TilingProgram(d * q ** 2 / gq + d * q ** 2 / gd, (gd * gq,), (gd, gq), ("d", "q"), (d, q))
    >>> beyond_closed_forms(causal, M), beyond_closed_forms(dense, M)
    (True, False)
    """
    H, tops, free, _ = top_columns(prog)
    return any(kkt_points(H, [T], list(free), M) is None for T in tops)


def all_sets(prog) -> tuple:
    """Every set of up to as many columns as free tiles (at most :data:`MOST_SETS`), smallest first."""
    _, tops, free, _ = top_columns(prog)
    top = min(len(tops), len(free))
    return tuple(s for k in range(1, top + 1) for s in itertools.combinations(range(len(tops)), k))[:MOST_SETS]


@functools.lru_cache(maxsize=2048)
def _solved(prog, M, s: tuple) -> tuple:
    """The KKT points of the columns ``s`` of :func:`top_columns` (each ``T_j = M``) with positive tiles."""
    H, tops, free, ones = top_columns(prog)
    out = []
    for p in kkt_points(H, [tops[j] for j in s], list(free), M) or ():
        tiles = {g: p[str(g)] for g in free}
        Hform = kept_form(H.xreplace(tiles), M)     # (tiles free of one another: as subs)
        tiles.update({t: sympy.Integer(1) for t in ones})
        tiles.update(dict(prog.fixed))
        out.append((s, Hform, tiles))
    return tuple(out)


def kept_form(Hpoint, M):
    """``Hpoint`` (``H`` at a KKT point, its tiles put in) in the form the derive carries: expanded as
    ``Σ α M^-β`` where it is one (:func:`~napkin_cat.cost.optimum_record.power_terms`); else (a radical in
    ``M``: the two-tile points of a column with a cross term) the shorter by ``count_ops`` of its expanded,
    tidied form and ``Hpoint`` as put in, the same function (expanding and tidying are exact rewrites).  On the
    block's cross-term points the expanded form has 1,900-7,350 operations and the form put in ~220, and every
    later step (float functions, the reference form, breakpoints, crossings) reads it.  Where a term's
    coefficient holds ``M``, ``power_terms`` would raise after expanding again: that is read off the terms first.

    >>> M, a, t = sympy.symbols("M a t", positive=True)
    >>> kept_form(a * (1 + t / M) ** 2, M)
    a + 2*a*t/M + a*t**2/M**2
    >>> kept_form((a + sympy.sqrt(M + a)) ** 4 / (a + 1), M)
    (a + sqrt(M + a))**4/(a + 1)
    """
    Hstar = expand(Hpoint)
    if not any(t.as_coeff_exponent(M)[0].has(M) for t in sympy.Add.make_args(Hstar)):
        try:
            return sympy.Add(*[a * M ** (-b) for a, b in power_terms(Hstar, M)])
        except NapkinError:
            pass
    expanded = tidy(Hstar)
    return Hpoint if count_ops(Hpoint) < count_ops(expanded) else expanded


def top_form(prog, M, K, ref: dict, at: float):
    """``(H, tiles, end)``: the form of ``prog`` that is the top-degree model's optimum just above the memory
    ``at`` at the reference sizes ``ref`` (symbols → numbers), its tiles solved for ``M`` (the caller shifts them
    by ``K``, :func:`~.held_alike.shifted`); ``end``: the :class:`~napkin_cat.search.breakpoints.Breakpoint` (in
    ``M``, ``K`` counted) where another form becomes the optimum, None if none does up to ``2^44``.  None where
    the model has no point (:func:`options` empty): the caller keeps the paper's form.  Where no point satisfies
    every column at ``at`` (``M − K`` too small for any tile) the first that does on the scan is taken.

    A point that binds one column and satisfies the others is the optimum there (it minimises the program with
    that column alone, a relaxation); the sets of several columns are solved only where, on the scan from ``at``,
    no such point satisfies every column."""
    pairs = tuple(sorted(((k, sympy.sympify(v)) for k, v in ref.items()), key=lambda kv: str(kv[0])))
    k_at = float(sympy.sympify(K).xreplace(dict(pairs)))
    chosen = _chosen(prog, M, pairs, k_at, float(at))
    if chosen is None:
        return None
    found, i, end = chosen
    _, H, tiles = found[i]
    if end is None:
        return H, tiles, None
    j, at_end = end
    return H, tiles, Breakpoint(at_end, solve=functools.partial(_where, found[i], found[j], prog, M, K, pairs,
                                                                at_end))


@functools.lru_cache(maxsize=512)
def _numeric(prog, M, pairs: tuple, sets):
    """Per option of ``options(prog, M, sets)``: its ``H``, its free tiles and the columns ``T_j`` as float
    functions at the reference sizes ``pairs`` (of ``M − K``, of the tiles)."""
    cols = _numeric_columns(prog, pairs)
    if sets is None:
        sets = tuple((j,) for j in range(len(top_columns(prog)[1])))
    return [(s, h, t, cols) for s in sets for h, t in _numeric_set(prog, M, pairs, s)]


@functools.lru_cache(maxsize=512)
def _numeric_at_sets(prog, M, pairs: tuple, sets) -> list:
    """:func:`_numeric` of the points solved at the sizes ``pairs`` (:func:`_numeric_at`), not in them."""
    cols = _numeric_columns(prog, pairs)
    if sets is None:
        sets = tuple((j,) for j in range(len(top_columns(prog)[1])))
    return [(s, h, t, cols) for s in sets for h, t in _numeric_at(prog, M, pairs, s)]


@functools.lru_cache(maxsize=2048)
def _numeric_at(prog, M, pairs: tuple, s: tuple) -> tuple:
    """``((H, tiles), …)``: the KKT points of the columns ``s`` (each ``T_j = M``) solved with the sizes ``pairs``
    put in first (:func:`~napkin_cat.cost.lagrange.kkt_points` of numbers and ``M``), as float functions of
    ``M − K``: what the scan reads of :func:`_numeric_set` at a fraction of its symbolic work.  The points are
    read as numbers only, so their tiles are not tidied (``kkt_points(…, tidied=False)``, half the work); the
    forms stated are the symbolic points', solved in the sizes (:func:`_solved`)."""
    H, tops, free, _ = top_columns(prog)
    env = dict(pairs)
    Hn = sympy.sympify(H).xreplace(env)
    exprs = []
    for p in kkt_points(Hn, [sympy.sympify(tops[j]).xreplace(env) for j in s], list(free), M, tidied=False) or ():
        ts = [sympy.sympify(p[str(g)]) for g in free]
        exprs += [Hn.xreplace(dict(zip(free, ts))), ts]
    fs = memory_functions(M, exprs)
    return tuple(zip(fs[::2], fs[1::2]))


@functools.lru_cache(maxsize=512)
def _numeric_columns(prog, pairs: tuple) -> list:
    """The columns ``T_j`` of :func:`top_columns` as float functions of the free tiles at the sizes ``pairs``."""
    _, tops, free, _ = top_columns(prog)
    env = dict(pairs)
    return float_functions(list(free), [sympy.sympify(T).xreplace(env) for T in tops])


@functools.lru_cache(maxsize=2048)
def _numeric_set(prog, M, pairs: tuple, s: tuple) -> tuple:
    """``((H, tiles), …)`` per point of :func:`_solved` for the column set ``s``: float functions of ``M − K`` at
    the sizes ``pairs`` (kept per set: a scan that widens its sets reads the single columns' again)."""
    _, _, free, _ = top_columns(prog)
    env = dict(pairs)
    exprs = []
    for _, H, tiles in _solved(prog, M, s):
        exprs += [sympy.sympify(H).xreplace(env), [sympy.sympify(tiles[g]).xreplace(env) for g in free]]
    fs = memory_functions(M, exprs)
    return tuple(zip(fs[::2], fs[1::2]))


def memory_functions(M, exprs: list) -> list:
    """:func:`float_functions` of ``M`` of ``exprs`` (expressions and lists of them), ``M`` put in as
    ``sympy.lambdify`` puts a dummy argument: in an expression a symbol without assumptions of a name it does not
    hold, in a list a dummy without assumptions.  The expressions are rebuilt as lambdify rebuilds them and so
    print alike, factors in one order (the block's tiles hold products of ``sqrt`` of sums in ``M`` whose order,
    and so the last bits of the float, follow the argument's kind).

    >>> M = sympy.Symbol("M", positive=True)
    >>> H, tiles = memory_functions(M, [1 / sympy.sqrt(M) + 1, [sympy.sqrt(M) / 2, M]])
    >>> H(16.0), tiles(16.0)
    (1.25, [2.0, 16.0])
    """
    taken = {str(x) for e in exprs for y in (e if isinstance(e, list) else [e]) for x in sympy.sympify(y).free_symbols}
    name = next(n for n in (f"Dummy_{k}" for k in itertools.count()) if n not in taken)
    m, d = sympy.Symbol(name), sympy.Dummy()
    one = float_functions([m], [sympy.sympify(e).xreplace({M: m}) for e in exprs if not isinstance(e, list)])
    many = float_functions([d], [[sympy.sympify(x).xreplace({M: d}) for x in e] for e in exprs if isinstance(e, list)])
    one, many = iter(one), iter(many)
    return [next(many) if isinstance(e, list) else next(one) for e in exprs]


def float_functions(args: list, exprs: list) -> list:
    """Per expression of ``exprs`` (a sympy expression or a list of them), a float function of ``args`` (symbols)
    whose code is ``sympy.lambdify(args, e, "math")``'s: the same printer (``PythonCodePrinter``, lambdify's
    settings for ``"math"``) prints each expression, and one source of all of them is compiled once in lambdify's
    namespace for ``"math"`` (each expression's text written by :func:`~napkin_cat.search.printed.printed`, that
    printer's text without its walk).  **Law:** the same printed expression evaluates to the same floats, bit for bit;
    lambdify's per call work around it (a docstring that prints the expression again, the arguments swapped for
    dummies, the namespace rebuilt) is not done.  Arguments that are not Python identifiers (or a name the
    expressions or Python already use) go to ``sympy.lambdify`` as they are.

    >>> x, y = sympy.symbols("x y", positive=True)
    >>> f, g = float_functions([x, y], [sympy.sqrt(x) + y / 3, [x * y, x - y]])
    >>> f(4.0, 3.0), g(2.0, 5.0)
    (3.0, [10.0, -3.0])
    """
    args = list(args)
    names = [_ARG(a) for a in args]
    if not all(n.isidentifier() and not keyword.iskeyword(n) and n not in _MATH for n in names) \
            or len(set(names)) != len(names):
        return [sympy.lambdify(args, e, "math") for e in exprs]
    printer = python_printer()
    namespace = dict(_MATH)
    lines = []
    for k, e in enumerate(exprs):
        body = _printed(printer, e, namespace)
        lines += [f"def f{k}({', '.join(names)}):", f"    return {body}"]
    for mod, keys in (printer.module_imports or {}).items():
        for key in keys:
            if key not in namespace:
                exec(f"from {mod} import {key}", {}, namespace)     # (as lambdify: what the printer imports)
    namespace.update({"builtins": builtins, "range": range})
    found = {}
    exec(compile("\n".join(lines) + "\n", "<float_functions>", "exec"), namespace, found)
    return [found[f"f{k}"] for k in range(len(exprs))]


def _printed(printer, e, namespace: dict) -> str:
    """``e`` (an expression or a list of them) as lambdify's ``return`` prints it; its symbols put in
    ``namespace`` as lambdify puts them."""
    if isinstance(e, list):
        return "[" + ", ".join(_printed(printer, x, namespace) for x in e) + "]"
    e = sympy.sympify(e)
    namespace.update({str(t): t for t in e.atoms(sympy.Symbol)})
    out = printed(e, printer)
    return f"({out})" if "\n" in out else out


#: lambdify's namespace for ``"math"`` (the module, sympy's names for its functions, builtins)
_MATH = dict(sympy.lambdify([], 0, "math").__globals__)
#: how lambdify prints an argument (a dummy as ``_Dummy_<index>``)
_ARG = LambdaPrinter().doprint


@functools.lru_cache(maxsize=2048)
def _chosen(prog, M, pairs: tuple, k_at: float, at: float):
    """``(found, i, end)``: the option ``found[i]`` (``found``: options of :func:`options`) chosen just above ``at``
    and ``(j, memory)`` where ``found[j]`` takes over (None if none does): :func:`_scanned` (a pure function of its
    key); None where the model has no point.

    Where the program has more columns than the scan keeps (the chosen set and the one that takes over: more than
    two) and several free tiles, the scan runs first on the points solved at the reference sizes
    (:func:`_numeric_at`: the sizes put in before the elimination) and only the sets of the chosen point and of the
    one that takes over are solved in the sizes; the scan over those two chooses as the scan over all does (where
    one option is the cheapest that satisfies every column among all, it is among any set of options that holds
    it).  An elimination at the sizes costs about one in them (``M`` stays a symbol: the block's attention kernel
    0.3 s of 0.5 s), so it saves work only where the sets it passes over outnumber those it solved at the sizes
    again: with one or two columns every single column is solved in the sizes either way, and the scan runs on
    them at once.  Where the two scans do not agree (:func:`_agree`: another set chosen, or another one taking
    over, or elsewhere; a point the numeric elimination finds and the symbolic one does not, or a choice where no
    point fits), every set is solved in the sizes and scanned, as with two columns.

    Where the program has one column and it one point, that point is the choice and no option takes over: the scan
    (:func:`_scanned`) would pick among that one option (each wider set is that column alone again) and a memory
    where it does not fit ends nothing; the scan and its float functions (:func:`_numeric_set`) are not made."""
    _, tops, free, _ = top_columns(prog)
    if len(tops) > KEPT and len(free) > 1:     # (one tile: the symbolic point is solved directly, no cheaper)
        first = _scanned(lambda sets: _numeric_at_sets(prog, M, pairs, sets), len(tops), k_at, at, prog)
        if first is not None and first[3]:
            sets, i, end, _ = first
            fs = _numeric_at_sets(prog, M, pairs, sets)
            keep = tuple(dict.fromkeys([fs[i][0]] + ([fs[end[0]][0]] if end else [])))
            second = _scanned(lambda _: _numeric(prog, M, pairs, keep), 0, k_at, at, prog)
            if second is not None and second[3] and _agree(fs, i, end, _numeric(prog, M, pairs, keep), second[1],
                                                          second[2], k_at, at):
                return options(prog, M, keep), second[1], second[2]
    found = options(prog, M)
    if not found:
        return None
    if len(tops) == 1 and len(found) == 1:
        return found, 0, None       # one column, one point: what the scan would choose (docstring), unscanned
    sets, i, end, _ = _scanned(lambda sets: _numeric(prog, M, pairs, sets), len(tops), k_at, at, prog)
    return options(prog, M, sets), i, end


def _agree(fa, i, end_a, fb, j, end_b, k_at: float, at: float) -> bool:
    """Whether the scans over the options ``fa`` (points solved at the sizes) and ``fb`` (the symbolic points of the
    sets kept) choose alike: ``fa[i]`` and ``fb[j]`` of one column set and one ``H`` just above ``at``, the options
    that take over (``end_a``, ``end_b``: ``(index, memory)`` or None) of one set and at one memory.  To
    :data:`AGREE` relative: a point solved at the sizes is not tidied (``kkt_points(…, tidied=False)``), and its
    radicals lose digits to cancellation (mlp's two-column kernel: ``H`` 2e-8 apart at ``M = 4610``; gqa's: the
    memory where a set takes over 3e-7 apart), while another point of a set or another set taking over differs
    in its leading digits."""
    m = max(at, 1.0) * (1 + 1e-6) - k_at
    a, b = fa[i], fb[j]
    if a[0] != b[0]:
        return False
    try:
        ha, hb = complex(a[1](m)), complex(b[1](m))
    except (ValueError, ZeroDivisionError, OverflowError, TypeError):
        return False
    if not abs(ha - hb) <= AGREE * abs(ha):
        return False
    if (end_a is None) != (end_b is None):
        return False
    return end_a is None or (fa[end_a[0]][0] == fb[end_b[0]][0] and abs(end_a[1] - end_b[1]) <= AGREE * end_a[1])


def _scanned(numeric, ncols: int, k_at: float, at: float, prog):
    """``(sets, i, end, fits)``: the scan of ``M`` on a geometric grid from ``at``, then bisection, over the options
    ``numeric(sets)`` (``(set, H, tiles, columns)`` float functions); ``fits``: whether some option satisfies every
    column at a memory of the scan.  The columns one at a time first (``sets`` None); where no such point satisfies
    every column at a memory of the scan, also each column with those its points there exceed (the set that binds
    where one column's point stops satisfying another), and every set only if that leaves one uncovered
    (``ncols`` columns; 0: ``numeric``'s options only, no widening)."""
    start = max(at, 1.0) * (1 + 1e-6)
    grid = [start * 2 ** (k / STEPS) for k in range(int(STEPS * max(0.0, LAST - math.log2(start))) + 2)]
    sets = None
    fs = numeric(sets)
    picks = [_best(fs, m - k_at) for m in grid]
    if ncols and any(p is None for p in picks):
        joined = {c for m, p in zip(grid, picks) if p is None for c in _joined(fs, m - k_at)}
        sets = tuple((j,) for j in range(ncols)) + tuple(sorted(joined - {None}))
        fs = numeric(sets)
        picks = [_best(fs, m - k_at) for m in grid]
        if any(p is None for p in picks):
            sets = all_sets(prog)
            fs = numeric(sets)
            picks = [_best(fs, m - k_at) for m in grid]
    fits = any(p is not None and p is not False for p in picks)
    chosen = next((p for p in picks if p is not None and p is not False), 0)
    lo = grid[0]
    for m, b in zip(grid, picks):
        if b is None or b is False:
            continue
        if b == chosen:
            lo = m
            continue
        return sets, chosen, (b, bisected(lambda mid: _best(fs, mid - k_at) == chosen, lo, m)), fits
    return sets, chosen, None, fits


def _joined(fs, mp: float) -> set:
    """The sets ``(j, k)`` (sorted) of each column ``j`` whose point (its own alone, an option of ``fs``) is real
    and positive at ``M − K = mp`` and each column ``k`` it exceeds there."""
    out = set()
    for s, _, t, cols in fs:
        if len(s) != 1:
            continue
        try:
            tv = [complex(x) for x in t(mp)]
        except (ValueError, ZeroDivisionError, OverflowError, TypeError):
            continue
        if any(abs(x.imag) > 1e-9 * max(1.0, abs(x.real)) or not x.real > 0 for x in tv):
            continue
        tv = [x.real for x in tv]
        out |= {tuple(sorted({s[0], k})) for k, c in enumerate(cols) if k != s[0] and c(*tv) > mp * (1 + 1e-9)}
    return out


def _best(fs, mp: float):
    """The index of the cheapest option that satisfies every column at ``M − K = mp``; None where none does, False
    where ``mp ≤ 0`` (no memory for the tiles)."""
    if not mp > 0:
        return False
    out = None
    for i, (_, h, t, cols) in enumerate(fs):
        try:
            tv = [complex(x) for x in t(mp)]
            if any(abs(x.imag) > 1e-9 * max(1.0, abs(x.real)) or not x.real > 0 for x in tv):
                continue
            tv = [x.real for x in tv]
            if any(c(*tv) > mp * (1 + 1e-9) for c in cols):
                continue
            v = complex(h(mp))
        except (ValueError, ZeroDivisionError, OverflowError, TypeError):
            continue
        if abs(v.imag) > 1e-9 * max(1.0, abs(v.real)):
            continue
        if out is None or v.real < out[0] * (1 - 1e-12):
            out = (v.real, i)
    return None if out is None else out[1]


def _where(old, new, prog, M, K, pairs, at: float):
    """The closed form of the memory where option ``new`` takes over from ``old``: where the column one of them
    binds and the other does not joins the smaller set (``T_j(t_A(M − K)) = M − K``, sympy's root that takes the
    scanned value ``at``); ``at`` as a number where the sets differ by more than one column or sympy has no root."""
    _, tops, _, _ = top_columns(prog)
    (s_old, _, t_old), (s_new, _, t_new) = old, new
    extra = set(s_old) ^ set(s_new)
    if len(extra) != 1:
        return sympy.Float(at, 15)
    (j,) = extra
    tiles = t_old if len(s_old) < len(s_new) else t_new
    shift = {M: M - K}
    ratio = sympy.sympify(tops[j]).xreplace({g: sympy.sympify(v).xreplace(shift) for g, v in tiles.items()}) / (M - K)
    return solved_root(ratio, sympy.Integer(1), M, dict(pairs), at)
