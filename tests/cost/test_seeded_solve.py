"""sympy's ``solve`` and ``roots`` with the points of their factorisations drawn from a fixed seed
(napkin_cat/cost/seeded.py), and the symbolic envelope's solves routed through them (search/crossings.py's crossing
roots, search/breakpoints.py's tile roots): the same roots as sympy's, the same points whatever state sympy's
generator is in, and that state given back."""
import random

import pytest
import sympy
import sympy.core.random
from sympy.core.random import rng

from napkin_cat.cost import seeded
from napkin_cat.search import breakpoints, crossings

a, b, c, M, u = sympy.symbols("a b c M u", positive=True)
#: each factors over the sizes (Wang's algorithm draws points: checked by ``test_each_draws``)
EQUATIONS = [sympy.expand((M - a * b) * (M - a - b)), sympy.expand((M - a * b) * (M - a - b) * (M - c)),
             sympy.expand((M ** 2 - a * b * c) * (M - a - c))]
POLYS = [sympy.Poly(e.subs(M, u), u) for e in EQUATIONS]


def counting(monkeypatch):
    """The integers sympy's factorisation draws from now on (``sympy.core.random.randint``), in a list."""
    seen = []
    monkeypatch.setattr(sympy.core.random, "randint", lambda lo, hi: seen.append(rng.randint(lo, hi)) or seen[-1])
    return seen


@pytest.mark.parametrize("e", EQUATIONS)
def test_the_roots_are_sympys(e):
    assert seeded.solve(e, M) == sympy.solve(e, M)
    assert seeded.solve(sympy.Eq(e / M, 0), M, check=False) == sympy.solve(sympy.Eq(e / M, 0), M, check=False)


@pytest.mark.parametrize("p", POLYS)
def test_the_polynomial_roots_are_sympys(p):
    assert seeded.roots(p) == sympy.roots(p)


def test_each_draws(monkeypatch):
    """The equations above reach Wang's algorithm (else the tests below would hold without a seed)."""
    seen = counting(monkeypatch)
    for e, p in zip(EQUATIONS, POLYS):
        n = len(seen)
        seeded.solve(e, M)
        seeded.roots(p)
        assert len(seen) > n


def drawn(call, state, monkeypatch) -> list:
    """The integers ``call()`` draws with sympy's generator first set to ``state``."""
    rng.setstate(state)
    seen = counting(monkeypatch)
    call()
    return seen


STATES = [random.Random(s).getstate() for s in (1, 2, 3)]
CALLS = {
    "solve": lambda: seeded.solve(EQUATIONS[1], M),
    "roots": lambda: seeded.roots(POLYS[1]),
    # the envelope's own solves (unmemoised: each call solves): a tile's root, a crossing's
    "breakpoints.sympy_roots": lambda: breakpoints.sympy_roots.__wrapped__(EQUATIONS[1] / M ** 2, sympy.Integer(0), M),
    "crossings.power_root": lambda: crossings.power_root(M ** 3 + EQUATIONS[1] - M ** 3, sympy.Integer(0), M,
                                                         {a: 3, b: 5, c: 100}, 100.0),
}


@pytest.mark.parametrize("name", CALLS)
def test_the_points_do_not_depend_on_sympys_generator(name, monkeypatch):
    """Three states of sympy's generator (a process's, seeded from the system at import), the same points drawn: a
    solve takes the same time in every run.  Mutation: ``sympy.solve``/``sympy.roots`` called unseeded in
    seeded.py, breakpoints.sympy_roots or crossings.power_root draw the generator's own sequence (fails).  (Called
    once first: sympy's cache spares the later calls some factorisations, and so some draws.)"""
    CALLS[name]()
    seen = [drawn(CALLS[name], s, monkeypatch) for s in STATES]
    assert seen[0] and seen[0] == seen[1] == seen[2]


def test_the_envelope_solves_answer_as_sympy():
    """The routed solves give what sympy's gave: the tile root and the crossing (the root at the reference sizes)."""
    assert breakpoints.sympy_roots.__wrapped__(EQUATIONS[1] / M ** 2, sympy.Integer(0), M) == tuple(
        sympy.solve(sympy.Eq(EQUATIONS[1] / M ** 2, 0), M, check=False))
    assert crossings.power_root(M ** 3 + EQUATIONS[1] - M ** 3, sympy.Integer(0), M, {a: 3, b: 5, c: 100}, 100.0) == c


@pytest.mark.parametrize("name", ["solve", "roots"])
def test_sympys_generator_is_given_back(name):
    rng.seed(12345)
    before = rng.getstate()
    CALLS[name]()
    assert rng.getstate() == before
