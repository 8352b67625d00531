"""Optimal transfers: ``H*(a, M) = min_g (Π a / Π g) H_g  s.t.  M_ℓ ≤ M`` (paper §4.1, App. A.2).

Two answers, side by side (errata D-12):

* the paper's **large-M form**: stream sizes set to 1, the memory constraint cut
  to its leading terms (highest total degree), solved in closed form by Lagrange
  multipliers; the result is a sum of power terms ``Σ α_t M^-β_t`` (``.terms``);
* the **exact** optimum under the full memory model (every live column), in
  closed form where sympy solves it, and by exact integer search over divisors
  for concrete sizes (``optimal(..., sizes={...})`` with an int ``memory``).

>>> import napkin_cat as nc
>>> mm = nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
>>> o = optimal(nc.cost(mm), memory="M")
>>> o.H, o.sizes
(a*c + 2*a*b*c/sqrt(M), {g_a: sqrt(M), g_c: sqrt(M), s_b: 1})
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import sympy

from napkin_cat.syntax.axis import symbol
from napkin_cat.errors import LevelError, MemoryLimitError, NapkinError


@dataclass
class Optimum:
    """``H`` (large-M closed form), ``sizes``, ``terms`` [(α_t, β_t)], and the exact optimum."""

    H: sympy.Expr
    sizes: dict
    terms: list
    memory: sympy.Expr
    exact_H: sympy.Expr | None = None
    exact_sizes: dict | None = None
    constraint: sympy.Expr | None = None
    exact_constraint: sympy.Expr | None = None
    notes: list = field(default_factory=list)

    def __str__(self):
        terms = " + ".join(f"({a})·M^-{b}" for a, b in self.terms)
        lines = [f"H* (paper's large-M form) = {self.H}   with {self.sizes}",
                 f"   as power terms Σ α_t M^-β_t: {terms}"]
        if self.exact_H is not None and self.exact_constraint is not None:
            lines.append(f"H* (exact, memory {self.exact_constraint} ≤ {self.memory}) = {self.exact_H}"
                         f"   with {self.exact_sizes}")
        lines += [f"   note: {n}" for n in self.notes]
        return "\n".join(lines)

    def at(self, **values):
        """``H`` with sizes and memory substituted (numbers)."""
        subs = {symbol(k): v for k, v in values.items()}
        return self.H.subs(subs)


def _as_memory(memory):
    if isinstance(memory, str):
        return symbol(memory)
    return sympy.sympify(memory)


def power_terms(expr, M) -> list:
    """``[(α_t, β_t)]`` with ``expr = Σ α_t M^-β_t`` (β_t ≥ 0, zero-exponent terms included)."""
    out = {}
    for term in sympy.Add.make_args(sympy.expand(expr)):
        coeff, exp = term.as_coeff_exponent(M)
        if coeff.has(M):
            raise NapkinError(f"{expr} is not a sum of powers of {M}")
        beta = sympy.nsimplify(-exp)
        out[beta] = out.get(beta, 0) + coeff
    return sorted(((sympy.factor(a), b) for b, a in out.items()), key=lambda t: t[1])


def _leading(expr, tiles):
    """The terms of highest total degree among those that involve a tile symbol."""
    poly_terms = [t for t in sympy.Add.make_args(sympy.expand(expr)) if t.free_symbols & set(tiles)]
    if not poly_terms:
        return sympy.expand(expr)
    def degree(t):
        return sum(sympy.degree(t, s) for s in t.free_symbols)
    top = max(degree(t) for t in poly_terms)
    return sympy.Add(*[t for t in poly_terms if degree(t) == top])


def _dominant(columns, tiles):
    """The column that is largest as every tile grows (compare by leading, then next terms)."""
    t = sympy.Symbol("t", positive=True)
    best = None
    for col in columns:
        poly = sympy.expand(col.subs({g: t * g for g in tiles}))
        key = sympy.Poly(poly, t).all_coeffs() if poly.has(t) else [poly]
        if best is None:
            best = (col, key)
            continue
        a, b = key, best[1]
        if len(a) != len(b):
            if len(a) > len(b):
                best = (col, key)
            continue
        for x, y in zip(a, b):
            diff = sympy.simplify(x - y)
            if diff.is_positive:
                best = (col, key)
                break
            if diff.is_negative or diff != 0:
                break
    return best[0]


def _tidy(expr):
    """The shortest of a few equivalent forms (``(M+1)/sqrt(M+1) - 1`` → ``sqrt(M + 1) - 1``)."""
    expr = sympy.sympify(expr)
    forms = [expr, sympy.simplify(expr)]
    roots = [p for p in expr.atoms(sympy.Pow) if p.exp == sympy.Rational(1, 2)]
    forms += [sympy.collect(sympy.expand(expr), r) for r in roots]
    forms += [sympy.factor(sympy.collect(sympy.expand(expr), r)) for r in roots]
    return min(forms, key=sympy.count_ops)


def _solve(H, constraint, tiles, M):
    """Minimise ``H`` over ``tiles`` with ``constraint = M`` (Lagrange); tiles H ignores are 1."""
    free = [g for g in tiles if H.has(g)]
    fixed = {g: sympy.Integer(1) for g in tiles if not H.has(g)}
    constraint = constraint.subs(fixed)
    if not free:
        return dict(fixed), H
    lam = sympy.Symbol("lambda_", positive=True)
    eqs = [sympy.diff(H, g) + lam * sympy.diff(constraint, g) for g in free] + [constraint - M]
    try:
        sols = sympy.solve(eqs, free + [lam], dict=True)
    except NotImplementedError:
        sols = []
    for sol in sols:
        if all(sol.get(g) is not None and sol[g].is_positive is not False and not sol[g].has(sympy.I)
               and not (sol[g].free_symbols & set(free)) for g in free):
            sizes = {g: _tidy(sol[g]) for g in free}
            sizes.update(fixed)
            return sizes, _tidy(H.subs(sizes))
    if len(free) > 1:
        # degenerate (H sees the tiles only through their product): grow one tile, keep the others at 1
        for g in free:
            rest = {h: sympy.Integer(1) for h in free if h is not g}
            sizes, value = _solve(H.subs(rest), constraint.subs(rest), [g], M)
            if sizes is not None:
                sizes.update(rest)
                sizes.update(fixed)
                return sizes, value
    return None, None


def optimal(c, memory="M", level: int = 1, *, streams=1, sizes: dict | None = None) -> Optimum:
    """Optimal tile sizes and transfers at ``level`` under ``memory`` (a symbol name, an expression or an int).

    ``streams``: the stream sizes (default 1, the paper's choice: no extra transfers, least memory).
    ``sizes``: concrete axis sizes; with an int ``memory`` this runs the exact integer search.
    """
    if level not in c.H:
        raise LevelError(f"the algorithm moves nothing at level {level}; levels with transfers: {sorted(c.H)}")
    if not c.groups:
        raise NapkinError("the algorithm has no group partition to optimise: apply nc.group first")
    M = _as_memory(memory)
    grp = c.groups[0]
    tiles = list(grp.tiles)
    stream_subs = {s: (streams if not isinstance(streams, dict) else streams.get(str(s), 1))
                   for _, s, _ in c.streams if not isinstance(s, int)}
    H = sympy.expand(c.H[level].subs(stream_subs))
    columns = [sympy.expand(col.subs(stream_subs)) for col in c.columns.get(level, [])]
    if sizes is not None:
        return _integer_search(c, H, columns, tiles, M, level, sizes, stream_subs)
    dominant = _dominant(columns, tiles)
    lead = _leading(dominant, tiles)
    tile_sizes, Hstar = _solve(H, lead, tiles, M)
    if tile_sizes is None:
        raise NapkinError(f"no closed form for the optimum of {H} subject to {lead} <= {M}")
    Hstar = sympy.expand(sympy.simplify(Hstar))
    terms = power_terms(Hstar, M)
    Hform = sympy.Add(*[a * M ** (-b) for a, b in terms])
    exact_sizes, exact_H = _solve(H, dominant, tiles, M)
    notes = []
    if exact_H is None:
        notes.append(f"no closed form for the exact optimum under {dominant} <= {M}")
    tile_sizes.update({s: sympy.sympify(v) for s, v in stream_subs.items()})
    return Optimum(Hform, tile_sizes, terms, M, exact_H, exact_sizes, lead, dominant, notes)


def _divisors(n: int):
    return [g for g in range(1, n + 1) if n % g == 0]


def _integer_search(c, H, columns, tiles, M, level, sizes, stream_subs):
    env = {symbol(k): v for k, v in sizes.items()}
    if not M.is_number:
        raise MemoryLimitError(f"the exact integer search needs a number for the memory limit, got {M}")
    full = {}
    for axis, tile, n in zip(c.groups[0].axes, tiles, c.groups[0].fulls):
        n = sympy.sympify(n).subs(env)
        if not n.is_Integer:
            raise NapkinError(f"give a concrete size for axis {axis!r} (sizes={{'{axis}': …}})")
        full[tile] = int(n)
    Hn = H.subs(env)
    cols = [col.subs(env) for col in columns]
    best = None
    for combo in itertools.product(*(_divisors(full[t]) for t in tiles)):
        sub = dict(zip(tiles, combo))
        if all(col.subs(sub) <= M for col in cols):
            h = Hn.subs(sub)
            if best is None or h < best[0]:
                best = (h, sub)
    if best is None:
        smallest = max([col.subs({t: 1 for t in tiles}) for col in cols], default=0)
        raise MemoryLimitError(f"no tile sizes fit level {level} with memory {M}: even tiles of 1 need "
                               f"{smallest} values; the smallest legal memory is {smallest}")
    h, sub = best
    sub.update({s: sympy.Integer(v) for s, v in stream_subs.items()})
    return Optimum(sympy.Integer(h), sub, [(sympy.Integer(h), sympy.Integer(0))], M, sympy.Integer(h), dict(sub),
                   None, None, ["exact integer search over divisors"])
