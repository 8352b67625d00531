"""The exact optimum under every column of the memory model (errata D-12), closed or implicit.

``H*(a, M) = min_g H(g)  s.t.  C_j(g) ≤ M  for every column j`` over real tiles. Where the bounded
elimination of :mod:`.lagrange` solves every active set, ``H`` and ``sizes`` are closed forms
(a ``Piecewise`` when the binding column changes with the sizes). Before it is returned, a
closed form is checked at sample sizes: every column within memory, and the value equal to the
numeric optimum of :mod:`.geometric` (an independent route); a form that fails is dropped.
Always available: the KKT system (``system``, ``solution_set``) and ``at(**sizes)``, the
optimum at numbers. The closed form holds where the program is feasible (``M`` at least every
column with tiles of 1) and its tiles lie between 1 and their axis sizes; ``at`` imposes
``1 ≤ g ≤ n`` itself.

>>> from napkin_cat import symbol
>>> g, d, q, x, M = (symbol(n) for n in ("g_q", "d", "q", "x", "M"))
>>> attention = TilingProgram(2*d*q + 2*d*q*x/g, (2*d*g + d + 3*g, 2*d*g + 2*d + 2*g), (g,), ("q",), (q,))
>>> e = exact_optimum(attention, M)
>>> e.sizes[g]
Piecewise(((M - d)/(2*d + 3), M >= 2*d**2 + 4*d), ((M - 2*d)/(2*d + 2), True))
>>> H, tiles = e.at(q=4096, x=4096, d=32, M=2000)      # g_q < d: the column 2d·g_q + 2d + 2g_q binds
>>> round(tiles[g], 6)
29.333333
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import sympy

from napkin_cat.cost import geometric
from napkin_cat.cost.lagrange import piecewise_optimum
from napkin_cat.cost.tiling import TilingProgram, monomials
from napkin_cat.cost.tiling import binding as binding_columns
from napkin_cat.errors import MemoryLimitError, NapkinError
from napkin_cat.syntax.axis import symbol

SAMPLES = 6          # sample sizes at which a closed form is checked
TOLERANCE = 1e-7     # relative agreement with the numeric optimum


@dataclass(frozen=True)
class ExactOptimum:
    """The exact optimum of ``H`` over the ``free`` tiles (``ones`` at 1) with every binding column ≤ ``memory``."""

    program: TilingProgram
    objective: sympy.Expr
    columns: tuple
    free: tuple
    ones: tuple
    memory: sympy.Expr
    H: sympy.Expr | None = None
    sizes: dict | None = None
    notes: list = field(default_factory=list)

    @property
    def constraint(self):
        return sympy.Max(*self.columns) if len(self.columns) > 1 else (self.columns[0] if self.columns else None)

    @property
    def multipliers(self) -> tuple:
        return tuple(sympy.Symbol(f"lambda_{j + 1}", nonnegative=True) for j in range(len(self.columns)))

    @property
    def system(self) -> sympy.Expr:
        """The KKT conditions: stationarity, primal feasibility, complementary slackness, λ ≥ 0."""
        lams = self.multipliers
        conds = [sympy.Eq(sympy.diff(self.objective, g)
                          + sum(lam * sympy.diff(C, g) for lam, C in zip(lams, self.columns)), 0)
                 for g in self.free]
        conds += [sympy.Le(C, self.memory) for C in self.columns]
        conds += [sympy.Eq(lam * (C - self.memory), 0) for lam, C in zip(lams, self.columns)]
        return sympy.And(*conds)

    @property
    def solution_set(self) -> sympy.ConditionSet:
        """``{(g, λ) : KKT}``; by convexity (log coordinates) its tile part is the set of optima."""
        pos = sympy.Interval.open(0, sympy.oo)
        base = sympy.ProductSet(*([pos] * len(self.free) + [sympy.Interval(0, sympy.oo)] * len(self.columns)))
        return sympy.ConditionSet(sympy.Tuple(*self.free, *self.multipliers), self.system, base)

    def at(self, **values) -> tuple:
        """``(H*, tiles)`` at numbers (every size and the memory, by name), over real tiles ``1 ≤ g ≤ n``.

        Raises :class:`MemoryLimitError` if even tiles of 1 do not fit.
        """
        env = {symbol(k): v for k, v in values.items()}
        return self._at(env, upper=True)

    def _at(self, env, *, upper):
        M = sympy.sympify(self.memory).subs(env)
        missing = (self.objective.free_symbols | set().union(*(C.free_symbols for C in self.columns))
                   | M.free_symbols) - set(self.free) - set(env)
        if missing or not M.is_number:
            raise NapkinError(f"give a number for {sorted(map(str, missing | M.free_symbols))} "
                              f"to evaluate the exact optimum")
        n = len(self.free)
        smallest = max((float(C.subs({g: 1 for g in self.free}).subs(env)) for C in self.columns), default=0.0)
        if smallest > float(M):
            raise MemoryLimitError(f"even tiles of 1 need {smallest:g} values, above the memory {M}; "
                                   f"the smallest legal memory is {smallest:g}")
        logc, E = monomials(self.objective, self.free).numeric(env)
        obj = geometric.LogSumExp(logc, E)
        cons = []
        for C in self.columns:
            logc, E = monomials(C, self.free).numeric(env)
            cons.append(geometric.LogSumExp(logc - np.log(float(M)), E))
        for i, g in enumerate(self.free):
            cons.append(geometric.bound_below(n, i))
            if upper:
                full = sympy.sympify(self.program.fulls[self.program.tiles.index(g)]).subs(env)
                if full.is_number and full.is_finite:
                    if float(full) <= 1:
                        raise NapkinError(f"axis {self.program.axes[self.program.tiles.index(g)]!r} has size "
                                          f"{full}: nothing to tile")
                    cons.append(geometric.bound_above(n, i, float(full)))
        u = geometric.minimise(obj, cons)
        tiles = {g: float(np.exp(v)) for g, v in zip(self.free, u)}
        tiles.update({g: 1.0 for g in self.ones})
        return float(np.exp(obj(u)[0])), tiles


def exact_optimum(prog: TilingProgram, M, *, dominant=None) -> ExactOptimum:
    """The exact optimum of the tiling program under memory ``M`` (closed form if found and checked, else implicit).

    ``dominant``: the column that binds for large tiles; its branch of a ``Piecewise`` comes first.
    """
    H, columns, free, ones = prog.restricted()
    binding = binding_columns(columns)
    binding = tuple(sorted(binding, key=lambda C: C != dominant))
    for g in free:
        if not any(C.has(g) for C in binding):
            return ExactOptimum(prog, H, binding, free, ones, M,
                                notes=[f"tile {g} is bounded by no column of the memory model: H* is not attained"])
    base = ExactOptimum(prog, H, binding, free, ones, M)
    if not free:                           # H sees no tile: tiles of 1 hold the least memory
        return ExactOptimum(prog, H, binding, free, ones, M, H, {g: sympy.Integer(1) for g in ones})
    found = piecewise_optimum(H, binding, list(free), M)
    if found is None:
        return ExactOptimum(prog, H, binding, free, ones, M, notes=[
            "no closed form for the exact optimum (beyond quadratic elimination): it is the solution of "
            "o.exact.system (o.exact.solution_set); o.exact.at(**sizes) evaluates it"])
    Hstar, tiles, _ = found
    sizes = dict(tiles)
    sizes.update({g: sympy.Integer(1) for g in ones})
    failure = _check(base, Hstar, sizes)
    if failure:
        return ExactOptimum(prog, H, binding, free, ones, M, notes=[
            f"the closed form found failed its check ({failure}); o.exact.at(**sizes) evaluates the optimum"])
    return ExactOptimum(prog, H, binding, free, ones, M, Hstar, sizes)


def _check(exact: ExactOptimum, Hstar, sizes):
    """Why the closed form is wrong at some sample sizes (a column over memory, or not optimal), else ''."""
    rng = random.Random(0)
    prog = exact.program
    tiles = set(prog.tiles)
    params = sorted((Hstar.free_symbols | exact.objective.free_symbols
                     | set().union(*(C.free_symbols for C in exact.columns))
                     | set().union(*(sympy.sympify(f).free_symbols for f in prog.fulls))) - tiles
                    - exact.memory.free_symbols, key=str)
    full_axes = set().union(*(sympy.sympify(f).free_symbols for f in prog.fulls))
    checked = 0
    for k in range(8 * SAMPLES):
        if checked >= SAMPLES:
            break
        env = {p: sympy.Integer(2 ** 20 if p in full_axes and not any(C.has(p) for C in exact.columns)
                                else rng.randint(1, 64)) for p in params}
        ones = {g: sympy.Integer(1) for g in prog.tiles}
        smallest = max(sympy.sympify(C).xreplace(ones).xreplace(env) for C in exact.columns)
        if isinstance(exact.memory, sympy.Symbol):
            # slack log-spaced from just above the smallest legal memory to 10^4 times it: the
            # columns that bind only for small tiles are met as well as the large-M ones
            slack = 1.05 * (1e4 / 1.05) ** ((k % SAMPLES) / (SAMPLES - 1))
            env[exact.memory] = sympy.Integer(int(smallest * slack) + 1)
        else:
            env.update({s: sympy.Integer(rng.randint(1, 10 ** 6)) for s in exact.memory.free_symbols})
        M = exact.memory.xreplace(env)
        if not M > smallest:
            continue
        # xreplace: every size at once (subs goes symbol by symbol and re-simplifies a Piecewise each time)
        at = {g: sympy.sympify(v).xreplace(env) for g, v in sizes.items()}
        for C in exact.columns:
            used = sympy.sympify(C).xreplace(env).xreplace(at)
            if not _at_most(used, M):
                return f"column {C} holds {sympy.N(used, 8)} > {M} at {env}"
        value = float(Hstar.xreplace(env))
        try:
            # the closed form ignores g ≥ 1: compare only where its tiles are at least 1
            best = exact._at(env, upper=False)[0] if all(float(v) >= 1 for v in at.values()) else None
        except MemoryLimitError:
            continue
        if best is not None and abs(value - best) > TOLERANCE * abs(best):
            return f"H* = {value:.10g} but the numeric optimum is {best:.10g} at {env}"
        checked += 1
    return ""


def _at_most(value, limit) -> bool:
    verdict = sympy.Le(value, limit)
    if verdict in (sympy.true, sympy.false):
        return bool(verdict)
    return float(sympy.N(value - limit, 30)) <= 1e-20 * float(limit)
