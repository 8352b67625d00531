"""Plans of masked algorithms: the stream loop carries its trip test, positions their loops' starts, and the
runner skips the trips the mask never reaches, moving what the cost counts."""
import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.plan.ir import Compute, StreamLoop, walk


def flash(att):
    return nc.group(nc.stream(att, "x", "s_x"), "q", "g_q")


def test_the_stream_loop_of_causal_attention_tests_each_trip():
    p = nc.plan(flash(nc.library.causal_attention()), {"q": 8, "x": 8, "d": 2, "g_q": 2, "s_x": 2})
    (loop,) = [s for s in walk(p.body) if isinstance(s, StreamLoop)]
    assert loop.skips and loop.when.free_symbols >= {sympy.Symbol("i_x", integer=True, nonnegative=True)}
    assert "skip unless i_x·s_x <= g_q·i_q" in str(p)
    starts = {s.box.cod.inside[0].names[0]: dict(s.at) for s in walk(p.body)
              if isinstance(s, Compute) and s.kind == "position"}
    assert str(starts["x"]["x"]) == "i_x*s_x" and str(starts["q"]["q"]) == "g_q*i_q"


def test_an_unmasked_stream_skips_nothing():
    p = nc.plan(flash(nc.library.attention()), {"q": 8, "x": 8, "d": 2, "g_q": 2, "s_x": 2})
    assert not any(s.skips for s in walk(p.body) if isinstance(s, StreamLoop))


def test_a_gather_knows_where_its_slice_starts():
    alg = nc.group(nc.stream(nc.library.cross_entropy(), "v", "s_v"), "n", "g_n")
    p = nc.plan(alg, {"n": 5, "v": 11, "g_n": 2, "s_v": 3})
    (g,) = [s for s in walk(p.body) if isinstance(s, Compute) and s.kind == "gather"]
    assert str(g.start("v")) == "i_v*s_v" and g.accumulate == "sum"
    rng = np.random.default_rng(0)
    L, t = rng.normal(size=(5, 11)), rng.integers(0, 11, 5)
    out, counted = p.run(L, t)
    np.testing.assert_allclose(out, nc.evaluate(nc.library.cross_entropy(), L, t), rtol=1e-12)
    assert counted.transfers == nc.cost(alg, sizes={"n": 5, "v": 11, "g_n": 2, "s_v": 3}).H
    assert p.variable_map["x1"].dtype == "int32" and counted.bytes[1] == 4 * 5 * 11 + 4 * 5 + 4 * 5


@pytest.mark.parametrize("sizes", [{"q": 9, "x": 9, "d": 2, "g_q": 3, "s_x": 2},
                                   {"q": 6, "x": 10, "d": 3, "g_q": 4, "s_x": 3}])
def test_the_runner_skips_and_still_computes_attention(sizes):
    att = nc.library.sliding_window_attention(1)
    p = nc.plan(flash(att), sizes)
    rng = np.random.default_rng(1)
    Q, K, V = (rng.normal(size=(sizes[n], sizes["d"])) for n in "qxx")
    with np.errstate(invalid="ignore"):
        out, counted = p.run(Q, K, V)
        want = nc.evaluate(att, Q, K, V)
    np.testing.assert_allclose(out, want, rtol=1e-12, equal_nan=True)
    every = -(-sizes["q"] // sizes["g_q"]) * sizes["x"] * 2 * sizes["d"] + 2 * sizes["q"] * sizes["d"]
    assert counted.transfers[1] < every
    assert counted.transfers == nc.cost(flash(att), sizes=sizes).H
