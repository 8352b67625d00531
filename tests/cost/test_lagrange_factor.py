"""The KKT elimination's factoring shortcut (issue 35, kkt-35c), each against sympy's own route.

* :func:`~napkin_cat.cost.seeded.linear_irreducible`: where it certifies a polynomial irreducible, sympy factors it
  into itself (one factor, power 1), on random sparse polynomials with common factors, squares and products mixed in;
* :func:`~napkin_cat.cost.seeded.factor_list` / ``factor`` (Wang's algorithm skipped on certified polynomials)
  equal to sympy's ``factor_list`` / ``factor`` run without the shortcut, ``srepr`` for ``srepr``;
* :func:`~napkin_cat.cost.lagrange.kkt_points` with the KKT equations' factors read off their Laurent form
  (``certain_factors``) equal to the points of the exact route (``together`` + ``factor_list``), ``srepr`` for
  ``srepr``, on random GP-like programs of one to three tiles under one or two columns.
"""
import random

import pytest
import sympy
from sympy.core.random import rng as sympy_rng

import napkin_cat as nc
from napkin_cat.cost import lagrange, seeded
from napkin_cat.cost.lagrange import kkt_points, laurent_part, remembered
from napkin_cat.cost.seeded import linear_irreducible

S = nc.symbol
d, e, n, M = (S(k) for k in ("d", "e", "n", "M"))
TILES = tuple(S(f"g_{k}") for k in ("x", "y", "z"))
LAM = sympy.Dummy("lambda_0", positive=True)
GENS = (d, e, n, LAM) + TILES


def sparse(rng, k, gens=GENS, top=2):
    """A polynomial of ``k`` random terms (coefficients in ±1..4, exponents up to ``top``)."""
    out = 0
    for _ in range(k):
        out += rng.choice((-1, 1)) * rng.randint(1, 4) * sympy.Mul(*(x ** rng.randint(0, top)
                                                                  for x in rng.sample(gens, rng.randint(1, 4))))
    return sympy.expand(out)


