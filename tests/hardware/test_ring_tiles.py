"""A ring's folds charged by the tiles its device's algorithm runs (issue 37 item 5(b)): ``nc.cost``'s ``Link.work``
at ``ring_tiles`` counts a fold a causal mask allows in part by the blocks of those tiles that run, as the
per-device algorithm skips them, so contiguous and zigzag causal rings get their per-step slowest device.

Second route: numpy over the mask's blocks, per device and ring step: each device's query pieces and the travelling
key pieces (np.array_split's cut in the order's chunks), each cut from its start into tiles, a block running where
its first key is at or before its last query; a fold's FLOPs are the same for every piece of one size, so the
expected work is that unit times the area of the blocks that run over the piece's area.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.orders import ORDERS
from napkin_cat.cost.at_sizes import At, running_area
from napkin_cat.cost.numeric import at
from napkin_cat.hardware.programtime import ring_compute


def pieces(order: str, n: int, P: int) -> list:
    """Per device, its pieces of positions (np.array_split of 0 … n−1 in the order's chunks)."""
    o = ORDERS[order]
    cut = np.array_split(np.arange(n), o.chunks(P))
    return [[cut[c] for c in o.pieces(p, P)] for p in range(P)]


def blocks_run(qp, kp, tq: int, tx: int) -> int:
    """The area of the (tq × tx) blocks of queries ``qp`` × keys ``kp`` (each cut from its start) that a causal mask
    lets run: a block runs where its first key is at or before its last query."""
    area = 0
    for qb in np.array_split(qp, range(tq, len(qp), tq)):
        for kb in np.array_split(kp, range(tx, len(kp), tx)):
            if len(qb) and len(kb) and kb[0] <= qb[-1]:
                area += len(qb) * len(kb)
    return area


def expected_work(order: str, n: int, P: int, unit: int, tq: int, tx: int) -> tuple:
    """Per device and step, Σ over its (query piece, key piece) folds that run of unit · area run // piece area."""
    mine = pieces(order, n, P)
    out = []
    for p in range(P):
        steps = []
        for t in range(P):
            w = 0
            for qp in mine[p]:
                for kp in mine[(p - t) % P]:
                    run = blocks_run(qp, kp, tq, tx)
                    if run:
                        w += unit * run // (len(qp) * len(kp))
            steps.append(w)
        out.append(tuple(steps))
    return tuple(out)


@pytest.mark.parametrize("order,P,n,tiles", [("contiguous", 4, 64, (4, 3)), ("zigzag", 4, 64, (3, 2)),
                                             ("contiguous", 3, 48, (5, 3)), ("zigzag", 2, 40, (3, 7))])
def test_ring_work_counts_the_blocks_that_run(order, P, n, tiles):
    tq, tx = tiles
    d = nc.ring(nc.shard(nc.library.causal_attention(), "q", devices=P, order=order), "x")
    sizes = {"q": n, "x": n, "d": 4}
    whole = at(d, sizes).link
    tiled = at(d, sizes, ring_tiles={"q": tq, "x": tx}).link
    # every piece is one size here (n a multiple of the order's chunks): a fold's FLOPs are one unit, read off the
    # untiled count at a step where the last device folds whole pieces only
    per = len(pieces(order, n, P)[0])
    unit = whole.work[P - 1][1] // (per * per if order == "contiguous" else whole.trips[P - 1][1])
    assert whole.work == expected_work(order, n, P, unit, n, n)          # one block per fold: counted whole
    assert tiled.work == expected_work(order, n, P, unit, tq, tx)
    assert tiled.trips == whole.trips and tiled.sent == whole.sent      # only the work is charged otherwise
    assert tiled.work != whole.work                                      # the diagonal's blocks are skipped


def test_running_area_at_ragged_tiles_and_many_tiles_at_once():
    f = nc.library.causal_attention(q=16, x=16, d=4)
    from napkin_cat.algorithms.schedule import schedule_of
    skip = schedule_of(nc.stream(f, "x", "s_x").boxes[0].arg.boxes[0]).skip
    # two fold tiles at once (count 2: query tiles at 0 and 7, keys at 3): each cut in blocks of 3 × 2
    ctx = At({}, {"q": (np.array([0, 7]), 7), "x": (np.array([3, 3]), 5)}, 2)
    want = sum(blocks_run(np.arange(q0, q0 + 7), np.arange(3, 8), 3, 2) for q0 in (0, 7))
    assert running_area(skip, ctx, {"q": 3, "x": 2}) == (want, 2 * 7 * 5)
    # an axis the mask does not read, or no tiles: the fold whole
    assert running_area(skip, ctx, {"d": 2}) == (1, 1)


def test_contiguous_and_zigzag_slowest_steps_by_the_blocks():
    P, n, tile = 4, 256, 16
    c = nc.hardware.cluster("h100-sxm5", devices=P, link="nvlink4")
    rate = c.gpu.peak("tensor", "fp32")
    sizes = {"q": n, "x": n, "d": 8}
    tiles = {"q": tile, "x": tile}
    got = {}
    for order in ("contiguous", "zigzag"):
        d = nc.ring(nc.shard(nc.library.causal_attention(), "q", devices=P, order=order), "x")
        link = at(d, sizes, ring_tiles=tiles).link
        got[order] = ring_compute(link, 0.0, rate)
    # numpy: Σ_t max_p of the blocks' area each device runs at step t (equal FLOPs per unit of area here)
    slowest = {o: sum(max(sum(blocks_run(qp, kp, tile, tile) for qp in pieces(o, n, P)[p]
                              for kp in pieces(o, n, P)[(p - t) % P]) for p in range(P)) for t in range(P))
               for o in ("contiguous", "zigzag")}
    assert float(got["zigzag"] / got["contiguous"]) == pytest.approx(slowest["zigzag"] / slowest["contiguous"],
                                                                       rel=2e-2)
    # counted whole, the diagonal folds would give 9/16 here; by the blocks the ratio is larger
    assert slowest["zigzag"] / slowest["contiguous"] > 9 / 16 + 0.01
