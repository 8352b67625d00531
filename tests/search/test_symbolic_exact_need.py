"""A symbolic ``nc.derive``'s constant pieces start where their algorithm fits (issue 35, found by clamp-35).

Setting a tile whole turns a term of a column's leading degree into one without a tile: the fused chain
``X·W₁·W₂`` with its row tile whole holds the whole intermediate ``a·c`` beside its ``c·g_e`` weight tile.  The
large-M form ``g_e = M/c`` left that term out, so its tile "reached" ``e`` at ``M = ce`` and the all-whole piece
``ab + ae + bc + ce`` (the compulsory transfers) was claimed from ``ce``, where its algorithm needs ``ce + ca + c + a``
(at the default reference sizes 1,400,832 against 2,582,656; mlp alike).  Now a form's free tiles are solved for the
memory less ``K``, the tile-free terms of the leading degree (:mod:`napkin_cat.search.held_alike`).

Routes that do not go through the envelope, at the reference sizes:

* **the cost functor**: the peak memory of each constant piece's algorithm (its diagram's ``cost.peak`` at the
  piece's tiles) exceeds the piece's lower end only by lower-order terms (the mode states them: a whole tile's row or
  column beside it): relative to the lower end the excess shrinks at least 4× when every axis grows 8×
  (:func:`higher_order_excess`; at fa410b4 the chain's all-whole piece started at ``ce`` = 5,472 where its algorithm
  needs ``ce + ca + c + a`` = 10,216, an excess that does not shrink; attention + projection 1,280 vs 4,312, mlp
  5,472 vs 10,364, swiglu 4,608 vs 9,424); random programs (concrete axes): the excess is at most ``Σ axes``;
* **compulsory** transfers (from the types): every piece's ``H`` is at least reading every input and writing every
  output once;
* **the numeric derive** (``sizes=``, integer tiles, every column of the memory model) at each constant piece's
  need inside the piece: its algorithm fits there, so the numeric optimum is at most its ``H`` and the symbolic ``H``
  is at least the numeric one, with no tolerance (a constant piece has no tile to round to an integer).

Pieces whose tiles grow with ``M`` (solved against the top-degree part of the exact columns since symmem-35):
``tests/search/test_symbolic_growing_need.py``.
"""
from __future__ import annotations

import math
import os

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.testing.programs import random_program

L = nc.library
M = nc.symbol("M")
slow = pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="symbolic and numeric derives of 10-20 s: "
                          "NAPKIN_SLOW=1")


def compulsory(diagram, sizes) -> int:
    """Σ over the inputs and outputs of the product of their axis sizes (the types, nothing else)."""
    env = {nc.symbol(k): v for k, v in sizes.items()}
    return sum(math.prod(int(sympy.sympify(a.size).subs(env)) for a in arr.axes)
               for arr in (*diagram.dom.inside, *diagram.cod.inside))


def chain():
    """``(X W₁) W₂``: two matrix products in a row."""
    b = nc.Builder(nc.types("a b, b c, c e"))
    A, B, C = b.inputs
    return b.build(b(nc.einsum("a c, c e -> a e"), b(nc.einsum("a b, b c -> a c"), A, B), C))


def attention_projection():
    """Multi-head attention and its output projection ``h q d, h d e -> q e``."""
    b = nc.Builder(nc.types("h q d, h x d, h x d, h d e"))
    A = b(L.multi_head_attention(), *b.inputs[:3])
    return b.build(b(nc.einsum("h q d, h d e -> q e"), A, b.inputs[3]))


def constant_pieces(r) -> list:
    """``[(piece, lower, need)]`` for each piece whose tiles do not grow with ``M`` (whole, or 1): its lower end and
    the cost functor's peak memory of its algorithm at those tiles, both in the sizes."""
    out = []
    for i, g in enumerate(r.regimes):
        tiles = {k: sympy.sympify(v) for k, v in g.optimum.sizes.items()}
        if any(t.has(M) for t in tiles.values()):
            continue
        peak = g.cost.peak
        out.append((i, sympy.sympify(g.lower), sympy.sympify(peak[max(peak)]).subs(tiles)))
    return out


def at(expr, sizes, scale=1) -> float:
    return float(expr.subs({nc.symbol(k): v * scale for k, v in sizes.items()}))


def higher_order_excess(r, sizes) -> list:
    """``[(piece, lower, need)]`` (at ``sizes``) where a constant piece's algorithm needs more than its lower end
    by a term that is no lower order: the excess over the lower end, relative to it, shrinks by less than 4× when
    every axis grows 8× (a term one degree lower shrinks 8×; the chain's ``ca`` beside ``ce`` does not shrink)."""
    bad = []
    for i, lower, need in constant_pieces(r):
        lo, n = at(lower, sizes), at(need, sizes)
        if n <= lo * (1 + 1e-9):
            continue
        lo8, n8 = at(lower, sizes, 8), at(need, sizes, 8)
        if (n8 - lo8) / lo8 > (n - lo) / lo / 4:
            bad.append((i, lo, n))
    return bad


