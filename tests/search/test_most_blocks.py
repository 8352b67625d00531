"""The bound a parallelism requirement reads before it costs a kernel (issue 31, the suite's time):
:func:`~napkin_cat.search.parallelism.most_blocks`, the most thread blocks a kernel can launch at given sizes over
every tiling, is the maximum of the one count (:func:`napkin_cat.algorithms.launches.blocks`) over the tiles, here
enumerated tile by tile (every integer tile, not only divisors); and skipping the kernels under it changes no
derivation: ``nc.derive(..., min_blocks=B)`` with the bound and with the bound switched off (every kernel costed,
the search as it was) return the same regimes, or both raise, on both sides of the point where B stops being met.

Mutations caught: the parts left out of the bound (a split kernel, the only way to meet B below, is skipped: the
derivation raises where the search without the bound finds split-K; and the enumerated maximum exceeds it); the
tiles put at 2 instead of 1 (the enumeration exceeds it)."""
from __future__ import annotations

import itertools

import pytest

import napkin_cat as nc
import napkin_cat.search.parallelism as parallelism
from napkin_cat.algorithms.launches import blocks, kernel_launches
from napkin_cat.errors import MemoryLimitError
from napkin_cat.search.parallelism import most_blocks

SPLIT = nc.group(nc.stream(nc.library.attention(), "x", "s_x", parts="P"), "q", "g_q")
NESTED = nc.group(nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "a", "h_a"), "c", "g_c")


@pytest.mark.parametrize("algorithm, sizes, tiles", [
    (SPLIT, {"q": 7, "x": 12, "d": 2, "P": 3, "s_x": 1}, {"g_q": 7}),
    (NESTED, {"a": 10, "b": 4, "c": 6, "s_b": 1}, {"g_a": 10, "h_a": 10, "g_c": 6}),
])
def test_the_bound_is_the_most_any_tiling_launches(algorithm, sizes, tiles):
    (k,) = kernel_launches(algorithm)
    counts = [blocks(algorithm, {**sizes, **dict(zip(tiles, combo))})
              for combo in itertools.product(*(range(1, n + 1) for n in tiles.values()))]
    assert max(counts) == most_blocks(k, sizes)
    assert min(counts) < max(counts)                # the tiles matter: the bound is not every tiling's count


def regimes(diagram, sizes, memory, need):
    try:
        r = nc.derive(diagram, memory=memory, sizes=sizes, min_blocks=need)
    except MemoryLimitError:
        return None
    return sorted((str(g.variant), int(g.H), str(g.optimum.sizes)) for g in r.regimes)


@pytest.mark.parametrize("need", [16, 17, 64, 257])
def test_skipping_under_the_bound_changes_no_derivation(need, monkeypatch):
    """A skinny matmul at a = c = 4 (16 groups at most, every tile 1): 16 blocks without a split, more only by
    split-K (b = 64 cut into parts, up to 4·4·64 = 1024 blocks); the search without the bound (every kernel costed)
    agrees at each requirement."""
    mm, sizes, memory = nc.library.matmul(), {"a": 4, "b": 64, "c": 4}, [2 ** 6, 2 ** 8]
    seen = []

    def recorded(kernel, sizes):
        seen.append(most_blocks(kernel, sizes))
        return seen[-1]
    monkeypatch.setattr(parallelism, "most_blocks", recorded)
    bounded = regimes(mm, sizes, memory, need)
    assert any(b < need for b in seen) and any(b >= need for b in seen)    # it skips some kernels, not all
    monkeypatch.setattr(parallelism, "most_blocks", lambda kernel, sizes: float("inf"))
    assert bounded == regimes(mm, sizes, memory, need)
    assert bounded is not None
    if need > 16:                                   # beyond the groups, only a split meets it
        assert all("×p_b" in v for v, _, _ in bounded)


def test_beyond_every_kernel_both_raise(monkeypatch):
    """At a requirement no kernel can meet (more than a·c·b = 1024 blocks), the search raises with the bound
    and without it."""
    mm, sizes = nc.library.matmul(), {"a": 4, "b": 64, "c": 4}
    assert regimes(mm, sizes, [2 ** 8], 1025) is None
    monkeypatch.setattr(parallelism, "most_blocks", lambda kernel, sizes: float("inf"))
    assert regimes(mm, sizes, [2 ** 8], 1025) is None
