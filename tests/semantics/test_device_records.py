"""The device region's record of what is sharded, and the failures the random walks found in the device rules
(issue 37): each a reproducer, now passing, checked against numpy written here from the maths and the link counts
against devices simulated here with ``np.array_split`` (a second route to the cost functor's formulas).

1. ``device_gather`` on a region over an axis of one value (soundness fuzz, walk 8 of seed 20240611): the second
   device held no shard of the region's axis, so it sat out, and the second shard of the gathered input with it.
   Co-shards are now cut among the devices that hold a shard of the region, as a collective's cuts are.
2. A sharded axis of one value is as large as its shard: read off the sizes, an input arriving sharded along it
   looked replicated and was gathered twice over.  The region records what is sharded (``Shard.sharded``).
3. A device region along a symbolic axis with a collective's cut inside, at sizes the devices do not divide
   (``random_program(20241371)``, Ulysses around a group of the heads): its inside kept ``b/2`` (``5/2``), and
   ``nc.evaluate`` raised ShapeError, ``nc.cost`` "not an integer".  Each device's inside now has its extents.
4. The record and the zigzag order together (the merge of the zigzag order): a zigzag ring records what is sharded
   and its order, the checks before a run read the largest zigzag shard (not device 0's), and a region in the zigzag
   order holding a collective is refused when it is made.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.devices import Shard, device_region
from napkin_cat.semantics import footprint
from napkin_cat.testing import random_program, run_checks
from rewrites.device_matching import as_diagram
from rewrites.devices import device_gather, device_reduction
from rewrites.ulysses import device_ulysses


def softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def gathered(blocks: list, axis: int) -> tuple:
    """Devices all-gathering: device ``p`` holds ``blocks[p]`` and sends it to each other device (none where it holds
    nothing); ``(sent, received)`` per device."""
    P = len(blocks)
    sizes = [b.size for b in blocks]
    return tuple((P - 1) * n for n in sizes), tuple(sum(sizes) - n for n in sizes)


def exchanged(blocks: list, scatter: int) -> tuple:
    """Devices exchanging by all-to-all: device ``p`` sends shard ``q`` of its block along ``scatter`` to ``q``."""
    P = len(blocks)
    sent, received = [0] * P, [0] * P
    for p, x in enumerate(blocks):
        for q, part in enumerate(np.array_split(x, P, axis=scatter)):
            if q != p:
                sent[p], received[q] = sent[p] + part.size, received[q] + part.size
    return sent, received


# ---------------------------------------------------------------------- 1. walk 8 of seed 20240611
def test_a_gather_in_a_region_over_one_value_keeps_the_function(rng):
    """The walk's step, smallest: a contraction over k of one value on 2 devices (device 1 holds no k: it is idle),
    its inputs read as replicated (the walk's document had no record: read off the sizes, k is as large as its
    shard), then their axis a arriving sharded and all-gathered.  Device 0, the only one running, holds every value
    of a, so it gathers from itself: nothing over the link."""
    f = nc.einsum("k a, k b a -> b", k=1, a=4, b=3)
    region = device_reduction.using(axis="k", devices=2).apply(f).boxes[0]
    assert region.sharded("dom") == ("k", "k")
    read = as_diagram(Shard(region.arg, region.dom, region.cod, {"axis": "k", "size": 1, "devices": 2}))
    assert read.boxes[0].sharded("dom") == (None, None)
    g = device_gather.using(axis="a").apply(read)
    x, y = rng.normal(size=(1, 4)), rng.normal(size=(1, 3, 4))
    want = np.einsum("ka,kba->b", x, y)
    for h in (read, g, nc.loads(nc.dumps(g))):
        np.testing.assert_allclose(nc.evaluate(h, x, y), want, rtol=1e-12)
    assert g.boxes[0].sharded("dom") == ("a", "a")
    link = nc.cost(g, sizes={}).link
    assert (link.sent, link.received) == ((0, 0), (0, 0))


def test_an_idle_device_holds_no_co_shard(rng):
    """One query on 2 devices, the keys' axis x (4 values) arriving sharded: device 0 holds all of it."""
    d = nc.shard(nc.einsum("q x, x d -> q d", q=1, x=4, d=3), "q", devices=2)
    g = device_gather.using(axis="x").apply(d)
    A, W = rng.normal(size=(1, 4)), rng.normal(size=(4, 3))
    np.testing.assert_allclose(nc.evaluate(g, A, W), A @ W, rtol=1e-12)
    link = nc.cost(g, sizes={}).link
    assert (link.sent, link.received) == ((0, 0), (0, 0)) and link.held[1] == 0       # device 1 holds nothing


