"""Cost pieces remembered by value (issue 35): a candidate's kernel reuses what another candidate's equal boxes cost.

The search costs hundreds of candidate kernels, each a fresh diagram in which the same operations reappear.  The
cost functor keeps a box's pieces (transfers, bytes, FLOPs) and an array's polynomial size by *value*
(:mod:`napkin_cat.cost.by_value`), so a fresh copy of a box costed before is not costed again.  Checked by a second
route that shares nothing with the memo:

* every candidate of random programs (:func:`~napkin_cat.testing.programs.random_program`) and of the library's
  kernels, costed as the search costs it (its record, polynomial arithmetic, the memo warm with every program
  costed before and with the same boxes seen plain), equals ``nc.cost`` of the diagram the rules build (sympy
  arithmetic, relabelled boxes: other memo keys): H and bytes per level, FLOPs per pipeline, the memory columns
  per level (hence M per level), exactly;
* fresh equal boxes share one entry, and it equals the pieces recomputed with the memo emptied.
"""
import sympy

import napkin_cat as nc
from napkin_cat.cost import iocost
from napkin_cat.cost.iocost import box_pieces, cost
from napkin_cat.cost.live import numel
from napkin_cat.cost.polynomial import NUMELS, POLYNOMIAL, as_expr
from napkin_cat.errors import NotPolynomialError
from napkin_cat.search.curves import Curve
from napkin_cat.search.variants import variants
from napkin_cat.syntax.flat import layers
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, random_program

SEEDS = range(14)


def expanded(d: dict) -> dict:
    return {k: sympy.expand(as_expr(v)) for k, v in d.items()}


def columns(c) -> dict:
    return {lvl: {sympy.expand(as_expr(v)) for v in cols} for lvl, cols in c.columns.items()}


def assert_record_is_built(v, what) -> bool:
    """The search's record of ``v`` (as :class:`Curve` costs it) against ``nc.cost`` of the built diagram."""
    try:
        rec = Curve(v).search_cost
    except NotPolynomialError:
        return False
    built = cost(v.diagram)
    assert expanded(rec.H) == expanded(built.H), (what, rec.H, built.H)
    assert expanded(rec.H_bytes) == expanded(built.H_bytes), what
    assert expanded(rec.flops) == expanded(built.flops), (what, rec.flops, built.flops)
    assert columns(rec) == columns(built), what
    return True


def plain(function):
    """The function's kernel costed whole in the search's arithmetic: its boxes' pieces seen plain, kept by value
    (a relabelled box that took them would cost its tiles as whole axes)."""
    cost(nc.kernel(function), arithmetic=POLYNOMIAL, ops=False)


def test_candidates_cost_what_their_built_diagrams_cost():
    costed = 0
    for name, make in sorted(LIBRARY_FUNCTIONS.items()):
        plain(make())
        for v in variants(make()):          # a fresh function: its boxes are equal to those costed plain
            costed += assert_record_is_built(v, (name, v.describe()))
    for seed in SEEDS:
        p = random_program(seed, n_ops=2 + seed % 5)
        plain(random_program(seed, n_ops=2 + seed % 5).diagram)
        for v in variants(p.diagram):
            costed += assert_record_is_built(v, (p.call, v.describe()))
    assert costed >= len(SEEDS) + len(LIBRARY_FUNCTIONS)


def test_fresh_equal_boxes_share_their_pieces():
    (_, one), = layers(nc.library.matmul())
    (_, two), = layers(nc.library.matmul())
    assert one is not two and one == two
    first = box_pieces(one, arithmetic=POLYNOMIAL)
    assert box_pieces(two, arithmetic=POLYNOMIAL) is first          # the second copy costs nothing
    iocost.PIECES.clear()
    (_, three), = layers(nc.library.matmul())
    again = box_pieces(three, arithmetic=POLYNOMIAL)
    assert again is not first and again[:3] == first[:3]            # recomputed: the same pieces
    a, b, c = nc.symbol("a"), nc.symbol("b"), nc.symbol("c")
    assert again[0] == () and dict(again[2]) == {"tensor": POLYNOMIAL.of(2 * a * b * c)}   # no load or save; 2abc


def test_equal_arrays_share_their_size():
    a = nc.types("q d x").inside[0]
    b = nc.types("q d x").inside[0]
    assert a is b          # interned by value (syntax/array.py): the memo on the object serves every equal copy
    n = POLYNOMIAL.numel(a)
    assert POLYNOMIAL.numel(b) is n and NUMELS.get(b) is n
    assert n.as_expr() == sympy.expand(numel(a))
