"""cost/point_sign: a value certainly positive at one admissible point is never one sympy reads as not positive
(the law ``positive_somewhere(v) ⇒ v.is_positive is not False``), and the elimination's drops are sympy's own.

Checked by a second route: the interval's ends against the exact value at the point (sympy's rationals and
``evalf`` at 50 digits), and every decision of the block's two cross-term problems against ``is_positive``."""
from __future__ import annotations

import random

import sympy

import napkin_cat as nc
from napkin_cat.cost import lagrange
from napkin_cat.cost.point_sign import not_positive, positive_somewhere, point_interval

M, d, e, h, n = (nc.symbol(s) for s in ("M", "d", "e", "h", "n"))
g_e, g_n = nc.symbol("g_e"), nc.symbol("g_n")


def _random_value(rng: random.Random, depth: int):
    """Sums, differences, products, quotients, integer powers and square roots of the sizes and small rationals."""
    leaves = [M, d, e, h, n, sympy.Integer(rng.randint(-9, 9)), sympy.Rational(rng.randint(-9, 9), rng.randint(2, 7))]
    if depth == 0:
        return rng.choice(leaves)
    a, b = _random_value(rng, depth - 1), _random_value(rng, depth - 1)
    kind = rng.randrange(6)
    if kind == 0:
        return a + b
    if kind == 1:
        return a - b
    if kind == 2:
        return a * b
    if kind == 3:
        return a / b if b != 0 else a
    if kind == 4:
        return sympy.sqrt(a ** 2 + b ** 2 + 1)
    return a ** rng.choice([2, 3, -1])


def test_interval_holds_the_exact_value():
    rng = random.Random(35)
    read = 0
    for _ in range(300):
        value = _random_value(rng, 3)
        ends, at = point_interval(value, M)
        if ends is None:
            continue
        read += 1
        exact = sympy.sympify(value).xreplace({s: sympy.Integer(int(v)) for s, v in at.items()}).evalf(50)
        assert sympy.Float(ends[0], 50) <= exact <= sympy.Float(ends[1], 50), (value, ends, exact)
    assert read > 200


def test_exact_zero_is_not_positive():
    # exactly 0 at every point, a few units in the last place off it in floats: the widened ends hold 0
    for value in ((sympy.sqrt(d) + 1) ** 2 - d - 2 * sympy.sqrt(d) - 1,
                  (sympy.sqrt(M + d) + sympy.sqrt(n)) ** 2 - M - d - n - 2 * sympy.sqrt(M + d) * sympy.sqrt(n),
                  sympy.sqrt(d + n) ** 3 - (d + n) * sympy.sqrt(d + n) + 0 * M):
        ends, _ = point_interval(value, M)
        assert ends[0] <= 0 <= ends[1]
        assert not positive_somewhere(value, M)


def test_never_refutes_a_false():
    rng = random.Random(36)
    falses = 0
    for _ in range(400):
        value = sympy.sympify(_random_value(rng, 2))
        if value.is_positive is False:
            falses += 1
            assert not positive_somewhere(value, M), value
            assert not_positive(value, M)
    assert falses > 50


def test_only_admissible_points():
    # a symbol that may not take the point's positive integers: no certificate (sympy decides)
    x = sympy.Symbol("x", real=True)
    even = sympy.Symbol("k", positive=True, even=True)
    assert not positive_somewhere(x + 100)
    assert not positive_somewhere(even + 1)
    assert positive_somewhere(d + 1)


def test_block_problems_drop_what_sympy_drops():
    """The block's two cross-term problems (both signs of their quadratic's root) solved with every decision of
    not_positive checked against sympy's, the certificate deciding most of them."""
    seen = {"certified": 0, "asked": 0}

    def checked(value, large=None):
        truth = value.is_positive is False
        certified = positive_somewhere(value, large)
        assert not (certified and truth), value
        seen["certified" if certified else "asked"] += 1
        return not_positive(value, large)

    H = d * e * h * n / g_n + d * e * h * n ** 2 / (g_e * g_n) + e * h * n ** 2 / g_e
    original = lagrange.not_positive
    lagrange.not_positive = checked
    try:
        for T in (d * g_e + d * g_n + g_e * g_n, d * g_e + d * g_n + 2 * g_e * g_n):
            points = lagrange.kkt_points(H, [T], [g_e, g_n], M)
            assert len(points) == 2
    finally:
        lagrange.not_positive = original
    assert seen["certified"] >= 10 and seen["certified"] > seen["asked"]


def test_certified_value_is_not_asked(monkeypatch):
    """not_positive answers a certified value without sympy's assumptions (the work it exists to skip)."""
    value = (-d + sympy.sqrt(2 * M + d ** 2)) / 2

    def asked(self):
        raise AssertionError("sympy asked")

    monkeypatch.setattr(type(value), "is_positive", property(asked))
    assert not_positive(value, M) is False