# ---------------------------------------------------------------------- 2. an axis of one value, recorded
def test_an_input_sharded_along_an_axis_of_one_value_is_gathered_once(rng):
    """``A W`` sharded on the rows n over 2 devices, W's inner axis x (one value) arriving sharded: device 0 holds
    W's one row, device 1 none; the all-gather sends it once."""
    d = nc.shard(nc.einsum("n x, x h -> n h", n=5, x=1, h=3), "n", devices=2)
    g = device_gather.using(axis="x").apply(d)
    assert g.boxes[0].sharded("dom") == ("n", "x") and g.boxes[0].sharded("cod") == ("n",)
    A, W = rng.normal(size=(5, 1)), rng.normal(size=(1, 3))
    np.testing.assert_allclose(nc.evaluate(g, A, W), A @ W, rtol=1e-12)
    link = nc.cost(g, sizes={}).link
    assert (link.sent, link.received) == gathered(np.array_split(W, 2, axis=0), 0)


def test_a_reduce_scatter_along_an_axis_of_one_value_is_counted_per_device(rng):
    """Row-parallel ``x W`` over the hidden axis h (4 over 2 devices), its partial reduce-scattered along n of one
    value: device 0 keeps the row, so device 1 sends it its whole partial and receives nothing."""
    one = nc.einsum("n h, h e -> n e", n=1, h=2, e=3) >> nc.reduce_scatter("n e", axis="n", devices=2, n=1, e=3)
    d = device_region(one, "h", 2, 4, also={"n": 1})
    assert d.boxes[0].sharded("dom") == ("h", "h") and d.boxes[0].sharded("cod") == ("n",)
    x, w = rng.normal(size=(1, 4)), rng.normal(size=(4, 3))
    np.testing.assert_allclose(nc.evaluate(d, x, w), x @ w, rtol=1e-12)
    partials = [np.zeros((1, 3)), np.zeros((1, 3))]
    sent, received = exchanged(partials, 0)     # chunk q of each partial to device q (a reduce-scatter's moves)
    link = nc.cost(d, sizes={}).link
    assert (link.sent, link.received) == (tuple(sent), tuple(received)) == ((0, 3), (3, 0))


def test_a_replicated_array_of_a_shards_size_is_read_as_recorded(rng):
    """A hand-built region along a (3 values: shards of 2 and 1) with a replicated input carrying a at 2, the size of
    device 0's shard, grouped inside: device 1 keeps it whole (2 values) though its shard of a is 1, with the record
    given and read off the sizes alike.  A record naming an axis the array does not carry is refused by name."""
    a3, a2 = nc.types("a", a=3).inside[0], nc.types("a", a=2).inside[0]
    inside = nc.elementwise("exp", "a", a=2) @ nc.group(nc.kernel(nc.elementwise("neg", "a", a=2)), "a", 1)
    x, y = rng.normal(size=3), rng.normal(size=2)
    for record in ({}, {"sharded_in": ("a", None), "sharded_out": ("a", None)}):
        d = as_diagram(Shard(inside, nc.Ty(a3, a2), nc.Ty(a3, a2), {"axis": "a", "size": 2, "devices": 2, **record}))
        assert d.boxes[0].sharded("dom") == ("a", None)
        got = nc.evaluate(d, x, y)
        np.testing.assert_allclose(got[0], np.exp(x), rtol=1e-12)
        np.testing.assert_allclose(got[1], -y, rtol=1e-12)
    with pytest.raises(nc.AxisError, match=r"input 0 \(a\[2\]\).* recorded sharded along 'z', but it carries no shard"):
        device_region(nc.elementwise("exp", "a", a=2), "a", 2, 3, sharded_in=("z",))