def polynomials(seed, count):
    """Random polynomials: sparse ones, and products/powers of them (reducible on purpose), with common factors."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        p = sparse(rng, rng.randint(2, 5))
        kind = rng.randint(0, 3)
        if kind == 1:
            p = sympy.expand(p * sparse(rng, rng.randint(1, 3)))
        elif kind == 2:
            p = sympy.expand(p ** 2)
        elif kind == 3:
            p = sympy.expand(rng.randint(1, 6) * rng.choice(GENS) * p)
        if not p.is_number:
            out.append(p)
    return out


def exact(factoring, expr):
    """sympy's ``factoring`` (``factor`` or ``factor_list``) without the shortcut (its generator seeded, as
    :mod:`seeded` seeds it)."""
    state = sympy_rng.getstate()
    sympy_rng.seed(seeded.SEED)
    try:
        return factoring(expr)
    finally:
        sympy_rng.setstate(state)


@pytest.mark.parametrize("seed", range(4))
def test_certified_polynomials_are_irreducible(seed):
    certified = 0
    for p in polynomials(seed, 60):
        poly = sympy.Poly(p, *GENS)
        if not linear_irreducible(dict(poly.terms())):
            continue
        certified += 1
        coeff, factors = exact(sympy.factor_list, p)
        assert len(factors) == 1 and factors[0][1] == 1, (p, factors)
        assert sympy.expand(coeff * factors[0][0] - p) == 0
    assert certified >= 10                 # the law is exercised, not skipped


def test_certificate_refuses_what_it_cannot_prove():
    x, y, z = sympy.symbols("x y z")
    for p in (x * y + y, 2 * x + 4 * y, (x + y) * (x + z), x ** 2 - y ** 2, x * y):
        assert not linear_irreducible(dict(sympy.Poly(sympy.expand(p), x, y, z).terms())), p


@pytest.mark.parametrize("seed", range(2))
def test_factor_list_and_factor_equal_sympys(seed):
    for p in polynomials(100 + seed, 25):
        for q in (p, p / 3, p * (d + 1)):
            assert sympy.srepr(seeded.factor_list(q)) == sympy.srepr(exact(sympy.factor_list, q)), q
            assert sympy.srepr(seeded.factor(q)) == sympy.srepr(exact(sympy.factor, q)), q


def test_shortcut_leaves_sympy_as_it_was():
    from sympy.polys import factortools
    before = factortools.dmp_zz_factor
    seeded.factor_list(sparse(random.Random(0), 3))
    with seeded.seeded_points(), seeded.seeded_points():
        pass
    assert factortools.dmp_zz_factor is before


def test_laurent_part_is_the_numerator_past_monomials():
    rng = random.Random(5)
    for _ in range(40):
        p = sparse(rng, rng.randint(1, 4))
        eq = sympy.expand(p * rng.choice((1, 2, sympy.Rational(1, 3))) / rng.choice((1, TILES[0], TILES[0] ** 2 * d)))
        gens, terms = laurent_part(eq)
        poly = sympy.Poly.from_dict(terms, *gens).as_expr()
        ratio = sympy.cancel(sympy.numer(sympy.together(eq)) / poly)
        monomial = (f.is_number or f.is_Symbol or f.is_Pow and f.base.is_Symbol for f in sympy.Mul.make_args(ratio))
        assert all(monomial), ratio
    assert laurent_part(1 / (d + 1) + e) is None


def gp_program(rng, tiles):
    """A GP-like tiling program: ``H`` a sum of size monomials over tile monomials, columns posynomials in tiles."""
    def mono(k):
        return rng.randint(1, 3) * sympy.Mul(*rng.sample((d, e, n), k))
    H = sum(mono(rng.randint(1, 3)) / sympy.Mul(*[t ** rng.randint(0, 2) for t in tiles]) for _ in range(3))
    H += mono(2) / tiles[0]
    cols = []
    for _ in range(rng.randint(1, min(2, len(tiles)))):
        C = sum(mono(rng.randint(0, 1)) * sympy.Mul(*rng.sample(tiles, rng.randint(1, len(tiles))))
                for _ in range(rng.randint(1, 3)))
        cols.append(sympy.expand(C))
    return sympy.expand(H), cols


def points_text(points):
    return None if points is None else [sorted((k, sympy.srepr(v)) for k, v in p.items()) for p in points]


@pytest.mark.parametrize("seed", range(4))
def test_kkt_points_equal_the_exact_routes(seed, monkeypatch):
    rng = random.Random(seed)
    fast_used = [0]
    certain = lagrange.certain_factors

    def counted(eq, unknowns):
        out = certain(eq, unknowns)
        fast_used[0] += out is not False
        return out

    for _ in range(6):
        tiles = TILES[:rng.randint(1, 3)]
        H, cols = gp_program(rng, tiles)
        for tidied in (True, False):
            with monkeypatch.context() as m:
                m.setattr(lagrange, "certain_factors", counted)
                with remembered({}):
                    fast = kkt_points(H, cols, list(tiles), M, tidied=tidied)
            with monkeypatch.context() as m:
                m.setattr(lagrange, "certain_factors", lambda eq, unknowns: False)
                m.setattr(seeded, "linear_irreducible", lambda terms: False)
                with remembered({}):
                    slow = kkt_points(H, cols, list(tiles), M, tidied=tidied)
            assert points_text(fast) == points_text(slow), (H, cols)
    assert fast_used[0] > 0


def test_symbols_of_unknown_sign_take_the_exact_route(monkeypatch):
    x, y, a = sympy.symbols("x y a")               # no assumptions: a monomial factor may vanish
    eq = a * x * y ** 2 + 3 * x * y
    assert lagrange.certain_factors(eq, {x, y}) is False
    H, C = a / x + 2 * a / (x * y), x * y + a * x
    with remembered({}):
        fast = kkt_points(H, [C], [x, y], M)
    with monkeypatch.context() as m:
        m.setattr(seeded, "linear_irreducible", lambda terms: False)
        with remembered({}):
            slow = kkt_points(H, [C], [x, y], M)
    assert points_text(fast) == points_text(slow)
