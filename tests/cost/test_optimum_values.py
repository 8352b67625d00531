"""The integer search's answers as plain values (:func:`napkin_cat.cost.sized_optimum.optimum_values`, issue 35 item
3): per memory ``(H, tiles)`` or None, without an :class:`~napkin_cat.cost.optimum_record.Optimum` per memory.

Second route: :func:`nc.optimal` at each memory alone (``sizes=``, one integer search per memory, a
:class:`~napkin_cat.errors.MemoryLimitError` where nothing fits), and ``H`` counted by the cost functor at the tiles
returned (``nc.cost(d, sizes=…)``), on seeded random programs and library kernels at memories below, inside and above
their range.
"""
from __future__ import annotations

from fractions import Fraction

import pytest

import napkin_cat as nc
from napkin_cat.cost.sized_optimum import optimum_values
from napkin_cat.errors import MemoryLimitError

L = nc.library


def cases():
    mm = nc.group(nc.group(nc.stream(L.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c")
    yield mm, {"a": 48, "b": 40, "c": 36}
    att = nc.group(nc.stream(L.attention(), "x", "s_x"), "q", "g_q")
    yield att, {"q": 64, "x": 96, "d": 16}


@pytest.mark.parametrize("k", [0, 1])
def test_values_equal_each_memory_alone(k):
    d, sizes = list(cases())[k]
    c = nc.cost(d)
    memories = [1, 40, 300, 2 ** 11, 2 ** 14, 2 ** 20]
    found = optimum_values(c, memories, sizes=sizes)
    assert any(v is None for v in found) and any(v is not None for v in found)
    for m, v in zip(memories, found):
        try:
            alone = nc.optimal(c, memory=m, sizes=sizes)
        except MemoryLimitError:
            assert v is None, m
            continue
        h, tiles = v
        assert isinstance(h, Fraction) and h == alone.H, m
        assert {str(s): int(x) for s, x in tiles.items()} == {str(s): int(x) for s, x in alone.sizes.items()
                                                               if str(s) not in sizes}, m
        at = {**sizes, **{str(s): int(x) for s, x in tiles.items()}}
        assert nc.cost(d, sizes=at).H[1] == h, m           # the cost functor counts what the search says


def test_each_memory_gets_its_own_dict():
    d, sizes = next(cases())
    a, b = optimum_values(nc.cost(d), [2 ** 20, 2 ** 21], sizes=sizes)
    assert a == b and a[1] is not b[1]                      # an answer shared by memories, each its own tiles
