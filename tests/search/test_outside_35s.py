"""Issue 35's symbolic mode from outside (``benchmarks/bench_outside_35s.py`` runs these and more, timed): wrong answers
of ``nc.derive(f, memory="M")`` found there.

* A symbolic derive answers or raises a typed error: the library's transformer block at ``n 12 e 20 h 4 d 5``
  raises an untyped ``TypeError`` (``search/envelope.py`` ``clamped_candidates`` evaluates the next form,
  ``… + 84000/(M − 480)``, at its own start ``M = 480``: ``zoo``, and ``float(zoo)`` raises).
* The symbolic answer is ``nan`` ("nothing fits") only below the least memory, the one a numeric derive's refusal
  names: self-attention with its projections ``(X W_q, X W_k, X W_v) → MHA → · W_o`` at ``n 10 e 24 h 2 d 12``
  derives numerically from ``M = 26`` (H 77,736 there, the runner's count = the cost functor's, the plan computes
  f), but its symbolic answer is one piece from ``M = 916``: ``nan`` on [26, 916).  Fixed in part: a tile no
  leading memory term holds is whole from the first memory on (a piece from 508); below 508 the winners' large-M
  programs have their optimum on a face of the tile box (``g_h = 1``: no KKT point), now solved there
  (:mod:`napkin_cat.search.faces`): the first piece from 26.
* ``H*(M)`` never rises with ``M`` (an algorithm that fits at ``M`` fits at every larger ``M``): gqa + W_o at
  ``q 20 x 36 d 6 h 2 g 3 e 16`` rose from 5,954 at ``M = 215`` to 7,200 at 216 where a clamp jumps up.
"""
import math

import pytest
import sympy

import napkin_cat as nc

L = nc.library
M = nc.symbol("M")


def projected_attention():
    """Q, K, V = X W_q, X W_k, X W_v (h heads of size d, keys on a second token axis m), then MHA, then · W_o."""
    mha = nc.rename_axis(nc.rename_axis(L.multi_head_attention(), "q", "n"), "x", "m", nc.symbol("n"))
    b = nc.Builder(nc.types("n e, e h d, e h d, e h d, h d e"))
    X, Wq, Wk, Wv, Wo = b.inputs
    Q = b(nc.einsum("n e, e h d -> h n d"), X, Wq)
    K = b(nc.renaming("h n d -> h m d"), b(nc.einsum("n e, e h d -> h n d"), X, Wk))
    V = b(nc.renaming("h n d -> h m d"), b(nc.einsum("n e, e h d -> h n d"), X, Wv))
    return b.build(b(nc.einsum("h n d, h d e -> n e"), b(mha, Q, K, V), Wo))


def least_memory(f, sizes) -> int:
    """The least memory a numeric derive names when refusing memory 1."""
    with pytest.raises(nc.MemoryLimitError) as e:
        nc.derive(f, memory=1, sizes=sizes)
    return int(str(e.value).split("smallest memory that works is ")[1].split()[0])


def test_symbolic_block_answers_at_n12_e20_h4_d5():
    """The form past ``g_n``'s clamp at ``M = 480`` holds ``480`` whatever its tiles (``g_d = (M − 480)/60``): at
    ``480`` it has a pole (tiles 0, no algorithm), so it starts where its algorithm runs; every piece is a finite
    count from its first memory on."""
    sizes = {"n": 12, "e": 20, "h": 4, "d": 5, "f": 44}
    r = nc.derive(L.transformer_block(), memory="M", reference=sizes)
    env = {nc.symbol(k): v for k, v in sizes.items()}
    for g in r.regimes:
        lower = sympy.Float(sympy.N(sympy.sympify(g.lower).subs(env)))
        h = complex(sympy.N(sympy.sympify(g.H).xreplace({**{k: sympy.Float(v) for k, v in env.items()}, M: lower})))
        assert math.isfinite(h.real) and abs(h.imag) <= 1e-9 * abs(h.real) and h.real > 0, \
            f"piece from M = {lower}: H = {h}"


def test_a_tile_no_leading_memory_term_holds_is_whole_from_the_first_memory():
    """The output projection's kernel grouped along ``n`` and ``h``, streamed along ``e``, holds ``g_n·h·n``
    whatever ``g_e``, and moves ``e·h·n²/g_e``: its large-M optimum has no KKT point (``g_e`` unbounded), and at
    25fb088 its algorithms were left out, the answer ``nan`` below 916.  ``g_e`` is whole from the first memory on
    (:mod:`napkin_cat.search.unbound_tiles`): a piece from ``max(dn + n², 3dn + 3d + n, eh + en + hn² + hn)`` = 508,
    ``g_e = e`` there; at 560 the symbolic ``H`` is below what the numeric derive finds (the second route)."""
    f, sizes = projected_attention(), {"n": 10, "e": 24, "h": 2, "d": 12}
    env = {nc.symbol(k): v for k, v in sizes.items()}
    r = nc.derive(f, memory="M", reference=sizes)
    at = next(g for g in r.regimes if sympy.sympify(g.lower).subs(env) <= 560 < sympy.sympify(g.upper).subs(env))
    assert at.optimum.sizes[nc.symbol("g_e")] == nc.symbol("e")
    sym = sympy.sympify(r.H).subs(env).subs(M, 560)
    assert 0 < sym <= nc.derive(f, memory=560, sizes=sizes).H


