"""The plan IR, its pseudocode and variables, the fast runner, the errors, and the memory cases
where the cost functor and the plan first disagreed (kept as regressions)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.plan import render
from napkin_cat.plan.ir import Compute, StreamLoop, walk
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.builder import Builder
from rewrites import flash_attention


@pytest.fixture(scope="module")
def flash():
    return flash_attention(nc.library.attention()).diagram


def _data(d, sizes, seed=0):
    env = {symbol(k): v for k, v in sizes.items()}
    rng = np.random.default_rng(seed)
    return [rng.normal(size=tuple(int(sympy.sympify(a.size).subs(env)) for a in arr.axes)) for arr in d.dom.inside]


# ---------------------------------------------------------------------- the IR and its text
def test_flash_attention_plan_reads_like_the_paper(flash):
    p = nc.plan(flash, {"q": 8, "x": 8, "d": 4, "g_q": 4, "s_x": 2})
    text = str(p)
    for piece in ("parallel for i_q", "kernel @1:", "head:", "# stream x", "tail:", "SoftMax₁(", "← load x0[",
                  "← store", "variables:"):
        assert piece in text, piece
    roles = {v.name: v.role for v in p.variables if v.level == 1}
    assert sorted(r for r in roles.values() if r == "state") == ["state"] * 3     # μ, z and the output
    loop = next(s for s in walk(p.body) if isinstance(s, StreamLoop))
    assert any(isinstance(s, Compute) and s.kind == "softmax_unscaled" for s in loop.body)
    assert all(v.buffers == 1 for v in p.variables)


def test_variables_carry_what_the_configuration_tables_read(flash):
    p = nc.plan(flash, {"q": 8, "x": 8, "d": 4, "g_q": 4, "s_x": 2})
    o = next(v for v in p.variables if v.role == "state" and len(v.shape) == 2)
    assert dict(o.shape) == {"q": symbol("g_q"), "d": symbol("d")}
    assert o.size == symbol("g_q") * symbol("d") and o.bytes == 4 * symbol("g_q") * symbol("d")
    assert o.level == 1 and o.dtype == "fp32" and "stream(x)" in o.origin
    # the shared memory is what the instrumented run measures live at level 1 (fp32, one buffer each: 4 bytes a
    # value), and that is the paper's Table 1 at g_q = 4, s_x = 2, d = 4: Q and o (2·g·d), the V slice (s·d), the
    # scores (g·s) and μ, z, δ (3g)
    assert {(v.dtype, v.buffers) for v in p.variables if v.level == 1} == {("fp32", 1)}
    _, counted = p.run(*_data(nc.library.attention(), {"q": 8, "x": 8, "d": 4}))
    g, s, dd = 4, 2, 4
    assert counted.peak == {1: 2 * g * dd + s * dd + g * s + 3 * g}
    assert p.smem_bytes == p.peak_bytes[1] == 4 * counted.peak[1]


def test_ragged_tiles_print_as_masked(flash):
    p = nc.plan(flash, {"q": 7, "x": 10, "d": 2, "g_q": 3, "s_x": 4})
    assert "+≤g_q" in p.pseudocode() and "+≤s_x" in p.pseudocode()
    even = nc.plan(flash, {"q": 6, "x": 8, "d": 2, "g_q": 3, "s_x": 4})
    assert "≤" not in even.pseudocode()


def test_render_json_round_trips(flash):
    p = nc.plan(flash, {"q": 4, "x": 4, "d": 2, "g_q": 2, "s_x": 2})
    data = json.loads(render(p, fmt="json"))
    assert data["smem_bytes"] == p.smem_bytes and data["pseudocode"] == p.pseudocode()
    assert {v["name"] for v in data["variables"]} == {v.name for v in p.variables}


# ---------------------------------------------------------------------- the fast runner
@pytest.mark.parametrize("threads", [1, 2])
def test_fast_runner_matches_the_instrumented_one(flash, threads):
    sizes = {"q": 9, "x": 11, "d": 3, "g_q": 4, "s_x": 5}
    p = nc.plan(flash, sizes)
    xs = [x.astype(np.float32) for x in _data(nc.library.attention(), sizes)]
    slow, _ = p.run(*xs)
    fast = p(*xs, threads=threads)
    assert fast.dtype == np.float32
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fast, nc.evaluate(nc.library.attention(), *[x.astype(float) for x in xs]),
                               rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------- memory: the cases that disagreed
def test_a_copied_value_is_one_variable():
    """x ↦ (x + x) + x copies x to three wires: the cost functor counted it three times (M = 3n), the plan
    holds it once (peak 2n: x and the partial sum)."""
    b = Builder(nc.types("n"))
    (x,) = b.inputs
    d = nc.kernel(b.build(b(nc.elementwise("add", "n"), b(nc.elementwise("add", "n"), x, x), x)))
    p = nc.plan(d, {"n": 5})
    _, counters = p.run(np.arange(5.0))
    assert counters.peak == {1: 10} == {1: int(nc.cost(d).M[1].subs({symbol("n"): 5}))}


def test_head_computations_run_before_the_slices_arrive():
    """Streamed along h, a transformer block's first layer norm is head: it never meets the weight slices.
    Walking the region in layer order the cost functor put it after the slice loads (M 720, plan 636)."""
    d = nc.stream(nc.library.transformer_block(), "h", "s_h")
    sizes = dict(n=6, e=6, h=6, d=6, f=6, s_h=3)
    _, counters = nc.plan(d, sizes).run(*_data(nc.library.transformer_block(), sizes))
    assert counters.peak == {1: 636} == {1: at(d, sizes).M[1]}


def test_the_online_step_holds_its_correction():
    """Inside the accumulator B: scores P, the running μ, δ, z and output o with Q and the V slice
    (paper Table 1 lists three auxiliaries): 2qd + sd + qs + 3q, which the cost functor missed (it had 2q)."""
    d = nc.stream(nc.library.attention(), "x", "s_x")
    q, x, dd, s = 4, 6, 2, 3
    _, counters = nc.plan(d, {"q": q, "x": x, "d": dd, "s_x": s}).run(
        *_data(nc.library.attention(), {"q": q, "x": x, "d": dd}))
    want = 2 * q * dd + s * dd + q * s + 3 * q
    assert counters.peak == {1: want}
    assert nc.cost(d).M[1].subs({symbol("q"): q, symbol("d"): dd, symbol("s_x"): s}) == want


# ---------------------------------------------------------------------- errors
def test_missing_and_unknown_sizes_are_named(flash):
    with pytest.raises(nc.AxisError, match=r"missing \['g_q'\]"):
        nc.plan(flash, {"q": 4, "x": 4, "d": 2, "s_x": 2})
    with pytest.raises(nc.AxisError, match=r"'k'.*axes and tiles are"):
        nc.plan(flash, {"q": 4, "x": 4, "d": 2, "s_x": 2, "g_q": 2, "k": 3})
    with pytest.raises(nc.AxisError, match="positive int"):
        nc.plan(flash, {"q": 4, "x": 4, "d": 2, "s_x": 0, "g_q": 2})


def test_a_tile_larger_than_its_axis_is_refused(flash):
    with pytest.raises(nc.PlanError, match=r"stream size of 'x' \(s_x = 9\) exceeds the axis \(x = 4\)"):
        nc.plan(flash, {"q": 4, "x": 4, "d": 2, "s_x": 9, "g_q": 2})


def test_a_fixed_tile_that_does_not_divide_cannot_be_masked():
    mm = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", 2)
    with pytest.raises(nc.PlanError, match=r"group size of 'a' \(2 = 2\) does not divide 'a' = 5.*divisors \[1, 5\]"):
        nc.plan(mm, {"a": 5, "b": 4, "c": 3, "s_b": 2})


def test_a_plan_over_a_levels_capacity_is_refused(flash):
    sizes = {"q": 8, "x": 8, "d": 4, "g_q": 4, "s_x": 2}
    peak = nc.plan(flash, sizes).peak[1]
    nc.plan(flash, sizes, memory=peak)
    with pytest.raises(nc.MemoryLimitError, match=rf"level 1 holds up to {peak} values.*capacity of {peak - 1}"):
        nc.plan(flash, sizes, memory={1: peak - 1})


def test_a_capacity_for_a_level_the_plan_does_not_hold_is_refused_by_name(flash):
    """A capacity for a level the plan holds nothing at (a typo, a level of another hierarchy) is not ignored."""
    sizes = {"q": 8, "x": 8, "d": 4, "g_q": 4, "s_x": 2}
    with pytest.raises(nc.LevelError, match=r"capacity for level 7, which this plan holds nothing at: its levels "
                                            r"below global memory are \[1\]"):
        nc.plan(flash, sizes, memory={1: 10 ** 6, 7: 100})
    assert nc.plan(flash, sizes, memory={1: 10 ** 6}).peak[1] > 0


def test_arrays_of_the_wrong_shape_are_named(flash):
    p = nc.plan(flash, {"q": 4, "x": 6, "d": 2, "g_q": 2, "s_x": 3})
    Q, K, V = np.ones((4, 2)), np.ones((6, 2)), np.ones((5, 2))
    with pytest.raises(nc.ShapeError, match=r"argument 2 \(x2, axes \['x', 'd'\]\).*x: 6 \(got 5\)"):
        p.run(Q, K, V)
    with pytest.raises(nc.ShapeError, match="takes 3 array"):
        p(Q, K)
