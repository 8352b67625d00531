"""A ring of values computed on the shards (issue 37, ``device_ring_gathered``), found by the device search and run on
torch.distributed (gloo, P = 2 and 4, ragged shards): causal self-attention from its projections, the transformer
block (K and V projected from each device's tokens, then passed round while attention folds them), and attention
whose keys are a projection ``x W_k`` of an input sharded along them.

Each checked by a second route: the outputs against numpy written here from the maths (and ``nc.evaluate`` of the
one-device program); the ranks' counted link traffic against the cost functor and against the ring's law counted here
from numpy's shards (device p sends every slice but device p + 1's, receives every one but its own, P − 1 messages
per travelling array), the values received equal to the all-gather form's; under the causal mask the folds each
device runs per step against numpy's count of the (query shard, key shard) pairs the mask allows."""
from __future__ import annotations

import numpy as np

import napkin_cat as nc
from napkin_cat.search.devices import device_forms
from rewrites.ring import allowed_folds
from rewrites.ring_gathered import self_attention_from_projections


def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def forms_of(f, P):
    return {g.label: g for g in device_forms(f, P) if g.refused is None}


def ring_law(streamed_rows, n, P):
    """``(sent, received, messages)`` per device of a ring of ``len(streamed_rows)`` arrays of ``n`` positions (each
    ``rows`` values a position), cut as np.array_split cuts."""
    cut = [len(c) for c in np.array_split(np.arange(n), P)]
    sent = tuple(sum(r * (n - cut[(p + 1) % P]) for r in streamed_rows) for p in range(P))
    received = tuple(sum(r * (n - cut[p]) for r in streamed_rows) for p in range(P))
    return sent, received, (len(streamed_rows) * (P - 1),) * P


def check_run(world, d, xs, expected, sizes):
    P = world.size
    r = nc.distributed.run(d, *xs, world_size=P, world=world)
    assert np.allclose(r.outputs[0], expected)
    assert np.allclose(r.outputs[0], nc.evaluate(d, *xs))
    c = nc.cost(d, sizes=sizes).link
    assert (r.link.sent, r.link.received, r.link.messages) == (c.sent, c.received, c.messages)
    return r


def test_causal_self_attention_rings_its_projected_keys(world):
    P, n, e, dd = world.size, 9, 3, 2
    f = self_attention_from_projections(causal=True)
    forms = forms_of(f, P)
    d = forms["shard n: ring m (computed)"].diagram
    assert forms["shard n: ring m (computed)"].trace.replay(f) == d
    rng = np.random.default_rng(P)
    X, Wq, Wk, Wv = rng.normal(size=(n, e)), *(rng.normal(size=(e, dd)) for _ in range(3))
    s = (X @ Wq) @ (X @ Wk).T / np.sqrt(dd)
    s[np.triu_indices(n, 1)] = -np.inf
    sizes = {"n": n, "e": e, "d": dd}
    r = check_run(world, d, (X, Wq, Wk, Wv), softmax(s) @ (X @ Wv), sizes)
    assert (r.link.sent, r.link.received, r.link.messages) == ring_law([dd, dd], n, P)
    gather = forms["shard n: all-gather n ×2"]
    assert nc.cost(gather.diagram, sizes=sizes).link.received == r.link.received
    pieces = [((a, b),) for a, b in zip(*[np.cumsum([0] + [len(c) for c in np.array_split(np.arange(n), P)])[i:]
                                           for i in (0, 1)])][:P]
    assert nc.cost(d, sizes=sizes).link.trips == allowed_folds(pieces, pieces, True)


def test_the_transformer_block_rings_k_and_v(world):
    P, rng = world.size, np.random.default_rng(10 + world.size)
    n, e, h, dd, ff = 7, 4, 2, 2, 3
    f = nc.library.transformer_block()
    forms = forms_of(f, P)
    ring = forms["shard n ; shard n ; shard n: ring m (computed) ; shard n ; shard n"]
    shapes = [(n, e), (e,), (e,), (e, h, dd), (e, h, dd), (e, h, dd), (h, dd, e), (e,), (e,), (e, ff), (ff,),
              (ff, e), (e,)]
    xs = [rng.normal(size=s) for s in shapes]
    X, g1, b1, Wq, Wk, Wv, Wo, g2, b2, W1, c1, W2, c2 = xs

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b
    x1 = ln(X, g1, b1)
    Q, K, V = (np.einsum("ne,ehd->hnd", x1, W) for W in (Wq, Wk, Wv))
    A = softmax(np.einsum("hnd,hmd->hnm", Q, K) / np.sqrt(dd)) @ V
    Y = X + np.einsum("hnd,hde->ne", A, Wo)
    u = ln(Y, g2, b2) @ W1 + c1
    gelu = np.asarray(nc.evaluate(nc.elementwise("gelu", "n f"), u))
    expected = Y + gelu @ W2 + c2
    sizes = {"n": n, "e": e, "h": h, "d": dd, "f": ff}
    r = check_run(world, ring.diagram, xs, expected, sizes)
    assert (r.link.sent, r.link.received, r.link.messages) == ring_law([h * dd, h * dd], n, P)
    gather = forms["shard n ; shard n ; shard n: all-gather n ×2 ; shard n ; shard n"]
    assert nc.cost(gather.diagram, sizes=sizes).link.received == r.link.received
    long = {**sizes, "n": 1024}              # K and V whole held by the gather, a slice and a slot by the ring
    held = [max(nc.cost(g.diagram, sizes=long).link.held) for g in (ring, gather)]
    assert held[0] < held[1]


def test_attention_rings_keys_projected_from_a_sharded_input(world):
    """K = X W_k with X arriving sharded along the keys (the gather form moved past the projection by the scatter
    rules): each device projects its own slice of X once, and K's slices travel with V's."""
    P, rng = world.size, np.random.default_rng(20 + world.size)
    b = nc.Builder(nc.types("q d, x e, e d, x d"))
    Q, X, Wk, V = b.inputs
    f = b.build(b(nc.library.attention(), Q, b(nc.einsum("x e, e d -> x d"), X, Wk), V))
    forms = forms_of(f, P)
    d = forms["shard q: ring x (computed)"].diagram
    q, x, e, dd = 5, 7, 6, 2
    xs = [rng.normal(size=s) for s in [(q, dd), (x, e), (e, dd), (x, dd)]]
    expected = softmax(xs[0] @ (xs[1] @ xs[2]).T / np.sqrt(dd)) @ xs[3]
    r = check_run(world, d, xs, expected, {"q": q, "x": x, "e": e, "d": dd})
    assert (r.link.sent, r.link.received, r.link.messages) == ring_law([dd, dd], x, P)     # K's d, not X's e
