"""``power_terms`` reads ``Σ α_t M^-β_t`` off a large-M optimum, each ``α_t`` factored (issue 35 item 3: a monomial
coefficient is left as it is instead of going through ``sympy.factor``).

Second route: ``sympy.factor`` itself, on seeded random monomials (rational coefficients, the package's positive
integer symbols, rational exponents: what :func:`~napkin_cat.cost.optimum.is_monomial` accepts) and on random sums
of powers of ``M`` whose coefficients are sums (what it must refuse): the terms are those of factoring every
coefficient, ``srepr`` for ``srepr`` (the symbolic ``H`` of a derive is compared by its ``srepr``).
"""
from __future__ import annotations

import random

import sympy

import napkin_cat as nc
from napkin_cat.cost.optimum import is_monomial, power_terms

S = nc.symbol
M = S("M")
SIZES = [S(k) for k in "dehnq"]


def monomial(rng):
    c = sympy.Rational(rng.choice([-1, 1]) * rng.randint(1, 12), rng.randint(1, 4))
    exps = [sympy.Rational(rng.randint(-4, 4), rng.choice([1, 2, 3])) for _ in SIZES]
    return c * sympy.Mul(*[s ** k for s, k in zip(SIZES, exps) if rng.random() < 0.6])


def by_factor(expr):
    """The second route: every coefficient factored (the definition before the shortcut)."""
    out = {}
    for term in sympy.Add.make_args(sympy.expand(expr)):
        coeff, exp = term.as_coeff_exponent(M)
        out[sympy.nsimplify(-exp)] = out.get(sympy.nsimplify(-exp), 0) + coeff
    return sorted(((sympy.factor(a), b) for b, a in out.items()), key=lambda t: t[1])


def test_a_monomial_is_what_factor_returns():
    rng = random.Random(11)
    seen = 0
    for _ in range(300):
        m = monomial(rng)
        if is_monomial(m):
            seen += 1
            assert sympy.srepr(sympy.factor(m)) == sympy.srepr(m), m
    assert seen >= 290


def test_power_terms_are_those_of_factoring_every_coefficient():
    rng = random.Random(12)
    for _ in range(25):
        expr = sum(monomial(rng) * M ** -sympy.Rational(rng.randint(0, 4), rng.choice([1, 2]))
                   for _ in range(rng.randint(1, 6)))
        assert sympy.srepr(power_terms(expr, M)) == sympy.srepr(by_factor(expr)), expr


def test_a_sum_or_a_radical_of_a_number_is_factored():
    d, e = SIZES[:2]
    assert not is_monomial(d * e + d) and not is_monomial(sympy.sqrt(2) * d) and not is_monomial(d * (e + 1))
    assert power_terms(2 * d * e / M + 2 * d / M, M) == [(2 * d * (e + 1), 1)]
