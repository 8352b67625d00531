"""cost/op_count.count_ops against sympy.count_ops (the exact route it shortens): random expressions of every kind
the walk distinguishes, and the KKT points and their H that lagrange and top_columns count."""
from __future__ import annotations

import random

import sympy

import napkin_cat as nc
from napkin_cat.cost.lagrange import kkt_points, tidy
from napkin_cat.cost.op_count import count_ops

x, y, z = sympy.symbols("x y z", positive=True)
w = sympy.Symbol("w")       # (no assumptions: its negation stays a Mul)
f = sympy.Function("f")


def _random_expr(rng: random.Random, depth: int):
    """An expression of sums (led by negative terms or not), products, quotients, powers (-1, 1/2, -3/2, 3), E and
    exp, Max/Min, an undefined function, rationals, integers and floats of either sign."""
    leaves = [x, y, z, w, sympy.Integer(rng.randint(-5, 5)), sympy.Rational(rng.randint(-7, 7), rng.randint(2, 5)),
              sympy.Float(rng.choice([-2.5, 0.5, 3.0])), sympy.S.Exp1, sympy.S.One, sympy.S.NegativeOne]
    if depth == 0:
        return rng.choice(leaves)
    a, b = _random_expr(rng, depth - 1), _random_expr(rng, depth - 1)
    kind = rng.randrange(11)
    if kind == 0:
        return a + b
    if kind == 1:
        return a - b
    if kind == 2:
        return -a - b
    if kind == 3:
        return a * b
    if kind == 4:
        return -a * b / 3
    if kind == 5:
        return a / (b + 1) if b != -1 else a
    if kind == 6:
        return sympy.Pow(a + x, rng.choice([sympy.Integer(-1), sympy.Rational(1, 2), sympy.Rational(-3, 2), 3]))
    if kind == 7:
        return sympy.exp(a) + sympy.sqrt(b + y)
    if kind == 8:
        return sympy.Max(a, b + z) + sympy.Min(a, x)
    if kind == 9:
        return f(a) * sympy.sin(b)
    return (a + b + x) * (a - y) - (b * w) / (a * x + 2)


def test_equals_sympy_on_random_expressions():
    rng = random.Random(35)
    exprs = [_random_expr(rng, rng.randint(0, 4)) for _ in range(600)]
    kinds = {type(e).__name__ for e in exprs}
    assert {"Add", "Mul", "Pow", "Symbol"} <= kinds
    assert [count_ops(e) for e in exprs] == [sympy.count_ops(e) for e in exprs]
    assert all(isinstance(count_ops(e), int) for e in exprs)
    assert max(count_ops(e) for e in exprs) > 20      # (deep ones among them)


def test_equals_sympy_on_kkt_points():
    """The forms :func:`tidy` and ``kept_form`` count: a two-tile point with a cross term (radicals in ``M``), its
    tidied tiles and its ``H`` expanded, a sum of 1,000+ operations."""
    M, d, n, g, h = (nc.symbol(s) for s in ("M", "d", "n", "g_e", "g_n"))
    H, C = d * n / h + d * n ** 2 / (g * h) + n ** 2 / g, d * g + d * h + g * h
    forms = []
    for tidied in (True, False):
        for p in kkt_points(H, [C], [g, h], M, tidied=tidied):
            Hp = H.xreplace({g: p["g_e"], h: p["g_n"]})
            forms += [p["g_e"], p["g_n"], p["lambda_0"], Hp, sympy.expand(Hp), tidy(p["g_n"])]
    assert max(sympy.count_ops(e) for e in forms) > 1000
    assert [count_ops(e) for e in forms] == [sympy.count_ops(e) for e in forms]


def test_not_an_expression_is_sympys():
    """A relation, a boolean, a container: counted by sympy (the port walks an ``Expr`` only)."""
    others = [sympy.Le(x + y, 2 * z), sympy.And(x > 1, y < 2), [x + y, x * y * z], sympy.Tuple(x + 1, y)]
    assert [count_ops(e) for e in others] == [sympy.count_ops(e) for e in others]