# ---------------------------------------------------------------------- 3. random_program(20241371)
def test_ulysses_around_a_group_of_the_heads_at_sizes_the_devices_do_not_divide(rng):
    """A softmax over s grouped along the heads b, run as Ulysses on 2 devices at b = 5 and s = 7: device 0 holds
    3 heads after the all-to-all, device 1 two; its group of the heads sees its own.  The values, the link (two
    all-to-alls, simulated), and the FLOPs per device: those of the program on 3 heads (device 0's)."""
    f = nc.group(nc.kernel(nc.softmax("b s", over="s")), "b", "g_b")
    d = device_ulysses.using(heads="b", devices=2).apply(f)
    x = rng.normal(size=(5, 7))
    np.testing.assert_allclose(nc.evaluate(d, x, sizes={"g_b": 2}), softmax(x, axis=1), rtol=1e-12)
    sizes = {"b": 5, "s": 7, "g_b": 2}
    c = nc.cost(d, sizes=sizes)
    there = exchanged(np.array_split(x, 2, axis=1), 0)           # sharded on s → on b
    back = exchanged(np.array_split(x, 2, axis=0), 1)            # on b → on s
    assert c.link.sent == tuple(a + b for a, b in zip(there[0], back[0]))
    assert c.link.received == tuple(a + b for a, b in zip(there[1], back[1]))
    assert c.flops == nc.cost(f, sizes={**sizes, "b": 3}).flops


def test_the_seeds_walk_applies_the_device_rules_and_keeps_the_function():
    tally = __import__("collections").Counter()
    assert run_checks(random_program(20241371), checks=("rules",), tally=tally) == []
    assert tally[("rules", "equivalent")] == 1


