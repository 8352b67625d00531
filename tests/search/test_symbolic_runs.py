"""Symbolic mode: a form with a tile set whole holds only where its algorithm runs (outside-35d).

The paper's memory model cuts what a group holds to its leading terms, so it leaves out what every group holds alike:
grouped-query attention whose group is the query heads holds the whole K and V (``2dx``), yet ``g_g = M/d``
reaches ``g`` at ``M = dg``.  At 9e1ea3d the form past that point (every tile whole: the compulsory transfers) was
claimed from ``M = dg`` (48 values at the sizes below), where the algorithm needs ``2dx + gx + 2g`` (6,004): the
envelope said 44,928 transfers at M = 64 where the integer optimum is 1,188,864 (26× fewer than any algorithm).

Two routes besides the envelope: the cost functor at the reference sizes (what the regime's algorithm holds with its
whole tiles at their axes and every other tile 1) and the numeric derive (integer tiles under the exact memory model).
"""
import sympy

import napkin_cat as nc

L = nc.library


def _regimes_at(f, sizes):
    r = nc.derive(f, memory="M", reference=sizes)
    env = {nc.symbol(k): v for k, v in sizes.items()}
    return r, env


def _needs(reg, sizes):
    """The memory the regime's algorithm needs: its whole tiles at their axes, every other tile and stream 1 (the
    cost functor at concrete sizes)."""
    tiles = {}
    for k, v in reg.optimum.sizes.items():
        v = sympy.sympify(v)
        tiles[str(k)] = sizes[str(v)] if v.is_Symbol and str(v) in sizes else 1
    return nc.cost(reg.diagram, sizes={**sizes, **tiles}).M[1]


def _check_whole_forms_run(f, sizes):
    """Every regime whose tiles are all whole (a constant ``H``) starts where its algorithm runs, up to the
    large-M form's lower-order memory terms (a tile's row or column beside the whole tile: here < 10 %)."""
    r, env = _regimes_at(f, sizes)
    checked = 0
    for reg in r.regimes:
        if sympy.sympify(reg.H).has(nc.symbol("M")):
            continue
        lower = float(sympy.sympify(reg.lower).subs(env))
        need = _needs(reg, sizes)
        assert need <= 1.1 * lower, (reg.H, lower, need)
        checked += 1
    assert checked
    return r, env


def _check_near_numeric(f, sizes, memories):
    """The envelope (real tiles, the paper's memory model) is a relaxation of the integer optimum, never 2× below it
    at these memories (at 9e1ea3d: 26× below for GQA at M = 64)."""
    r, env = _regimes_at(f, sizes)
    H = sympy.sympify(r.H).subs(env)
    for m in memories:
        sym = float(H.subs(nc.symbol("M"), m))
        num = nc.derive(f, memory=m, sizes=sizes).H
        assert sym >= 0.5 * num, (m, sym, num)


def test_grouped_query_whole_forms_start_where_they_run():
    _check_whole_forms_run(L.grouped_query_attention(), {"q": 96, "x": 120, "d": 24, "h": 3, "g": 2})


def test_multi_query_whole_forms_start_where_they_run():
    _check_whole_forms_run(L.grouped_query_attention(), {"q": 96, "x": 120, "d": 24, "h": 1, "g": 6})


def test_grouped_query_envelope_near_the_integer_optimum():
    _check_near_numeric(L.grouped_query_attention(), {"q": 96, "x": 120, "d": 24, "h": 3, "g": 2},
                        [64, 256, 1024, 4096])


def test_matmul_keeps_its_pieces():
    """Where a form ran up to the memory its tile reaches its axis, the next form starts there (matmul's
    ``ab + ac + bc`` from ``ac``: what the whole tiles need beyond it, ``a + c``, is a lower-order term; B whole and
    A's rows streamed, found between the grid's memories since symbwd-35, likewise from ``bc``)."""
    sizes = {"a": 96, "b": 80, "c": 56}
    r, env = _check_whole_forms_run(L.matmul(), sizes)
    a, b, c = nc.symbol("a"), nc.symbol("b"), nc.symbol("c")
    cross = a * c * (b - c) / (a - c)
    assert [(g.lower, g.upper) for g in r.regimes][1:] == [(c ** 2, cross), (cross, b * c), (b * c, a * c),
                                                           (a * c, sympy.oo)]
