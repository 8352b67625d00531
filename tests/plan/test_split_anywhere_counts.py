"""A split stream wherever it sits: inside another stream's trip (sliced or not), in a level-2 kernel nested in
a level-1 one (grouped or not), in a level-2 kernel of its own: the plan computes the function, and what its run
measures (the peak per level, the transfers, the FLOPs) is what ``nc.cost`` says at those sizes and what the
symbolic cost gives there (issue 31's follow-up: the combine's states were not counted inside another stream,
and a level-2 split held its partials on chip where the cost did not see them).

Sizes are drawn at random (ragged tiles, 1-4 parts, more parts than slices included); the function is checked
against numpy written from the maths, the counts against the runner, and the reproducer's memory against a
formula written here from what its loop holds.
"""
from __future__ import annotations

import functools
import shutil

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.numeric import at

L = nc.library


def _lse(X):          # logsumexp over the first axis
    m = X.max(axis=0)
    return m + np.log(np.exp(X - m).sum(axis=0))


def _attention(Q, K, V):
    S = Q @ K.T / np.sqrt(Q.shape[1])
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return (P / P.sum(axis=1, keepdims=True)) @ V


LSE = "d l -> l"
#: name: (the algorithm, its numpy reference, the tiles' axes: tile name -> the axis it cuts)
STRUCTURES = {
    "inside a sliced stream (the reproducer)": (
        lambda: nc.stream(nc.stream(nc.kernel(nc.reduce("logsumexp", LSE)), "l", "t", sliced=True), "d", "s",
                          parts="P"), _lse, {"t": "l", "s": "d"}),
    "split-K inside a sliced stream": (
        lambda: nc.stream(nc.stream(nc.kernel(L.matmul()), "c", "t", sliced=True), "b", "s", parts="P"),
        lambda A, B: A @ B, {"t": "c", "s": "b"}),
    "attention's split inside a sliced stream": (
        lambda: nc.stream(nc.stream(nc.kernel(L.attention()), "q", "t", sliced=True), "x", "s", parts="P"),
        _attention, {"t": "q", "s": "x"}),
    "a stream inside the split's trip": (
        lambda: nc.stream(nc.stream(nc.kernel(L.attention()), "x", "s", parts="P"), "d", "t"),
        _attention, {"s": "x", "t": "d"}),
    "in a level-2 kernel inside a level-1 one": (
        lambda: nc.stream(nc.kernel(nc.kernel(L.matmul()), level=2), "b", "s", parts="P"),
        lambda A, B: A @ B, {"s": "b"}),
    "in a grouped level-2 kernel inside a level-1 one": (
        lambda: nc.group(nc.stream(nc.kernel(nc.kernel(L.attention()), level=2), "x", "s", parts="P"), "q", "t"),
        _attention, {"s": "x", "t": "q"}),
    "the whole of a level-2 kernel": (
        lambda: nc.group(nc.stream(nc.kernel(L.attention(), level=2), "x", "s", parts="P"), "q", "t"),
        _attention, {"s": "x", "t": "q"}),
}


def _draw(rng, f, tiles: dict) -> dict:
    sizes = {a.name: int(rng.integers(1, 8)) for arr in f.dom.inside for a in arr.axes}
    sizes.update({t: int(rng.integers(1, sizes[axis] + 1)) for t, axis in tiles.items()})
    return {**sizes, "P": int(rng.integers(1, 5))}


def _at(expr, sizes: dict):
    """A symbolic expression at ``sizes`` (by the symbols' names)."""
    expr = sympy.sympify(expr)
    return expr.subs({x: sizes[str(x)] for x in expr.free_symbols})


@functools.lru_cache(maxsize=None)
def algorithm(name: str) -> tuple:
    """``STRUCTURES[name]``'s algorithm and its symbolic memory, built once."""
    d = STRUCTURES[name][0]()
    return d, nc.cost(d).M