def test_symbolic_first_piece_starts_at_the_least_memory():
    """Below 508 the winners' QKᵀ and PV kernels have their optimum on a face of the tile box (``g_h = 1``, ``g_n``
    whole: no interior KKT point), and were left out (``nan`` on [26, 508)); now each is solved on its cheapest
    feasible face (:mod:`napkin_cat.search.faces`).  The first piece starts at the least memory a numeric derive
    names; inside it (second route: the numeric derive, integer divisor tiles, every column) the symbolic ``H`` is
    at most the numeric one, and the cost functor's transfers of the piece's algorithm at its tiles are the piece's
    ``H``, every tile in its box ``1 ≤ g ≤ axis``."""
    f, sizes = projected_attention(), {"n": 10, "e": 24, "h": 2, "d": 12}
    least = least_memory(f, sizes)
    d, at = nc.derive(f, memory=least, sizes=sizes).planned()     # the second route: an algorithm runs there
    assert nc.cost(d, sizes=at).M[1] <= least and nc.equivalent(f, d, sizes=at)
    r = nc.derive(f, memory="M", reference=sizes)
    env = {nc.symbol(k): v for k, v in sizes.items()}
    first = r.regimes[0]
    lower, upper = (float(sympy.sympify(b).subs(env)) for b in (first.lower, first.upper))
    assert lower <= least, f"symbolic answer nan below M = {lower}, numeric derives from {least}"
    axes = {t: n.subs(env) for g in first.cost.groups for t, n in zip(g.tiles, g.fulls)}
    for m in (least, (least + upper) / 2, upper * 0.999):
        tiles = {k: sympy.sympify(v).subs(env).subs(M, m) for k, v in first.optimum.sizes.items()}
        sym = float(sympy.sympify(first.H).subs(env).subs(M, m))
        assert sym <= nc.derive(f, memory=math.floor(m), sizes=sizes).H
        assert math.isclose(float(sympy.sympify(first.cost.H[max(first.cost.H)]).subs(tiles).subs(env)), sym,
                            rel_tol=1e-9)
        assert all(1 - 1e-9 <= float(v) <= float(axes[k]) * (1 + 1e-9) for k, v in tiles.items() if k in axes)


def gqa_proj():
    """Grouped-query attention, then its output projection ``h g q d, h g d e -> q e``."""
    att = L.grouped_query_attention()
    b = nc.Builder(nc.Ty(*att.dom.inside, *nc.types("h g d e").inside))
    Q, K, V, Wo = b.inputs
    return b.build(b(nc.einsum("h g q d, h g d e -> q e"), b(att, Q, K, V), Wo))


def rises(r, sizes, points=3000) -> list:
    """The memories ``(m₁, H₁, m₂, H₂)`` of a geometric grid from the first piece to 4096× it where the symbolic
    ``H`` rises from one to the next (beyond rounding)."""
    env = {nc.symbol(k): v for k, v in sizes.items()}
    h = sympy.lambdify(M, sympy.sympify(r.H).subs(env), "math")
    lo = float(sympy.N(sympy.sympify(r.regimes[0].lower).subs(env)))
    grid = [lo * 4096 ** (k / points) for k in range(points + 1)]
    vals = [h(m) for m in grid]
    return [(grid[k], vals[k], grid[k + 1], vals[k + 1]) for k in range(points)
            if vals[k + 1] > vals[k] * (1 + 1e-9)]


@pytest.mark.parametrize("name", ["gqa + W_o", "gqa", "mha", "projected attention"])
def test_symbolic_H_never_rises_with_M(name):
    """An algorithm that fits at ``M`` fits at every larger ``M``: past a clamp where the next form's ``H`` jumps up
    (gqa + W_o: 5,936 just below ``M = 216``, 7,200 at it, at 25fb088) the algorithm at the lower form's end is a
    candidate with that ``H`` (:mod:`napkin_cat.search.held_on`), and ``H`` is non-increasing on a fine grid."""
    f, sizes = {"gqa + W_o": (gqa_proj(), {"q": 20, "x": 36, "d": 6, "h": 2, "g": 3, "e": 16}),
                "gqa": (L.grouped_query_attention(), {"q": 96, "x": 120, "d": 24, "h": 3, "g": 2}),
                "mha": (L.multi_head_attention(), {"h": 3, "q": 40, "x": 48, "d": 8}),
                "projected attention": (projected_attention(), {"n": 10, "e": 24, "h": 2, "d": 12})}[name]
    r = nc.derive(f, memory="M", reference=sizes)
    assert rises(r, sizes) == []
