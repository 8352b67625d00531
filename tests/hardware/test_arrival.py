"""The one-device form under a layout is charged the gather of its sharded inputs (issue 37; hardware/arrival.py).

Second routes: the gathered program's values against numpy's attention at ragged sizes; its link counts against
np.array_split's shards counted by hand ((P − 1)·n_p sent, n − n_p received per array, P − 1 messages each); the
one-device form's predicted time against its compute plus the link time by hand (the busiest device's
max(sent, received) bytes over NVLink 4's 450 GB/s, plus 3.4 µs a message).
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware.arrival import gathered
from napkin_cat.hardware.clustered import GATHERED, time_form
from napkin_cat.search.devices import DeviceForm, device_forms
from napkin_cat.rewriting.trace import Trace

SEQUENCE = ("q", "x", "x")


def attention_np(Q, K, V):
    S = Q @ K.T / np.sqrt(Q.shape[1])
    E = np.exp(S - S.max(1, keepdims=True))
    return (E / E.sum(1, keepdims=True)) @ V


@pytest.mark.parametrize("P, q, x", [(4, 9, 7), (3, 8, 8), (4, 9, 3),   # x = 3: a device holds no key
                                     (4, 3, 9), (4, 2, 3), (4, 3, 3)])  # fewer queries than devices (main: x cut
def test_the_gather_computes_f_and_moves_every_other_shard(P, q, x):    # over the 3 or 2 devices that held a query)
    f, d = nc.library.attention(), 3
    g = gathered(f, SEQUENCE, P, {"q": q, "x": x, "d": d})
    rng = np.random.default_rng(P)
    Q, K, V = rng.normal(size=(q, d)), rng.normal(size=(x, d)), rng.normal(size=(x, d))
    assert np.allclose(nc.evaluate(g, Q, K, V), attention_np(Q, K, V))
    link = nc.cost(g, sizes={"q": q, "x": x, "d": d}).link
    shards = [len(s) for s in np.array_split(np.arange(q), P)], [len(s) for s in np.array_split(np.arange(x), P)]
    k = sum(a + b > 0 for a, b in zip(*shards))     # the devices that hold a shard of an input: the gather's
    for p in range(P):
        mine = [shards[0][p], shards[1][p], shards[1][p]]          # rows of Q, K, V device p holds (the layout's)
        whole = [q, x, x] if p < k else mine                       # a device that holds none takes no part
        assert link.sent[p] == sum((k - 1) * m * d for m in mine)
        assert link.received[p] == sum((n - m) * d for n, m in zip(whole, mine))
        assert link.messages[p] == (3 * (k - 1) if p < k else 0)


def test_the_one_device_form_pays_for_its_gather():
    P, s = 4, {"q": 256, "x": 256, "d": 16}
    c = nc.hardware.cluster("h100-sxm5", devices=P, link="nvlink4")
    f = nc.library.attention()
    one = DeviceForm("one device", f, Trace((), ()))
    cache = {}
    free = time_form(one, c, s, cache=cache, compute="transfers")
    paid = time_form(one, c, s, cache=cache, compute="transfers", layout=SEQUENCE)
    assert free.time == free.compute and paid.compute == free.compute and paid.memory == free.memory
    # by hand: every device sends (P − 1) shards of 64 × 16 of each of Q, K, V and receives as many: fp32
    busiest = 3 * (P - 1) * (256 // P) * 16 * 4
    assert paid.time == pytest.approx(free.compute + busiest / 450e9 + 3 * (P - 1) * 3.4e-6, rel=1e-12)
    assert GATHERED in paid.prediction.assumptions and GATHERED not in free.prediction.assumptions
    # only the sharded inputs are gathered: Q whole on every device, K and V cut along the keys
    part = time_form(one, c, s, cache=cache, compute="transfers", layout=(None, "x", "x"))
    assert part.time == pytest.approx(free.compute + 2 * busiest / 3 / 450e9 + 2 * (P - 1) * 3.4e-6, rel=1e-12)


def test_derive_keeps_the_one_device_form_replayable():
    c = nc.hardware.cluster("h100-sxm5", devices=2, link="nvlink4")
    f = nc.library.attention()
    r = nc.derive(f, sizes={"q": 16, "x": 16, "d": 8}, hardware=c, layout=SEQUENCE, compute="transfers",
                  forms=[DeviceForm("one device", f, Trace((), ()))])
    assert r.label == "one device" and r.diagram == f and r.trace.replay(f) == f
    assert [p.label for p in r.prediction.phases] == ["compute", "collectives"]


def test_a_bad_layout_is_named():
    f = nc.library.attention()
    with pytest.raises(nc.AxisError, match=r"input 1 \(x×d\) cannot arrive sharded along 'q'"):
        gathered(f, ("q", "q", "x"), 2)
    with pytest.raises(nc.AxisError, match="one entry per input"):
        gathered(f, ("q",), 2)
    with pytest.raises(nc.AxisError, match="nothing to gather"):
        gathered(f, (None, None, None), 2)
    with pytest.raises(nc.AxisError, match=r"cuts \['q', 'x'\] \(sizes \['q', 'x'\]\) over 2 devices.*sizes="):
        gathered(f, SEQUENCE, 2)            # symbolic sizes: which cut axis is the largest is not known


@pytest.mark.parametrize("q, refused", [(3, True), (2, True), (8, False)])
def test_a_form_that_cuts_the_keys_over_fewer_devices_than_the_layout_is_refused(q, refused):
    """``shard q: all-gather x ×2`` reads K and V co-sharded along x as the layout gives them; with fewer queries than
    devices its region runs on q devices and cuts x among them (np.array_split over q), not over all P as the layout
    says (main: timed with the other cut).  The cut by hand: at q = 3, P = 4, x = 9 the layout's is 3 | 2 | 2 | 2."""
    P, x = 4, 9
    assert [len(c) for c in np.array_split(np.arange(x), P)] != [len(c) for c in np.array_split(np.arange(x), q)] + \
        [0] * (P - q) or not refused
    c = nc.hardware.cluster("h100-sxm5", devices=P, link="nvlink4")
    (form,) = [g for g in device_forms(nc.library.attention(), P) if g.label == "shard q: all-gather x ×2"]
    r = time_form(form, c, {"q": q, "x": x, "d": 4}, compute="transfers", layout=SEQUENCE)
    if refused:
        assert r.refused.startswith(f"layout: the region along 'q' ({q} values) runs on {q} of the {P} devices")
    else:
        assert r.refused is None and r.time > 0
