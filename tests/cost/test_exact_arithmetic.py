"""Size expressions in exact Python arithmetic (napkin_cat.cost.exact_arithmetic) against sympy's own route.

The second route is sympy itself: ``expr.subs(env)`` for a value, ``expand`` and ``as_powers_dict`` of every term
for the monomials in the tiles, on seeded random expressions built from the nodes a cost holds (sums, products,
integer powers of either sign, ceilings, floors, maxima, minima, rationals); seconds in all.
"""
import random
from fractions import Fraction

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.exact_arithmetic import monomials_at, value
from napkin_cat.cost.tiling import rereads
from napkin_cat.errors import NapkinError
from napkin_cat.search.curves import Curve
from napkin_cat.search.paths import Choice
from napkin_cat.syntax.sizes import Sizes

SIZES = [nc.symbol(n) for n in ("a", "b", "c")]
TILES = [nc.symbol(n) for n in ("g_a", "s_b")]


def _random_expr(rng, symbols, depth, rounding=True):
    """A positive expression in ``symbols`` (positive), ``depth`` nodes deep."""
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.3:
            return sympy.Rational(rng.randint(1, 9), rng.choice([1, 1, 2, 3]))
        return rng.choice(symbols)
    kinds = ["add", "mul", "pow"] + (["ceiling", "floor", "max", "min"] if rounding else [])
    kind = rng.choice(kinds)
    args = [_random_expr(rng, symbols, depth - 1, rounding) for _ in range(rng.randint(2, 3))]
    if kind == "add":
        return sympy.Add(*args)
    if kind == "mul":
        return sympy.Mul(*args)
    if kind == "pow":
        return args[0] ** rng.choice([-2, -1, 2, 3])
    if kind == "ceiling":
        return sympy.ceiling(args[0] / args[1])
    if kind == "floor":                    # every node stays positive: no division by zero
        return sympy.floor(args[0] / args[1]) + 1
    return (sympy.Max if kind == "max" else sympy.Min)(*args)


def _exact_type(v):
    return isinstance(v, int) or (isinstance(v, Fraction) and v.denominator != 1)


def test_value_equals_sympy_substitution():
    rng = random.Random(35)
    checked = 0
    for _ in range(200):
        e = _random_expr(rng, SIZES, 3)
        env = {s: rng.randint(1, 12) for s in SIZES}
        want = e.xreplace({k: sympy.Integer(v) for k, v in env.items()})
        got = value(e, env)
        assert _exact_type(got), (e, got)
        assert sympy.Rational(got.numerator, got.denominator) == want, (e, env, got, want)
        checked += 1
    assert checked == 200


def test_value_keeps_integers_exact_past_floats():
    a, b = SIZES[:2]
    big = 2 ** 60 + 1                       # a float would round it
    assert value(a * b + 1, {a: big, b: 3}) == 3 * big + 1
    assert value(sympy.ceiling(a / b), {a: big, b: 2}) == big // 2 + 1


def _sympy_monomials(e, tiles, env):
    """The second route: expand at the sizes with sympy, read each term's powers of the tiles."""
    out = {}
    for term in sympy.Add.make_args(sympy.expand(e.xreplace(env))):
        powers = term.as_powers_dict()
        exps = tuple(int(powers.get(t, 0)) for t in tiles)
        coeff = term / sympy.Mul(*[t ** k for t, k in zip(tiles, exps)])
        assert not coeff.free_symbols, (e, term)
        out[exps] = out.get(exps, 0) + coeff
    return {k: v for k, v in out.items() if v != 0}


def test_monomials_at_equals_sympy_expansion():
    rng = random.Random(31)
    for _ in range(250):
        e = _random_expr(rng, SIZES + TILES, 3, rounding=False)
        env = {s: rng.randint(1, 9) for s in SIZES}
        try:
            coeffs, exps = monomials_at(e, tuple(TILES), env)
        except NapkinError:        # a sum in a denominator with a tile in it: no monomials, by either route
            d = sympy.denom(sympy.together(sympy.expand(e.xreplace(env))))
            assert d.free_symbols & set(TILES), e
            continue
        assert list(exps) == sorted(exps)
        got = {k: sympy.Rational(c.numerator, c.denominator) for k, c in zip(exps, coeffs)}
        assert got == _sympy_monomials(e, TILES, env), e


def test_not_a_sum_of_monomials_is_refused():
    a, g = SIZES[0], TILES[0]
    with pytest.raises(NapkinError, match="not a sum of monomials"):
        monomials_at(a / (g + 1), (g,), {a: 4})
    with pytest.raises(NapkinError, match="ceiling"):
        monomials_at(sympy.ceiling(a / g), (g,), {a: 4})
    with pytest.raises(NapkinError, match=r"give sizes for \['b', 'c'\]"):
        value(SIZES[0] * SIZES[1] + SIZES[2], {a: 2})


def test_rereads_agrees_with_sympy():
    rng = random.Random(7)
    s = TILES[1]
    for _ in range(80):
        e = _random_expr(rng, SIZES + TILES, 3)
        want = any(sympy.sympify(t).as_powers_dict().get(s, 0) < 0 for t in sympy.Add.make_args(sympy.expand(e)))
        assert rereads(e, s) == want, e


def test_smallest_memory_of_a_curve_is_its_largest_column_at_ones():
    att = nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")
    curve = Curve(att)
    sizes = {"q": 96, "x": 80, "d": 24}
    ones = {nc.symbol("g_q"): 1, nc.symbol("s_x"): 1, **{nc.symbol(k): v for k, v in sizes.items()}}
    want = max(sympy.sympify(c).subs(ones) for c in curve.cost.columns[1])
    assert curve.smallest(sizes) == want
    assert curve.at(sizes, int(want) - 1) == (None, {})
    assert curve.at(sizes, int(want))[0] is not None


def test_compulsory_transfers_of_a_block_at_sizes():
    """Attention reads Q, K, V and writes O once: 2qd + 2xd, exact (an int) at any sizes."""
    block = Choice(nc.library.attention(), 1)
    for q, x, d in ((96, 80, 24), (2 ** 40, 2 ** 21 + 1, 3)):
        got = block.compulsory_at(Sizes(q=q, x=x, d=d))
        assert isinstance(got, int) and got == 2 * q * d + 2 * x * d
