"""Composition inside out (issue 20): a level-ℓ kernel drawn around an algorithm whose kernels run deeper.

Building a multi-level algorithm inside out (the level-2 algorithm first, then a level-1 kernel around it,
then its partitions) gives the algorithm built outside in (the level-1 kernel first, a level-2 kernel nested
in it), the same diagram, so the same cost at every level, the same function and the same counted run.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.errors import LevelError


def _same(inside, outside, function, sizes):
    assert inside == outside
    ci, co = nc.cost(inside), nc.cost(outside)
    assert (ci.H, ci.M, ci.flops) == (co.H, co.M, co.flops) and set(ci.H) == {1, 2}
    assert nc.cost(inside, sizes=sizes).H == nc.cost(outside, sizes=sizes).H
    assert nc.equivalent(function, inside)


def test_the_issue_s_matmul_built_inside_out_is_the_one_built_outside_in():
    mm = nc.library.matmul()
    inside = nc.group(nc.kernel(nc.group(nc.kernel(mm, level=2), "a", "t_a"), level=1), "a", "g_a")
    outside = nc.group(nc.kernel(nc.group(nc.kernel(mm, level=1), "a", "g_a"), level=2), "a", "t_a")
    _same(inside, outside, mm, {"a": 12, "b": 5, "c": 4, "g_a": 6, "t_a": 4})
    p = nc.plan(inside, {"a": 12, "b": 5, "c": 4, "g_a": 6, "t_a": 4})
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(12, 5)), rng.normal(size=(5, 4))
    out, counted = p.run(A, B)
    np.testing.assert_allclose(out, A @ B, rtol=1e-12)
    assert counted.transfers == nc.cost(outside, sizes={"a": 12, "b": 5, "c": 4, "g_a": 6, "t_a": 4}).H


def test_flash_attention_with_a_level_2_tile_built_inside_out():
    att = nc.library.attention()
    level2 = nc.group(nc.stream(nc.kernel(att, level=2), "x", "s_x"), "q", "t_q")
    inside = nc.group(nc.kernel(level2, level=1), "q", "g_q")
    outside = nc.group(nc.stream(nc.kernel(nc.group(nc.kernel(att, level=1), "q", "g_q"), level=2), "x", "s_x"),
                       "q", "t_q")
    _same(inside, outside, att, {"q": 8, "x": 6, "d": 3, "g_q": 4, "t_q": 3, "s_x": 4})


def test_a_kernel_around_unfused_level_2_kernels_keeps_their_intermediates_at_level_1():
    f = nc.library.mlp()
    around = nc.kernel(nc.unfused(f, level=2), level=1)
    c = nc.cost(around)
    assert c.H[1] == nc.cost(nc.kernel(f, level=1)).H[1]           # only the boundary crosses level 1
    assert c.H[2] == nc.cost(nc.unfused(f, level=2)).H[2]         # each op still loads to and saves from 2
    assert nc.equivalent(f, around)


def test_a_level_between_the_kernels_is_refused_naming_both_ways():
    two = nc.kernel(nc.group(nc.kernel(nc.library.matmul(), level=3), "a", "t_a"), level=2)
    with pytest.raises(LevelError, match=r"cannot nest a kernel at level 2 inside Kernel\(level=2\).*use level=4 "
                                         r"or more"):
        nc.kernel(two, level=2)
    with pytest.raises(LevelError, match=r"use level=4 or more \(or a level below 3, to draw it around"):
        nc.kernel(nc.kernel(nc.library.matmul(), level=3), level=3)
    assert nc.kernel(two, level=1).boxes[0].params == {"level": 1}


def test_a_group_goes_to_the_kernel_not_grouped_along_its_axis_yet():
    mm = nc.library.matmul()
    inner = nc.group(nc.kernel(mm, level=2), "a", "t_a")
    around = nc.kernel(inner, level=1)
    along_c = nc.group(around, "c", "t_c")          # no kernel is grouped along c: the deepest (level 2) as before
    grids = [b for b in along_c.boxes[0].arg.boxes if isinstance(b, nc.Grid)]
    assert [g.axis for g in grids] == ["a"] and grids[0].arg.boxes[0].axis == "c"
    twice = nc.group(nc.group(nc.kernel(mm), "a", "g_a"), "a", "h_a")       # every kernel grouped: as before
    assert [b.params["size"] for b in (twice.boxes[0], twice.boxes[0].arg.boxes[0])] == [nc.symbol("g_a"),
                                                                                        nc.symbol("h_a")]
