"""Obligations of the device level (``rewrites/devices.py``): each rule keeps the function on random instances and
random variants of them (axes renamed, sizes chosen, weaves at random positions), at 2, 3 and 4 devices with
ragged shards, and keeps its cost claim (per-device FLOPs and memory, the link traffic of its collectives); a mutant
of each fails its obligation.  Megatron's column- then row-parallel MLP is derived by the rules and checked."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import ObligationError
from rewrites.devices import device_fusion, device_gather, device_partition, device_reduction, tensor_parallel
from rewrites.generation import device_generation
from rewrites.ring import device_ring

proves = pytest.mark.proves


@proves("device_partition")
@pytest.mark.parametrize("P", [2, 3, 4])
def test_device_partition_is_sound(P):
    rule = device_partition.using(devices=P)
    proof = rule.obligation.discharge(rule, trials=8, variants=4)
    assert proof.rewrites >= 8 and proof.cost_checked


@proves("device_reduction")
@pytest.mark.parametrize("P", [2, 3, 4])
def test_device_reduction_is_sound(P):
    rule = device_reduction.using(devices=P)
    proof = rule.obligation.discharge(rule, trials=8, variants=4)
    assert proof.rewrites >= 8 and proof.cost_checked


@proves("device_fusion")
def test_device_fusion_is_sound():
    proof = device_fusion.obligation.discharge(device_fusion, trials=12)
    assert proof.rewrites >= 12 and proof.cost_checked


@proves("device_generation")
def test_device_generation_is_sound():
    proof = device_generation.obligation.discharge(device_generation, trials=8)
    assert proof.rewrites >= 8 and proof.cost_checked


def test_device_generation_moves_the_positions_into_the_ring():
    """Causal attention partitioned on the queries leaves the keys' positions outside (read whole); moved inside,
    a ring of the keys computes each trip's own, so the folds the mask skips are counted per device and step."""
    from rewrites.ring import device_ring
    base = tensor_parallel(nc.library.causal_attention(), "q", 4).diagram
    assert [b.name for b in base.boxes if not isinstance(b, nc.Shard)][:1] == ["pos"]
    moved = device_generation.apply(base)
    assert [b.name for b in moved.boxes if b.name == "pos"] == []
    ring = device_ring.using(axis="x").apply(moved)
    assert nc.cost(ring, sizes={"q": 16, "x": 16, "d": 2}).link.trips == ((1, 0, 0, 0), (1, 1, 0, 0), (1, 1, 1, 0),
                                                                          (1, 1, 1, 1))


def test_mutants_fail_their_obligations():
    """A reduction merged by the wrong law (max for a sum), and a fusion that forgets the all-gather of a value read
    whole, are caught."""
    def wrong_merge(m):
        d = device_reduction.rhs(m)
        text = nc.dumps(d).replace('"add"', '"max"')
        return nc.loads(text)
    bad = replace(device_reduction.using(devices=3), rhs=wrong_merge)
    with pytest.raises(ObligationError):
        bad.obligation.discharge(bad, trials=8)

    def no_gather(m):
        d = device_fusion.rhs(m)
        return nc.loads(nc.dumps(d).replace('"all_gather"', '"all_reduce"').replace(
            '"axis": "h", "devices"', '"merge": "add", "devices"'))
    bad = replace(device_fusion, rhs=no_gather)
    with pytest.raises((ObligationError, nc.NapkinError)):
        bad.obligation.discharge(bad, trials=12)


@pytest.mark.parametrize("P", [2, 3, 4])
def test_megatron_mlp_is_derived_with_one_all_reduce(P):
    mlp = (nc.einsum("n d, d h -> n h") >> nc.elementwise("relu", "n h")) @ nc.Id("h e") \
        >> nc.einsum("n h, h e -> n e")
    r = tensor_parallel(mlp, "h", devices=P)
    (region,) = r.diagram.boxes
    assert region.region == "shard" and [b.data.kind for b in region.arg.boxes if hasattr(b, "data")].count(
        "all_reduce") == 1
    rng = np.random.default_rng(P)
    x, w1, w2 = rng.normal(size=(3, 4)), rng.normal(size=(4, 11)), rng.normal(size=(11, 5))
    assert np.allclose(nc.evaluate(r.diagram, x, w1, w2), np.maximum(x @ w1, 0) @ w2)
    assert nc.isomorphic(r.trace.replay(mlp), r.diagram)
    n, e = nc.symbol("n"), nc.symbol("e")
    link = nc.cost(r.diagram).link
    assert sympy.simplify(link.sent - 2 * (P - 1) * n * e / P) == 0 and link.messages == 2 * (P - 1)


