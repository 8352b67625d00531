"""``expand`` (napkin_cat/cost/expanded.py): ``sympy.expand`` with only the hints that act on a Laurent form
(``multinomial``, ``mul``, ``power_base``) gives sympy's tree (srepr equal) on the forms a symbolic derive expands,
and anything outside the class (a ``log``, an ``exp``, a symbolic exponent, a ``Sum``) is expanded whole by sympy."""
from __future__ import annotations

import pytest
import sympy
from sympy.core.expr import Expr

import napkin_cat as nc
from napkin_cat.cost import expanded as X

a, b, c, M = sympy.symbols("a b c M", positive=True)
k = sympy.Symbol("k", integer=True)


def _fresh(f):
    """``f`` with every axis renamed apart from other tests' (the forms are new to the process's caches, which
    would otherwise skip the expansions another test's derive of the same function made)."""
    for name in sorted({a.name for arr in (*f.dom.inside, *f.cod.inside) for a in arr.axes}):
        f = nc.rename_axis(f, name, f"{name}_expand")
    return f


@pytest.fixture(scope="module")
def derived_forms():
    """Every distinct expression attention's and an MLP's symbolic derives expand by the fast route (recorded at
    ``Expr.expand`` called with ``ACTING``, and at the walk that expands a form repeating a subexpression once)."""
    seen, real, real_walk = {}, Expr.expand, X.walked_once

    def spy(self, *args, **hints):
        if hints == X.ACTING:
            seen[self] = None
        return real(self, *args, **hints)

    def spy_walk(e, hints):
        if hints == X.ACTING:
            seen[e] = None
        return real_walk(e, hints)

    Expr.expand, X.walked_once = spy, spy_walk
    try:
        for f in (nc.library.attention(), nc.library.mlp()):
            nc.derive(_fresh(f), memory="M")
    finally:
        Expr.expand, X.walked_once = real, real_walk
    return list(seen)


def test_a_derives_forms_expand_as_sympys(derived_forms):
    """Mutation: ``mul`` or ``multinomial`` dropped from ``ACTING`` (some of the forms then differ)."""
    assert len(derived_forms) >= 200
    assert all(X.laurent(e) for e in derived_forms)
    assert [sympy.srepr(X.expand(e)) for e in derived_forms] == [sympy.srepr(sympy.expand(e)) for e in derived_forms]


@pytest.mark.parametrize("drop", ["mul", "multinomial"])
def test_each_kept_hint_acts_on_the_derives_forms(derived_forms, drop):
    """The check above can fail: without ``drop`` some real form expands otherwise than sympy's."""
    hints = dict(X.ACTING, **{drop: False})
    assert any(sympy.srepr(e.expand(**hints)) != sympy.srepr(sympy.expand(e)) for e in derived_forms)


OUTSIDE = [sympy.log(a * b) * (a + 1), a ** (b + 1) * (a + b), sympy.exp(a + b) * (a - 1), sympy.E * (a + 1) ** 2,
           sympy.Sum(a * (k + 1), (k, 1, 3)), sympy.sqrt(a + b) * a ** c, sympy.sin(a + b) * (a + 1)]
INSIDE = [(a + b) ** 3 / (M + a * b) ** 2, sympy.sqrt(a * b) * (a - b) ** 2, sympy.sqrt(M * (a + b)) * (M + 1),
          (a + 2.5) * (b - sympy.Rational(1, 3)) ** -2 + a ** -1 * (a + b), sympy.Integer(7), a,
          sympy.Pow(sympy.Mul(a, b, evaluate=False), sympy.Rational(1, 2), evaluate=False) + a]


@pytest.mark.parametrize("e", OUTSIDE)
def test_a_form_outside_the_class_is_expanded_whole(e):
    """Each holds a node a dropped hint acts on (``log``, an ``Add`` exponent, ``exp``, ``Sum``...).  Mutation:
    ``laurent`` answering True for every form (the ``log``, exponent, ``exp`` and ``Sum`` cases fail)."""
    assert not X.laurent(e)
    assert sympy.srepr(X.expand(e)) == sympy.srepr(sympy.expand(e))


@pytest.mark.parametrize("e", INSIDE)
def test_a_laurent_form_expands_as_sympys(e):
    """Mutation: ``power_base`` dropped from ``ACTING`` (the unevaluated ``sqrt(a*b)`` then keeps its product base:
    on evaluated forms sympy's ``Pow`` splits the base's nonnegative factors itself, and ``power_base`` acted on none
    of the 5,165 forms 14 symbolic derives expand)."""
    assert X.laurent(e)
    assert sympy.srepr(X.expand(e)) == sympy.srepr(sympy.expand(e))


def test_the_dropped_hints_act_on_the_outside_forms():
    """Why they are outside: on each of the first four, the hints ``ACTING`` drops change the expansion."""
    assert all(sympy.srepr(e.expand(**X.ACTING)) != sympy.srepr(sympy.expand(e)) for e in OUTSIDE[:3] + OUTSIDE[4:5])
