"""device_ulysses rewrites what it offers at every size: on a symbolic program its right-hand side is run where the
heads are fewer than the devices, a device without a head idle between the two all-to-alls (it sends its sequence
shard, computes nothing, receives its rows of every head), as a device without a shard of a region's axis is idle.

The rule's condition cannot see the sizes of a symbolic program (it refuses fewer heads than devices where the sizes
are numbers); the rewrite is the law at every size, so the run handles the empty shard.  Found by the random-program
fuzz: program 248 (n_ops=4) as one kernel, its heads axis ``Q`` of one value at P = 2, raised "the size of axis 'Q'
of 'pos' is Q/2 = 1/2".  Checked against the program on one device (nc.evaluate of the left-hand side) and numpy
written here from the maths; the link per device against P devices exchanging numpy's blocks
(:func:`rewrites.ulysses.exchanged`); a head shard's positions (a part that reads the heads' positions) against
numpy.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.testing import random_program
from rewrites.ulysses import device_ulysses, exchanged


def softmax(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention(Q, K, V):
    """Per head softmax(Q Kᵀ/√d) V and its log-sum-exp."""
    s = np.einsum("hqd,hxd->hqx", Q, K) / np.sqrt(Q.shape[-1])
    m = s.max(-1, keepdims=True)
    return np.einsum("hqx,hxd->hqd", softmax(s), V), (m + np.log(np.exp(s - m).sum(-1, keepdims=True)))[..., 0]


def test_the_fuzz_program_rewrites_to_the_same_function_with_one_head_on_two_devices():
    p = random_program(248, n_ops=4)
    d = nc.kernel(p.diagram)
    (m,) = device_ulysses.matches(d)
    after = device_ulysses.apply(d, m)
    (r,) = after.boxes
    assert r.devices == 2 and p.sizes["Q"] == 1 and r.arg.boxes[0].data.param("scatter") == "Q"
    x = np.random.default_rng(0).normal(size=[p.sizes[a.name] for a in d.dom.inside[0].axes])
    for got, want in zip(nc.evaluate(after, x, sizes=p.sizes), nc.evaluate(d, x, sizes=p.sizes)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert nc.equivalent(d, after, sizes=p.sizes)


@pytest.mark.parametrize("P, h, lse", [(2, 1, False), (3, 2, True), (4, 3, True), (4, 1, False)])
def test_multi_head_attention_with_fewer_heads_than_devices(P, h, lse):
    """q = 5 queries, x = 7 keys, d = 4; each device's link that of P devices exchanging numpy's blocks (the idle
    one's included), the FLOPs per device those of one head (the busiest device's)."""
    f = nc.kernel(nc.library.multi_head_attention(lse=lse))
    d = device_ulysses.using(heads="h", devices=P).apply(f)
    rng = np.random.default_rng(P + h)
    Q, K, V = rng.normal(size=(h, 5, 4)), rng.normal(size=(h, 7, 4)), rng.normal(size=(h, 7, 4))
    got = nc.evaluate(d, Q, K, V)
    want = attention(Q, K, V)
    for g, w in zip(got if lse else (got,), want if lse else want[:1]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    sizes = {"h": h, "q": 5, "x": 7, "d": 4}
    sent, received = [0] * P, [0] * P
    blocks = [(x, 1, 0) for x in (Q, K, V)] + [(o, 0, 1) for o in (want if lse else want[:1])]
    for x, held, scatter in blocks:         # inputs: sequence shards cut along the heads; outputs: back
        s, r = exchanged(np.array_split(x, P, axis=held), scatter)
        sent, received = [a + b for a, b in zip(sent, s)], [a + b for a, b in zip(received, r)]
    c = nc.cost(d, sizes=sizes)
    assert (c.link.sent, c.link.received) == (tuple(sent), tuple(received))
    one = nc.cost(f, sizes={**sizes, "h": 1}).flops
    assert c.flops == one


def test_a_head_shard_reads_its_heads_positions_from_its_start():
    """softmax over s of x · (b + 1), b the heads axis (its positions computed inside the part): each device's head
    shard at its own positions, the idle device's none (P = 3, 2 heads; P = 4, 6 heads: shards 2, 2, 1, 1)."""
    b = nc.Builder(nc.types("b s"))
    (x,) = b.inputs
    w = b(nc.elementwise("shift", "b", const=1, dtype="int32"), b(nc.position("b")))
    y = b(nc.elementwise("mul", "b s, b -> b s"), x, b(nc.cast("b", to="fp32", dtype="int32"), w))
    f = nc.kernel(b.build(b(nc.softmax("b s", over="s"), y)))        # one part: the positions computed inside
    for P, B in ((3, 2), (4, 6), (2, 5)):
        X = np.random.default_rng(B).normal(size=(B, 9))
        d = device_ulysses.using(heads="b", devices=P).apply(f)
        assert "position" in {b.data.kind for b in d.boxes[0].arg.boxes[1].arg.boxes if b.data is not None}
        np.testing.assert_allclose(nc.evaluate(d, X), softmax((np.arange(B) + 1.0)[:, None] * X), rtol=1e-12)
