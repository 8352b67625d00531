"""The device rules keep a region's order (issue 37), and the walks reach the zigzag ring.

A region in the zigzag order (device p holds chunks p and 2P − 1 − p of 2P) rewritten by a device rule stays in it
where the rule can keep it, and is not offered where it cannot: two regions in different orders hold different shards
on a device (not fused), and an all-gather joins contiguous shards (no region in the zigzag order holds one, so
``device_gather`` and a fusion that would gather are not offered there).  Each rewrite's outputs are checked against
numpy written here from the maths, each region's shards against the definition of the order; the walks of
:func:`~napkin_cat.testing.rule_walk.check_rules` and of the search fuzz offer the ring in every order, and a walk at a
fixed seed reaches a zigzag ring whose end is equivalent to its start.
"""
from __future__ import annotations

import collections

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.devices import Shard
from napkin_cat.algorithms.device_shards import device_shards
from napkin_cat.algorithms.orders import ORDERS
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.rewriting import RuleSet
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.registry import Rulebook, rulebook
from napkin_cat.testing import Program
from napkin_cat.testing.rule_walk import check_rules
from napkin_cat.testing.offers import in_every_order
from rewrites.devices import device_fusion, device_gather, device_partition, device_reduction
from rewrites.generation import device_generation
from rewrites.ring import device_ring
from rewrites.ulysses import device_ulysses

D = 3


def causal(Q, K, V):
    """softmax(Q Kᵀ/√d + causal) V, from the maths."""
    s = Q @ K.T / np.sqrt(Q.shape[1])
    s[np.triu_indices(len(Q), 1, len(K))] = -np.inf
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ V


def zigzag_positions(n: int, P: int) -> list:
    """Per device its positions under zigzag, from the definition: chunks p and 2P − 1 − p of np.array_split's 2P."""
    c = np.array_split(np.arange(n), 2 * P)
    return [[*c[p], *c[2 * P - 1 - p]] for p in range(P)]


def regions(d) -> list:
    return [b for b in d.boxes if isinstance(b, Shard)]


def two_regions(n: int, P: int, first: str, second: str):
    """Causal attention sharded on the queries, then exp of its output sharded on the queries: two regions."""
    att = nc.shard(nc.library.causal_attention(q=n, x=n, d=D), "q", P, order=first)
    return att >> nc.shard(nc.elementwise("exp", "q d", q=n, d=D), "q", P, order=second)


def inputs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, D)) for _ in range(3)]


def reasons(rule, d) -> list:
    """Why each candidate of ``rule`` in ``d`` is not offered (its failing condition's message)."""
    return [rule.failure(m)[1] for m in rule.candidates(to_netlist(d)) if rule.failure(m) is not None]


@pytest.mark.parametrize("P, n", [(2, 9), (3, 13)])
def test_fusing_two_zigzag_regions_keeps_the_order(P, n):
    """Sizes no multiple of 2P: ragged chunks.  The fused region holds both parts in the zigzag order, each device
    the definition's positions, and computes exp(causal attention)."""
    d = two_regions(n, P, "zigzag", "zigzag")
    (m,) = device_fusion.matches(d)
    (fused,) = regions(device_fusion.apply(d, m))
    assert fused.order == "zigzag"
    shards = device_shards(schedule_of(fused), int)
    assert [s["q"].positions().tolist() for s in shards] == zigzag_positions(n, P)
    Q, K, V = inputs(n, n)
    np.testing.assert_allclose(nc.evaluate(device_fusion.apply(d, m), Q, K, V), np.exp(causal(Q, K, V)), rtol=1e-12)


def test_regions_in_different_orders_are_not_fused():
    """A device's zigzag shard is not its contiguous one: the fusion is not offered, its reason names both orders;
    the same regions in one order are fused."""
    for first, second in (("zigzag", "contiguous"), ("contiguous", "zigzag")):
        d = two_regions(9, 2, first, second)
        assert device_fusion.matches(d) == []
        (why,) = reasons(device_fusion, d)
        assert "zigzag order" in why and "contiguous order" in why, why
    assert len(device_fusion.matches(two_regions(9, 2, "contiguous", "contiguous"))) == 1


