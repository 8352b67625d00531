"""A masked stream's count of the (tile, slice) pairs that run, kept per tiling (issue 37 item 5: a search counts one
tiling once per structure and assignment; at 1M tokens that count was the derive's time): ``running_slices`` without
positions gives, for each context, the count of the pairs whose slice some query of the tile may see.

Second route: numpy over every (tile, slice) pair and every (query, key) in it, the mask evaluated pointwise from
its definition (causal ``x ≤ q``; a window ``|q − x| ≤ w``).  Contexts that differ only in where their tiles lie
(same count, same extents) come one after another, so a kept count read back for the wrong tiles is caught.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost.at_sizes import At, count_running, running_slices


def stream_of(f):
    """The stream over the keys ``x`` of attention ``f``, and its skip."""
    region = nc.stream(f, "x", "s_x").boxes[0].arg.boxes[0]
    return region, schedule_of(region).skip


def brute(allowed, q_starts, tq: int, extent: int, starts, n: int) -> int:
    """The (tile, slice) pairs in which some (query, key) is allowed: the queries ``[s, s + tq)`` of each tile (cut
    at ``n``), the keys ``[t, t + extent)`` of each slice."""
    q = np.arange(n)[:, None]
    x = np.arange(n)[None, :]
    ok = allowed(q, x)
    return sum(bool(ok[s:min(s + tq, n), t:t + extent].any()) for s in q_starts for t in starts)


MASKS = {"causal": (lambda w: nc.library.causal_attention(), lambda w: lambda q, x: x <= q),
         "window": (lambda w: nc.library.sliding_window_attention(w), lambda w: lambda q, x: abs(q - x) <= w)}


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("seed", range(3))
def test_kept_counts_equal_the_pairs_that_run(mask, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(24, 64))
    w = int(rng.integers(0, 9))
    make, rule = MASKS[mask]
    region, skip = stream_of(make(w))
    for _ in range(6):
        tq, extent = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        count = int(rng.integers(1, 6))
        step = extent
        starts = range(0, n // extent * extent, step)
        if not len(starts):
            continue
        env = {}
        for shift in (0, int(rng.integers(1, n - tq))):              # the same tiling, its tiles elsewhere
            q_starts = np.sort(rng.choice(n - tq, size=count, replace=False)) if shift else \
                np.arange(count) * tq % max(n - tq, 1)
            ctx = At(env, {"q": (q_starts.astype(np.int64), tq)}, count)
            kept = running_slices(skip, ctx, region, extent, starts, positions=False).count
            again = running_slices(skip, ctx, region, extent, starts, positions=False).count
            assert kept == again == count_running(skip, ctx, region, extent, starts)
            assert kept == brute(rule(w), q_starts, tq, extent, starts, n), (mask, w, tq, extent, q_starts)