def check(f, sizes):
    r = nc.derive(f, memory="M", reference=sizes)
    env = {nc.symbol(k): v for k, v in sizes.items()}
    H = sympy.sympify(r.H).subs(env)
    floor = compulsory(f, sizes)
    assert constant_pieces(r), "a symbolic H ends in a constant piece (every tile whole)"
    assert higher_order_excess(r, sizes) == []
    for g in r.regimes:                # every piece at its ends and between: never below the compulsory transfers
        lo, hi = float(sympy.sympify(g.lower).subs(env)), min(float(sympy.sympify(g.upper).subs(env)), 2.0 ** 30)
        for m in {lo, math.sqrt(lo * max(hi, lo)), max(hi, lo) * (1 - 1e-9)}:
            h = H.subs(M, m)
            assert h is not sympy.nan and float(h) >= floor, (m, h, floor)
    # where a constant piece's algorithm fits (its need, inside the piece) the numeric optimum is at most its H
    needs = [math.ceil(at(need, sizes)) for i, _, need in constant_pieces(r)
             if at(need, sizes) < at(sympy.sympify(r.regimes[i].upper), sizes)]
    counted = {g.memory: g.H for g in nc.derive(f, memory=sorted(set(needs)), sizes=sizes).regimes}
    assert [(m, float(H.subs(M, m)), counted[m]) for m in needs if float(H.subs(M, m)) < counted[m]] == []
    return r


def test_the_chains_constant_pieces_start_where_their_algorithm_fits():
    check(chain(), {"a": 64, "b": 68, "c": 72, "e": 76})


@slow
@pytest.mark.parametrize("name", ["attention+projection", "mlp", "swiglu"])
def test_constant_pieces_start_where_their_algorithm_fits_slow(name):
    f, sizes = {"attention+projection": (attention_projection(), {"h": 3, "q": 40, "d": 48, "x": 40, "e": 32}),
                "mlp": (L.mlp(), {"n": 64, "i": 68, "f": 72, "o": 76}),
                "swiglu": (L.swiglu(), {"n": 64, "e": 68, "f": 72})}[name]
    check(f, sizes)


def test_the_chains_clamped_form_holds_what_its_whole_tile_makes():
    """The chain's form with its row tile whole solves ``g_e`` for ``M − ac`` (the whole intermediate), so ``g_e``
    reaches ``e`` at ``ce + ac`` and the all-whole piece starts there (its algorithm needs ``ce + ac + c + a``).

    That form is a candidate: per tile of ``e`` the chain streams ``b`` and reads ``A`` and ``W₁`` again, so
    ``H = ce + ae + (e/g_e)(ab + bc)`` at ``g_e = (M − ac)/c``.  (Since symbwd-35 it wins no piece at these sizes:
    the envelope probed between its grid memories finds the chain fused and streamed along ``c``, ``e`` whole, whose
    form is below it there.)"""
    r = nc.derive(chain(), memory="M", reference={"a": 64, "b": 68, "c": 72, "e": 76})
    a, b, c, e = (nc.symbol(k) for k in "abce")
    assert sympy.expand(r.regimes[-1].lower - (c * e + a * c)) == 0
    shifted = c * e + a * e + e / ((M - a * c) / c) * (a * b + b * c)
    # simplify (2 s a candidate) only where the difference is not clearly nonzero at a point (an identity is 0 there)
    point = {a: 61, b: 67, c: 71, e: 73, M: sympy.Rational(10 ** 7, 3)}

    def off_at_point(H) -> bool:
        v = (sympy.sympify(H) - shifted).xreplace(point)
        return v.is_number and abs(sympy.N(v, 50)) > 1e-30
    assert [v for v, H in r.candidates if not off_at_point(H) and sympy.simplify(sympy.sympify(H) - shifted) == 0]
    for g in r.regimes:     # wherever a piece has g_e solved for M − ac, it is that
        if sympy.sympify(g.optimum.sizes.get(nc.symbol("g_e"), 0)).has(M - a * c):
            assert sympy.expand(g.optimum.sizes[nc.symbol("g_e")] - (M - a * c) / c) == 0


@pytest.mark.parametrize("seed", [1, 3, 4])
def test_random_programs_constant_pieces_fit(seed):
    p = random_program(seed)
    r = nc.derive(p.diagram, memory="M", reference=p.sizes)
    slack = sum(v for v in p.sizes.values())      # (axes of up to 13, some concrete: a row or column of each)
    assert [(i, at(lo, p.sizes), at(n, p.sizes)) for i, lo, n in constant_pieces(r)
            if at(n, p.sizes) > at(lo, p.sizes) + slack] == []
