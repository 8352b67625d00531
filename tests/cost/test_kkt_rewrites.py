"""The elimination's steps rewritten for speed against their previous code (kkt-35).

* ``tidy`` keeps the first form of the fewest operations, against the reference ``min`` over the same forms
  (``expr`` first: a tie keeps the expression as it came).
"""
import random

import sympy

import napkin_cat as nc
from napkin_cat.cost import lagrange
from napkin_cat.cost.lagrange import kkt_points, tidy

S = nc.symbol
d, e, h, n, M = (S(k) for k in ("d", "e", "h", "n", "M"))
ge, gn = S("g_e"), S("g_n")

#: (H, active columns, free tiles): the block's projection kernel with a cross term (two roots with
#: ``sqrt(M + d·n)``-like radicals), a product column, and the same at numbers (what the numeric scan solves)
PROGRAMS = [
    (d * e * h * n / gn + d * e * h * n ** 2 / (ge * gn) + e * h * n ** 2 / ge, [d * ge + d * gn + 2 * ge * gn],
     [ge, gn]),
    (d * e * h * n / gn + d * e * h * n / ge, [d * ge + d * gn + ge * gn], [ge, gn]),
    (d * e * h * n / gn + d * e * n / ge, [e * gn + ge * gn], [ge, gn]),
    (1560683741184 / gn + 1354760192 / ge, [ge * gn + 1088 * gn], [ge, gn]),
]


def reference_tidy(expr):
    """``tidy`` as it was written before kkt-35: ``min`` (the first of the fewest) over every form."""
    expr = sympy.sympify(expr)
    ops = sympy.count_ops(expr)
    if ops > lagrange.MAX_TIDY_OPS:
        return expr
    forms = [expr, sympy.factor(expr), sympy.cancel(expr)]
    roots = [p for p in expr.atoms(sympy.Pow) if p.exp == sympy.Rational(1, 2)]
    if roots and ops <= lagrange.MAX_RADICAL_OPS:
        forms.append(sympy.radsimp(expr))
        forms += [sympy.collect(sympy.expand(expr), r) for r in roots]
        forms += [sympy.factor(sympy.collect(sympy.expand(expr), r)) for r in roots]
    return min(forms, key=sympy.count_ops)


def test_tidy_keeps_the_first_of_the_fewest_operations(monkeypatch):
    exprs = [2 * (n + 1),                                           # ties with its expansion: kept as it came
             (M + 1) / sympy.sqrt(M + 1) - 1, (n ** 2 - 1) / (n - 1), 2 * n + 2,
             (sympy.sqrt(d) * sympy.sqrt(n) * sympy.sqrt(M + d * n) - d * n) / d,
             2 * sympy.sqrt(M) * sympy.sqrt(d) * sympy.sqrt(e) * sympy.sqrt(n) / (2 * d * e * n + 2 * d * n ** 2)]
    for H, active, free in PROGRAMS:                               # the elimination's points before tidy
        with monkeypatch.context() as m:
            m.setattr(lagrange, "tidy", lambda expr: expr)
            exprs += [p[str(g)] for p in kkt_points(H, active, free, M) for g in free]
    for expr in exprs:
        assert sympy.srepr(tidy(expr)) == sympy.srepr(reference_tidy(expr)), expr
    assert sympy.srepr(tidy(2 * (n + 1))) == sympy.srepr(2 * (n + 1))


def reference_linear_pair(eqs, unknowns, order):
    """``linear_pair`` as it was before kkt-35: every equation against every unknown, the least rank."""
    best = None
    for k, eq in enumerate(eqs):
        for x in order:
            if x not in unknowns or not eq.has(x):
                continue
            poly = sympy.Poly(eq, x)
            if poly.degree() != 1:
                continue
            coeff, rest = poly.all_coeffs()
            rank = (order.index(x), len(eq.free_symbols & unknowns), sympy.count_ops(coeff))
            if best is None or rank < best[0]:
                best = (rank, k, x, coeff, rest)
    return best


class CountingPoly:
    """``sympy`` as ``lagrange`` reads it, counting the ``Poly``s built."""

    def __init__(self):
        self.built = 0

    def Poly(self, *args):
        self.built += 1
        return sympy.Poly(*args)

    def __getattr__(self, name):
        return getattr(sympy, name)


def test_the_linear_pair_is_the_least_rank_and_stops_at_the_first_unknown(monkeypatch):
    rng = random.Random(7)
    x, y, z = (sympy.Dummy(k, positive=True) for k in "xyz")
    order = [x, y, z]
    saved = 0
    for _ in range(60):
        eqs = []
        for _ in range(rng.randint(1, 4)):
            terms = [rng.randint(-3, 3) * sympy.Mul(*[v ** rng.randint(0, 2) for v in order]) * rng.choice((1, d, n))
                     for _ in range(rng.randint(1, 4))]
            eq = sympy.expand(sum(terms))
            if eq.free_symbols & set(order):
                eqs.append(eq)
        unknowns = set(rng.sample(order, rng.randint(1, 3)))
        expected = reference_linear_pair(eqs, unknowns, order)
        counting = CountingPoly()
        with monkeypatch.context() as m:
            m.setattr(lagrange, "sympy", counting)
            got = lagrange.linear_pair(eqs, unknowns, order)
        assert got == expected
        every = sum(1 for eq in eqs for v in order if v in unknowns and eq.has(v))
        assert counting.built <= every
        saved += every - counting.built
    assert saved > 0                                               # later unknowns skipped: Polys not built
