"""hardware/lambdas.py: each form compiled once per process, its values those of one lambdify of the whole list."""
import math
import random

import sympy

from napkin_cat.hardware.lambdas import Lambdas

MODULES = [{"ceiling": math.ceil}, "math"]
SYMS = sympy.symbols("q x d g_q g_x P")


def _term(rng, depth):
    """A random form of the kinds a kernel's forms hold: sizes over tiles, ceilings, Max/Min, floats (rates)."""
    if depth == 0 or rng.random() < 0.25:
        pick = rng.random()
        if pick < 0.6:
            return rng.choice(SYMS)
        if pick < 0.8:
            return sympy.Integer(rng.randint(1, 9))
        if pick < 0.9:
            return sympy.Rational(rng.randint(1, 9), rng.randint(2, 9))
        return sympy.Float(rng.uniform(1e-13, 1e3))
    a, b = _term(rng, depth - 1), _term(rng, depth - 1)
    op = rng.randrange(6)
    if op < 4:
        return [a + b, a * b, a / b, sympy.ceiling(a / b)][op]
    return (sympy.Max if op == 4 else sympy.Min)(a, b, evaluate=False)   # (unevaluated: built fast, printed alike)


def test_values_bit_equal_to_one_lambdify_of_the_list():
    """Second route: sympy.lambdify of the whole list (what predict.KernelForm compiled before), compared with ==
    on the Python values (same type: an int stays an int) at random sizes, shared and repeated forms included."""
    rng = random.Random(35)
    exprs = [_term(rng, 3) for _ in range(30)] + [sympy.Integer(0)]
    exprs += exprs[:10]                                    # forms met twice: compiled once, values the same
    whole = sorted(set().union(*(e.free_symbols for e in exprs)), key=str)
    reference = sympy.lambdify(whole, exprs, modules=MODULES, docstring_limit=0)
    forms = Lambdas(exprs, MODULES)
    assert forms.symbols == whole
    for _ in range(20):
        env = {s: rng.randint(1, 4096) for s in SYMS}
        got, want = forms.values(env), reference(*(env[s] for s in whole))
        assert [(type(v), v) for v in got] == [(type(v), v) for v in want]


def test_each_form_reads_its_own_symbols():
    """Forms over different symbols in one list: each gets its own arguments, by name."""
    q, x, g = sympy.symbols("q x g_q")
    forms = Lambdas([q / g, x - q, sympy.Integer(7)], MODULES)
    assert forms.values({q: 12, x: 100, g: 4}) == [3.0, 88, 7]


def test_modules_are_part_of_what_is_compiled():
    """The same form under other modules is compiled anew (a cache keyed by the form alone would reuse the first)."""
    q, g = sympy.symbols("q g_q")
    form = sympy.ceiling(q / g)
    assert Lambdas([form], MODULES).values({q: 10, g: 4}) == [3]
    assert Lambdas([form], [{"ceiling": lambda v: -1}, "math"]).values({q: 10, g: 4}) == [-1]