def test_a_value_read_whole_is_all_gathered():
    """A softmax over the sharded axis reads its scores whole: fused into the device region, they are all-gathered
    and the softmax runs on every device."""
    f = nc.einsum("n d, d h -> n h") >> nc.softmax("n h", over="h")
    r = tensor_parallel(f, "h", devices=3)
    (region,) = r.diagram.boxes
    assert [b.data.kind for b in region.arg.boxes] == ["contract", "all_gather", "softmax"]
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 3)), rng.normal(size=(3, 7))
    s = x @ w
    expected = np.exp(s - s.max(-1, keepdims=True))
    assert np.allclose(nc.evaluate(r.diagram, x, w), expected / expected.sum(-1, keepdims=True))
    link = nc.cost(r.diagram, sizes={"n": 2, "d": 3, "h": 7}).link
    assert link.received == (2 * 7 - 2 * 3, 2 * 7 - 2 * 2, 2 * 7 - 2 * 2)      # shards 3, 2, 2 of h


@proves("device_gather")
def test_device_gather_is_sound():
    rule = device_gather.using(axis="x")
    proof = rule.obligation.discharge(rule, trials=12)
    assert proof.rewrites >= 12 and proof.cost_checked


@pytest.mark.parametrize("P", [2, 3, 4])
def test_attention_with_keys_and_values_all_gathered(P):
    """Context parallelism's all-gather mode, derived: the queries sharded, K and V arriving sharded along the keys
    and all-gathered; exact at ragged shards, the link traffic per device that of two all-gathers."""
    d = device_gather.using(axis="x").apply(nc.shard(nc.library.attention(), "q", devices=P))
    (region,) = d.boxes
    assert region.sharded("dom") == ("q", "x", "x") and region.sharded("cod") == ("q",)
    rng = np.random.default_rng(P)
    Q, K, V = rng.normal(size=(7, 4)), rng.normal(size=(9, 4)), rng.normal(size=(9, 4))
    s = Q @ K.T / 2.0
    e = np.exp(s - s.max(-1, keepdims=True))
    assert np.allclose(nc.evaluate(d, Q, K, V), (e / e.sum(-1, keepdims=True)) @ V)
    link = nc.cost(d, sizes={"q": 7, "x": 9, "d": 4}).link
    keys = [len(c) for c in np.array_split(np.arange(9), P)]
    assert link.sent == tuple(2 * (P - 1) * k * 4 for k in keys)
    assert link.received == tuple(2 * (9 - k) * 4 for k in keys)
    x, dd = nc.symbol("x"), nc.symbol("d")
    assert sympy.simplify(nc.cost(d).link.sent - 2 * (P - 1) * x * dd / P) == 0


@proves("device_ring")
def test_device_ring_is_sound():
    rule = device_ring.using(axis="x")
    proof = rule.obligation.discharge(rule, trials=10)
    assert proof.rewrites >= 10 and proof.cost_checked


@proves("device_ring")
def test_device_ring_in_the_zigzag_order_is_sound():
    """The order as the ring rule's parameter: the same function (causal attention among the instances: each piece
    masked at its own positions), the link a ring's at the zigzag shards' sizes, the folds per step those whose
    pieces the causal mask allows."""
    rule = device_ring.using(axis="x", order="zigzag")
    proof = rule.obligation.discharge(rule, trials=10)
    assert proof.rewrites >= 10 and proof.cost_checked


def test_zigzag_mutant_fails_the_obligation(monkeypatch):
    """Chunks (p + 1) mod 2P and 2P − 1 − p for device p (one off: device P − 1 holds chunk P twice, chunk 0 is no
    one's): the instances' outputs or counts differ."""
    from napkin_cat.algorithms.orders import ORDERS, Order
    rule = device_ring.using(axis="x", order="zigzag")
    with monkeypatch.context() as m:
        m.setitem(ORDERS, "zigzag", Order("zigzag", lambda P: 2 * P, lambda p, P: ((p + 1) % (2 * P), 2 * P - 1 - p)))
        with pytest.raises((ObligationError, AssertionError)):
            rule.obligation.discharge(rule, trials=10)


def test_ring_mutants_fail_the_obligation(monkeypatch):
    """A ring whose devices each fold their own shard P times (no shard travels), and link counts in which a device
    sends what it receives (its own shard's size missing instead of its neighbour's), are caught."""
    import importlib
    devices_at = importlib.import_module("napkin_cat.cost.devices_at")
    regions = importlib.import_module("napkin_cat.semantics.regions")
    from napkin_cat.algorithms.ring import ring_link

    rule = device_ring.using(axis="x")
    with monkeypatch.context() as m:
        m.setattr(regions, "ring_shard", lambda p, t, P: p)
        with pytest.raises(ObligationError):
            rule.obligation.discharge(rule, trials=10)

    def symmetric(box, numel, weight=None, device=None, extents=None):
        sent, received, messages = ring_link(box, numel, weight, device, extents)
        return received, received, messages
    with monkeypatch.context() as m:
        m.setattr(devices_at, "ring_link", symmetric)
        with pytest.raises((ObligationError, AssertionError)):
            rule.obligation.discharge(rule, trials=10)
