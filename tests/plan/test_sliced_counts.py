"""Sliced streams (``nc.stream(..., sliced=True)``) on every library algorithm: the runner measures what the cost
functor predicts.

A sliced stream writes the outputs that grow with its axis slice by slice (``S = QKᵀ`` along ``x`` with the ``Q``
tile stationary; a skinny product with ``B`` resident).  For random library algorithms, axes and groups along the
other axes, at random (ragged included) sizes: the plan's outputs equal ``nc.evaluate`` of the function diagram,
and its transfers, bytes, peak per level and FLOPs equal ``nc.cost``'s.  The properties draw among the partitions
the library accepts (none is filtered away), so every example is checked.
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.syntax.sizes import symbols_of

sys.path.insert(0, str(Path(__file__).parent))
from test_plan_counts import LIBRARY, axes_of, check  # noqa: E402


@functools.lru_cache(maxsize=None)
def sliced(name: str, axis: str, groups: tuple):
    """Library algorithm ``name`` sliced-streamed along ``axis`` then grouped along ``groups``, or the refusal."""
    try:
        d = nc.stream(LIBRARY[name](), axis, f"s_{axis}", sliced=True)
        for g in groups:
            d = nc.group(d, g, f"g_{g}")
        return d
    except NapkinError as e:
        return e


def _legal(make, options, data, label):
    """Draw among ``options`` only those ``make(option)`` builds (an algorithm, not a refusal): every example the
    property draws is one it checks, none is filtered away."""
    legal = [o for o in options if not isinstance(make(o), NapkinError)]
    return data.draw(st.sampled_from(legal), label=label) if legal else None


def _grouped(make, names, data, most: int) -> tuple:
    """Up to ``most`` legal groups, each drawn among the axes its predecessors leave groupable."""
    groups = ()
    for _ in range(data.draw(st.integers(0, most), label="how many groups")):
        g = _legal(lambda g: make(groups + (g,)), [n for n in names if n not in groups], data, "group")
        if g is None:
            break
        groups += (g,)
    return groups


SLICED = sorted(set(LIBRARY) - {"transformer_block"})


@pytest.mark.parametrize("name", SLICED)
def test_every_algorithm_has_an_axis_to_slice(name):
    """The property below runs on each algorithm: some axis takes a sliced stream."""
    assert any(not isinstance(sliced(name, a, ()), NapkinError) for a in axes_of(LIBRARY[name]()))


@pytest.mark.parametrize("name", SLICED)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_sliced_counters_equal_the_cost_functor(name, data):
    names = axes_of(LIBRARY[name]())
    axis = _legal(lambda a: sliced(name, a, ()), names, data, "axis")
    groups = _grouped(lambda gs: sliced(name, axis, gs), names, data, 2)
    algorithm = sliced(name, axis, groups)
    assert not isinstance(algorithm, NapkinError)
    found = symbols_of(algorithm)
    sizes = {str(s): data.draw(st.integers(1, 5), label=str(s)) for s in sorted(found, key=str)
             if not str(s).startswith(("s_", "g_"))}
    for s in sorted(found, key=str):
        n = str(s)
        if n.startswith(("s_", "g_")):
            sizes[n] = data.draw(st.integers(1, sizes[n[2:]]), label=n)
    check(LIBRARY[name](), algorithm, sizes, seed=data.draw(st.integers(0, 100), label="seed"))


@functools.lru_cache(maxsize=None)
def sliced_level_2(name: str, outer: str, axis: str, groups: tuple):
    """``name`` grouped along ``outer`` at level 1, a level-2 kernel inside sliced along ``axis``, then grouped."""
    try:
        d = nc.kernel(nc.group(LIBRARY[name](), outer, f"g_{outer}"), level=2)
        d = nc.stream(d, axis, f"u_{axis}", sliced=True)
        for g in groups:
            d = nc.group(d, g, f"h_{g}")
        return d
    except NapkinError as e:
        return e


@pytest.mark.parametrize("name", ["matmul", "attention", "mlp", "gqa"])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_level_2_sliced_counters_equal_the_cost_functor(name, data):
    names = axes_of(LIBRARY[name]())
    pairs = [(o, a) for o in names for a in names]
    outer, axis = _legal(lambda p: sliced_level_2(name, *p, ()), pairs, data, "outer and axis")
    groups = _grouped(lambda gs: sliced_level_2(name, outer, axis, gs), names, data, 1)
    algorithm = sliced_level_2(name, outer, axis, groups)
    assert not isinstance(algorithm, NapkinError)
    found = symbols_of(algorithm)
    sizes = {str(s): data.draw(st.integers(1, 5), label=str(s)) for s in sorted(found, key=str)
             if not str(s).startswith(("g_", "u_", "h_"))}
    for pre in ("g_", "u_", "h_"):
        for s in sorted(found, key=str):
            n = str(s)
            if n.startswith(pre):
                a = n[2:]
                bound = min([sizes[a]] + [sizes[t + a] for t in ("g_", "u_") if t + a in sizes])
                sizes[n] = data.draw(st.integers(1, bound), label=n)
    check(LIBRARY[name](), algorithm, sizes, seed=data.draw(st.integers(0, 100), label="seed"))


def test_qk_with_the_q_tile_stationary_moves_q_d_once():
    """S = QKᵀ grouped in g_q, sliced along x: Q once, K once per group, S once: q·d + (q/g_q)·x·d + q·x."""
    qk = nc.einsum("q d, x d -> q x")
    d = nc.group(nc.stream(qk, "x", "s_x", sliced=True), "q", "g_q")
    q, x, dd, g = (nc.symbol(n) for n in ("q", "x", "d", "g_q"))
    assert sympy.simplify(nc.cost(d).H[1] - (q * dd + q * x * dd / g + q * x)) == 0
    _, n = check(qk, d, {"q": 5, "x": 7, "d": 3, "g_q": 2, "s_x": 3})
    assert n.transfers[1] == 5 * 3 + 3 * 7 * 3 + 5 * 7


def test_a_sliced_output_at_the_kernels_level_is_held_whole():
    """A level-2 kernel sliced along a inside a level-1 group: its output slice goes to level 1 trip by trip, so
    level 1 holds the whole output tile while the trips run (the runner's peak is the functor's M)."""
    mm = nc.kernel(nc.group(nc.library.matmul(), "c", "g_c"), level=2)
    d = nc.stream(mm, "a", "u_a", sliced=True)
    check(nc.library.matmul(), d, {"a": 5, "b": 3, "c": 4, "g_c": 2, "u_a": 2})


def test_the_default_refuses_an_output_axis_and_names_the_sliced_stream():
    with pytest.raises(RewriteError, match=r"grows with 'a'.*sliced=True"):
        nc.stream(nc.library.matmul(), "a", "s_a")


def test_a_sliced_stream_takes_no_sub_loop_along_its_axis():
    d = nc.stream(nc.library.matmul(), "a", "s_a", sliced=True)
    with pytest.raises(RewriteError, match="sliced stream takes no sub-loop"):
        nc.stream(d, "a", "u_a")


def test_sliced_round_trips_through_json_and_shows_in_the_title():
    d = nc.group(nc.stream(nc.library.attention(), "x", "s_x", sliced=False), "q", "g_q")
    s = nc.stream(nc.einsum("q d, x d -> q x"), "x", "s_x", sliced=True)
    (k,) = s.boxes
    (st_box,) = [b for b in k.arg.boxes if isinstance(b, nc.Stream)]
    assert st_box.params["sliced"] is True and "sliced=True" in st_box.name
    back = nc.loads(nc.dumps(s))
    assert back == s and [b for b in back.boxes[0].arg.boxes if isinstance(b, nc.Stream)][0].sliced
    assert "sliced" not in str(d)   # recorded only when set
    A, B = np.ones((3, 2)), np.ones((4, 2))
    np.testing.assert_allclose(nc.evaluate(back, A, B, sizes={"s_x": 3}), A @ B.T)


def test_the_drawing_titles_a_sliced_stream():
    d = nc.group(nc.stream(nc.einsum("q d, x d -> q x"), "x", "s_x", sliced=True), "q", "g_q")
    assert "Stream(axis=x, size=s\\_x, sliced=True)" in nc.to_tikz(d)


def test_a_region_inside_a_sliced_stream_is_refused_with_the_reason():
    """A level-2 kernel inside a sliced stream's slice would have to run as a map of the trip (not a nested reducer):
    not supported, refused when built, naming the axis and the region."""
    d = nc.stream(nc.library.matmul(), "a", "s_a", sliced=True)
    with pytest.raises(RewriteError, match=r"level-2 kernel.*'a'.*Kernel\(level=2\).*sliced stream"):
        nc.kernel(d, level=2)
