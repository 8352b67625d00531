"""Where a large-M form stops holding (:mod:`napkin_cat.search.breakpoints`, issue 35 item 3): the memory where a
tile ``t(M)`` reaches its axis ``n``, bracketed at the reference sizes first and solved in closed form only where
read.

Second route: ``sympy.solve`` of ``t = n`` called here, its first root that is real, positive and where ``t``
meets ``n`` at the reference sizes (what the envelope took before the bracket): the bracketed value equals it to
the float's precision and the closed form read later is that root.  The tiles are the kinds the large-M optima of a
transformer block and attention choose (a radical of a sum, a quotient with a radical, a root times a constant), at
seeded random reference sizes.
"""
from __future__ import annotations

import random

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.search.breakpoints import Breakpoint, bracketed, reaching

S = nc.symbol
M, d, e, h, n = (S(k) for k in "Mdehn")

#: (tile t(M), its axis): the large-M tiles the symbolic derive of a transformer block meets
TILES = [
    ((-d + sympy.sqrt(2 * M + d ** 2)) / 2, e),
    ((-h + sympy.sqrt(2 * M + h ** 2)) / 2, n),
    (-h + sympy.sqrt(M + h ** 2), e),
    (M / (sympy.sqrt(M) / sympy.sqrt(d) + e), n),
    (-n + sympy.sqrt(n) * sympy.sqrt(M + d * n) / sympy.sqrt(d), e),
    (sympy.sqrt(d) * sympy.sqrt(M + d * n) / sympy.sqrt(n), n),
    (sympy.sqrt(M) * sympy.sqrt(e + 2) / sympy.sqrt(e + 1), n),
    (M / (3 * d * n), h),
]


def by_sympy(t, axis, ref):
    """The second route: sympy's roots of ``t = axis``, the first real positive one where ``t`` meets ``axis``."""
    for r in sympy.solve(sympy.Eq(t, axis), M):
        v = complex(r.subs(ref).evalf())
        if abs(v.imag) > 1e-9 * abs(v) or v.real <= 0:
            continue
        if abs(complex(t.subs(ref).subs(M, v.real)) - float(axis.subs(ref))) <= 1e-6 * float(axis.subs(ref)):
            return r, v.real
    return None, None


def test_the_bracketed_value_is_where_the_tile_crosses_its_axis_and_the_closed_form_its_value():
    rng = random.Random(0)
    met = 0
    for (t, axis), ref in ((tile, {s: rng.randint(16, 2048) for s in (d, e, h, n)}) for tile in TILES * 2):
        b = reaching(t, axis, M, ref)
        f = sympy.lambdify(M, (t - axis).subs(ref))
        if b is None:         # past its axis from the smallest memories on: never crosses it
            assert all(f(2.0 ** k) > 0 for k in range(-8, 80, 4)), (t, axis, ref)
            continue
        met += 1
        assert abs(f(b.at)) <= 1e-9 * float(axis.subs(ref)) and f(b.at * 0.999) < 0 < f(b.at * 1.001), (t, ref)
        assert abs(float(b.expr.subs(ref)) - b.at) <= 1e-12 * b.at, (t, axis, b.expr, b.at)
    assert met >= 10          # most tiles reach their axes at these sizes: the comparison is not vacuous


@pytest.mark.parametrize("k", [0, 2, 4])
def test_the_closed_form_is_sympys_root(k):
    t, axis = TILES[k]
    ref = {d: 64, e: 256, h: 4, n: 512}
    root, value = by_sympy(t, axis, ref)
    b = reaching(t, axis, M, ref)
    assert abs(b.at - value) <= 1e-12 * value and sympy.srepr(b.expr) == sympy.srepr(root), (t, b.expr, root)


def test_the_closed_form_is_solved_only_where_read(monkeypatch):
    calls = []
    solve = sympy.solve
    monkeypatch.setattr(sympy, "solve", lambda *a, **k: calls.append(a) or solve(*a, **k))
    c = random.Random().randint(3, 10 ** 5)     # a tile no other call asked for (the roots are remembered)
    t = (-d + sympy.sqrt(2 * M + d ** 2 + c)) / 2
    b = reaching(t, e, M, {d: 64, e: 256})
    assert calls == [] and b.at == pytest.approx(float(((2 * 256 + 64) ** 2 - 64 ** 2 - c) / 2), rel=1e-12)
    assert sympy.expand(b.expr - ((2 * e + d) ** 2 - d ** 2 - c) / 2) == 0 and len(calls) == 1
    b.expr
    assert len(calls) == 1


def test_a_tile_past_its_axis_at_every_memory_never_reaches_it():
    # √d·√(M + dn)/√n starts at d: with d > n it is past n from the start (sympy's one root is negative)
    t = sympy.sqrt(d) * sympy.sqrt(M + d * n) / sympy.sqrt(n)
    assert reaching(t, n, M, {d: 1088, n: 1024}) is None
    assert bracketed(t, n, M, ((d, 1088), (n, 1024))) is None


def test_a_monomial_tile_is_solved_at_once():
    b = reaching(sympy.sqrt(M) / 3, d, M, {d: 100})
    assert b.expr == 9 * d ** 2 and b.at == 90000.0
    assert reaching(M, n, M, {n: 7}).at == 7.0          # a root that is one size: a number at the reference


def test_a_breakpoint_solves_once():
    made = []
    b = Breakpoint(2.0, solve=lambda: made.append(1) or sympy.Integer(2))
    assert (b.expr, b.expr, made) == (2, 2, [1])


def test_the_bracket_refuses_a_difference_that_turns():
    # (M − 100)²/M − 1 falls, then rises: two positive roots; the first of sympy's is the envelope's to pick
    assert bracketed((M - 100) ** 2 / M, n, M, ((n, 1),)) is None


def test_a_difference_monotone_but_for_its_floats_rounding_is_bracketed(monkeypatch):
    """A two-tile point of the block (its row tile ``g`` against ``n``): ``t(M) − n`` at ``M = 2^-33`` steps one unit
    in the last place of ``n`` against its trend, so the strict monotone check sent it to sympy's solver at once
    (0.4 s of the block's derive, with the tile ``g_e`` it makes).  Read as rounding (:data:`.breakpoints.ROUNDING`),
    it is bracketed, and the value and closed form are sympy's root's (the second route)."""
    from napkin_cat.search import breakpoints
    t = (-2 * M * d ** 2 + 2 * sympy.sqrt(d) * sympy.sqrt(n) * (M + d ** 2) * sympy.sqrt(M + d * n)
         - 2 * d ** 3 * n) / (2 * M * n - 2 * d ** 3 + 4 * d ** 2 * n)
    ref = {d: 1216, n: 1024}
    f = sympy.lambdify(M, (t - n).subs(ref), "math")
    ys = [f(2.0 ** k) for k in breakpoints.SCAN]
    against = [(a, b) for a, b in zip(ys, ys[1:]) if b < a]
    assert against and all(a - b <= 1e-15 * abs(a) for a, b in against)     # the float steps back, by rounding
    solved = []
    real = breakpoints.sympy_roots
    monkeypatch.setattr(breakpoints, "sympy_roots", lambda *a: solved.append(a) or real.__wrapped__(*a))
    b = reaching(t, n, M, ref)
    assert solved == []                      # bracketed: sympy is not asked until the closed form is read
    root, value = by_sympy(t, n, ref)
    assert abs(b.at - value) <= 1e-12 * value
    assert sympy.srepr(b.expr) == sympy.srepr(root) and len(solved) == 1