# ---------------------------------------------------------------------- the checks before a run
def test_evaluate_checks_tiles_and_memory_inside_a_device_region(rng, monkeypatch):
    """A group of 5 queries on a device holding 4 of 7 is refused, one of 4 runs; an inside whose scores (20 × 40
    on a device) pass the machine's memory is refused though every boundary array fits."""
    d = nc.shard(nc.group(nc.kernel(nc.library.attention()), "q", "g_q"), "q", devices=2)
    Q, K, V = rng.normal(size=(7, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    with pytest.raises(nc.ShapeError, match=r"\(g_q = 5\) exceeds the axis \(q = 4\); legal sizes are 1 … 4"):
        nc.evaluate(d, Q, K, V, sizes={"g_q": 5})
    np.testing.assert_allclose(nc.evaluate(d, Q, K, V, sizes={"g_q": 4}), softmax(Q @ K.T / np.sqrt(2)) @ V,
                               rtol=1e-12)
    big = nc.shard(nc.library.attention(), "q", devices=2)
    Q, K, V = rng.normal(size=(40, 2)), rng.normal(size=(40, 2)), rng.normal(size=(40, 2))
    monkeypatch.setattr(footprint, "MACHINE_BYTES", 8 * 500)        # the boundary's 80 values fit, 800 do not
    with pytest.raises(nc.MemoryLimitError, match=r"q\[20\]×x: 800 values"):
        nc.evaluate(big, Q, K, V)


# ---------------------------------------------------------------------- the record and the zigzag order together
def zigzag_chunks(n: int, P: int, p: int) -> list:
    """Device ``p``'s positions under zigzag, from the definition: chunks ``p`` and ``2P − 1 − p`` of
    ``np.array_split``'s ``2P``."""
    chunks = np.array_split(np.arange(n), 2 * P)
    return [*chunks[p], *chunks[2 * P - 1 - p]]


def test_a_zigzag_ring_records_what_is_sharded_and_its_order(rng):
    """The ring rule in the zigzag order makes a region that records both: the queries sharded, the keys and values
    travelling (sharded along x), the output sharded, and the order; each device holds chunks p and 2P − 1 − p of
    both axes, and the ring computes attention."""
    from napkin_cat.algorithms.device_shards import device_shards
    from napkin_cat.algorithms.schedule import schedule_of
    from rewrites.ring import device_ring
    q, x, d, P = 13, 16, 4, 4
    z = device_ring.using(order="zigzag").apply(nc.shard(nc.library.attention(q=q, x=x, d=d), "q", P))
    box = z.boxes[0]
    assert (box.sharded("dom"), box.sharded("cod"), box.order) == (("q", "x", "x"), ("q",), "zigzag")
    shards = device_shards(schedule_of(box), int)
    for axis, n in (("q", q), ("x", x)):
        assert [s[axis].positions().tolist() for s in shards] == [zigzag_chunks(n, P, p) for p in range(P)]
    Q, K, V = rng.normal(size=(q, d)), rng.normal(size=(x, d)), rng.normal(size=(x, d))
    np.testing.assert_allclose(nc.evaluate(z, Q, K, V), softmax(Q @ K.T / np.sqrt(d)) @ V, rtol=1e-12)


def test_the_checks_before_a_run_read_the_largest_zigzag_shard(rng):
    """13 queries over 4 devices in the zigzag order: device 3 holds 4 (chunks 3 and 4 of 2, 2, 2, 2, 2, 1, 1, 1),
    device 0 only 3; a group of 4 queries runs, one of 5 is refused naming the largest shard."""
    q, d, P = 13, 4, 4
    largest = max(len(zigzag_chunks(q, P, p)) for p in range(P))
    assert largest == 4 and len(zigzag_chunks(q, P, 0)) == 3
    f = nc.shard(nc.group(nc.kernel(nc.library.attention(q=q, x=6, d=d)), "q", "g_q"), "q", P, order="zigzag")
    Q, K, V = rng.normal(size=(q, d)), rng.normal(size=(6, d)), rng.normal(size=(6, d))
    np.testing.assert_allclose(nc.evaluate(f, Q, K, V, sizes={"g_q": largest}), softmax(Q @ K.T / np.sqrt(d)) @ V,
                               rtol=1e-12)
    with pytest.raises(nc.ShapeError, match=rf"\(g_q = {largest + 1}\) exceeds the axis \(q = {largest}\)"):
        nc.evaluate(f, Q, K, V, sizes={"g_q": largest + 1})


def test_a_collective_in_a_zigzag_region_is_refused():
    """An all-gather joins the devices' shards in device order, contiguous shards: a region in the zigzag order
    holding one (built by hand, as a document could) is refused when it is made, as device_region refuses it; the
    same region in the contiguous order is made."""
    inside = device_gather.using(axis="x").apply(nc.shard(nc.library.attention(q=8, x=8, d=2), "q", 2)).boxes[0]
    assert any(getattr(b, "data", None) is not None and b.data.kind == "all_gather" for b in inside.arg.boxes)
    Shard(inside.arg, inside.dom, inside.cod, dict(inside.params))
    with pytest.raises(nc.RewriteError, match="the collective 'all-gather' inside assumes contiguous shards"):
        Shard(inside.arg, inside.dom, inside.cod, {**inside.params, "order": "zigzag"})
    with pytest.raises(nc.RewriteError, match="no device region along 'q' in the zigzag order"):
        device_region(inside.arg, "q", 2, 8, also={"x": 8}, order="zigzag")
