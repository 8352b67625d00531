"""A stream inside a stream's trip along another axis (the 2-D loop): what it computes, what it costs, what the
runner counts, and what is refused.

Property tests over random sizes and tiles (ragged ones included): the plan's outputs equal ``nc.evaluate`` of the
function, and its counters (transfers, bytes, FLOPs, peak) equal the cost functor at those sizes."""
from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.errors import RewriteError
from napkin_cat.syntax.sizes import symbols_of

n, e, v, g, s_v, s_e = (nc.symbol(a) for a in ("n", "e", "v", "g_n", "s_v", "s_e"))


def lce_2d():
    lce = nc.library.linear_cross_entropy()
    return lce, nc.group(nc.stream(nc.stream(lce, "v", "s_v"), "e", "s_e"), "n", "g_n")


def lse_2d():
    f = nc.einsum("n e, v e -> n v") >> nc.reduce("logsumexp", "n v -> n")
    return f, nc.group(nc.stream(nc.stream(f, "v", "s_v"), "e", "s_e"), "n", "g_n")


def attention_2d():
    f = nc.library.attention()
    return f, nc.group(nc.stream(nc.stream(f, "x", "s_x"), "d", "s_d"), "q", "g_q")


def mlp_2d():
    f = nc.library.mlp(activation="relu")
    return f, nc.group(nc.stream(nc.stream(f, "f", "s_f"), "i", "s_i"), "n", "g_n")


CASES = {"linear_cross_entropy": lce_2d, "logsumexp_of_a_product": lse_2d, "attention": attention_2d,
         "mlp": mlp_2d}


def _inputs(function, sizes, rng):
    env = nc.Sizes(sizes).restrict(function).env
    xs = []
    for arr in function.dom.inside:
        shape = tuple(int(sympy.sympify(a.size).subs(env)) for a in arr.axes)
        if arr.dtype.name == "int32":       # targets: positions along the vocabulary
            xs.append(rng.integers(0, sizes["v"], size=shape).astype(np.int32))
        else:
            xs.append(rng.normal(size=shape))
    return xs


def check(function, algorithm, sizes, seed=0):
    p = nc.plan(algorithm, sizes)
    xs = _inputs(function, sizes, np.random.default_rng(seed))
    y, counted = p.run(*xs)
    np.testing.assert_allclose(y, nc.evaluate(function, *xs), rtol=1e-9, atol=1e-9)
    c = at(algorithm, sizes)
    assert counted.transfers == c.H and counted.bytes == c.H_bytes
    assert counted.flops == c.flops
    assert counted.peak == {level: m for level, m in c.M.items() if level > 0} == p.peak
    return counted


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_runner_counts_what_the_cost_functor_predicts_at_ragged_sizes(name, data):
    function, algorithm = CASES[name]()
    names = sorted(str(x) for x in symbols_of(algorithm))
    sizes = {a: data.draw(st.integers(1, 7), label=a) for a in names if not a.startswith(("s_", "g_"))}
    for a in names:
        if a.startswith(("s_", "g_")):
            sizes[a] = data.draw(st.integers(1, sizes[a[2:]]), label=a)
    check(function, algorithm, sizes, seed=data.draw(st.integers(0, 100), label="seed"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_2d_loop_computes_the_function_at_ragged_sizes(name):
    function, algorithm = CASES[name]()
    if name == "linear_cross_entropy":      # integer targets: nc.equivalent draws normal inputs
        check(function, algorithm, {"n": 7, "e": 11, "v": 13, "g_n": 3, "s_v": 5, "s_e": 4})
        return
    assert nc.equivalent(function, algorithm, trials=4)


def test_the_inner_stream_is_in_the_outer_trip_with_the_loads_of_what_it_reduces():
    _, two = lce_2d()
    outer = two.boxes[0].arg.boxes[0].arg.boxes[0]
    assert isinstance(outer, nc.Stream) and outer.axis == "v"
    (inner,) = [b for b in outer.arg.boxes if isinstance(b, nc.Region)]
    assert isinstance(inner, nc.Stream) and inner.axis == "e"
    assert sorted(b.name for b in inner.arg.boxes if getattr(b, "data", None) is not None) == ["load", "load", "·"]
    assert [str(a) for a in inner.cod.inside] == ["n[g_n]×v[s_v]@1"]


def test_the_cost_of_the_2d_loop_is_the_hand_count():
    """Per group of g_n rows and slice of s_v words: the hidden rows (g_n·e) and the weight's rows (s_v·e) in
    slices of s_e; the targets (g_n) and the loss (g_n) once per group.  It holds the logits tile, both slices and
    the online log-sum-exp's state (μ, z), the picked logit and the targets."""
    _, two = lce_2d()
    c = nc.cost(two)
    assert sympy.simplify(c.H[1] - (n * e * v / s_v + n * v * e / g + 2 * n)) == 0
    assert sympy.expand(c.M[1] - (g * s_v + g * s_e + s_v * s_e + 4 * g)) == 0


def test_the_streams_size_is_a_tile_of_the_optimum():
    """H falls as s_v grows (the hidden rows are read once per trip), so the optimum chooses s_v with g_n."""
    _, two = lce_2d()
    o = nc.optimal(nc.cost(two), 2 ** 14, sizes={"n": 1024, "e": 256, "v": 8192})
    assert o.H == 50_333_696 and o.sizes[s_v] > 1 and o.sizes[s_e] == 1
    assert o.H == at(two, {"n": 1024, "e": 256, "v": 8192, **{str(k): int(x) for k, x in o.sizes.items()
                                                              if str(k) in ("g_n", "s_v", "s_e")}}).H[1]
    large = nc.optimal(nc.cost(two), "M")
    assert sympy.simplify(large.H - (2 * n + 2 * e * n * v / sympy.sqrt(nc.symbol("M")))) == 0


def test_a_stream_along_an_axis_the_trip_does_not_reduce_is_refused():
    streamed = nc.stream(nc.library.linear_cross_entropy(), "v", "s_v")
    with pytest.raises(RewriteError, match=r"no box of the stream's trip reduces 'n' away"):
        nc.stream(streamed, "n", "s_n")


def test_a_reduction_whose_slices_are_read_elsewhere_is_refused():
    """Q is read by the product along d and by the output's scale along d: the d-slices cannot leave the trip."""
    b = nc.Builder(nc.types("q d, x d"))
    Q, K = b.inputs
    S = b(nc.einsum("q d, x d -> q x"), Q, K)
    out = b(nc.einsum("q x, q d -> q d"), S, Q)
    f = nc.stream(b.build(out), "x", "s_x")
    with pytest.raises(RewriteError, match=r"made along 'd' by the reduction of 'd' and also read outside it"):
        nc.stream(f, "d", "s_d")
