"""Multi-level algorithms (paper §3.1, §4, Fig. multi-level; §5.2 sub-loops): a kernel at level ℓ+1 inside the
partitions of a level-ℓ kernel, and a stream streamed again.  Built, evaluated, costed per level, planned, run,
drawn and serialised; the runner's counters are the second route to the cost functor's numbers.

On the main branch before this work, ``nc.kernel(tiled, level=2)`` raised
``RewriteError: cannot form a kernel around Grid(axis=a, size=g_a): the diagram is already an algorithm``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.bubbles import Grid, Kernel, Stream
from napkin_cat.cost.numeric import at
from napkin_cat.errors import LevelError, RewriteError
from napkin_cat.plan.ir import GridLoop, Kernel as KernelNode, StreamLoop, walk

sys.path.insert(0, str(Path(__file__).parent.parent / "plan"))
from test_plan_counts import check  # noqa: E402

S = {n: nc.symbol(n) for n in ("a", "b", "c", "g_a", "g_c", "s_b", "h_a", "h_c", "u_b")}


def tiled():
    return nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")


def two_level():
    """Fig. matmul_tiling_ml: g_a × g_c tiles at level 1, split into h_a × h_c tiles at level 2, s_b into u_b."""
    return nc.group(nc.group(nc.stream(nc.kernel(tiled(), level=2), "b", "u_b"), "a", "h_a"), "c", "h_c")


def attention():
    """Attention on other axis names: queries r, keys k, features e."""
    att = nc.library.attention()
    for old, new in (("q", "r"), ("x", "k"), ("d", "e")):
        att = nc.rename_axis(att, old, new)
    return att


def two_level_attention():
    """A level-2 kernel per h_r rows inside each g_r × s_k tile of FlashAttention, its slice streamed in u_k."""
    flash = nc.group(nc.stream(attention(), "k", "s_k"), "r", "g_r")
    return nc.stream(nc.group(nc.kernel(flash, level=2), "r", "h_r"), "k", "u_k")


def regions(d, depth=0):
    out = []
    for b in d.boxes:
        if isinstance(b, (Kernel, Grid, Stream)):
            out.append((depth, b.name))
            out += regions(b.arg, depth + 1)
    return out


# --------------------------------------------------------------------------- (a) construction
def test_a_kernel_nests_around_the_innermost_body():
    d = nc.kernel(tiled(), level=2)
    names = [n for _, n in regions(d)]
    assert names == ["Grid(axis=a, size=g_a)", "Grid(axis=c, size=g_c)", "Kernel(level=1)",
                     "Stream(axis=b, size=s_b)", "Kernel(level=2)"]
    (k2,) = [b for b in d.boxes[0].arg.boxes[0].arg.boxes[0].arg.boxes[0].arg.boxes if isinstance(b, Kernel)]
    assert [a.level for a in k2.dom.inside] == [1, 1]            # it reads the level-1 tiles
    assert {a.level for b in k2.arg.boxes for a in b.cod.inside} == {1, 2}
    assert [str(a) for a in k2.dom.inside] == ["a[g_a]×b[s_b]@1", "b[s_b]×c[g_c]@1"]


def test_partitions_go_to_the_deepest_kernels_and_a_streamed_axis_gets_a_sub_loop():
    names = [n for _, n in regions(two_level())]
    assert names[4:] == ["Grid(axis=a, size=h_a)", "Grid(axis=c, size=h_c)", "Kernel(level=2)",
                         "Stream(axis=b, size=u_b)"]
    flash = nc.group(nc.stream(attention(), "k", "s_k"), "r", "g_r")
    sub = regions(nc.stream(flash, "k", "u_k"))
    assert (3, "Stream(axis=k, size=u_k)") in sub and (2, "Stream(axis=k, size=s_k)") in sub


# --------------------------------------------------------------------------- (b) meaning
def test_b_two_level_matmul_and_attention_equal_numpy():
    assert nc.equivalent(nc.library.matmul(), two_level())
    assert nc.equivalent(attention(), two_level_attention())
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(9, 13)), rng.normal(size=(13, 7))
    sizes = {"g_a": 4, "g_c": 6, "s_b": 6, "h_a": 2, "h_c": 3, "u_b": 4}   # every tile ragged somewhere
    np.testing.assert_allclose(nc.evaluate(two_level(), A, B, sizes=sizes), A @ B, rtol=1e-12, atol=1e-12)
    Q, K, V = rng.normal(size=(7, 3)), rng.normal(size=(11, 3)), rng.normal(size=(11, 3))
    P = np.exp(Q @ K.T / np.sqrt(3))
    want = (P / P.sum(1, keepdims=True)) @ V
    got = nc.evaluate(two_level_attention(), Q, K, V, sizes={"g_r": 4, "h_r": 3, "s_k": 5, "u_k": 2})
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- (c) cost per level
def _tiles(n, g):
    return [g] * (n // g) + ([n % g] if n % g else [])


def test_c_cost_per_level_by_hand():
    """Level 1 as the single-level tiling.  Level 2: per level-1 slice, each h_a × h_c group loads its part of the
    accumulator and its A and B slices, and saves the accumulator back:
    (a/g_a)(c/g_c)(b/s_b)(g_a/h_a)(g_c/h_c)(2 h_a h_c + h_a s_b + s_b h_c)."""
    c, one = nc.cost(two_level()), nc.cost(tiled())
    a, b, cc, g_a, g_c, s_b, h_a, h_c, u_b = S.values()
    assert sympy.simplify(c.H[1] - (a * b * cc / g_c + a * b * cc / g_a + a * cc)) == 0
    assert sympy.simplify(c.H[2] - (a * b * cc / h_c + a * b * cc / h_a + 2 * a * cc * b / s_b)) == 0
    assert c.flops == one.flops == {"tensor": 2 * a * b * cc}
    assert sympy.expand(c.M[2] - (h_a * h_c + h_a * u_b + u_b * h_c)) == 0
    assert c.M[1] == one.M[1]


def test_c_runner_counts_equal_the_cost_at_ragged_sizes():
    sizes = {"a": 9, "b": 13, "c": 7, "g_a": 4, "g_c": 6, "s_b": 6, "h_a": 2, "h_c": 3, "u_b": 4}
    p, n = check(nc.library.matmul(), two_level(), sizes)      # outputs, H, bytes, FLOPs, peaks: all equal
    A2 = [e for g in _tiles(9, 4) for e in _tiles(g, 2)]        # level-2 tiles of a: 2 2 | 2 2 | 1
    C2 = [e for g in _tiles(7, 6) for e in _tiles(g, 3)]        # of c: 3 3 | 1
    B = _tiles(13, 6)
    H2 = sum(2 * ea * ec + ea * eb + eb * ec for ea in A2 for ec in C2 for eb in B)
    H1 = sum(ea * 13 + 13 * ec for ea in _tiles(9, 4) for ec in _tiles(7, 6)) + 9 * 7
    assert n.transfers == {1: H1, 2: H2} == at(two_level(), sizes).H
    assert n.flops == {"tensor": 2 * 9 * 13 * 7}
    assert n.peak == {1: 4 * 6 + 4 * 6 + 6 * 6, 2: 2 * 3 + 2 * 4 + 4 * 3}


def test_c_two_level_attention_counts_and_plan_levels():
    sizes = {"r": 9, "k": 13, "e": 3, "g_r": 4, "s_k": 6, "u_k": 4, "h_r": 3}
    p, n = check(attention(), two_level_attention(), sizes)
    assert set(n.transfers) == {1, 2}
    levels = {v.name: v.level for v in p.variables}
    assert {v.level for v in p.variables if v.role == "state"} == {1, 2}   # μ, z, o at level 1, loaded to 2
    kernels = [s.level for s in walk(p.body) if isinstance(s, KernelNode)]
    assert kernels == [1, 2]
    loops = [(type(s).__name__, s.axis) for s in walk(p.body) if isinstance(s, (GridLoop, StreamLoop))]
    assert loops == [("GridLoop", "r"), ("StreamLoop", "k"), ("GridLoop", "r"), ("StreamLoop", "k")]
    assert p.smem_bytes == p.peak_bytes[1] and max(levels.values()) == 2


def test_sub_loop_plan_streams_each_slice_again():
    flash = nc.group(nc.stream(attention(), "k", "s_k"), "r", "g_r")
    sub = nc.stream(flash, "k", "u_k")
    p, n = check(attention(), sub, {"r": 5, "k": 11, "e": 2, "g_r": 3, "s_k": 5, "u_k": 2})
    (outer,) = [s for s in p.body[1].body[0].body if isinstance(s, StreamLoop)]
    (inner,) = [s for s in outer.body if isinstance(s, StreamLoop)]
    assert (outer.tile, inner.tile) == (nc.symbol("s_k"), nc.symbol("u_k"))
    assert nc.cost(sub).H == nc.cost(flash).H                  # a sub-loop moves nothing more


def test_per_level_optimum():
    c = nc.cost(two_level())
    o = nc.optimal(c, "M_2", level=2, streams={"s_b": S["b"]})
    M2 = nc.symbol("M_2")
    assert o.sizes[S["h_a"]] == o.sizes[S["h_c"]] == sympy.sqrt(M2)
    assert sympy.simplify(o.H - (2 * S["a"] * S["c"] + 2 * S["a"] * S["b"] * S["c"] / sympy.sqrt(M2))) == 0
    o1 = nc.optimal(c, "M", level=1)
    assert set(o1.sizes) >= {S["g_a"], S["g_c"]} and S["h_a"] not in o1.sizes


# --------------------------------------------------------------------------- (d) drawing and JSON
def test_d_drawing_and_json_round_trip():
    d = two_level()
    s = nc.draw(d).napkin_summary
    assert s["frames"].index("Kernel(level=2)") < s["frames"].index("Stream(axis=b, size=s_b)")  # drawn inside
    assert set(s["level_colors"]) == {0, 1, 2} and s["level_colors"][2] != s["level_colors"][1]
    text = nc.dumps(d)
    back = nc.loads(text)
    assert back == d and json.loads(text)
    assert nc.cost(back).H == nc.cost(d).H
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(5, 6)), rng.normal(size=(6, 4))
    sizes = {"g_a": 3, "g_c": 2, "s_b": 4, "h_a": 2, "h_c": 1, "u_b": 3}
    np.testing.assert_array_equal(nc.evaluate(back, A, B, sizes=sizes), nc.evaluate(d, A, B, sizes=sizes))


# --------------------------------------------------------------------------- (e) errors
def test_e_a_nested_kernel_must_be_deeper():
    with pytest.raises(LevelError, match=r"level 1 inside Kernel\(level=1\) \(level 1\).*use level=2"):
        nc.kernel(tiled(), level=1)
    with pytest.raises(LevelError, match=r"level 2 inside Kernel\(level=2\) \(level 2\).*use level=3"):
        nc.kernel(two_level(), level=2)
    assert [n for _, n in regions(nc.kernel(two_level(), level=3))].count("Kernel(level=3)") == 1


def test_e_partitions_of_an_axis_the_inner_kernel_lacks():
    k2 = nc.kernel(tiled(), level=2)
    with pytest.raises(RewriteError, match=r"group along 'b' in the level-2 kernels.*no output carries 'b'"):
        nc.group(k2, "b", "h_b")
    with pytest.raises(RewriteError, match=r"stream along 'a' in the level-2 kernels.*grows with 'a'"):
        nc.stream(k2, "a", "u_a")


def test_a_level_2_grid_holds_its_level_1_arrays_whole_and_three_levels_nest():
    """A level-2 kernel's Grid in an unstreamed level-1 tile: level 1 holds the tile's inputs and the Grid's output
    whole while the groups run (the runner allocates the output before the loop); a level-3 kernel nests in turn."""
    flat = nc.group(nc.kernel(nc.group(attention(), "r", "g_r"), level=2), "r", "h_r")
    p, n = check(attention(), flat, {"r": 7, "k": 5, "e": 3, "g_r": 4, "h_r": 3})
    assert n.peak[1] == 4 * 3 + 2 * 5 * 3 + 4 * 3          # Q tile, K and V, the output tile
    three = nc.kernel(two_level(), level=3)
    p, n = check(nc.library.matmul(), three, {"a": 5, "b": 7, "c": 4, "g_a": 3, "g_c": 2, "s_b": 4, "h_a": 2,
                                              "h_c": 1, "u_b": 3})
    assert set(n.transfers) == {1, 2, 3} and n.flops == {"tensor": 2 * 5 * 7 * 4}
