"""A sum of monomials factored as its content times a part irreducible at sight (napkin_cat/cost/content_factor.py):
the same tree as ``sympy.factor`` (srepr equal) on given sums, on seeded random ones (where the law applies and where
it does not), and on every coefficient a symbolic derive's power terms factor."""
from __future__ import annotations

import random

import pytest
import sympy

import napkin_cat as nc
import napkin_cat.cost.optimum_record as record
from napkin_cat.cost.content_factor import factored, read_off

a, b, c, d = sympy.symbols("a b c d", positive=True)
x = sympy.Symbol("x")

GIVEN = [3 * a * b * c + 3 * a * c * d, 2 * a + 2 * b, 2 * a * b + 2 * a + 2 * b, a * b + a + b + 1,
         6 * a + 4 * b, a ** 2 * b + 2 * a * b ** 2, 2 * a * b + c ** 2, a ** 2 + 2 * a * b + b ** 2, a - b,
         a / 2 + b, sympy.sqrt(a) * b + b, a * b + a / b, 4 * a ** 3 * c + 6 * a ** 2 * c ** 2 + 2 * a * c,
         x * a + x, a + 1, 2 * a + 4]


@pytest.mark.parametrize("e", GIVEN)
def test_the_given_sums_factor_as_sympys(e):
    assert sympy.srepr(factored(e)) == sympy.srepr(sympy.factor(e))


def test_the_law_is_read_off_where_it_applies_and_only_there():
    assert read_off(3 * a * b * c + 3 * a * c * d) is not None        # x = b: A = 3ac·b alone
    assert read_off(2 * a + 2 * b) is not None
    assert read_off(a * b + a + b + 1) is None                          # (a + 1)(b + 1): two terms on each side
    assert read_off(a ** 2 + 2 * a * b + b ** 2) is None                # degree 2 in every symbol
    assert read_off(a - b) is None and read_off(a / 2 + b) is None and read_off(sympy.sqrt(a) * b + b) is None


def random_sum(rng):
    """Positive integer combinations of monomials in four symbols, some a product of two such sums (reducible)."""
    def one():
        return sympy.Add(*(rng.randint(1, 4) * sympy.Mul(*(s ** rng.randint(0, 1) for s in (a, b, c, d)))
                           for _ in range(rng.randint(2, 3))))
    e = one()
    if rng.random() < 0.3:
        e = sympy.expand(e * one())
    return sympy.expand(e * rng.choice([1, 2, 6]) * rng.choice([1, a, b * c ** 2]))


def test_random_sums_factor_as_sympys():
    rng = random.Random(35)
    sums = [random_sum(rng) for _ in range(80)]
    read = sum(read_off(e) is not None for e in sums)
    assert 20 <= read <= 70                                          # both routes taken
    assert [sympy.srepr(factored(e)) for e in sums] == [sympy.srepr(sympy.factor(e)) for e in sums]


def test_a_symbolic_derives_power_term_coefficients_factor_as_sympys(monkeypatch):
    """Every coefficient the power terms of a symbolic derive factor (a SwiGLU MLP and attention, renamed apart
    so no earlier derive in the process left its forms in the caches)."""
    seen = []

    def recorded(e):
        seen.append(e)
        return factored(e)

    monkeypatch.setattr(record, "factored", recorded)
    f = nc.library.swiglu_mlp()
    for old, new in (("n", "rows35"), ("e", "in35"), ("f", "hidden35"), ("o", "out35")):
        f = nc.rename_axis(f, old, new)
    nc.derive(f, memory="M")
    g = nc.library.attention()
    for old, new in (("q", "q35"), ("d", "k35"), ("x", "kv35")):
        g = nc.rename_axis(g, old, new)
    nc.derive(g, memory="M")
    assert len(seen) >= 20 and sum(read_off(e) is not None for e in seen) >= 15
    assert [sympy.srepr(factored(e)) for e in seen] == [sympy.srepr(sympy.factor(e)) for e in seen]
