"""print-35: :func:`~napkin_cat.search.printed.printed` writes an expression as sympy's ``PythonCodePrinter``
(lambdify's printer for ``"math"``) does, character for character: on every expression the scan's float functions
print while symbolic derives run, and on random sums, products and powers of symbols, dummies, integers,
rationals, radicals of numbers and of sums, negative coefficients and floats (the last printed by sympy)."""
from __future__ import annotations

import random

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.search import top_columns
from napkin_cat.search.printed import READ_OFF, printed, python_printer
from napkin_cat.search.top_columns import float_functions


def _fresh(f):
    """``f`` with every axis renamed apart from other tests' (its forms are new to the process's caches)."""
    for name in sorted({a.name for arr in (*f.dom.inside, *f.cod.inside) for a in arr.axes}):
        f = nc.rename_axis(f, name, f"{name}_print")
    return f


@pytest.fixture(scope="module")
def derived_printed(monkeypatch_module):
    """Every expression the scan's float functions print while a SwiGLU MLP's symbolic derive runs."""
    seen = []

    def spy(e, printer=None):
        seen.append(e)
        return printed(e, printer)

    monkeypatch_module.setattr(top_columns, "printed", spy)
    nc.derive(_fresh(nc.library.swiglu_mlp()), memory="M")
    monkeypatch_module.undo()
    return seen


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_a_derives_expressions_print_as_sympys(derived_printed):
    """Mutation: the terms of a sum in reversed order, a parenthesis left off a base or a denominator."""
    assert len(derived_printed) >= 40
    assert any(e.is_Add and len(e.args) >= 4 for e in derived_printed)
    assert [printed(e) for e in derived_printed] == [python_printer().doprint(e) for e in derived_printed]


x, y, z = sympy.symbols("x y z", positive=True)
u = sympy.Symbol("u")
d = sympy.Dummy()
ATOMS = [x, y, z, u, d]
NUMBERS = [sympy.Integer(2), sympy.Integer(-3), sympy.Rational(1, 2), sympy.Rational(-5, 7), sympy.Integer(1),
           sympy.Integer(-1), sympy.sqrt(2), sympy.sqrt(17), sympy.Integer(2) ** sympy.Rational(1, 3),
           sympy.Integer(1275068416), sympy.Rational(-3, 2)]
EXPONENTS = [sympy.S.Half, -sympy.S.Half, sympy.S.NegativeOne, sympy.Integer(2), sympy.Integer(-2),
             sympy.Rational(3, 2), sympy.Rational(-3, 2), sympy.Rational(1, 3)]


def _random(rng: random.Random, depth: int, floats: bool):
    """A random expression of symbols and numbers under ``Add``, ``Mul`` and ``Pow`` (a rational exponent)."""
    if depth == 0 or rng.random() < 0.2:
        if floats and rng.random() < 0.1:
            return sympy.Float(rng.choice([0.5, 2.25, -1.5, 3.0]))
        return rng.choice(ATOMS) if rng.random() < 0.7 else rng.choice(NUMBERS)
    kind = rng.random()
    if kind < 0.4:
        return sympy.Add(*(_random(rng, depth - 1, floats) for _ in range(rng.randint(2, 5))))
    if kind < 0.8:
        return sympy.Mul(*(_random(rng, depth - 1, floats) for _ in range(rng.randint(2, 4))))
    return sympy.Pow(_random(rng, depth - 1, floats), rng.choice(EXPONENTS))


@pytest.mark.parametrize("floats", [False, True], ids=["exact", "floats"])
def test_random_expressions_print_as_sympys(floats):
    """Sums of several degrees and coefficients (the term order), negative coefficients times radicals of numbers
    (the sign taken out of a product), powers of sums (parentheses), ``1/x`` and ``1/sqrt``; floats anywhere go to
    sympy's printer whole.  Mutation: as above."""
    rng = random.Random(35 + floats)
    exprs = [_random(rng, 3, floats) for _ in range(250)]
    assert sum(e.is_Add for e in exprs) >= 50
    assert [printed(e) for e in exprs] == [python_printer().doprint(e) for e in exprs]


def test_ordered_terms_cases():
    """The term orders sympy's ``as_ordered_terms`` makes by its rules: higher powers first over the generators
    in ``default_sort_key`` order, equal monomials by coefficient, ``1 - c·x`` kept as written, a coefficient
    with a radical read as a float."""
    cases = [x ** 2 + x + 1, 1 - 2 * x, -1 + 2 * x, 3 * x * y + 2 * x * y ** 2 - y, sympy.sqrt(x) + x + 1 / x,
             sympy.sqrt(2) * x - sympy.sqrt(3) * x * y + x * y, (x + 1) * y + x, -x - y - z]
    expected = [python_printer().doprint(e) for e in cases]
    assert [printed(e) for e in cases] == expected
    assert expected[:2] == ["x**2 + x + 1", "1 - 2*x"]


def test_float_functions_use_math_sqrt():
    """The printed ``sqrt`` is ``math``'s: the compiled function evaluates as lambdify's, bit for bit."""
    e = 3 * x / (2 * sympy.sqrt(x + 7)) - sympy.sqrt(2) * x ** sympy.Rational(-3, 2) + 1 / (x + 1)
    fast, = float_functions([x], [e])
    slow = sympy.lambdify([x], e, "math")
    for v in (0.5, 3.0, 1e6, 17.25):
        assert repr(fast(v)) == repr(slow(v))


def _refusing():
    """lambdify's printer refusing to print: what :func:`printed` writes through it, it wrote itself."""
    printer = python_printer()

    def doprint(expr, assign_to=None):
        raise AssertionError(f"sympy's printer asked for {expr}")

    printer.doprint = doprint
    return printer


def test_the_derives_kinds_print_without_sympys_printer(derived_printed):
    """Under the sympy the rules were read off, the derive's expressions are written here (the law above is not
    met by handing everything to sympy), ``sqrt`` registered as sympy registers it; a float goes to sympy's.
    Mutation: every expression sent to sympy's printer."""
    if sympy.__version__.split(".")[:2] != READ_OFF.split("."):
        pytest.skip(f"rules read off sympy {READ_OFF}, running {sympy.__version__}")
    refusing = _refusing()
    texts = [printed(e, refusing) for e in derived_printed]
    assert texts == [python_printer().doprint(e) for e in derived_printed]
    assert any("sqrt(" in t for t in texts) and "sqrt" in refusing.module_imports["math"]
    with pytest.raises(AssertionError, match="asked for"):
        printed(x + sympy.Float(0.5), refusing)
