"""A crossing whose polynomial in ``u = M^(1/L)`` is of degree 1 with radicals in its coefficients is solved as
``−b/a``, without sympy's ``roots`` (whose ``roots_linear`` runs ``simplify`` on them: 8 CPU s on one crossing of a
renamed transformer block); with polynomial coefficients sympy's ``roots`` factors it, as before.
Checked against sympy's ``roots`` on forms with nested radicals in their coefficients, each root's value at random
sizes equal to 1e-12, and that ``roots`` is not asked of a degree-1 polynomial (mutation: the degree-1 branch removed:
the count test fails; ``−a/b`` for ``−b/a``: the value tests fail)."""
from __future__ import annotations

import random

import pytest
import sympy

from napkin_cat.search import crossings

M, n, e, d = sympy.symbols("M n e d", positive=True)
REF = {n: 12, e: 20, d: 5}


def _forms():
    r = sympy.sqrt(n * e + sympy.sqrt(d * n)) + sympy.sqrt(e)
    return [
        (r * n ** 2 * e / M + n * e, 2 * n * e),                            # A + B/M against a constant
        (n * e * d / sympy.sqrt(M) + r, 2 * r),                             # in u = √M
        (n ** 2 * e / M + sympy.sqrt(d) * n, (1 + sympy.sqrt(n * d)) * n),
    ]


def _value(x, ref):
    return complex(sympy.sympify(x).subs(ref).evalf(30))


@pytest.mark.parametrize("k", range(3))
def test_a_linear_crossing_is_the_root_sympy_finds(k):
    Ha, Hb = _forms()[k]
    target = sympy.nsolve((Ha - Hb).subs(REF), M, 50)
    root = crossings.power_root(Ha, Hb, M, REF, float(target))
    assert root is not None and not root.has(M)
    (want,) = [s for s in sympy.solve(Ha - Hb, M) if abs(_value(s, REF) - float(target)) < 1e-6 * float(target)]
    rng = random.Random(k)
    for _ in range(5):
        ref = {n: rng.randint(2, 40), e: rng.randint(2, 40), d: rng.randint(2, 40)}
        a, b = _value(root, ref), _value(want, ref)
        assert abs(a - b) <= 1e-12 * abs(b)


def test_roots_is_not_asked_of_a_linear_polynomial(monkeypatch):
    asked = []
    monkeypatch.setattr(crossings, "seeded_roots", lambda *a, **k: asked.append(a) or [])
    for Ha, Hb in _forms():
        target = sympy.nsolve((Ha - Hb).subs(REF), M, 50)
        assert crossings.power_root(Ha, Hb, M, REF, float(target)) is not None
    assert asked == []
    # a quadratic still goes to roots (n³/M² + n²/M − 2n has u² in it), and a linear one with polynomial coefficients
    crossings.power_root(n ** 3 / M ** 2 + n ** 2 / M, 2 * n, M, REF, 1.0)
    crossings.power_root(n ** 2 * e / M + n, 2 * n * d, M, REF, 1.0)
    assert len(asked) == 2
