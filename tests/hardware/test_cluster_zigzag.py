"""nc.derive on a cluster offers the ring in every order (issue 37 item 3(b)): under a causal mask each ring step is
charged its slowest device, so the zigzag ring is chosen (without a mask the contiguous one:
test_cluster_derive.test_memory_forces_the_ring).

Second routes: the ratio of the two rings' compute against numpy's count of the slowest device's area per step in
the blocks of the per-device algorithm's tiles that the causal mask lets run (np.array_split's cut, the order's
pieces, each cut from its start into those tiles); the chosen program's
values against numpy's causal attention at ragged sizes.  The long sequence is forced onto the rings by the devices'
memory (one device and the all-gather refused before their algorithms are derived), so the derive times two
forms (about 9 s on one core with compute="transfers"; NAPKIN_SLOW=1: every form the rules make, 11 s).
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.orders import ORDERS
from napkin_cat.hardware.clustered import by_transfers
from napkin_cat.hardware.local_programs import local_parts
from napkin_cat.hardware.ringcharge import algorithm_tiles
from napkin_cat.hardware.devices import Cluster
from napkin_cat.search.devices import device_forms

P, N, D = 4, 8192, 128
SIZES = {"q": N, "x": N, "d": D}
SEQUENCE = ("q", "x", "x")
FAST = {"compute": "transfers", "cache": {}}
PLAIN, ZIGZAG = "shard q: ring x", "shard q (zigzag): ring x"


def ring_only(f):
    """A cluster of 4 H100 whose devices hold a ring's shards but not K and V whole (the all-gather's)."""
    h100 = nc.hardware.load("h100-sxm5")
    gather = (N // P + 2 * N) * D * 4            # Q's shard, K and V whole, fp32
    return Cluster(dataclasses.replace(h100, gmem=gather - 1), P, nc.hardware.load_link("nvlink4"))


def rows(r) -> dict:
    return {c.label: c for c in r.candidates}


def area_run(qp, kp, tq: int, tx: int) -> int:
    """The area of the (tq × tx) blocks of queries ``qp`` × keys ``kp`` (each cut from its start) the causal mask
    lets run: a block runs where its first key is at or before its last query."""
    if not len(qp) or not len(kp):
        return 0
    ks = kp[::tx]
    kl = np.diff(np.append(np.arange(0, len(kp), tx), len(kp)))
    return int(sum(len(qb) * kl[ks <= qb[-1]].sum() for qb in np.array_split(qp, range(tq, len(qp), tq))))


def slowest_area(order: str, n: int, P: int, tiles=None) -> int:
    """Σ over ring steps of the most query × key values any device runs at that step among its pieces, cut into
    blocks of ``tiles`` (``{"q": tq, "x": tx}``; None: each piece one block), the causal mask skipping the blocks
    whose first key is after their last query, by numpy."""
    o = ORDERS[order]
    cut = np.array_split(np.arange(n), o.chunks(P))
    pieces = [[cut[c] for c in o.pieces(p, P)] for p in range(P)]
    tq, tx = (n, n) if tiles is None else (tiles["q"], tiles["x"])
    total = 0
    for t in range(P):
        total += max(sum(area_run(qp, kp, tq, tx) for qp in pieces[p] for kp in pieces[(p - t) % P])
                     for p in range(P))
    return total


def test_the_ring_is_offered_in_every_order():
    f = nc.library.causal_attention()
    forms = {m.label: m for m in device_forms(f, P)}
    assert [label for label in forms if label.startswith("shard q") and label.endswith(": ring x")] == [PLAIN, ZIGZAG]
    zigzag = forms[ZIGZAG]
    assert zigzag.refused is None and zigzag.trace.replay(f) == zigzag.diagram
    assert zigzag.trace.steps[-1].params == (("axis", "x"), ("order", "zigzag"))
    # the positions are each device's own: a mask of them skips folds (the contiguous ring's device 0 folds 1 of 4)
    assert nc.cost(forms[PLAIN].diagram, sizes=SIZES).link.trips[0] == (1, 0, 0, 0)


def on_the_queries(f) -> list:
    """The forms the rules make of ``f`` on one device and sharded along the queries (the others, sharded along the
    keys or the head dimension, hold more than a ring: each refused for memory; timed under NAPKIN_SLOW)."""
    every = device_forms(f, P)
    return every if os.environ.get("NAPKIN_SLOW") else [m for m in every if m.label.split(":")[0] in (
        "one device", "shard q", "shard q (zigzag)")]


def device_areas(order: str, n: int, P: int, tiles) -> list:
    """Per device and ring step, the query × key area its pieces run against the step's shard, in blocks of
    ``tiles``, the causal mask skipping the blocks after the diagonal (numpy, as :func:`slowest_area`)."""
    o = ORDERS[order]
    cut = np.array_split(np.arange(n), o.chunks(P))
    pieces = [[cut[c] for c in o.pieces(p, P)] for p in range(P)]
    return [[sum(area_run(qp, kp, tiles["q"], tiles["x"]) for qp in pieces[p] for kp in pieces[(p - t) % P])
             for t in range(P)] for p in range(P)]


def test_causal_attention_takes_the_zigzag_ring():
    """32 heads of 4096 causal queries: 256 query blocks of 128 per device fill the H100's 132 SMs, so a device's
    time follows its work and the balanced ring wins (one head: test_joined_pieces.py, a device's two pieces timed
    as one program)."""
    heads, n = 32, 4096
    f = nc.weave(nc.library.causal_attention(), "h", h=heads)
    sizes = {"q": n, "x": n, "d": D}
    h100 = nc.hardware.load("h100-sxm5")
    # between a ring's memory (Q's, O's, K's and V's shards and two slots: 6n/P rows) and the all-gather's (Q's and
    # O's shards, K and V whole: 2n/P + 2n rows), of 32 heads of 128 fp32 values
    c = Cluster(dataclasses.replace(h100, gmem=2 * n * D * 4 * heads), P, nc.hardware.load_link("nvlink4"))
    forms = [m for m in on_the_queries(f) if "all-to-all" not in m.label]
    r = nc.derive(f, sizes=sizes, hardware=c, layout=SEQUENCE, forms=forms, **FAST)
    got = rows(r)
    assert got["one device"].refused.startswith("memory") and got["shard q: all-gather x ×3"].refused.startswith(
        "memory")
    plain, zigzag = got[PLAIN], got[ZIGZAG]
    assert r.label == ZIGZAG and zigzag.time < plain.time
    assert r.trace.replay(f) == r.diagram
    # numpy: the device of most work over the steps is the one timed (the last one in the contiguous order; in the
    # zigzag order every device does the same work, the first is taken), and it is the slowest at every step, so the
    # ring's compute is exactly that device's predicted seconds: Σ_t max_p area[p][t] = Σ_t area[busiest][t]
    tiles = algorithm_tiles(r.local)
    assert {"q", "x"} <= set(tiles) and tiles["q"] < n // P
    for row, order in ((plain, "contiguous"), (zigzag, "zigzag")):
        area = np.array(device_areas(order, n, P, tiles))
        b = int(np.argmax(area.sum(1)))
        assert b == (P - 1 if order == "contiguous" else 0) and (area[b] == area.max(0)).all()
        if order == "zigzag":
            assert (area.sum(1) == area[0].sum()).all()                       # balanced
        ring = next(p for p in row.prediction.phases if p.label == "ring")
        assert ring.compute == pytest.approx(row.compute, rel=1e-9)
        # that device's programs timed apart, one per piece: the same seconds
        env = nc.Sizes(sizes).env
        own = sum(by_transfers(p, c.gpu).prediction.time for p, ringed in local_parts(row.diagram, env, device=b)
                  if ringed)
        assert row.compute == pytest.approx(own, rel=1e-9)
    assert any("slowest device" in a for a in r.prediction.assumptions)


def test_causal_zigzag_computes_causal_attention_at_ragged_sizes():
    f = nc.library.causal_attention()
    (zigzag,) = [m for m in device_forms(f, P) if m.label == ZIGZAG]
    rng = np.random.default_rng(4)
    q, x, d = 13, 11, 5                                  # 8 chunks of each: 2 and 1 values
    Q, K, V = rng.normal(size=(q, d)), rng.normal(size=(x, d)), rng.normal(size=(x, d))
    S = Q @ K.T / np.sqrt(d)
    S = np.where(np.arange(x)[None, :] <= np.arange(q)[:, None], S, -np.inf)
    E = np.exp(S - S.max(1, keepdims=True))
    assert np.allclose(nc.evaluate(zigzag.diagram, Q, K, V), (E / E.sum(1, keepdims=True)) @ V)
