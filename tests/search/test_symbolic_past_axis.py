"""A symbolic ``nc.derive``'s pieces choose every tile inside its axis, also where a form's tile is past its axis
from the form's first memory on (issue 35, found by sym-kkt-35e).

A large-M form holds until one of its tiles reaches its axis (:mod:`napkin_cat.search.breakpoints`); a form whose
tile is *already* past its axis at its first memory has no crossing to find (the transformer block's
``g_n ≥ d > n`` at every memory), and used to stay in the envelope, describing no algorithm.  Now such a form is
replaced by its clamped form from the start (:func:`napkin_cat.search.candidates.past_at`).

Routes that do not go through the envelope:

* **the tiles** of each piece, read off the regime's optimum at sample memories in its interval, against the axes
  their names come from (``g_n_3`` tiles ``n``), at the reference sizes;
* **compulsory** transfers (from the types): every input read once, every output written once;
* **the numeric derive** (``sizes=``, integer tiles) at the powers of two the reference search ran on: the
  symbolic ``H`` is at most it (the continuous optimum of a structure the numeric search also tries).
"""
from __future__ import annotations

import math
import os
import re

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.search.envelope import reference_sizes

L = nc.library
M = nc.symbol("M")
slow = pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="a symbolic derive of a block: NAPKIN_SLOW=1")


def compulsory(diagram, sizes) -> int:
    env = {nc.symbol(k): v for k, v in sizes.items()}
    return sum(math.prod(int(sympy.sympify(a.size).subs(env)) for a in arr.axes)
               for arr in (*diagram.dom.inside, *diagram.cod.inside))


def axes(diagram, sizes) -> dict:
    """Every axis of the diagram's boxes (inner ones too: the block's ``m``, sized ``n``) at ``sizes``."""
    env = {nc.symbol(k): v for k, v in sizes.items()}
    found = {}
    for box in diagram.boxes:
        for a in (a for arr in (*box.dom.inside, *box.cod.inside) for a in arr.axes):
            size = sympy.sympify(a.size).subs(env)
            if a.name not in found and size.is_number:      # (inside a partition: the tile, not the axis)
                found[a.name] = float(size)
        if isinstance(box, nc.Region):
            found = {**axes(box.arg, sizes), **found}
    return found


def axis_of(tile: str) -> str:
    """The axis a tile's name comes from: ``g_n_3`` and ``s_n`` tile ``n``."""
    return re.fullmatch(r"[gs]_([A-Za-z]+)(?:_\d+)?", tile).group(1)


def samples(lo: float, hi: float) -> list:
    """Memories inside ``[lo, hi)``: its ends (the upper one just below) and three between, on a log scale."""
    hi = min(hi, 2.0 ** 40)
    if hi <= lo:
        return [lo]
    return [lo * (hi / lo) ** (k / 4) for k in range(4)] + [hi * (1 - 1e-9)]


def pieces_within_axes(r, sizes) -> list:
    """``[(piece, M, tile, value, axis)]`` where a piece's tile exceeds its axis at a memory of its interval."""
    env = {nc.symbol(k): v for k, v in sizes.items()}
    bad = []
    for i, g in enumerate(r.regimes):
        n = {**axes(r.diagram, sizes), **axes(g.diagram, sizes)}       # (a kernel's axes renamed apart too)
        lo, hi = float(sympy.sympify(g.lower).subs(env)), float(sympy.sympify(g.upper).subs(env))
        for m in samples(lo, hi):
            for tile, t in g.optimum.sizes.items():
                v = float(sympy.sympify(t).subs(env).subs(M, m))
                if v > n[axis_of(str(tile))] * (1 + 1e-9):
                    bad.append((i, m, str(tile), v, n[axis_of(str(tile))]))
    return bad


def pieces_that_do_not_fit(r, sizes) -> list:
    """``[(piece, lower, peak)]`` where a piece whose tiles are all whole or constant starts below the memory its
    algorithm holds: the cost functor's peak of the regime's algorithm (``g.cost``, made from its diagram) at the
    piece's tiles, against the piece's lower end (the envelope's)."""
    env = {nc.symbol(k): v for k, v in sizes.items()}
    bad = []
    for i, g in enumerate(r.regimes):
        tiles = {k: sympy.sympify(v).subs(env) for k, v in g.optimum.sizes.items()}
        if any(t.has(M) for t in tiles.values()):
            continue            # (a large-M form: its lower-order memory terms are left out, as the mode says)
        peak = g.cost.peak
        need = float(sympy.sympify(peak[max(peak)]).subs(tiles).subs(env))
        lower = float(sympy.sympify(g.lower).subs(env))
        if need > lower * (1 + 1e-9):
            bad.append((i, lower, need))
    return bad


def attention_projection():
    """Multi-head attention and its output projection ``h q d, h d e -> q e`` (the block's kernel whose form chose
    ``g_n = √(d(M + dn)/n) ≥ d > n``), at sizes with ``d > q``."""
    b = nc.Builder(nc.types("h q d, h x d, h x d, h d e"))
    A = b(L.multi_head_attention(), *b.inputs[:3])
    return b.build(b(nc.einsum("h q d, h d e -> q e"), A, b.inputs[3]))


def check_numeric(f, r, sizes):
    env = {nc.symbol(k): v for k, v in sizes.items()}
    H = sympy.sympify(r.H).subs(env)
    floor = compulsory(f, sizes)
    grid = [2 ** k for k in range(4, 25, 4)]
    counted = {g.memory: g.H for g in nc.derive(f, memory=grid, sizes=sizes).regimes}
    for m in grid:
        h = H.subs(M, m)
        if h is sympy.nan:
            continue
        assert h >= floor, (m, h, floor)
        assert float(h) <= float(counted[m]) * (1 + 1e-9), (m, float(h), counted[m])


def test_an_attention_projections_pieces_keep_their_tiles_inside_the_axes():
    f, sizes = attention_projection(), {"h": 3, "q": 40, "d": 48, "x": 40, "e": 32}
    r = nc.derive(f, memory="M", reference=sizes)
    assert pieces_within_axes(r, sizes) == []
    check_numeric(f, r, sizes)


@slow
def test_the_transformer_blocks_pieces_keep_their_tiles_inside_the_axes():
    f = L.transformer_block()
    r = nc.derive(f, memory="M")
    sizes = reference_sizes(f)
    assert pieces_within_axes(r, sizes) == []
    # the form past its axis used to be kept: its clamped descendant (every tile whole) started at 3eh = 3,760,128,
    # where g_h reached h, but that algorithm holds 7,161,024 words (the cost functor's peak)
    assert pieces_that_do_not_fit(r, sizes) == []
    env = {nc.symbol(k): v for k, v in sizes.items()}
    floor = compulsory(f, sizes)
    for g in r.regimes:
        lo = float(sympy.sympify(g.lower).subs(env))
        assert float(sympy.sympify(r.H).subs(env).subs(M, lo)) >= floor
