"""device_gather on a region that computes the positions of the axis it gathers (a causal mask's keys): positions
follow the region's record.  A box carrying a device's shard of an axis reads its positions from the shard's start;
a box carrying the axis whole (gathered) reads them from 0, over the whole axis.  So the gathered region computes
causal attention (before, the keys kept the device's shard start as their offset: the rows of devices 1 … P − 1
attended to key 0 alone), alone and with its keys then passed round a ring in each order.

Each output is checked against numpy written here from the maths; the cost at sizes, whose masks decide which tiles
of a stream run at their positions, against the same region with K and V replicated (whole on every device from the
start: no gathered axis, the positions unambiguous), whose devices do the same work.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.devices import Shard
from napkin_cat.algorithms.orders import ORDERS
from rewrites.devices import device_gather
from rewrites.ring import device_ring

D = 3
#: (devices, sequence length): P = 2, 3, 4, most lengths no multiple of P (ragged shards)
SIZES = [(2, 12), (2, 9), (3, 12), (3, 13), (4, 13), (4, 10)]


def causal(Q, K, V):
    """softmax(Q Kᵀ/√d + causal) V: query i attends to keys 0 … i."""
    s = Q @ K.T / np.sqrt(Q.shape[1])
    s[np.triu_indices(len(Q), 1, len(K))] = -np.inf
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ V


def inputs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, D)) for _ in range(3)]


def gathered(f, P: int):
    """``f`` sharded on the queries over P devices, K and V arriving sharded on the keys and all-gathered."""
    s = nc.shard(f, "q", P)
    (m,) = device_gather.matches(s)                     # offered: the region computes the keys' positions
    g = device_gather.apply(s, m)
    (r,) = [b for b in g.boxes if isinstance(b, Shard)]
    assert r.sharded("dom") == ("q", "x", "x") and [b.name for b in r.arg.boxes][:2] == ["all-gather"] * 2
    return g


@pytest.mark.parametrize("P, n", SIZES)
def test_gathered_causal_attention_equals_numpy(P, n):
    Q, K, V = inputs(n, n + P)
    g = gathered(nc.library.causal_attention(q=n, x=n, d=D), P)
    np.testing.assert_allclose(nc.evaluate(g, Q, K, V), causal(Q, K, V), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("P, n", [(2, 9), (3, 13), (4, 13)])
def test_gathered_then_ringed_in_each_order_equals_numpy(P, n, order):
    """The ring replaces the all-gather (the keys travel instead), in the contiguous and the zigzag order."""
    Q, K, V = inputs(n, n * P)
    ringed = device_ring.using(order=order).apply(gathered(nc.library.causal_attention(q=n, x=n, d=D), P))
    (r,) = [b for b in ringed.boxes if isinstance(b, Shard)]
    assert r.order == order and [b.region for b in r.arg.boxes] == ["ring"]
    np.testing.assert_allclose(nc.evaluate(ringed, Q, K, V), causal(Q, K, V), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("P, n", [(2, 16), (3, 13), (4, 13)])
def test_flash_attention_gathered_skips_the_tiles_the_replicated_one_skips(P, n):
    """FlashAttention inside (queries in groups of 2, keys streamed by 2, the tiles above the diagonal skipped):
    gathered, it equals numpy, and the cost per device (its FLOPs, its transfers) equals that of the region with K, V
    replicated, where no axis is gathered; both are those of the busiest device's rows."""
    f = nc.group(nc.stream(nc.library.causal_attention(q=n, x=n, d=D), "x", 2), "q", 2)
    Q, K, V = inputs(n, 7)
    g = gathered(f, P)
    np.testing.assert_allclose(nc.evaluate(g, Q, K, V), causal(Q, K, V), rtol=1e-12, atol=1e-12)
    whole, made = nc.cost(nc.shard(f, "q", P), sizes={}), nc.cost(g, sizes={})
    assert made.flops == whole.flops and made.H == whole.H
    assert made.flops["special"] < nc.cost(f, sizes={}).flops["special"]       # a device's share, not the whole
