"""device_gather offers only what it rewrites: a region computing the positions of the axis it would gather (a
causal mask's keys) is not offered (gathered whole, the positions kept the device's shard start as their offset:
rows of devices 1 … P−1 attended to key 0 alone); without positions the gather equals numpy's attention."""
import numpy as np

import napkin_cat as nc
from rewrites.devices import device_gather


def attention(Q, K, V, causal):
    s = Q @ K.T / np.sqrt(Q.shape[1])
    if causal:
        s[np.triu_indices(len(Q), 1, len(K))] = -np.inf
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ V


def test_a_region_computing_the_gathered_axis_positions_is_not_offered():
    n, P = 12, 3
    Q, K, V = (np.random.default_rng(0).normal(size=(n, 3)) for _ in range(3))
    s = nc.shard(nc.library.causal_attention(q=n, x=n, d=3), "q", P)
    assert np.allclose(nc.evaluate(s, Q, K, V), attention(Q, K, V, causal=True))
    assert device_gather.matches(nc.engine.to_netlist(s)) == []


def test_without_positions_the_gather_is_offered_and_equals_numpy():
    n, P = 11, 3
    Q, K, V = (np.random.default_rng(1).normal(size=(n, 3)) for _ in range(3))
    s = nc.shard(nc.library.attention(q=n, x=n, d=3), "q", P)
    g = device_gather.apply(s)
    assert [b.name for b in g.boxes[0].arg.boxes][:2] == ["all-gather", "all-gather"]
    assert np.allclose(nc.evaluate(g, Q, K, V), attention(Q, K, V, causal=False))
