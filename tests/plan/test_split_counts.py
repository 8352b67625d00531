"""A split stream's plan runs, computes the function, and the runner measures what the cost functor predicts.

Random ragged sizes, stream tiles that do not divide the axis, and numbers of parts that do not divide the
slices (more parts than slices included): the plan's outputs equal ``nc.evaluate`` of the unsplit function,
and its counters (transfers, bytes, FLOPs, peak) equal ``nc.cost(d, sizes=...)``.  The combine holds two
states at once (the merged one and the part being merged): the cost counts them, by hand below.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.cost.numeric import at
from napkin_cat.plan.ir import Free, GridLoop, Load, Store, StreamLoop, reads, walk, writes


def _mean_var():
    """LayerNorm's statistics: the mean and the variance of the centred row."""
    b = nc.Builder(nc.types("n d"))
    (X,) = b.inputs
    mu = b(nc.reduce("mean", "n d -> n"), X)
    c = b(nc.elementwise("sub", "n d, n -> n d"), X, mu)
    return b.build(mu, b(nc.reduce("mean", "n d -> n"), b(nc.elementwise("square", "n d"), c)))


CASES = {   # name: (function, streamed axis, grouped axis, sizes other than the streamed axis)
    "attention at q = 1": (nc.library.attention, "x", "q", {"q": 1, "d": 4}),
    "attention at q = 3": (nc.library.attention, "x", "q", {"q": 3, "d": 3}),
    "split-K matmul": (nc.library.matmul, "b", "a", {"a": 2, "c": 3}),
    "sum": (lambda: nc.reduce("sum", "n v -> n"), "v", "n", {"n": 3}),
    "logsumexp": (lambda: nc.reduce("logsumexp", "n v -> n"), "v", "n", {"n": 2}),
    "LayerNorm's mean and variance": (_mean_var, "d", "n", {"n": 3}),
}


def split(name):
    make, axis, grouped, _ = CASES[name]
    return nc.group(nc.stream(make(), axis, f"s_{axis}", parts="P"), grouped, f"g_{grouped}")


def check(name, sizes, seed=0):
    make, *_ = CASES[name]
    f, d = make(), split(name)
    p = nc.plan(d, sizes)
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=tuple(sizes[a.name] for a in arr.axes)) for arr in f.dom.inside]
    y, n = p.run(*xs)
    want = nc.evaluate(f, *xs)
    for a, b in zip(y if isinstance(y, tuple) else (y,), want if isinstance(want, tuple) else (want,), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
    c = at(d, sizes)
    assert n.transfers == c.H and n.bytes == c.H_bytes
    assert n.flops == c.flops
    assert n.peak == {lvl: m for lvl, m in c.M.items() if lvl > 0}
    assert n.peak == p.peak
    return p, n


@pytest.mark.parametrize("name", list(CASES))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_split_plan_computes_the_function_and_counts_its_cost(name, data):
    _, axis, grouped, sizes = CASES[name]
    full = data.draw(st.integers(1, 13), label=axis)
    s = data.draw(st.integers(1, full), label="s")
    trips = -(-full // s)
    P = data.draw(st.integers(1, trips + 3), label="P")        # P need not divide the slices, nor be below them
    S = {**sizes, axis: full, f"s_{axis}": s, f"g_{grouped}": data.draw(st.integers(1, sizes[grouped])), "P": P}
    check(name, S, seed=data.draw(st.integers(0, 50), label="seed"))


def test_the_plan_runs_P_parts_each_saving_its_state_then_merges_the_partials():
    p, n = check("split-K matmul", {"a": 2, "b": 7, "c": 3, "s_b": 2, "g_a": 2, "P": 3})
    groups, combine_groups = [s for s in p.body if isinstance(s, GridLoop)]     # two launches over the groups
    (parts,) = groups.body           # the first: one block per group and part, each storing its state
    (kernel,) = parts.body
    (stream,) = [s for s in kernel.body if isinstance(s, StreamLoop)]
    (combine,) = [s for s in walk(combine_groups.body) if isinstance(s, StreamLoop)]
    assert parts.axis == combine.axis == "parts_b" and str(parts.full) == "P"
    assert [type(s).__name__ for s in stream.tail if not isinstance(s, Free)] == ["Store"]
    assert [type(s).__name__ for s in combine.head if not isinstance(s, Free)] == ["Load"]
    # A (2×7) and B (7×3) read once, 3 partials of 2×3 stored and loaded back, C (2×3) stored: 14 + 21 + 36 + 6
    assert n.transfers == {1: 14 + 21 + 2 * 3 * 6 + 6}
    assert sum(1 for s in walk(p.body) if isinstance(s, (Load, Store))) == 2 + 1 + 2 + 1


def test_the_combine_holds_two_states_of_one_row_at_once_and_the_cost_counts_them():
    """Split-K with one-column slices: a part holds its state (g·c) and its two slices (g + c); the combine, one
    block per row of the group, the merged row and the part's row being merged (2·c), which is less; with one row
    per group the part holds c + 1 + c, the combine 2·c."""
    for g, c in ((2, 3), (1, 4)):
        p, n = check("split-K matmul", {"a": 2, "b": 5, "c": c, "s_b": 1, "g_a": g, "P": 4})
        assert n.peak == {1: g * c + g + c} and at(split("split-K matmul"), p.sizes).M[1] == g * c + g + c
        (combine,) = [s for s in walk(p.body) if isinstance(s, StreamLoop) and s.axis.startswith("parts_")]
        held = {v for st in walk(combine.body) for v in (*reads(st), *writes(st)) if p.variable_map[v].level == 1}
        assert {str(p.variable_map[v].shape) for v in held} == {"(('a', 1), ('c', c))"}   # one row of a


def test_more_parts_than_slices_leave_the_extra_parts_empty():
    """Empty parts store the empty state (μ = −∞, z = 0), which the merge leaves unchanged: no NaN."""
    _, n = check("logsumexp", {"n": 2, "v": 5, "s_v": 2, "g_n": 1, "P": 7})
    # per row: the row read once, 7 partials of (μ, z) stored and loaded back, the result stored
    assert n.transfers == {1: 2 * (5 + 2 * 7 * 2 + 1)}
