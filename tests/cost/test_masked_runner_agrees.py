"""The cost at sizes is what the counting runner counts on masked attention, partitioned every way: transfers, FLOPs
by kind and peak memory, at ragged sizes.  A masked trip is skipped where the mask is never true on its tile and run
without the mask's maps where it is always true, in a stream and in a sub-loop alike, and a stream's trip whose every
sub-trip is skipped is skipped whole (``nc.plan`` and ``nc.cost(d, sizes=…)`` decide all three by one test,
:func:`~napkin_cat.cost.trip_kinds.loop_skip`); a trip that never runs, or runs only whole, never holds the mask.

A second route: a plain numpy loop over the tiles counts the trips that run and run whole, the contraction FLOPs a
causal sub-loop must do, and the keys and values the outer stream must load."""
import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.adapter import Ty


def sinks_window_mask(sinks: int, window: int):
    """``x < S ∨ |q − x| ≤ w``: a window, and every query sees the first ``S`` keys (attention sinks)."""
    b = nc.Builder(Ty())
    qi, xi = b(nc.position("q")), b(nc.position("x"))
    zero = b(nc.elementwise("scale", "q", const=0, dtype=nc.INT32), qi)
    bound = b(nc.elementwise("shift", "q", const=sinks, dtype=nc.INT32), zero)
    lo = b(nc.elementwise("shift", "q", const=-window, dtype=nc.INT32), qi)
    hi = b(nc.elementwise("shift", "q", const=window, dtype=nc.INT32), qi)
    band = b(nc.logical("and", "q x, q x -> q x"), b(nc.compare("le", "q, x -> q x"), lo, xi),
             b(nc.compare("le", "x, q -> q x"), xi, hi))
    sink = b(nc.compare("lt", "x, q -> q x"), xi, bound)
    return b.build(b(nc.logical("or", "q x, q x -> q x"), sink, band))


MASKS = {
    "causal": nc.library.causal_attention,
    "window": lambda: nc.library.sliding_window_attention(2),
    "prefix-lm": lambda: nc.library.prefix_lm_attention(3),
    "document": lambda: nc.library.document_attention(causal=True),
    "sinks+window": lambda: nc.library.masked_attention(sinks_window_mask(2, 1)),
}
PARTITIONS = {
    "stream": lambda a: nc.stream(a, "x", "s_x"),
    "group": lambda a: nc.group(nc.stream(a, "x", "s_x"), "q", "g_q"),
    "sub-loop": lambda a: nc.group(nc.stream(nc.stream(a, "x", "s_x"), "x", "u_x"), "q", "g_q"),
    "sub-loop alone": lambda a: nc.stream(nc.stream(a, "x", "s_x"), "x", "u_x"),
    "sub-loops two deep": lambda a: nc.group(nc.stream(nc.stream(nc.stream(a, "x", "s_x"), "x", "u_x"), "x", "v_x"),
                                             "q", "g_q"),
    "sub-loop in a level-2 group": lambda a: nc.stream(
        nc.group(nc.kernel(nc.group(nc.stream(a, "x", "s_x"), "q", "g_q"), level=2), "q", "h_q"), "x", "u_x"),
    "2-D stream": lambda a: nc.group(nc.stream(nc.stream(a, "x", "s_x"), "d", "s_d"), "q", "g_q"),
}


def _sizes(seed: int, partition: str) -> dict:
    """Ragged sizes (no tile need divide its axis), small enough to run."""
    rng = np.random.default_rng(seed)
    q, x, d = (int(v) for v in rng.integers(1, 10, 3))
    s_x = int(rng.integers(1, x + 1))
    out = {"q": q, "x": x, "d": d, "s_x": s_x}
    if partition not in ("stream", "sub-loop alone"):
        out["g_q"] = int(rng.integers(1, q + 1))
    if partition.startswith("sub-loop"):
        out["u_x"] = int(rng.integers(1, s_x + 1))
    if partition == "sub-loops two deep":
        out["v_x"] = int(rng.integers(1, out["u_x"] + 1))
    if partition == "sub-loop in a level-2 group":
        out["h_q"] = int(rng.integers(1, out["g_q"] + 1))
    if partition == "2-D stream":
        out["s_d"] = int(rng.integers(1, d + 1))
    return out


