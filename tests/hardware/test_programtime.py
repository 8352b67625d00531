"""A device program's predicted time, its traffic read from its cost: checked against the link's formula on counts
made by hand (a ring simulated step by step, NCCL's all-gather counts), never against the library's own counts."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware import cluster, predict_program
from rewrites.devices import device_gather
from rewrites.ring import simulate_ring

B, ALPHA = 450e9, 3.4e-6           # nvlink4: per direction, per message


def _ring(P):
    return nc.ring(nc.shard(nc.library.attention(), "q", devices=P), "x")


@pytest.mark.parametrize("compute", [1e-7, 1e-2])
@pytest.mark.parametrize("P, x", [(4, 4099), (3, 3000)])
def test_a_rings_time_overlaps_its_exchanges_with_its_trips(P, x, compute):
    """Busiest device's exchanges (from the simulated ring, fp32, K and V of d = 64), spread over P − 1 of the P
    trips: T = (P − 1)·max(c'/P, L/(P − 1)) + c'/P, link- or compute-bound by the compute given; each step waits
    for its slowest device, one folding the largest shard (every step some device does, ragged or not), so the
    trips take c' = c · P·max(shard)/x of every device's c (x = 4099 over 4: 4100/4099 of it), up to the part of a
    fold's FLOPs that does not grow with its shard (the running state's rescaling per query: under 1e-6 of it
    here, against the 2.4e-4 the slowest device adds)."""
    d, sizes = 64, {"q": 8 * P, "x": x, "d": 64}
    extents = [len(s) for s in np.array_split(np.arange(x), P)]
    sent, received, messages, _ = simulate_ring(extents, [d, d])
    L = max(max(s, r) * 4 / B + m * ALPHA for s, r, m in zip(sent, received, messages))
    slowest = compute * P * max(extents) / x
    by_hand = (P - 1) * max(slowest / P, L / (P - 1)) + slowest / P
    p = predict_program(cluster("h100-sxm5", devices=P, link="nvlink4"), _ring(P), sizes=sizes, compute=compute)
    assert p.time == pytest.approx(by_hand, rel=1e-6)
    assert [x.label for x in p.phases] == ["ring"] and p.bound == ("link" if compute < 1e-4 else "compute")


def test_the_all_gather_mode_pays_its_collectives_after_the_compute():
    """K and V all-gathered (NCCL's counts: (P − 1)/P of the array each way, P − 1 messages each), not overlapped:
    T = c + (P − 1)/P · 2·x·d·4 / B + 2(P − 1)·α; the ring of the same program hides them behind c."""
    P, x, d, c = 8, 8192, 128, 5e-3
    sizes = {"q": 8192, "x": x, "d": d}
    g = device_gather.using(axis="x").apply(nc.shard(nc.library.attention(), "q", devices=P))
    cl = cluster("h100-sxm5", devices=P, link="nvlink4")
    p = predict_program(cl, g, sizes=sizes, compute=c)
    assert p.time == pytest.approx(c + (P - 1) / P * 2 * x * d * 4 / B + 2 * (P - 1) * ALPHA, rel=1e-12)
    assert [x.label for x in p.phases] == ["compute", "collectives"]
    r = predict_program(cl, _ring(P), sizes=sizes, compute=c)
    assert r.time == pytest.approx(c) and r.time < p.time
    assert r.memory < p.memory          # one incoming slice held, not all the keys and values


def test_memory_past_a_device_and_bad_programs_are_refused():
    cl = cluster("h100-sxm5", devices=2, link="nvlink4")
    g = device_gather.using(axis="x").apply(nc.shard(nc.library.attention(), "q", devices=2))
    with pytest.raises(nc.CapacityError, match="more than the h100-sxm5"):
        predict_program(cl, g, sizes={"q": 2 ** 18, "x": 2 ** 18, "d": 128})
    with pytest.raises(nc.HardwareError, match="the program runs on 2 devices, the cluster"):
        predict_program(cluster("h100-sxm5", devices=4, link="nvlink4"), g, sizes={"q": 8, "x": 8, "d": 4})
    with pytest.raises(nc.HardwareError, match="device program"):
        predict_program(cl, nc.library.attention(), sizes={"q": 8, "x": 8, "d": 4})
