"""The ring (issue 37): a stream over the devices whose slices are their shards.  Each claim is checked by a second
route: the values against numpy's attention and against a ring simulated step by step (which shard each device folds
at each trip, made visible by a sum whose rounding depends on its order), the link counts against the simulation's,
the memory against the all-gather's."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.ring import Ring
from rewrites.devices import device_gather
from rewrites.ring import simulate_ring


def _attention(Q, K, V):
    """softmax(Q Kᵀ / √d) V, from the maths."""
    s = Q @ K.T / np.sqrt(Q.shape[1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ V


@pytest.mark.parametrize("P, q, x", [(2, 5, 7), (3, 6, 10), (4, 9, 6), (5, 5, 13)])
def test_ring_attention_is_attention(P, q, x):
    d = nc.ring(nc.shard(nc.library.attention(), "q", devices=P), "x")
    rng = np.random.default_rng(P)
    Q, K, V = rng.normal(size=(q, 4)), rng.normal(size=(x, 4)), rng.normal(size=(x, 4))
    assert np.allclose(nc.evaluate(d, Q, K, V), _attention(Q, K, V))
    (region,) = d.boxes
    (r,) = region.arg.boxes
    assert isinstance(r, Ring) and region.sharded("dom") == ("q", "x", "x")


@pytest.mark.parametrize("P", [2, 3, 4])
def test_each_device_folds_the_shards_in_the_ring_order(P):
    """``Σ_x k_x`` folded in float64 keeps the order it was added in: 1e16 + 1 − 1e16 is 0 but 1e16 − 1e16 + 1 is 1.
    Each device's row (one query per device) is the sum in the order the simulated ring hands it the shards."""
    keys = np.array([1e16, 1.0, -1e16, 3.0, -7.0][:P])
    f = nc.einsum("q d, x d -> q", q=P, x=P, d=1)
    d = nc.ring(nc.shard(f, "q", devices=P), "x")
    *_, order = simulate_ring([1] * P, [1])
    expected = []
    for p in range(P):
        acc = 0.0
        for shard in order[p]:
            acc = acc + keys[shard]
        expected.append(acc)
    got = nc.evaluate(d, np.ones((P, 1)), keys[:, None])
    assert list(got) == expected
    assert order[1][:2] == [1, 0]                    # device p at trip t holds shard (p − t) mod P


@pytest.mark.parametrize("P, x", [(2, 7), (3, 10), (4, 6), (4, 3)])
def test_link_counts_are_the_simulated_ring(P, x):
    """Per device at ragged shards: the values sent and received and the messages, those of the ring run step by
    step; symbolically (P − 1)·x·d/P each way per streamed input, as an all-gather's."""
    d = nc.ring(nc.shard(nc.library.attention(), "q", devices=P), "x")
    link = nc.cost(d, sizes={"q": 2 * P, "x": x, "d": 4}).link
    extents = [len(c) for c in np.array_split(np.arange(x), P)]
    sent, received, messages, _ = simulate_ring(extents, [4, 4])
    assert (link.sent, link.received, link.messages) == (sent, received, messages)
    assert link.sent_bytes == tuple(4 * s for s in sent)
    xs, dd = nc.symbol("x"), nc.symbol("d")
    sym = nc.cost(d).link
    assert sympy.simplify(sym.sent - 2 * (P - 1) * xs * dd / P) == 0 and sym.messages == 2 * (P - 1)
    gathered = nc.cost(device_gather.using(axis="x").apply(nc.shard(nc.library.attention(), "q", devices=P))).link
    assert sympy.simplify(sym.sent - gathered.sent) == 0 and sympy.simplify(sym.received - gathered.received) == 0


