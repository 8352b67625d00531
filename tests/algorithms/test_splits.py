"""Split streams (issue 22, item 2): a stream's slices cut into P parts run as parallel blocks, each writing its
state, then merged.  The split computes what the function computes at ragged sizes and any P; the cost counts
the P heads, the partial states written and read back, and the P − 1 merges exactly (the symbolic cost against a
hand count, the concrete cost against the symbolic one); the refusals name what is at fault."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.splits import blocks
from napkin_cat.cost.numeric import at


def _mean_var():
    b = nc.Builder(nc.types("n d"))
    (X,) = b.inputs
    mu = b(nc.reduce("mean", "n d -> n"), X)
    c = b(nc.elementwise("sub", "n d, n -> n d"), X, mu)
    return b.build(mu, b(nc.reduce("mean", "n d -> n"), b(nc.elementwise("square", "n d"), c)))


CASES = {   # name: (function, streamed axis, grouped axis, sizes)
    "attention": (nc.library.attention, "x", "q", {"q": 3, "x": 23, "d": 5}),
    "matmul": (nc.library.matmul, "b", "a", {"a": 4, "b": 19, "c": 3}),
    "logsumexp": (lambda: nc.reduce("logsumexp", "n v -> n"), "v", "n", {"n": 3, "v": 17}),
    "max": (lambda: nc.reduce("max", "n v -> n"), "v", "n", {"n": 3, "v": 17}),
    "mean and variance": (_mean_var, "d", "n", {"n": 3, "d": 21}),
}


def split(name):
    make, axis, grouped, _ = CASES[name]
    return nc.group(nc.stream(make(), axis, f"s_{axis}", parts="P"), grouped, f"g_{grouped}")


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_split_stream_computes_the_function_at_ragged_sizes(name, seed):
    make, axis, grouped, sizes = CASES[name]
    rng = np.random.default_rng(seed)
    f = make()
    xs = [rng.normal(size=tuple(sizes[a.name] for a in arr.axes)) * 20 + [0, 1e3][seed % 2]
          for arr in f.dom.inside]
    want = nc.evaluate(f, *xs)
    s = int(rng.integers(1, 5))
    trips = -(-sizes[axis] // s)
    for P in sorted({1, 2, int(rng.integers(1, trips + 1)), trips}):
        got = nc.evaluate(split(name), *xs, sizes={**sizes, f"g_{grouped}": 2, f"s_{axis}": s, "P": P})
        for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want],
                        strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(w).max()))


def test_the_cost_counts_the_heads_the_partials_and_the_merges():
    q, x, d, g, P = (nc.symbol(n) for n in ("q", "x", "d", "g_q", "P"))
    c = nc.cost(split("attention"))
    # per group of g rows: Q loaded by each part (P d g), its (μ, z, o) written and read back (2 P (2 + d) g),
    # K and V streamed once (2 d x), O written once (d g)
    assert sympy.simplify(c.H[1] - q / g * (P * d * g + 2 * P * (2 + d) * g + 2 * d * x + d * g)) == 0
    plain = nc.cost(nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q"))
    # P − 1 merges of (μ, z, o): 2 exp per row (special); max, 2 sub, 2 mul and an add for z, 2 mul and an add per o
    assert sympy.simplify(c.flops["special"] - plain.flops["special"] - (P - 1) * q * 2) == 0
    assert sympy.simplify(c.flops["general"] - plain.flops["general"] - (P - 1) * q * (6 + 3 * d)) == 0
    mm = nc.cost(split("matmul"))
    a, b, cc, ga = (nc.symbol(n) for n in ("a", "b", "c", "g_a"))
    assert sympy.simplify(mm.H[1] - a / ga * (b * ga + b * cc + 2 * P * ga * cc + ga * cc)) == 0


@pytest.mark.parametrize("name", list(CASES))
def test_the_cost_at_sizes_is_the_symbolic_cost_where_the_tiles_divide(name):
    _, axis, grouped, sizes = CASES[name]
    d = split(name)
    full = {**sizes, axis: 24, grouped: 4}
    S = {**full, f"g_{grouped}": 2, f"s_{axis}": 3, "P": 4}
    env = {nc.symbol(k): v for k, v in S.items()}
    sym, num = nc.cost(d), at(d, S)
    assert num.H == {k: sympy.sympify(v).subs(env) for k, v in sym.H.items()}
    assert num.flops == {k: sympy.sympify(v).subs(env) for k, v in sym.flops.items()}


def test_blocks_count_the_groups_times_the_parts():
    d = split("attention")
    assert blocks(d, {"q": 5, "x": 64, "d": 8, "g_q": 2, "s_x": 4, "P": 8}) == 3 * 8
    assert blocks(nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q"),
                  {"q": 5, "x": 64, "d": 8, "g_q": 2, "s_x": 4}) == 3


def test_refusals_name_what_is_at_fault_and_empty_parts_are_neutral():
    with pytest.raises(nc.RewriteError, match="sliced stream"):
        nc.stream(nc.library.matmul(), "a", "s_a", sliced=True, parts=2)
    X = np.random.default_rng(0).normal(size=(2, 5))      # more parts than slices: the empty parts add nothing
    for name in ("max", "logsumexp"):
        f = CASES[name][0]()
        np.testing.assert_allclose(nc.evaluate(split(name), X, sizes={"n": 2, "v": 5, "g_n": 1, "s_v": 2, "P": 7}),
                                   nc.evaluate(f, X), rtol=1e-12)
    S = {"n": 2, "v": 5, "g_n": 1, "s_v": 2, "P": 7}
    np.testing.assert_allclose(nc.plan(split("max"), S).run(X)[0], X.max(axis=1), rtol=1e-12)


def test_a_users_accumulator_splits_by_the_merge_it_declares(scratch_kinds):
    """A product reduction whose accumulator names its merge (``mul``) splits like ``sum``: the parts' products
    multiplied are numpy's product, at every P; an accumulator without a merge is refused by name."""
    def prod(xs, core):
        return [np.prod(xs[0], axis=-1)]

    def ones(shape, dtype=float):
        return np.ones(shape, dtype)

    nc.declare("user_prod", prod, accumulator=nc.Accumulator("user_prod", ones, np.multiply, merge="mul"))
    nc.declare("user_prod_bare", prod, accumulator=nc.Accumulator("user_prod_bare", ones, np.multiply))
    X = 1 + 0.2 * np.random.default_rng(3).normal(size=(3, 11))
    sizes = {"n": 3, "v": 11, "g_n": 2, "s_v": 3}
    for P in (1, 2, 3, 4):
        d = nc.group(nc.stream(nc.apply("user_prod", "n v -> n"), "v", "s_v", parts="P"), "n", "g_n")
        np.testing.assert_allclose(nc.evaluate(d, X, sizes={**sizes, "P": P}), np.prod(X, axis=1), rtol=1e-12)
    with pytest.raises(nc.RewriteError, match=r"its accumulator 'user_prod_bare' declares no merge, so the stream is "
                                              r"not split across blocks: give it merge="):
        d = nc.group(nc.stream(nc.apply("user_prod_bare", "n v -> n"), "v", "s_v", parts="P"), "n", "g_n")
        nc.evaluate(d, X, sizes={**sizes, "P": 2})
    with pytest.raises(nc.SignatureError, match=r"accumulator 'bad': merge names the elementwise kind"):
        nc.Accumulator("bad", ones, np.multiply, merge=np.multiply)
