"""The zigzag order of a device region's shards (issue 37): device p holds chunks p and 2P − 1 − p of 2P, of the
queries and of the keys that travel round the ring.  Each claim by a second route: the outputs against numpy's
causal attention from the maths, the folds each device runs per ring step against numpy's count of the (query
chunk, key chunk) pairs the causal mask leaves non-empty, the link counts against a ring simulated step by step, the
time model's ring compute against the slowest device of each step read off the cost; and mutants of the library
(chunks p and 2P − p, the mean over devices for the max) fail them."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.orders import ORDERS, Order
from napkin_cat.errors import ArgumentError, DeviceError
from rewrites.ring import simulate_ring

programtime = importlib.import_module("napkin_cat.hardware.programtime")


def causal(Q, K, V):
    """softmax(Q Kᵀ/√d + causal) V, from the maths."""
    s = Q @ K.T / np.sqrt(Q.shape[1])
    s[np.triu_indices(len(Q), 1, len(K))] = -np.inf
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ V


def chunks_of(n: int, P: int, zigzag: bool) -> list:
    """Per device the positions of its chunks (numpy's cut): zigzag: chunks p and 2P − 1 − p of 2P; contiguous:
    chunk p of P."""
    if not zigzag:
        return [[c] for c in np.array_split(np.arange(n), P)]
    cut = np.array_split(np.arange(n), 2 * P)
    return [[cut[p], cut[2 * P - 1 - p]] for p in range(P)]


def nonempty_pairs(n: int, P: int, zigzag: bool) -> tuple:
    """Per device and ring step, how many (query chunk, key chunk) pairs hold a pair the causal mask allows: device
    p at step t holds device (p − t) mod P's keys; the mask built whole by numpy (np.tril) and read per block."""
    allowed = np.tril(np.ones((n, n), dtype=bool))
    ch = chunks_of(n, P, zigzag)
    return tuple(tuple(sum(bool(allowed[np.ix_(qc, kc)].any()) for qc in ch[p] for kc in ch[(p - t) % P])
                       for t in range(P)) for p in range(P))


def ring_attention(P, order, f=None):
    return nc.ring(nc.shard(f or nc.library.causal_attention(), "q", devices=P, order=order), "x")


@pytest.mark.parametrize("P, n", [(2, 9), (3, 13), (4, 10), (4, 19)])
def test_zigzag_ring_attention_is_causal_attention(P, n):
    """Sizes no multiple of 2P (ragged chunks): each piece of each shard is masked at its own positions."""
    rng = np.random.default_rng(n)
    Q, K, V = (rng.normal(size=(n, 4)) for _ in range(3))
    d = ring_attention(P, "zigzag")
    region = d.boxes[0]
    assert region.order == "zigzag" and region.arg.boxes[0].order == "zigzag"
    got = nc.evaluate(d, Q, K, V)
    assert np.allclose(got, causal(Q, K, V))
    assert np.allclose(got, nc.evaluate(nc.library.causal_attention(), Q, K, V))
    sharded = nc.shard(nc.library.causal_attention(), "q", devices=P, order="zigzag")     # K, V replicated
    assert np.allclose(nc.evaluate(sharded, Q, K, V), causal(Q, K, V))


def test_zigzag_ring_of_flash_attention_reads_the_pieces_positions():
    """FlashAttention inside each step (queries in groups of 2, keys streamed by 2, causal tiles skipped): the
    groups of a device's two query chunks sit at their own positions."""
    flash = nc.group(nc.stream(nc.kernel(nc.library.causal_attention()), "x", "s_x"), "q", "g_q")
    d = ring_attention(3, "zigzag", flash)
    rng = np.random.default_rng(1)
    Q, K, V = (rng.normal(size=(14, 4)) for _ in range(3))
    assert np.allclose(nc.evaluate(d, Q, K, V, sizes={"s_x": 2, "g_q": 2}), causal(Q, K, V))


def test_zigzag_ring_of_document_attention_reads_each_pieces_document_ids():
    """Causal document attention (query q sees key x ≤ q of its own document: ids as inputs along q and x, cut into
    the pieces with the queries and keys): numpy's, from the maths."""
    P, n = 3, 14
    rng = np.random.default_rng(2)
    Q, K, V = (rng.normal(size=(n, 4)) for _ in range(3))
    docs = np.sort(rng.integers(0, 3, size=n)).astype(np.int32)
    s = Q @ K.T / 2.0
    s[~((docs[:, None] == docs[None, :]) & np.tril(np.ones((n, n), dtype=bool)))] = -np.inf
    e = np.exp(s - s.max(-1, keepdims=True))
    d = ring_attention(P, "zigzag", nc.library.document_attention(causal=True))
    assert np.allclose(nc.evaluate(d, Q, K, V, docs, docs), (e / e.sum(-1, keepdims=True)) @ V)


def test_too_few_values_for_the_chunks_and_an_unknown_order_are_refused_by_name():
    with pytest.raises(DeviceError, match=r"'q'.*8 chunks over 4 devices.*7 values"):
        nc.shard(nc.library.causal_attention(q=7, x=7, d=4), "q", devices=4, order="zigzag")
    d = ring_attention(4, "zigzag")
    with pytest.raises(DeviceError, match=r"8 chunks"):
        nc.cost(d, sizes={"q": 7, "x": 7, "d": 4})
    with pytest.raises(ArgumentError, match=r"'zig'.*contiguous.*zigzag"):
        nc.shard(nc.library.causal_attention(), "q", devices=2, order="zig")


@pytest.mark.parametrize("P, n", [(2, 9), (3, 12), (4, 16), (4, 21)])
def test_folds_per_device_and_step_are_numpys_nonempty_pairs(P, n):
    """Zigzag: every device the same 2P + 1 folds that do work (with ragged chunks too); contiguous: device p
    p + 1, so the slowest device does P."""
    sizes = {"q": n, "x": n, "d": 4}
    zig, plain = (nc.cost(ring_attention(P, o), sizes=sizes).link for o in ("zigzag", "contiguous"))
    assert zig.trips == nonempty_pairs(n, P, True)
    assert plain.trips == nonempty_pairs(n, P, False)
    assert {sum(t) for t in zig.trips} == {2 * P + 1}
    assert [sum(t) for t in plain.trips] == [p + 1 for p in range(P)]
    if n % (2 * P) == 0:           # equal chunks: every fold of a zigzag ring does the same work
        per_fold = {w / k for ws, ks in zip(zig.work, zig.trips) for w, k in zip(ws, ks) if k}
        assert len(per_fold) == 1 and {sum(w) for w in zig.work} == {(2 * P + 1) * per_fold.pop()}


@pytest.mark.parametrize("P, n", [(2, 9), (4, 10)])
def test_the_link_is_the_zigzag_shards_passed_round(P, n):
    """The volume is a ring's, each shard the size of its two chunks (numpy's cut), simulated step by step; the
    memory held is the contiguous order's (the largest shard is as large)."""
    d = ring_attention(P, "zigzag")
    link = nc.cost(d, sizes={"q": n, "x": n, "d": 4}).link
    extents = [sum(len(c) for c in ch) for ch in chunks_of(n, P, True)]
    sent, received, messages, _ = simulate_ring(extents, [4, 4])
    assert (link.sent, link.received, link.messages) == (sent, received, messages)
    plain = nc.cost(ring_attention(P, "contiguous"), sizes={"q": n, "x": n, "d": 4}).link
    assert max(link.held) == max(plain.held)
    assert nc.cost(d).link.sent == nc.cost(ring_attention(P, "contiguous")).link.sent
    unmasked = nc.cost(ring_attention(P, "zigzag", nc.library.attention())).link
    assert sympy.simplify(unmasked.trips - 4 * P) == 0          # symbolically: P steps of 2 × 2 pieces


def test_the_time_model_charges_each_step_its_slowest_device():
    """Ring compute = Σ_t max_p work[p][t] / rate: the contiguous causal ring's last device does every step's most
    work, so it is more than the mean device's; the zigzag ring's devices are equal, so it is their work."""
    P, n = 4, 16
    c = nc.hardware.cluster("h100-sxm5", devices=P, link="nvlink4")
    rate = c.gpu.peak("tensor", "fp32")
    sizes = {"q": n, "x": n, "d": 4}
    for order in ("contiguous", "zigzag"):
        d = ring_attention(P, order)
        work = np.array(nc.cost(d, sizes=sizes).link.work)          # device × step
        ring = nc.hardware.predict_program(c, d, sizes=sizes, rate=rate).phases[0]
        assert ring.label == "ring"
        assert ring.compute == pytest.approx(float(work.max(0).sum() / rate), rel=1e-12)
        if order == "contiguous":
            assert work.max(0).sum() > work.mean(0).sum()
            assert list(work.sum(1)) == sorted(work.sum(1)) and work.sum(1)[0] < work.sum(1)[-1]
        else:
            assert len(set(work.sum(1))) == 1
    fixed = nc.hardware.predict_program(c, ring_attention(P, "zigzag"), sizes=sizes, compute=1e-3).phases[0]
    assert fixed.compute == pytest.approx(1e-3, rel=1e-12)        # balanced: compute is every device's


# ---------------------------------------------------------------------------------------------------- mutants
def test_mutants_fail_these_checks(monkeypatch):
    """Chunks p and 2P − p (off by one: device 0 would hold chunk 2P, past the last) and the mean over devices for
    the max: each fails the checks above."""
    with monkeypatch.context() as m:
        m.setitem(ORDERS, "zigzag", Order("zigzag", lambda P: 2 * P, lambda p, P: (p, 2 * P - p)))
        with pytest.raises((AssertionError, IndexError, ValueError)):
            test_zigzag_ring_attention_is_causal_attention(2, 9)
        with pytest.raises((AssertionError, IndexError, ValueError)):
            test_folds_per_device_and_step_are_numpys_nonempty_pairs(4, 16)
    with monkeypatch.context() as m:
        m.setattr(programtime, "slowest_steps",
                  lambda link: [] if link is None or not link.work else
                  [sympy.Rational(sum(w[t] for w in link.work), len(link.work)) for t in range(len(link.work[0]))])
        with pytest.raises(AssertionError):
            test_the_time_model_charges_each_step_its_slowest_device()
