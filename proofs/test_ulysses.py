"""Ulysses derived by a rule (``rewrites/ulysses.py``, issue 37 item 3 (c)): its obligation on random instances
(sizes that P does not divide, weaves at random positions) at 2, 3 and 4 devices; mutants of the all-to-all fail it;
on multi-head attention and on a softmax over a sequence woven over a batch the values equal ``nc.evaluate`` of the
program on one device and numpy, the link counts equal P devices exchanging blocks (simulated here), and the traffic
is set beside the all-gather form's by formula."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import ObligationError
from napkin_cat.syntax.collectives import Collective
from napkin_cat.syntax.primitive import KINDS
from rewrites.devices import device_fusion, device_gather
from rewrites.ulysses import device_ulysses, ulysses

proves = pytest.mark.proves


def simulate(P, blocks_of: list) -> tuple:
    """P devices exchanging by all-to-all, written from the law: for each array ``(whole, held, scatter)`` device
    ``p`` holds shard ``p`` of ``whole`` along axis ``held`` and sends its shard ``q`` along ``scatter`` to device
    ``q`` (``np.array_split``'s cuts); ``(sent, received)`` per device."""
    sent, received = [0] * P, [0] * P
    for whole, held, scatter in blocks_of:
        for p, mine in enumerate(np.array_split(whole, P, axis=held)):
            for q, block in enumerate(np.array_split(mine, P, axis=scatter)):
                if q != p:
                    sent[p] += block.size
                    received[q] += block.size
    return tuple(sent), tuple(received)


def mha_numpy(Q, K, V):
    s = np.einsum("hqd,hxd->hqx", Q, K) / np.sqrt(Q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("hqx,hxd->hqd", e / e.sum(-1, keepdims=True), V)


@proves("device_ulysses")
@pytest.mark.parametrize("P", [2, 3, 4])
def test_device_ulysses_is_sound(P):
    rule = device_ulysses.using(devices=P)
    proof = rule.obligation.discharge(rule, trials=8, variants=6)
    assert proof.rewrites >= 8 and proof.cost_checked and proof.varied >= 1


def test_mutants_of_the_all_to_all_fail_the_obligation(monkeypatch):
    """An all-to-all that joins the blocks in the wrong device order (device p's block from device P − 1 − q), and
    one whose counts swap sent and received, are caught."""
    kind = KINDS["all_to_all"]
    run, moves = kind.collective.run, kind.collective.moves
    rule = device_ulysses.using(devices=3)

    def reversed_blocks(box, xs, merge):
        return run(box, xs[::-1], merge)
    with monkeypatch.context() as m:
        m.setitem(KINDS, "all_to_all", replace(kind, collective=Collective(reversed_blocks, moves)))
        with pytest.raises(ObligationError, match="unsound"):
            rule.obligation.discharge(rule, trials=8)

    def swapped(box, numel, p, P, weight=None):
        s, r, k = moves(box, numel, p, P, weight)
        return r, s, k
    with monkeypatch.context() as m:
        m.setitem(KINDS, "all_to_all", replace(kind, collective=Collective(run, swapped)))
        with pytest.raises(ObligationError, match="cost claim fails"):
            rule.obligation.discharge(rule, trials=8)


@pytest.mark.parametrize("P,h,q,x", [(2, 4, 6, 6), (3, 5, 7, 8), (4, 6, 9, 5)])
def test_multi_head_attention_sharded_on_the_sequence(P, h, q, x):
    """Q arrives sharded on the queries, K and V on the keys; all-to-all to the heads, attention on each device's
    heads, all-to-all back: equal to one device and numpy; per device, the counts of P devices exchanging blocks."""
    mha = nc.kernel(nc.library.multi_head_attention(h=h, q=q, x=x, d=3))
    d = device_ulysses.using(heads="h", devices=P).apply(mha)
    (region,) = d.boxes
    assert region.axis == "q" and region.sharded("dom") == ("q", "x", "x") and region.sharded("cod") == ("q",)
    assert [b.data.kind for b in region.arg.boxes if not isinstance(b, nc.Region)] == ["all_to_all"] * 4
    rng = np.random.default_rng(P)
    Q, K, V = rng.normal(size=(h, q, 3)), rng.normal(size=(h, x, 3)), rng.normal(size=(h, x, 3))
    got = nc.evaluate(d, Q, K, V)
    assert np.allclose(got, nc.evaluate(mha, Q, K, V)) and np.allclose(got, mha_numpy(Q, K, V))
    link = nc.cost(d, sizes={}).link
    O = np.zeros((h, q, 3))
    assert (link.sent, link.received) == simulate(P, [(Q, 1, 0), (K, 1, 0), (V, 1, 0), (O, 0, 1)])


def test_a_softmax_over_the_sequence_woven_over_a_batch():
    """A program the issue does not name: softmax over s, woven over b, s sharded; b is found as the heads."""
    P, b, s = 3, 5, 7
    f = nc.softmax("b s", over="s", b=b, s=s)
    d = device_ulysses.using(devices=P).apply(f)
    (region,) = d.boxes
    assert region.axis == "s"
    X = np.random.default_rng(1).normal(size=(b, s))
    e = np.exp(X - X.max(-1, keepdims=True))
    assert np.allclose(nc.evaluate(d, X), e / e.sum(-1, keepdims=True))
    assert np.allclose(nc.evaluate(d, X), nc.evaluate(f, X))
    link = nc.cost(d, sizes={}).link
    assert (link.sent, link.received) == simulate(P, [(X, 1, 0), (X, 0, 1)])


def test_its_neighbours_sharded_on_the_sequence_fuse_with_it():
    """exp sharded on s, then the softmax by Ulysses: device_fusion joins them in one region (the exp's s shards go
    straight into the all-to-all, nothing gathered)."""
    P = 2
    f = nc.shard(nc.elementwise("exp", "b s"), "s", devices=P) >> nc.softmax("b s", over="s")
    d = device_ulysses.using(heads="b", devices=P).apply(f)
    fused = device_fusion.apply(d)
    (region,) = fused.boxes
    assert [b.data.kind for b in region.arg.boxes] == ["exp", "all_to_all", "softmax", "all_to_all"]
    X = np.random.default_rng(2).normal(size=(4, 5))
    e = np.exp(np.exp(X) - np.exp(X).max(-1, keepdims=True))
    assert np.allclose(nc.evaluate(fused, X), e / e.sum(-1, keepdims=True))


@pytest.mark.parametrize("P", [2, 4, 8])
def test_ulysses_moves_2_over_p_of_the_all_gather_for_attention(P):
    """With n queries and n keys, per device Ulysses sends 4 arrays' (P − 1)/P² each (Q, K, V in, O out):
    4 (P − 1) h n d / P²; the all-gather of K and V (queries sharded) sends 2 (P − 1) h n d / P; the ratio is 2/P:
    less for P > 2, equal at P = 2."""
    h, n, d = nc.symbol("h"), nc.symbol("n"), nc.symbol("d")
    mha = nc.library.multi_head_attention(q=n, x=n)
    ulysses = nc.cost(device_ulysses.using(heads="h", devices=P).apply(nc.kernel(mha))).link
    gathered = nc.cost(device_gather.using(axis="x").apply(nc.shard(mha, "q", devices=P))).link
    assert sympy.simplify(ulysses.sent - 4 * (P - 1) * h * n * d / P ** 2) == 0
    assert sympy.simplify(ulysses.received - ulysses.sent) == 0
    assert sympy.simplify(gathered.sent - 2 * (P - 1) * h * n * d / P) == 0
    assert sympy.simplify(ulysses.sent / gathered.sent - sympy.Rational(2, P)) == 0


def test_bad_input_is_a_typed_error_naming_the_axis():
    with pytest.raises(nc.RewriteError, match="'h' has fewer values than the 4 devices"):
        ulysses(nc.kernel(nc.library.multi_head_attention(h=3)).boxes[0], "h", 4)
    with pytest.raises(nc.RewriteError, match="s e does not carry the heads axis 'b'"):
        ulysses(nc.einsum("b s, s e -> b e").boxes[0], "b", 2)



def test_a_box_that_reads_no_input_is_refused_by_name():
    """A box with no input (a position: the rule-offer fuzz found an IndexError there) has nothing to exchange."""
    with pytest.raises(nc.RewriteError, match="pos reads no input"):
        ulysses(nc.position("b").boxes[0])
    assert not list(device_ulysses.matches(nc.position("b")))