def _inputs(alg, sizes: dict, seed: int) -> list:
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=(sizes["q"], sizes["d"])), rng.normal(size=(sizes["x"], sizes["d"])),
          rng.normal(size=(sizes["x"], sizes["d"]))]
    if len(alg.dom) == 5:       # segment ids, sorted: documents
        xs += [np.sort(rng.integers(0, 3, sizes["q"])), np.sort(rng.integers(0, 3, sizes["x"]))]
    return xs


def counts(alg, sizes: dict, seed: int = 0):
    """``(cost at sizes, runner's counters)`` of ``alg`` at ``sizes``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        _, counted = nc.plan(alg, sizes).run(*_inputs(alg, sizes, seed))
    return nc.cost(alg, sizes=sizes), counted


@pytest.mark.parametrize("partition", list(PARTITIONS))
@pytest.mark.parametrize("mask", list(MASKS))
def test_the_cost_at_ragged_sizes_is_what_the_runner_counts(mask, partition):
    alg = PARTITIONS[partition](MASKS[mask]())
    for seed in range(6 if partition.startswith("sub-loop") else 4):
        sizes = _sizes(seed, partition)
        c, counted = counts(alg, sizes, seed)
        assert c.H == counted.transfers and c.H_bytes == counted.bytes, sizes
        assert c.flops == counted.flops, sizes
        assert c.M[1] == counted.peak[1], sizes


def _causal_subloop():
    return PARTITIONS["sub-loop"](nc.library.causal_attention())


def _loop_count(sizes: dict) -> tuple:
    """A numpy loop over the sub-loop's tiles of causal attention: ``(trips, trips run, run whole, tensor FLOPs)``,
    each trip that runs doing QKᵀ and PV on its tile (2 FLOPs per multiply-add, twice over ``d``)."""
    q, x, d, g, s, u = (sizes[k] for k in ("q", "x", "d", "g_q", "s_x", "u_x"))
    trips = run = whole = tensor = 0
    for i in range(0, q, g):
        qs = np.arange(i, min(i + g, q))
        for j in range(0, x, s):
            for k in range(j, min(j + s, x), u):
                xs = np.arange(k, min(k + u, j + s, x))
                allowed = xs[None, :] <= qs[:, None]
                trips += 1
                if allowed.any():
                    run, whole, tensor = run + 1, whole + bool(allowed.all()), tensor + 4 * len(qs) * len(xs) * d
    return trips, run, whole, tensor


@pytest.mark.parametrize("sizes", [{"q": 8, "x": 8, "d": 3, "g_q": 2, "s_x": 4, "u_x": 2},
                                   {"q": 7, "x": 9, "d": 2, "g_q": 3, "s_x": 4, "u_x": 3}])
def test_a_causal_sub_loop_skips_the_trips_its_mask_never_allows(sizes):
    """The issue's case (the first sizes): the runner ran all 16 sub-loop trips (tensor 768 FLOPs), where the mask
    allows 10 (480), 6 of them whole."""
    c, counted = counts(_causal_subloop(), sizes)
    trips, run, whole, tensor = _loop_count(sizes)
    assert run < trips and 0 < whole < run
    assert c.flops["tensor"] == counted.flops["tensor"] == tensor
    assert c.flops == counted.flops
    if sizes["q"] == 8:
        assert (trips, run, whole, tensor) == (16, 10, 6, 480)
    p = nc.plan(_causal_subloop(), sizes)
    assert str(p).count("skip unless") == 2 and "the mask is true on every pair" in str(p)     # the stream's, its
    assert str(p).count("the mask is true on every pair") == 1                           # sub-loop's; one whole


def _outer_loads(sizes: dict) -> tuple:
    """A numpy loop over the outer stream's tiles of causal attention (each group of queries by each slice of keys):
    ``(trips, trips run, values moved)``, a trip running where some pair of its tiles is allowed (a query at or after
    a key), loading its slice of keys and of values (``2·d`` per key); each group loads its queries and stores its
    output once (``2·d`` per query)."""
    q, x, d, g, s = (sizes[k] for k in ("q", "x", "d", "g_q", "s_x"))
    trips = run = 0
    moved = 2 * q * d
    for i in range(0, q, g):
        qs = np.arange(i, min(i + g, q))
        for j in range(0, x, s):
            xs = np.arange(j, min(j + s, x))
            trips += 1
            if (xs[None, :] <= qs[:, None]).any():
                run, moved = run + 1, moved + 2 * len(xs) * d
    return trips, run, moved


@pytest.mark.parametrize("sizes", [{"q": 8, "x": 8, "d": 3, "g_q": 2, "s_x": 4, "u_x": 2},
                                   {"q": 7, "x": 9, "d": 2, "g_q": 3, "s_x": 4, "u_x": 3},
                                   {"q": 5, "x": 11, "d": 2, "g_q": 2, "s_x": 3, "u_x": 2}])
def test_a_stream_whose_sub_trips_are_all_masked_out_skips_the_trip(sizes):
    """The issue's case (the first sizes): the outer stream around a causal sub-loop loaded keys and values on all 8 of
    its trips, 240 values moved, where 6 trips have a pair the mask allows: 192."""
    c, counted = counts(_causal_subloop(), sizes)
    trips, run, moved = _outer_loads(sizes)
    assert run < trips
    assert c.H[1] == counted.transfers[1] == moved
    if sizes["q"] == 8:
        assert (trips, run, moved) == (8, 6, 192)


def test_a_trip_that_runs_only_whole_never_holds_the_mask():
    """The issue's case: a window of 2 over 2 positions allows every pair; the mask's maps never run, so what they
    make is never live (the runner's peak, 22; the cost at sizes said 24)."""
    alg = nc.stream(nc.library.sliding_window_attention(2), "x", "s_x")
    sizes = {"q": 2, "x": 2, "d": 2, "s_x": 1}
    c, counted = counts(alg, sizes)
    assert c.M[1] == counted.peak[1] == 22
    narrow = nc.stream(nc.library.sliding_window_attention(0), "x", "s_x")     # partial trips: the mask is held
    c0, counted0 = counts(narrow, {"q": 4, "x": 4, "d": 2, "s_x": 2})
    assert c0.M[1] == counted0.peak[1]
    assert c0.M[1] > nc.cost(nc.stream(nc.library.attention(), "x", "s_x"), sizes={"q": 4, "x": 4, "d": 2,
                                                                                   "s_x": 2}).M[1]


def test_a_partial_trip_only_on_the_short_slice_is_held_at_its_extent():
    """Prefix-LM with the prefix 3 over 4 keys in slices of 3: the full slice runs whole, only the short one (1 key)
    partial, so the mask is held on one key's tile, not on a full slice's (the cost said 159, the runner 114)."""
    alg = nc.stream(nc.library.prefix_lm_attention(3), "x", "s_x")
    sizes = {"q": 9, "x": 4, "d": 2, "s_x": 3}
    c, counted = counts(alg, sizes)
    assert c.M[1] == counted.peak[1] == 114



def test_the_peak_may_be_held_on_a_short_tile():
    """Sinks and a window, sub-looped by 1: a partial trip runs only on the short slice, and what it holds there (the
    mask made on the short slice) is the peak, above every column of the full tiles (which run whole): the
    columns walked at the full sizes alone say 129, the runner holds 133."""
    alg = PARTITIONS["sub-loop"](MASKS["sinks+window"]())
    sizes = {"q": 9, "x": 3, "d": 3, "s_x": 2, "g_q": 9, "u_x": 1}
    c, counted = counts(alg, sizes)
    assert c.M[1] == counted.peak[1] == 133
