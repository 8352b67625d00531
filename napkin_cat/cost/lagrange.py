"""Closed forms for the tiling program by Lagrange multipliers, with bounded symbolic work.

For an *active set* A of columns the KKT conditions of ``min H  s.t.  C_j ≤ M`` read::

    ∂H/∂g_i + Σ_{j∈A} λ_j ∂C_j/∂g_i = 0   (every free tile i),   C_j = M,   λ_j > 0   (j ∈ A)
    C_k ≤ M                                                        (k ∉ A)

The program is a geometric program (convex in log coordinates), so a KKT point is the global
optimum; its active set decides which formula holds where. :func:`kkt_points` solves one active
set by elimination, never by an open-ended ``sympy.solve``: it factors every equation (a factor
that is a sum of same-signed terms has no positive root and is dropped), substitutes any unknown
that occurs linearly, solves univariate equations up to degree 2 in radicals, and gives up
(``None``) beyond that. :func:`piecewise_optimum` joins the active sets into a ``Piecewise``.

Where the program is one tile ``g`` under one active column linear in it, ``C = a·g + b`` (``a > 0`` free of
``g``), the KKT system is linear and solved directly: ``g* = (M − b)/a``, ``λ = −(∂H/∂g)(g*)/a``
(:func:`direct_point`), the same point as the elimination's (``tests/cost/test_kkt_direct.py``).

Within :func:`remembered` (a derivation's context, :class:`~napkin_cat.search.context.Search`), the steps that
programs share (the factors of an equation, a tidied form, a sign, a whole active set's points) are kept by the
value of what they read, so equal sub-problems of different programs are solved once per call.

>>> import sympy, napkin_cat as nc
>>> g, M, d = nc.symbol("g_q"), nc.symbol("M"), nc.symbol("d")
>>> [p["g_q"] for p in kkt_points(2 * d / g, [2 * d * g + d + 3 * g], [g], M)]
[(M - d)/(2*d + 3)]
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
import math

import sympy
from napkin_cat.cost.op_count import count_ops
from napkin_cat.cost.point_sign import not_positive
from napkin_cat.cost.seeded import factor, factor_list, linear_irreducible
from napkin_cat.cost.expanded import expand

MAX_DEGREE = 2        # univariate equations are solved in radicals up to this degree
MAX_BRANCHES = 32     # factor and root branches followed per active set
MAX_ACTIVE_SETS = 64  # active sets tried before the closed form is given up
MAX_TIDY_OPS = 120    # expressions larger than this are not simplified further
MAX_RADICAL_OPS = 30  # radicals are rewritten only in expressions up to this size

#: the store of the current call's closed-form steps (:func:`remembered`), or None: nothing kept
_STORE = contextvars.ContextVar("napkin_cat_closed_forms", default=None)


@contextlib.contextmanager
def remembered(store: dict):
    """Within the block, the steps of the closed forms are kept in ``store`` (a dict the caller owns), each under the
    value of its inputs (symbols with their assumptions), so that a step met again returns what it returned.

    Every kept step is a pure function of its inputs, so its answer is the one it would recompute:

    >>> import sympy
    >>> x = sympy.Symbol("x", positive=True)
    >>> store = {}
    >>> with remembered(store):
    ...     first = tidy((x**2 - 1) / (x - 1))
    ...     again = tidy((x**2 - 1) / (x - 1))
    >>> first, again is first, len(store)
    (x + 1, True, 1)
    """
    token = _STORE.set(store)
    try:
        yield store
    finally:
        _STORE.reset(token)


def _key(value):
    """``value`` as a key equal for equal values: sympy objects as themselves with their type (sympy's equality
    and hash are structural, symbols' assumptions included, as ``srepr`` is, but without printing them), lists
    and tuples as tuples, sets as frozensets, anything else with its type (so ``2`` and ``Integer(2)`` differ)."""
    if isinstance(value, (set, frozenset)):
        return frozenset(_key(v) for v in value)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, *(_key(v) for v in value))
    return type(value), value


def kept(fn):
    """``fn`` remembered in the current :func:`remembered` store under the value of its arguments (``fn`` a pure
    function of them, its answer not mutated by its callers); outside :func:`remembered`, ``fn`` itself."""
    def kept(*args):
        store = _STORE.get()
        if store is None:
            return fn(*args)
        key = (fn.__name__, _key(args))
        if key not in store:
            store[key] = fn(*args)
        return store[key]
    kept.__name__, kept.__doc__, kept.__wrapped__ = fn.__name__, fn.__doc__, fn
    return kept


@kept
def sign_of(expr):
    """+1 or -1 if every term of ``expr`` has that strict sign for positive symbols, else ``None``."""
    if count_ops(expr) > MAX_TIDY_OPS:
        return None                        # expanding large radical expressions has no useful bound
    terms = sympy.Add.make_args(expand(expr))
    if all(t.is_positive for t in terms):
        return 1
    if all(t.is_negative for t in terms):
        return -1
    return None


def laurent_part(eq):
    """``eq`` (a sum of terms ``c·Π x^k``, ``c`` rational, ``x`` symbols, ``k`` integers of any sign) times the
    least common denominator of the ``c`` and divided by its terms' greatest common monomial and integer:
    ``{exponents: coefficient}`` over ``gens`` (its symbols), as ``(gens, terms)``; ``None`` for any other ``eq``.
    Its factors are those of ``eq``'s numerator but monomials and integers, which are positive for positive symbols.

    >>> import sympy
    >>> x, y = sympy.symbols("x y", positive=True)
    >>> gens, terms = laurent_part(y / x ** 2 / 3 + 2 * y ** 2 / 3)
    >>> gens, sorted(terms.items())
    ((x, y), [((0, 0), 1), ((2, 1), 2)])
    """
    terms = {}
    for term in sympy.Add.make_args(eq):
        coeff, rest = term.as_coeff_Mul()
        if not coeff.is_Rational:
            return None
        powers = {}
        for part in () if rest is sympy.S.One else sympy.Mul.make_args(rest):
            base, exp = part.as_base_exp()
            if not (base.is_Symbol and exp.is_Integer) or base in powers:
                return None
            powers[base] = int(exp)
        terms[frozenset(powers.items())] = coeff
    if len(terms) != len(sympy.Add.make_args(eq)):
        return None
    gens = tuple(sorted({x for mono in terms for x, _ in mono}, key=sympy.default_sort_key))
    rows = [(tuple(dict(mono).get(x, 0) for x in gens), c) for mono, c in terms.items()]
    low = [min(e[i] for e, _ in rows) for i in range(len(gens))]
    scale = math.lcm(*(int(c.q) for _, c in rows))
    rows = [(e, int(c * scale)) for e, c in rows]
    content = math.gcd(*(c for _, c in rows))
    return gens, {tuple(k - m for k, m in zip(e, low)): c // content for e, c in rows}


def certain_factors(eq, unknowns):
    """:func:`_factors` where the numerator's part past its monomial and integer (:func:`laurent_part`) is certainly
    irreducible (:func:`~napkin_cat.cost.seeded.linear_irreducible`): then it is the only factor that can vanish,
    with sympy's sign (a positive leading coefficient); ``False`` where this does not apply.

    >>> x, y, z = sympy.Symbol("x", positive=True), sympy.Symbol("y", positive=True), sympy.Symbol("z")
    >>> certain_factors(x - 4 / y, {x}), certain_factors(z * y + 1, {z})    # (z of unknown sign: the exact route)
    ([x*y - 4], False)
    """
    part = laurent_part(eq)
    if part is None:
        part = laurent_part(expand(eq))       # (expanded, its denominators are those of eq's terms)
    if part is None:
        return False
    gens, terms = part
    if not all(x.is_positive for x in gens):
        return False                       # a monomial factor can vanish: the exact route decides
    if len(terms) == 1:
        return []                          # a monomial: never zero for positive symbols
    if not linear_irreducible(terms):
        return False
    poly = sympy.Poly.from_dict(terms, *gens)
    poly = sympy.Poly(poly.as_expr())      # its own generators, ordered as sympy orders them
    if poly.LC() < 0:
        poly = -poly
    f = poly.as_expr()
    return [f] if f.free_symbols & unknowns and sign_of(f) is None else []


@kept
def _factors(eq, unknowns):
    """The factors of ``eq``'s numerator that can vanish for positive unknowns (``[]``: it never vanishes)."""
    if eq != 0:
        certain = certain_factors(eq, unknowns)
        if certain is not False:
            return certain
    return _slow_factors(eq, unknowns)


def _slow_factors(eq, unknowns):
    """:func:`_factors` by sympy's ``together`` and ``factor_list`` (the exact route :func:`certain_factors`
    shortens)."""
    num = sympy.numer(sympy.together(eq))
    if num == 0:
        return None
    _, factors = _factor_list(num)
    return [f for f, _ in factors if f.free_symbols & unknowns and sign_of(f) is None]


def linear_pair(eqs, unknowns, order):
    """An equation and an unknown in which it is linear with a coefficient free of that unknown: the first unknown
    of ``order`` that has one, and among its equations the one with the fewest unknowns, then the smallest
    coefficient (the first on ties).  Later unknowns are not tried once one has a pair (no ``Poly`` built)."""
    for x in order:
        if x not in unknowns:
            continue
        best = None
        for k, eq in enumerate(eqs):
            if not eq.has(x):
                continue
            poly = sympy.Poly(eq, x)
            if poly.degree() != 1:
                continue
            coeff, rest = poly.all_coeffs()
            rank = (order.index(x), len(eq.free_symbols & unknowns), count_ops(coeff))
            if best is None or rank < best[0]:
                best = (rank, k, x, coeff, rest)
        if best is not None:
            return best
    return None


def _roots(eq, x):
    poly = sympy.Poly(eq, x)
    if poly.degree() > MAX_DEGREE:
        return None
    if poly.degree() == 1:
        a, b = poly.all_coeffs()
        return [-b / a]
    a, b, c = poly.all_coeffs()
    disc = factor(b ** 2 - 4 * a * c)
    return [(-b + s * sympy.sqrt(disc)) / (2 * a) for s in (1, -1)]


def _eliminate(eqs, unknowns, order, assigned, budget, large=None):
    """Every solution of ``eqs = 0`` in positive ``unknowns``, as lists of assignments; None past the bounds.  A value
    sympy reads as not positive is dropped (:func:`~napkin_cat.cost.point_sign.not_positive`, ``large``: ``M``)."""
    if budget[0] <= 0:
        return None
    normal = []
    for i, eq in enumerate(eqs):
        fs = _factors(eq, unknowns)
        if fs is None:
            continue                       # 0 = 0
        if not fs:
            return []                      # never zero for positive unknowns: no solution here
        if len(fs) > 1:
            out = []
            for f in fs:                   # a product vanishes where one factor does
                budget[0] -= 1
                sub = _eliminate([f] + eqs[:i] + eqs[i + 1:], unknowns, order, assigned, budget, large)
                if sub is None:
                    return None
                out += sub
            return out
        normal.append(expand(fs[0]))
    if not unknowns:
        return [assigned] if not normal else []
    if not normal:
        return None                        # a continuum of solutions: not a closed form
    pair = linear_pair(normal, unknowns, order)
    if pair is not None:
        _, k, x, coeff, rest = pair
        value = -rest / coeff
        candidates = [value]
    else:
        single = [(eq, next(iter(eq.free_symbols & unknowns))) for eq in normal
                  if len(eq.free_symbols & unknowns) == 1]
        if not single:
            return None
        eq, x = single[0]
        k = normal.index(eq)
        candidates = _roots(eq, x)
        if candidates is None:
            return None
    out = []
    for value in candidates:
        if not_positive(value, large) or value.has(sympy.I):
            continue
        budget[0] -= 1
        rest_eqs = [e.xreplace({x: value}) for j, e in enumerate(normal) if j != k]   # (a symbol: as subs)
        sub = _eliminate(rest_eqs, unknowns - {x}, order, assigned + [(x, value)], budget, large)
        if sub is None:
            return None
        out += sub
    return out


def kkt_points(H, active, free, M, tidied: bool = True):
    """The KKT points of ``min H  s.t.  C = M`` (C in ``active``) with multipliers > 0, in closed form.

    Each point maps every free tile's name, and ``"lambda_j"``, to its value (an expression in the
    sizes and ``M``); ``None`` if the system is beyond the bounded elimination.  One tile under one
    column linear in it is solved directly (:func:`direct_point`); the rest by elimination.

    ``tidied=False``: the tiles as the elimination leaves them, not made shortest (:func:`tidy`, about half the
    work of a point solved with the sizes put in as numbers): equal in value to the tidied ones, for a caller
    that only reads them as numbers.  A point whose tile is not positive is dropped where sympy sees it on the
    form it has, so the untidied points may keep one the tidied drop (never positive there: the reader drops it).

    >>> import napkin_cat as nc
    >>> M, d, n, g, h = (nc.symbol(s) for s in ("M", "d", "n", "g_e", "g_n"))
    >>> H, C = d * n / h + d * n ** 2 / (g * h) + n ** 2 / g, d * g + d * h + g * h
    >>> tidied, raw = (kkt_points(H, [C], [g, h], M, tidied=t) for t in (True, False))
    >>> at = {M: 4096, d: 48, n: 64}
    >>> [abs(complex(p["g_e"].subs(at)) - complex(q["g_e"].subs(at))) < 1e-9 for p, q in zip(tidied, raw)]
    [True, True]
    >>> tidied[1]["g_e"] == raw[1]["g_e"]
    False
    """
    # H's terms free of the tiles: no part in ∂H/∂g
    moving = sympy.Add(*[t for t in sympy.Add.make_args(H) if t.has(*free)]) if free else H
    points = _kkt_points(moving, tuple(active), tuple(free), M, bool(tidied))
    return None if points is None else [dict(p) for p in points]


@kept
def _kkt_points(H, active, free, M, tidied=True):
    if len(free) == 1 and len(active) == 1:
        point = direct_point(H, active[0], free[0], M, tidied)
        if point is not None:
            return [] if any(not_positive(v, M) for v in point.values()) else [point]
    return _eliminated(H, list(active), list(free), M, tidied)


def direct_point(H, C, g, M, tidied: bool = True):
    """The KKT point of ``min H  s.t.  C = M`` for one tile ``g`` and ``C = a·g + b`` with ``a > 0`` free of ``g``:
    ``g* = (M − b)/a`` and ``λ = −(∂H/∂g)(g*)/a``, as :func:`kkt_points` maps them; ``None`` for any other ``C``,
    and where ``−∂H/∂g`` is not a sum of positive terms (then λ's sign is the elimination's to decide).

    The system ``∂H/∂g + λ·a = 0``, ``a·g + b = M`` is linear in ``(λ, g)`` with the one solution above; it is the
    elimination's point (a tile and a multiplier that are not positive are dropped by the caller).

    >>> import napkin_cat as nc
    >>> g, M, d = nc.symbol("g_q"), nc.symbol("M"), nc.symbol("d")
    >>> direct_point(2 * d / g, 2 * d * g + d + 3 * g, g, M)
    {'g_q': (M - d)/(2*d + 3), 'lambda_0': 2*d*(2*d + 3)/(M - d)**2}
    >>> direct_point(2 * d / g, g ** 2, g, M) is None          # not linear in the tile: the elimination's
    True
    """
    if not C.is_polynomial(g):
        return None
    poly = sympy.Poly(C - M, g)
    if poly.degree() != 1:
        return None
    coeff, rest = poly.all_coeffs()
    slope = -sympy.diff(H, g)
    if sign_of(coeff) != 1 or sign_of(slope) != 1:
        return None                        # λ's sign is not read off the terms: the elimination decides
    value = tidy(-rest / coeff) if tidied else -rest / coeff
    return {str(g): value, "lambda_0": slope.subs(g, value) / coeff}


def _eliminated(H, active, free, M, tidied=True):
    """:func:`kkt_points` by the bounded elimination (:func:`_eliminate`); the tiles tidied where ``tidied``."""
    lams = [sympy.Dummy(f"lambda_{j}", positive=True) for j in range(len(active))]
    eqs = [sympy.diff(H, g) + sum(lam * sympy.diff(C, g) for lam, C in zip(lams, active)) for g in free]
    eqs += [C - M for C in active]
    order = lams + list(free)
    solutions = _eliminate(eqs, set(order), order, [], [MAX_BRANCHES], M)
    if solutions is None:
        return None
    points = []
    for assignment in solutions:
        values = {}
        for x, v in reversed(assignment):
            values[x] = v.xreplace(values)     # (symbols, each value free of the others: as subs)
        point = {str(g): tidy(values[g]) if tidied else values[g] for g in free}
        point.update({f"lambda_{j}": values[lam] for j, lam in enumerate(lams)})   # only its sign is used
        if any(not_positive(v, M) for v in point.values()):
            continue
        if point not in points:
            points.append(point)
    return points


@kept
def tidy(expr):
    """The shortest of a few equivalent forms (``(M+1)/sqrt(M+1) - 1`` → ``sqrt(M + 1) - 1``); of forms that tie,
    the first (the radicals collected in sympy's canonical order: the same form under every hash seed).

    Rewriting radicals (``radsimp``, collecting) is tried on small expressions only: on large
    ones it has no useful time bound (minutes on the three-matrix chain).
    """
    expr = sympy.sympify(expr)
    ops = count_ops(expr)
    if ops > MAX_TIDY_OPS:
        return expr
    forms = [factor(expr), sympy.cancel(expr)]
    # (sympy's canonical order, not a set's: a tie goes to one form in every process, whatever PYTHONHASHSEED)
    roots = sorted((p for p in expr.atoms(sympy.Pow) if p.exp == sympy.Rational(1, 2)), key=sympy.default_sort_key)
    if roots and ops <= MAX_RADICAL_OPS:
        forms.append(sympy.radsimp(expr))
        expanded = expand(expr)
        collected = [sympy.collect(expanded, r) for r in roots]
        forms += collected + [factor(c) for c in collected]
    best, fewest = expr, ops                 # the first of the fewest operations: expr where it ties
    for form in forms:
        n = count_ops(form)
        if n < fewest:
            best, fewest = form, n
    return best


@kept
def _factor_list(expr):
    """``(coefficient, [(factor, power)])``; an expression sympy cannot factor is its own factor."""
    expr = expand(expr)
    if expr.is_number:
        return expr, []
    try:
        return factor_list(expr)
    except sympy.PolynomialError:
        return sympy.Integer(1), [(expr, 1)]


def condition(expr, M):
    """``expr ≤ 0`` made readable: same-signed factors dropped, and solved for ``M`` where linear in it.

    ``None`` if ``expr`` is too large to work on within bounds.
    """
    if count_ops(expr) > MAX_TIDY_OPS:
        return None                        # too large to decide or print: no closed form
    num, den = sympy.fraction(sympy.together(expr))
    if num == 0:
        return sympy.true
    sign, kept = 1, []
    for part, power in ((num, 1), (den, -1)):
        coeff, factors = _factor_list(part)
        sign = -sign if coeff.is_negative else sign
        for f, k in factors:
            s = sign_of(f)
            if k % 2 == 0:
                continue                   # an even power is never negative (zero only on a boundary)
            if s is None:
                kept.append(f ** (k * power))
            elif s < 0:
                sign = -sign
    if not kept:
        return sympy.true if sign < 0 else sympy.false
    body = sympy.Mul(*kept)
    if isinstance(M, sympy.Symbol) and len(kept) == 1 and body.is_polynomial(M) and sympy.degree(body, M) == 1:
        a, b = sympy.Poly(body, M).all_coeffs()
        slope = sign_of(sign * a)
        if slope is not None:
            bound = sympy.cancel(-b / a)
            bound = expand(bound) if bound.is_polynomial() else tidy(bound)
            return sympy.Le(M, bound) if slope > 0 else sympy.Ge(M, bound)
    return sympy.Le(sign * body, 0)


def _tightest(conds, M):
    """Drop a bound ``M ≥ e`` (``M ≤ e``) implied by another ``M ≥ e'`` with ``e' − e ≥ 0`` (``≤ 0``)."""
    def implied(c, other, way):
        diff = expand(way * (other.rhs - c.rhs))
        return diff == 0 or sign_of(diff) == 1
    out = []
    for i, c in enumerate(conds):
        if isinstance(c, (sympy.GreaterThan, sympy.LessThan)) and c.lhs == M:
            way = 1 if isinstance(c, sympy.GreaterThan) else -1
            if any(j != i and type(o) is type(c) and o.lhs == M and implied(c, o, way)
                   and not (implied(o, c, way) and j > i) for j, o in enumerate(conds)):
                continue
        out.append(c)
    return out


def piecewise_optimum(H, columns, free, M):
    """``(H*, tiles, branches)``: the exact optimum as a ``Piecewise`` over active sets; ``None`` past the bounds.

    ``branches`` lists ``(active columns, tiles, condition)``; the last branch's condition is
    replaced by ``True``: the active sets are exhaustive, so where the others fail it holds.
    """
    branches = []
    sets = [s for r in range(1, len(free) + 1) for s in itertools.combinations(columns, r)]
    if len(sets) > MAX_ACTIVE_SETS:
        return None
    for active in sets:
        points = kkt_points(H, list(active), free, M)
        if points is None:
            return None
        for point in points:
            tiles = {g: point[str(g)] for g in free}
            # real first: where a root's radicand is negative, this fails before anything compares complex values
            radicands = sorted({p.base for v in point.values() for p in sympy.sympify(v).atoms(sympy.Pow)
                                if not p.exp.is_integer and p.base.is_nonnegative is not True},
                               key=sympy.default_sort_key)     # (_tightest keeps the first of two alike)
            conds = [condition(-r, M) for r in radicands]
            conds += [condition(-g, M) for g in tiles.values()]
            conds += [condition(-point[f"lambda_{j}"], M) for j in range(len(active))]
            conds += [condition(C.subs(tiles) - M, M) for C in columns if C not in active]
            if any(c is None for c in conds):
                return None
            cond = sympy.And(*_tightest(conds, M))
            if cond is not sympy.false:
                branches.append((active, tiles, cond))
    if not branches:
        return None
    if any(cond is sympy.true for _, _, cond in branches):
        branches = [next(b for b in branches if b[2] is sympy.true)]
    values = [tidy(H.subs(tiles)) for _, tiles, _ in branches]
    if len(branches) == 1:
        return values[0], dict(branches[0][1]), branches
    conds = [cond for _, _, cond in branches[:-1]] + [sympy.true]
    Hstar = sympy.Piecewise(*zip(values, conds))
    tiles = {g: sympy.Piecewise(*[(t[g], c) for (_, t, _), c in zip(branches, conds)]) for g in free}
    return Hstar, tiles, branches
