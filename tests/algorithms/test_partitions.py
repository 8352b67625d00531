"""Kernels, group and stream partitions: semantics and refusals (paper §2.2-2.4)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.algorithms.bubbles import Grid, Kernel, Stream


def flash():
    return nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")


def tiled_matmul():
    return nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")


def test_kernel_wraps_loads_and_saves():
    k = nc.kernel(nc.library.attention())
    (box,) = k.boxes
    assert isinstance(box, Kernel) and box.params == {"level": 1}
    kinds = [b.data.kind for b in box.arg.boxes]
    assert kinds.count("load") == 3 and kinds.count("save") == 1
    assert all(a.level == 1 for b in box.arg.boxes if b.data.kind == "softmax" for a in b.dom.inside)
    assert nc.equivalent(nc.library.attention(), k)


def test_unfused_is_one_kernel_per_primitive():
    u = nc.unfused(nc.library.attention())
    assert [type(b) for b in u.boxes] == [Kernel, Kernel, Kernel]
    assert nc.equivalent(nc.library.attention(), u)


def test_flash_structure_and_equivalence():
    f = flash()
    (grid,) = f.boxes
    assert isinstance(grid, Grid) and grid.axis == "q"
    (kern,) = grid.arg.boxes
    (st_,) = kern.arg.boxes
    assert isinstance(st_, Stream) and st_.axis == "x"
    # the inside sees the relabelled sizes
    assert any(a.axis("q").size == nc.symbol("g_q") for a in grid.arg.dom.inside if "q" in a.names)
    assert [r.kind for r in st_.plan.reducers] == ["softmax_contraction_to_unscaled"]
    assert nc.equivalent(nc.library.attention(), f, trials=6)


@pytest.mark.parametrize("function, build", [
    (nc.library.multi_head_attention,
     lambda f: nc.group(nc.group(nc.stream(f, "x", "s_x"), "q", "g_q"), "h", "g_h")),
    (nc.library.grouped_query_attention,
     lambda f: nc.group(nc.group(nc.stream(f, "x", "s_x"), "q", "g_q"), "g", "g_g")),
    (nc.library.matmul, lambda f: nc.group(nc.group(nc.stream(f, "b", "s_b"), "a", "g_a"), "c", "g_c")),
], ids=["mha", "gqa", "matmul"])
def test_partitioned_algorithms_are_equivalent(function, build):
    f = function()
    assert nc.equivalent(f, build(f), trials=6)


def test_streaming_is_derived_not_listed():
    """A user algorithm never seen by the library: exp, masking, then a contraction over x."""
    b = nc.Builder(nc.types("q x, x d, q x"))
    S, V, mask = b.inputs
    P = b(nc.elementwise("exp", "q x"), b(nc.elementwise("add", "q x"), S, mask))
    out = b.build(b(nc.einsum("q x, x d -> q d"), P, V))
    s = nc.stream(out, "x", "s_x")
    assert nc.equivalent(out, s, trials=5)
    # and a sum of two streamed reductions sharing the streamed input
    b = nc.Builder(nc.types("q x"))
    (X,) = b.inputs
    m = b(nc.reduce("max", "q x -> q"), X)
    z = b(nc.reduce("sum", "q x -> q"), b(nc.elementwise("square", "q x"), X))
    two = b.build(b(nc.elementwise("add", "q"), m, z))
    assert nc.equivalent(two, nc.group(nc.stream(two, "x", "s_x"), "q", "g_q"), trials=5)


def test_weaving_preserves_streamability():
    inner = nc.einsum("x d, x -> d")          # a contraction over x: streamable
    woven = nc.weave(inner, "h")
    assert nc.equivalent(woven, nc.stream(woven, "x", "s_x"))


def test_softmax_alone_is_not_streamable():
    with pytest.raises(nc.RewriteError, match="SoftMax alone is not streamable along 'x'"):
        nc.stream(nc.softmax("q x", over="x"), "x", "s_x")


def test_max_subtract_pattern_is_not_streamable():
    b = nc.Builder(nc.types("q x"))
    (X,) = b.inputs
    m = b(nc.reduce("max", "q x -> q"), X)
    y = b(nc.elementwise("sub", "q x, q -> q x"), X, m)
    d = b.build(b(nc.reduce("sum", "q x -> q"), y))
    with pytest.raises(nc.RewriteError, match="reads both streamed data and an accumulated result"):
        nc.stream(d, "x", "s_x")


def test_mean_has_no_accumulator():
    with pytest.raises(nc.RewriteError, match="declares no accumulator"):
        nc.stream(nc.reduce("mean", "q x -> q"), "x", "s_x")


def test_group_refuses_core_axis():
    with pytest.raises(nc.RewriteError, match="no output carries 'x'"):
        nc.group(nc.library.attention(), "x", "g_x")
    with pytest.raises(nc.RewriteError, match="item-level core"):
        nc.group(nc.einsum("q x, x d -> q x d") >> nc.softmax("q x d", over="q"), "q", "g_q")


def test_a_tile_need_not_divide_a_concrete_axis():
    """Ragged tiles: the last group (or slice) is shorter (the paper's decomposition allows any split)."""
    att = nc.library.attention(q=12, x=7)
    grouped = nc.group(att, "q", 5)
    assert grouped.boxes[0].params == {"axis": "q", "size": 5}
    assert nc.equivalent(att, grouped)
    assert nc.equivalent(att, nc.group(nc.stream(att, "x", 3), "q", 5))
    assert nc.equivalent(att, nc.group(att, "q", 4))


@pytest.mark.parametrize("size, match", [(0, "must be a positive integer, got 0"), (-2, "positive integer"),
                                         (1.5, "must be an int, a symbol name")])
def test_a_tile_must_be_a_positive_integer(size, match):
    with pytest.raises(nc.AxisError, match=match):
        nc.group(nc.library.attention(q=12), "q", size)
    with pytest.raises(nc.AxisError, match=match):
        nc.stream(nc.library.attention(x=12), "x", size)


def test_tile_sizes_are_bound_at_run_time():
    f = flash()
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    ragged = nc.evaluate(f, Q, K, V, sizes={"g_q": 4, "s_x": 4})
    np.testing.assert_allclose(ragged, nc.evaluate(nc.library.attention(), Q, K, V), rtol=1e-12)
    with pytest.raises(nc.ShapeError, match="g_q"):
        nc.evaluate(f, Q, K, V, sizes={"s_x": 2})


def test_kernel_level_must_be_below_global():
    with pytest.raises(nc.LevelError, match="level=0"):
        nc.kernel(nc.library.matmul(), level=0)


def test_online_softmax_is_stable_for_huge_logits():
    rng = np.random.default_rng(3)
    Q, K, V = rng.normal(size=(8, 4)) * 100, rng.normal(size=(12, 4)) * 100, rng.normal(size=(12, 4))
    out = nc.evaluate(flash(), Q, K, V, sizes={"g_q": 4, "s_x": 3})
    S = Q @ K.T / 2.0
    P = np.exp(S - S.max(1, keepdims=True))
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, (P / P.sum(1, keepdims=True)) @ V, rtol=1e-9, atol=1e-9)


