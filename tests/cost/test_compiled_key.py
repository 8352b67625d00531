"""The compiled tiling program is the process's memo (``napkin_cat.cost.optimum``, issue 35): a pure function of its
key, the program and the sizes.  Calls that differ in one part of that key only (the sizes, the stream sizes the
program fixes, the transfers themselves) follow one another in one process, each after the other has filled the
memo, and each must find its own optimum.

Second route: the brute force from the maths, every divisor tiling of the symbolic cost substituted by sympy, the
least ``H`` among those whose every column fits the memory.
"""
from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.optimum import optima, optimal


def divisors(n: int) -> list:
    return [k for k in range(1, n + 1) if n % k == 0]


def brute(c, memory: int, sizes: dict, streams: dict) -> int | None:
    """The least transfers over every divisor tiling of ``c``'s groups that fits ``memory``, by sympy."""
    env = {nc.symbol(k): v for k, v in {**sizes, **streams}.items()}
    tiles = [(t, sizes[str(g.axes[i])]) for g in c.groups for i, t in enumerate(g.tiles)]
    best = None
    for combo in itertools.product(*(divisors(n) for _, n in tiles)):
        at = {**env, **{t: v for (t, _), v in zip(tiles, combo)}}
        if max(sympy.sympify(col).subs(at) for col in c.columns[1]) > memory:
            continue
        h = sympy.sympify(c.H[1]).subs(at)
        best = h if best is None else min(best, h)
    return best


def matmul():
    return nc.cost(nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c"))


def test_the_sizes_are_part_of_the_key():
    c = matmul()
    for sizes in ({"a": 12, "b": 8, "c": 18}, {"a": 18, "b": 8, "c": 12}, {"a": 12, "b": 6, "c": 18}):
        (o,) = optima(c, [120], sizes=sizes)
        assert o.H == brute(c, 120, sizes, {"s_b": 1}), sizes


@pytest.mark.parametrize("memory", [60, 200])
def test_the_fixed_streams_are_part_of_the_key(memory):
    """``optimal`` substitutes the streams into the program; ``optima`` keeps them apart (``fixed`` alone differs)."""
    c, sizes = matmul(), {"a": 12, "b": 8, "c": 18}
    for s in (1, 4, 2, 1):                           # one program but for the stream it fixes, back and forth
        o = optimal(c, memory=memory, sizes=sizes, streams={"s_b": s})
        (p,) = optima(c, [memory], sizes=sizes, streams={"s_b": s})
        assert o.H == p.H == brute(c, memory, sizes, {"s_b": s}), s


def test_the_transfers_and_the_columns_are_part_of_the_key():
    """Programs alike but for their transfers, or but for one column, or but for both (two algorithms)."""
    sizes, a, b, c_ = {"a": 12, "b": 8, "c": 18}, *map(nc.symbol, "abc")
    once = matmul()
    twice = nc.cost(nc.group(nc.group(nc.stream(nc.einsum("a b, b c, a c -> a c"), "b", "s_b"), "a", "g_a"), "c",
                             "g_c"))            # a third input, read once per tile
    more = replace(once, H={**once.H, 1: once.H[1] + 7 * a * b * c_ / nc.symbol("g_c")})
    wider = replace(once, columns={**once.columns, 1: [*once.columns[1][:-1], 3 * once.columns[1][-1]]})
    assert once.H[1] != twice.H[1]
    for c in (once, more, once, wider, once, twice, once):
        for memory in (60, 150):
            (o,) = optima(c, [memory], sizes=sizes)
            assert o.H == brute(c, memory, sizes, {"s_b": 1})
