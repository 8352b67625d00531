"""A masked stream's count of the (tile, slice) pairs that run, kept per tiling (issue 37 item 5: a search counts one
tiling once per structure and assignment; at 1M tokens that count was the derive's time): ``running_slices`` without
positions gives, for each context, the count of the pairs whose slice some query of the tile may see.

Second route: numpy over every (tile, slice) pair and every (query, key) in it, the mask evaluated pointwise from
its definition (causal ``x ≤ q``; a window ``|q − x| ≤ w``).  Contexts that differ only in where their tiles lie
(same count, same extents) come one after another, so a kept count read back for the wrong tiles is caught.

The counts are kept in the store of the call that makes them (:func:`~napkin_cat.cost.at_sizes.counts_kept`, issue
35: a cache belongs to the call, its key everything the count depends on): contexts that differ in one part of the key
each are counted right in one store, and two calls never share a store.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost import at_sizes
from napkin_cat.cost.at_sizes import At, count_running, counts_kept, kept_counts, running_slices


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
    with counts_kept():                # one call's store: every context below is counted into it
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


def test_one_store_tells_apart_each_part_of_the_key():
    """One store, contexts that differ from a first one in one part of the key each (the mask, where the tiles lie,
    their extent and how many, an axis not tiled and its size, the slices' extent, first start, step and number):
    each is counted as the brute force counts it, and each is an entry of its own (a key without one of these parts
    reads another context's count)."""
    n = 48
    base = dict(mask="causal", q_starts=(0, 16), tq=8, extent=4, first=0, step=4, slices=12, q_size=None)
    changes = [dict(mask="window"), dict(q_starts=(8, 40)), dict(tq=16), dict(q_starts=(0, 16, 32)),
               dict(extent=6, step=6, slices=8), dict(first=8, slices=10), dict(step=8, slices=6), dict(slices=5),
               dict(q_starts=None, q_size=20), dict(q_starts=None, q_size=40)]
    with counts_kept() as store:
        for change in [{}] + changes:
            case = {**base, **change}
            make, rule = MASKS[case["mask"]]
            region, skip = stream_of(make(3))
            starts = range(case["first"], case["first"] + case["step"] * case["slices"], case["step"])
            if case["q_starts"] is None:           # q not tiled: the mask reads the whole axis, its size from env
                ctx, q_starts, tq = At({nc.symbol("q"): case["q_size"]}), [0], case["q_size"]
            else:
                q_starts, tq = np.array(case["q_starts"], dtype=np.int64), case["tq"]
                ctx = At({}, {"q": (q_starts, tq)}, len(q_starts))
            got = running_slices(skip, ctx, region, case["extent"], starts, positions=False).count
            assert got == brute(rule(3), q_starts, tq, case["extent"], starts, n), case
        assert len(store) == 1 + len(changes)


def test_two_calls_never_share_a_store(monkeypatch):
    """Every count a call makes is kept in that call's store (``nc.derive``'s searches and folds share the derive's),
    two calls (other masks, other sizes) have two stores, and none outlives its call."""
    seen = []
    real = at_sizes.count_running

    def spy(*args, **kwargs):
        seen.append(kept_counts())
        return real(*args, **kwargs)
    monkeypatch.setattr(at_sizes, "count_running", spy)
    sizes = {"q": 64, "x": 64, "d": 4}
    r = nc.derive(nc.library.causal_attention(), memory=2 ** 9, sizes=sizes)
    derived = list(seen)
    seen.clear()
    window = nc.group(nc.stream(nc.library.sliding_window_attention(5), "x", "s_x"), "q", "g_q")
    at = {"q": 32, "x": 32, "d": 4, "g_q": 8, "s_x": 4}
    c = nc.cost(window, sizes=at)
    costed = list(seen)
    assert derived and costed and all(s is not None for s in derived + costed)
    assert all(s is derived[0] for s in derived), "a derive's folds and searches read one store"
    assert all(s is costed[0] for s in costed) and costed[0] is not derived[0], "two calls share a store"
    assert kept_counts() is None
    xs = [np.random.default_rng(0).standard_normal((32, 4)) for _ in range(3)]
    assert c.H == nc.plan(window, at).run(*xs)[1].transfers          # second route: what a run counts
    assert r.H == nc.plan(r.diagram, r.optimum.sizes).run(
        *[np.random.default_rng(1).standard_normal((64, 4)) for _ in range(3)])[1].transfers[1]