def test_a_fusion_that_would_gather_in_a_zigzag_region_is_not_offered():
    """A box read after the region needs its output whole: an all-gather inside, which a zigzag region cannot hold.
    In the contiguous order the fusion is offered and computes exp(causal attention)."""
    n, P = 9, 2
    att = nc.library.causal_attention(q=n, x=n, d=D)
    after = nc.elementwise("exp", "q d", q=n, d=D)
    zig = nc.shard(att, "q", P, order="zigzag") >> after
    assert device_fusion.matches(zig) == []
    assert any("no device region along 'q' in the zigzag order" in why for why in reasons(device_fusion, zig))
    flat = nc.shard(att, "q", P) >> after
    (m,) = device_fusion.matches(flat)
    made = device_fusion.apply(flat, m)
    Q, K, V = inputs(n, 1)
    assert [b.data.kind for b in regions(made)[0].arg.boxes if b.data is not None].count("all_gather") == 1
    np.testing.assert_allclose(nc.evaluate(made, Q, K, V), np.exp(causal(Q, K, V)), rtol=1e-12)


def test_gather_is_not_offered_on_a_zigzag_region():
    """device_gather puts an all-gather inside: offered on the contiguous region (and computing attention), not on
    the zigzag one, with the reason; the zigzag region's keys travel by the ring instead, in its order."""
    n, P = 12, 3
    f = nc.library.causal_attention(q=n, x=n, d=D)
    Q, K, V = inputs(n, 2)
    zig = nc.shard(f, "q", P, order="zigzag")
    assert device_gather.matches(zig) == []
    assert any("the collective 'all-gather' inside assumes contiguous shards" in why
               for why in reasons(device_gather, zig))
    gathered = device_gather.apply(nc.shard(f, "q", P))     # the gathered keys at their global positions
    np.testing.assert_allclose(nc.evaluate(gathered, Q, K, V), causal(Q, K, V), rtol=1e-12)
    ringed = device_ring.apply(zig)            # without order=: the region's own
    (r,) = regions(ringed)
    assert r.order == "zigzag" and r.sharded("dom") == ("q", "x", "x")
    shards = device_shards(schedule_of(r), int)
    assert [s["x"].positions().tolist() for s in shards] == zigzag_positions(n, P)
    np.testing.assert_allclose(nc.evaluate(ringed, Q, K, V), causal(Q, K, V), rtol=1e-12)


def test_ulysses_and_the_partitions_take_no_zigzag_region():
    """Their pattern is a box at level 0: a device region is none, so a zigzag region is never rebuilt by them (their
    regions hold collectives or are new, contiguous)."""
    zig = nc.shard(nc.kernel(nc.library.multi_head_attention(q=8, x=8, d=2, h=4)), "q", 2, order="zigzag")
    for rule in (device_ulysses, device_partition, device_reduction):
        assert rule.matches(zig) == [], rule.name


# ---------------------------------------------------------------------- the walks
DEVICE_BOOK = Rulebook("devices-orders", RuleSet((device_partition, device_reduction, device_fusion, device_gather,
                                                  device_generation, device_ring, device_ulysses)),
                       roles={"ring": "device_ring"})


def test_the_walks_offer_the_ring_in_every_order():
    book = rulebook()
    assert [dict(r.params)["order"] for r in in_every_order(book.role("ring"), book.roles)] == list(ORDERS)
    assert all(in_every_order(r, book.roles) == [] for r in book.rules if r.name != book.roles["ring"])


def test_a_walk_at_a_fixed_seed_reaches_a_zigzag_ring():
    """check_rules' walk over the device rules from causal attention in one kernel: each step's offered matches
    rewrite and replay, the end is equivalent to the start (nc.equivalent against the start's numpy run), and the
    walk made a ring in the zigzag order (counted by its outcomes)."""
    source = "nc.kernel(nc.library.causal_attention(q=8, x=8, d=2))"
    p = Program(eval(source), {}, source, None, seed=0)
    tally = collections.Counter(check_rules(p, seed=SEED, steps=4, book=DEVICE_BOOK))
    assert tally["equivalent"] == 1 and tally["applied"] >= 2, tally
    assert tally["ring zigzag"] >= 1, tally


SEED = 0