def _divisor(draw, n):
    return draw(st.sampled_from([g for g in range(1, n + 1) if n % g == 0]))


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_partitions_evaluate_equal_and_count_matches_cost(data):
    """Random sizes and legal partitions: same function, and N_g·H_g = brute count of moved values."""
    q, x, d = (data.draw(st.integers(1, 8)) for _ in range(3))
    gq, sx = _divisor(data.draw, q), _divisor(data.draw, x)
    f = flash()
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    Q, K, V = rng.normal(size=(q, d)), rng.normal(size=(x, d)), rng.normal(size=(x, d))
    counters = {}
    out = nc.evaluate(f, Q, K, V, sizes={"g_q": gq, "s_x": sx}, counters=counters)
    np.testing.assert_allclose(out, nc.evaluate(nc.library.attention(), Q, K, V), rtol=1e-9, atol=1e-12)
    c = nc.cost(f)
    env = {nc.symbol("q"): q, nc.symbol("x"): x, nc.symbol("d"): d, nc.symbol("g_q"): gq, nc.symbol("s_x"): sx}
    assert c.H[1].subs(env) == counters[1]
    assert (c.N_g * c.H_g[1]).subs(env) == counters[1]


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_matmul_partitions_count_matches_cost(data):
    a, b, c_ = (data.draw(st.integers(1, 8)) for _ in range(3))
    ga, gc, sb = _divisor(data.draw, a), _divisor(data.draw, c_), _divisor(data.draw, b)
    t = tiled_matmul()
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(a, b)), rng.normal(size=(b, c_))
    counters = {}
    out = nc.evaluate(t, A, B, sizes={"g_a": ga, "g_c": gc, "s_b": sb}, counters=counters)
    np.testing.assert_allclose(out, A @ B, rtol=1e-9, atol=1e-12)
    env = {nc.symbol(k): v for k, v in dict(a=a, b=b, c=c_, g_a=ga, g_c=gc, s_b=sb).items()}
    assert nc.cost(t).H[1].subs(env) == counters[1]


def test_user_declared_accumulator_makes_a_new_kind_streamable():
    """A user's primitive with an accumulator streams without editing the library."""
    import napkin_cat.syntax.ops as ops
    kind = nc.declare("sum_of_squares", lambda xs, core: [np.sum(xs[0] ** 2, axis=-1)],
                      flops=lambda core: {"general": 2}, accumulator=ops.SUM)
    try:
        f = nc.apply("sum_of_squares", "q x -> q")
        s = nc.group(nc.stream(f, "x", "s_x"), "q", "g_q")
        assert nc.equivalent(f, s, trials=5)
        assert kind.accumulator.name == "sum"
        # without an accumulator the same kind is refused, and says why
        nc.declare("sum_of_squares", kind.impl, replace=True)
        with pytest.raises(nc.RewriteError, match="declares no accumulator"):
            nc.stream(nc.apply("sum_of_squares", "q x -> q"), "x", "s_x")
    finally:
        del nc.engine.KINDS["sum_of_squares"]


def test_softmax_contraction_refusals_say_which_condition_fails():
    with pytest.raises(nc.RewriteError, match=r"the contraction also sums away \['q'\]"):
        nc.stream(nc.softmax("q x", over="x") >> nc.einsum("q x -> "), "x", "s_x")
    b = nc.Builder(nc.types("q x y, x y d"))
    S, V = b.inputs
    d = b.build(b(nc.einsum("q x y, x y d -> q d"), b(nc.softmax("q x y", over="x y"), S), V))
    with pytest.raises(nc.RewriteError, match=r"runs over \['x', 'y'\]"):
        nc.stream(d, "x", "s_x")