def test_the_ring_holds_one_incoming_slice_not_all_the_keys():
    """Per device the ring holds its K, V shard and one incoming slice; the all-gather holds K and V whole.  Counted
    by hand: the device region's boundary (Q's shard, K's and V's shards) plus the slot, at a long sequence."""
    P, q, x, dd = 4, 8, 4096, 16
    sizes = {"q": q, "x": x, "d": dd}
    ring = nc.cost(nc.ring(nc.shard(nc.library.attention(), "q", devices=P), "x"), sizes=sizes).link.held
    gather = nc.cost(device_gather.using(axis="x").apply(nc.shard(nc.library.attention(), "q", devices=P)),
                     sizes=sizes).link.held
    assert all(r < g for r, g in zip(ring, gather))
    assert all(g >= 2 * x * dd for g in gather)
    slot = 2 * (x // P) * dd
    # the level-0 columns of the unkernelled stream: Q's shard, K's and V's shards, the slot, the trip's scores,
    # state and output (q/P rows): bounded by the boundary plus the slot plus the trip's q/P × x/P values and rows
    low = (q // P) * dd + 2 * (x // P) * dd + slot
    assert all(low <= r <= low + (q // P) * (x // P) + 4 * (q // P) * dd for r in ring)


def test_ring_flops_are_the_attention_of_a_query_shard():
    """Every device folds every shard: its contractions' FLOPs are those of its queries against all the keys."""
    P, sizes = 3, {"q": 9, "x": 11, "d": 4}
    c = nc.cost(nc.ring(nc.shard(nc.library.attention(), "q", devices=P), "x"), sizes=sizes)
    one = nc.cost(nc.library.attention(), sizes={**sizes, "q": 3})
    assert c.flops["tensor"] == one.flops["tensor"]


def test_ring_from_the_all_gather_mode():
    """The all-gathers that device_gather put on K and V are taken out: the same boundary, a ring inside."""
    P = 3
    gathered = device_gather.using(axis="x").apply(nc.shard(nc.library.attention(), "q", devices=P))
    d = nc.ring(gathered, "x")
    (region,) = d.boxes
    assert [getattr(b, "region", None) for b in region.arg.boxes] == ["ring"]
    assert d.dom == gathered.dom and d.cod == gathered.cod
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(7, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 4))
    assert np.allclose(nc.evaluate(d, Q, K, V), nc.evaluate(gathered, Q, K, V))


def test_refusals_name_what_is_at_fault():
    with pytest.raises(nc.RewriteError, match="shards 'q' itself"):
        nc.ring(nc.shard(nc.library.attention(), "q", devices=2), "q")
    with pytest.raises(nc.RewriteError, match="one device region"):
        nc.ring(nc.library.attention(), "x")
    with pytest.raises(nc.RewriteError, match="takes a Diagram"):
        nc.ring("attention", "x")
    wide = nc.stream(nc.kernel(nc.library.attention(q=6, x=7, d=2)), "x", 4)      # shards of 3, 2, 2 keys
    with pytest.raises(nc.RewriteError, match="tiles of 4, more than the smallest .* legal tiles are 1 … 2"):
        nc.ring(nc.shard(wide, "q", devices=3), "x")
    with pytest.raises(nc.RewriteError, match="no input carries 'nope'"):
        nc.ring(nc.shard(nc.library.attention(), "q", devices=2), "nope")
    with pytest.raises(nc.RewriteError, match="sharded along 'n'"):
        nc.ring(nc.shard(nc.einsum("n x, x h -> n h"), "n", devices=2), "x")
    with pytest.raises(nc.AxisError, match="devices"):
        Ring(nc.library.attention(), nc.library.attention().dom, nc.library.attention().cod, {"axis": "x", "size": 2})
    d = nc.ring(nc.shard(nc.library.attention(), "q", devices=4), "x")
    Q, K, V = np.ones((3, 2)), np.ones((8, 2)), np.ones((8, 2))       # 3 queries on 4 devices: one idle
    with pytest.raises(nc.DeviceError, match="every device"):
        nc.evaluate(d, Q, K, V)


@pytest.mark.parametrize("P", [2, 3, 4])
def test_causal_ring_attention_reads_each_shards_own_positions(P):
    """Under a causal mask each trip's keys are masked at their own positions (shard (p − t) mod P's place along
    the keys), not the device's own shard's: numpy's causal attention, from the maths."""
    d = nc.ring(nc.shard(nc.library.causal_attention(), "q", devices=P), "x")
    rng = np.random.default_rng(P)
    n = 3 * P + 1
    Q, K, V = rng.normal(size=(n, 4)), rng.normal(size=(n, 4)), rng.normal(size=(n, 4))
    s = Q @ K.T / 2.0
    s[np.triu_indices(n, 1)] = -np.inf
    e = np.exp(s - s.max(-1, keepdims=True))
    assert np.allclose(nc.evaluate(d, Q, K, V), (e / e.sum(-1, keepdims=True)) @ V)
    sizes = {"q": 4 * P, "x": 4 * P, "d": 4}               # every trip folded: the symbolic count is the one at sizes
    symbolic = nc.cost(d).flops
    at = nc.cost(d, sizes=sizes).flops
    assert {k: int(v.subs({nc.symbol(a): b for a, b in sizes.items()})) for k, v in symbolic.items()} == at


def test_ring_of_flash_attention_runs_a_local_flash_per_trip():
    """ring-flash-attention: the inside is FlashAttention (queries in groups, keys streamed in a kernel); each trip
    runs it on the shard that arrived, its (μ, z, o) carried across the trips.  Exact at ragged shards and tiles; per
    device the kernel's memory and one incoming slot, less than the all-gather mode's whole K and V."""
    flash = nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")
    d = nc.ring(nc.shard(flash, "q", devices=3), "x")
    rng = np.random.default_rng(1)
    Q, K, V = rng.normal(size=(9, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 4))
    assert np.allclose(nc.evaluate(d, Q, K, V, sizes={"s_x": 3, "g_q": 2}), _attention(Q, K, V))
    sizes = {"q": 96, "x": 3000, "d": 16, "s_x": 64, "g_q": 32}
    gathered = device_gather.using(axis="x").apply(nc.shard(flash, "q", devices=3))
    ring, gather = nc.cost(d, sizes=sizes).link, nc.cost(gathered, sizes=sizes).link
    assert all(r < g for r, g in zip(ring.held, gather.held)) and ring.sent == gather.sent


def test_a_ring_outside_a_device_region_is_refused():
    """A ring hands shards between devices: run or counted at sizes on its own, it is a DeviceError."""
    inside = nc.ring(nc.shard(nc.library.attention(), "q", devices=2), "x").boxes[0].arg
    Q, K, V = np.ones((2, 2)), np.ones((3, 2)), np.ones((3, 2))
    with pytest.raises(nc.DeviceError, match="inside a device region"):
        nc.evaluate(inside, Q, K, V, sizes={"q": 4, "x": 6, "d": 2})
    with pytest.raises(nc.DeviceError, match="inside a device region"):
        nc.cost(inside, sizes={"q": 4, "x": 6, "d": 2})


def test_link_counts_on_a_symbolic_number_of_devices_bound_at_sizes():
    """A ring over ``devices="P"`` counted at sizes binding P: per device the counts of the ring over the int P, and
    those of the law at ``np.array_split``'s shards (10 keys over 3 devices: 4, 3, 3; K and V of 4 features)."""
    flash = nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")
    sizes = {"q": 9, "x": 10, "d": 4, "s_x": 2, "g_q": 2}
    symbolic = nc.cost(nc.ring(nc.shard(flash, "q", devices="P"), "x"), sizes={**sizes, "P": 3}).link
    concrete = nc.cost(nc.ring(nc.shard(flash, "q", devices=3), "x"), sizes=sizes).link
    n = [4 * 4, 3 * 4, 3 * 4]
    assert symbolic.sent == concrete.sent == tuple(2 * (40 - n[(p + 1) % 3]) for p in range(3))
    assert symbolic.received == concrete.received == tuple(2 * (40 - n[p]) for p in range(3))
    assert symbolic.messages == concrete.messages == (4, 4, 4)