def check(name: str, sizes: dict, seed: int = 0):
    """The plan of ``STRUCTURES[name]`` at ``sizes`` computes the function and counts its cost; its counters."""
    (d, M), reference = algorithm(name), STRUCTURES[name][1]
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=tuple(sizes[a.name] for a in arr.axes)) for arr in d.dom.inside]
    y, n = nc.plan(d, sizes).run(*xs)
    np.testing.assert_allclose(y, reference(*xs), rtol=1e-9, atol=1e-9)
    c = at(d, sizes)
    assert n.peak == {lvl: m for lvl, m in c.M.items() if lvl > 0}, (n.peak, c.M)
    assert n.transfers == c.H and n.flops == c.flops
    symbolic = {lvl: int(_at(m, sizes)) for lvl, m in M.items() if lvl > 0}
    assert symbolic == n.peak, (symbolic, n.peak)
    return n


@pytest.mark.parametrize("name", list(STRUCTURES))
def test_a_split_stream_counts_its_memory_wherever_it_sits(name):
    rng = np.random.default_rng(sorted(STRUCTURES).index(name))
    parts = set()
    for k in range(3):
        sizes = _draw(rng, algorithm(name)[0], STRUCTURES[name][2])
        sizes["P"] = 1 + k if k < 2 else sizes["P"]        # one part (no merge runs) and two at least once
        check(name, sizes, seed=k)
        parts.add(sizes["P"])
    assert {1, 2} <= parts


@pytest.mark.parametrize("P", [1, 2, 3])
@pytest.mark.parametrize("s", [1, 2, 4])
def test_the_reproducer_holds_the_combines_two_states_by_a_formula(s, P):
    """``logsumexp`` over ``d`` split in ``P`` parts inside the stream along ``l`` (tile ``t``): a part holds its
    slice (``s·t``) and its state μ, z (``2t``); the combine, where ``P ≥ 2``, holds the merged μ, z, the part's
    μ, z and their maximum (``5t``).  At ``t = 5, s = 2, P = 2``: 25, which the cost said was 20."""
    t = 5
    n = check("inside a sliced stream (the reproducer)", {"d": 5, "l": 5, "t": t, "s": s, "P": P})
    assert n.peak == {1: t * max(s + 2, 5 if P >= 2 else 0)}


def test_the_symbolic_memory_weighs_the_merges_by_whether_they_run():
    d, M = algorithm("inside a sliced stream (the reproducer)")
    t, s, P = nc.symbol("t"), nc.symbol("s"), nc.symbol("P")
    assert sympy.simplify(M[1] - sympy.Max(5 * t * sympy.Min(1, P - 1), s * t + 2 * t)) == 0


def test_partials_live_in_global_memory_so_the_split_kernels_level_holds_none():
    """A split in a level-2 kernel: level 1 holds the level-1 kernel's tiles (A and B whole), never the
    ``P`` partials (which were hoisted to level 1 from the first statement on: the run measured 42 + 12P)."""
    sizes = {"a": 4, "b": 6, "c": 3, "s": 2, "P": 3}
    n = check("in a level-2 kernel inside a level-1 one", sizes)
    assert n.peak[1] == 4 * 6 + 6 * 3


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler: the C kernel check is skipped")
def test_the_c_kernel_of_a_level_2_split_kernel_finds_every_part_in_the_combine():
    """The parts and the combine are two launches: partials on chip did not outlive the first (wrong sums)."""
    d = nc.stream(nc.kernel(L.matmul(), level=2), "b", "s", parts=2)
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(4, 6)).astype("f4"), rng.normal(size=(6, 3)).astype("f4")
    np.testing.assert_allclose(nc.codegen.c(nc.plan(d, {"a": 4, "b": 6, "c": 3, "s": 2}))(A, B), A @ B,
                               rtol=1e-4, atol=1e-4)


def test_a_level_2_kernel_inside_a_split_stream_is_refused_where_it_is_built():
    """Its trip would advance the nested kernel on the state, which has no merge: refused by ``nc.kernel``, naming
    the stream and what is legal, and what it names as legal builds, plans and counts its cost."""
    split = nc.stream(nc.kernel(L.matmul()), "b", "s", parts=2)
    with pytest.raises(nc.RewriteError, match=r"inside the stream along 'b' split in 2 parts: .*Kernel\(level=2\)"
                                              r".*nc\.kernel\(f, level=2\) before nc\.stream\(\.\.\., parts=P\)"):
        nc.kernel(split, level=2)
    check("in a level-2 kernel inside a level-1 one", {"a": 3, "b": 5, "c": 2, "s": 2, "P": 2})
