"""nc.derive(f, sizes=..., hardware=cluster): the device forms the rules make, timed per device and over the link,
the least predicted time chosen under each device's memory (issue 37 item 3).

Second routes: the chosen program's values against f's (nc.evaluate and numpy), its time against predict_program of
the same diagram, the all-gather's link time against a hand computation from the sizes ((P − 1)·x/P·d per array),
the all-gather form's memory against its arrays counted by hand, the sweep's change against the size where that
count crosses the capacity.  Every derivation here times each device's algorithm by transfers (compute=
"transfers", seconds each); tests/hardware/test_cluster_derive_slow.py runs the least-predicted-time model.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware.clustered import input_layout
from napkin_cat.hardware.clustersweep import sweep
from napkin_cat.hardware.devices import Cluster
from napkin_cat.search.devices import device_forms

CACHE: dict = {}          # local programs → their derivations, shared by the tests (the same sizes recur)
FAST = {"compute": "transfers", "cache": CACHE}
H100 = nc.hardware.load("h100-sxm5")
SEQUENCE = ("q", "x", "x")                 # Q sharded along the queries, K and V along the keys


def small(capacity: int, devices: int = 4) -> Cluster:
    """An H100 cluster whose devices hold ``capacity`` bytes (everything else the model's)."""
    return Cluster(dataclasses.replace(H100, gmem=capacity), devices, nc.hardware.load_link("nvlink4"))


def rows(r) -> dict:
    return {c.label: c for c in r.candidates}


def close(a, b):
    return np.allclose(a, b, rtol=1e-9, atol=1e-9)


N, D, P = 128, 16, 4           # attention's sequence, head dimension, devices


def test_attention_forms_time_and_values():
    c = nc.hardware.cluster("h100-sxm5", devices=P, link="nvlink4")
    f, s = nc.library.attention(), {"q": N, "x": N, "d": D}
    r = nc.derive(f, sizes=s, hardware=c, layout=SEQUENCE, **FAST)
    got = rows(r)
    gather, ring = got["shard q: all-gather x ×2"], got["shard q: ring x"]
    assert gather.refused is None and ring.refused is None
    assert got["shard q"].refused.startswith("layout")             # K, V whole: not the layout given
    assert r.trace.replay(f) == r.diagram and r.label in got
    rng = np.random.default_rng(0)
    Q, K, V = (rng.normal(size=(N, D)) for _ in range(3))
    S = Q @ K.T / np.sqrt(D)
    E = np.exp(S - S.max(1, keepdims=True))
    assert close(nc.evaluate(r.diagram, Q, K, V), (E / E.sum(1, keepdims=True)) @ V)
    for row in (gather, ring):          # the time is predict_program's of the same diagram at the same compute
        p = nc.hardware.predict_program(c, row.diagram, sizes=s, compute=row.compute)
        assert p.time == pytest.approx(row.time, rel=1e-12)
    # the all-gather by hand: K and V, (P − 1) shards of x/P · d values each, 4 B, one message per peer and array
    link = nc.cost(gather.diagram, sizes=s).link
    per = 2 * (P - 1) * (N // P) * D
    assert link.sent == link.received == (per,) * P and link.messages == (2 * (P - 1),) * P
    hand = per * 4 / 450e9 + 2 * (P - 1) * 3.4e-6
    assert gather.time == pytest.approx(gather.compute + hand, rel=1e-9)
    assert gather.prediction.phases[-1].label == "collectives"
    # memory by hand: Q's shard and K, V whole (gathered), 4 B each
    assert gather.memory == (N // P + 2 * N) * D * 4
    # the ring by hand, at least: Q's and O's shards, its own K, V shards and the two slots they arrive in
    assert 6 * (N // P) * D * 4 <= ring.memory < gather.memory
    assert input_layout(ring.diagram) == SEQUENCE


def test_memory_forces_the_ring():
    f, s = nc.library.attention(), {"q": N, "x": N, "d": D}
    roomy = rows(nc.derive(f, sizes=s, hardware=small(10 ** 9), layout=SEQUENCE, **FAST))
    gather, ring = roomy["shard q: all-gather x ×2"].memory, roomy["shard q: ring x"].memory
    r = nc.derive(f, sizes=s, hardware=small((gather + ring) // 2), layout=SEQUENCE, **FAST)
    assert r.label == "shard q: ring x"
    zigzag = rows(r)["shard q (zigzag): ring x"]      # no mask: the other order is offered, never faster
    assert zigzag.refused is None and zigzag.time >= rows(r)["shard q: ring x"].time
    assert rows(r)["shard q: all-gather x ×2"].refused.startswith("memory")
    with pytest.raises(nc.CapacityError, match=f"'shard q: ring x', holds {ring} B per device; each holds 1000 B"):
        nc.derive(f, sizes=s, hardware=small(1000), layout=SEQUENCE, **FAST)


def test_sweep_changes_where_the_memory_crosses_the_capacity():
    """Inputs as each form reads them (no layout: the one device holds them whole, nothing over the link), so one
    device is the fastest at these sizes until it no longer fits (with layout=, it pays for their gather:
    tests/hardware/test_arrival.py)."""
    f = nc.library.attention()

    def whole(n):             # by hand: the one device holds Q, K and V whole (O in Q's place once Q is read)
        return 3 * n * D * 4
    capacity = whole(3 * N // 4)                   # between N/2 and N
    s = sweep(f, small(capacity, P), {"d": D}, axes=("q", "x"), values=[N // 2, N], **FAST)
    first = min(n for n in s.values if whole(n) > capacity)
    for p in s.points:
        one = rows(p.derivation)["one device"]
        assert one.memory == whole(p.value)
        assert (one.refused is not None and one.refused.startswith("memory")) == (p.value >= first)
        assert (p.derivation.label == "one device") == (p.value < first)
        assert p.derivation.time == min(c.time for c in p.derivation.candidates if c.time is not None)
    out_of_one = [ch for ch in s.changes() if ch[2] == "one device"]
    assert [(b, why) for _, b, _, _, why in out_of_one] == [(first, "memory")]
    for a, b, before, after, why in s.changes():          # a change by time: the two forms' times cross there
        if why == "time":
            pa, pb = (dict(zip(s.values, s.points))[v].derivation for v in (a, b))
            assert rows(pa)[before].time <= rows(pa)[after].time and rows(pb)[after].time < rows(pb)[before].time


def test_mlp_gives_the_column_then_row_split():
    up = nc.einsum("n d, d h -> n h") >> nc.elementwise("relu", "n h")
    mlp = up @ nc.Id("h e") >> nc.einsum("n h, h e -> n e")
    s = {"n": 256, "d": 1024, "h": 4096, "e": 1024}
    c = nc.hardware.cluster("h100-sxm5", devices=4, link="nvlink4")
    r = nc.derive(mlp, sizes=s, hardware=c, layout=(None, "h", "h"), **FAST)     # weights sharded, x whole
    assert r.label == "shard h: all-reduce"
    assert [b.name for b in r.diagram.boxes[0].arg.boxes] == ['·', 'relu', '·', 'all-reduce']
    link = nc.cost(r.diagram, sizes=s).link          # one all-reduce of n·e: 2(P − 1)/P of it each way
    assert link.sent == link.received == (2 * 3 * 256 * 1024 // 4,) * 4
    rng = np.random.default_rng(1)
    x, w1, w2 = rng.normal(size=(6, 5)), rng.normal(size=(5, 7)), rng.normal(size=(7, 3))   # h = 7: ragged
    assert close(nc.evaluate(r.diagram, x, w1, w2), np.maximum(x @ w1, 0) @ w2)
    assert r.trace.replay(mlp) == r.diagram


def layer_norm_then_matmul():
    return nc.library.layer_norm() @ nc.Id("d e") >> nc.einsum("n d, d e -> n e")


@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="8 s: NAPKIN_SLOW=1 (its forms' values: below)")
def test_a_layer_norm_then_a_matmul():
    f = layer_norm_then_matmul()
    s = {"n": 128, "d": 64, "e": 64}
    r = nc.derive(f, sizes=s, hardware=nc.hardware.cluster("h100-sxm5", devices=2, link="nvlink4"), **FAST)
    assert r.trace.replay(f) == r.diagram
    rng = np.random.default_rng(2)
    X, g, b, W = rng.normal(size=(9, 6)), rng.normal(size=6), rng.normal(size=6), rng.normal(size=(6, 4))
    mean = X.mean(1, keepdims=True)
    ref = ((X - mean) / np.sqrt(((X - mean) ** 2).mean(1, keepdims=True) + 1e-5) * g + b) @ W
    assert close(nc.evaluate(f, X, g, b, W), ref)
    assert close(nc.evaluate(r.diagram, X, g, b, W), ref)


@pytest.mark.parametrize("f, devices, shapes", [
    (nc.library.attention(), 3, [(7, 4), (8, 4), (8, 4)]),        # 8 keys: 6 zigzag chunks of 2, 1
    (nc.library.multi_head_attention(), 2, [(5, 7, 3), (5, 5, 3), (5, 5, 3)]),
    (layer_norm_then_matmul(), 3, [(7, 5), (5,), (5,), (5, 4)]),
])
def test_every_form_computes_f_at_ragged_sizes(f, devices, shapes):
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=sh) for sh in shapes]
    want = nc.evaluate(f, *xs)
    made = [form for form in device_forms(f, devices) if form.refused is None]
    assert len(made) >= 3
    for form in made:
        assert close(nc.evaluate(form.diagram, *xs), want), form.label
    if f.dom.inside[0].names[0] == "h":              # Ulysses: the all-to-all from the sequence to the heads
        assert "shard q: all-to-all q→h, all-to-all x→h ×2, all-to-all h→q" in [m.label for m in made]


def test_refusals_are_named():
    c = nc.hardware.cluster("h100-sxm5", devices=4, link="nvlink4")
    f = nc.library.attention()
    with pytest.raises(nc.AxisError, match="give sizes= for every axis"):
        nc.derive(f, hardware=c)
    with pytest.raises(nc.AxisError, match="'x'"):
        nc.derive(f, sizes={"q": 256, "d": 64}, hardware=c)
    with pytest.raises(nc.HardwareError, match="CPU model"):
        nc.hardware.cluster(nc.hardware.load_cpu("epyc-zen3-dev"), devices=2, link="nvlink4")
    cpu = Cluster(nc.hardware.load_cpu("epyc-zen3-dev"), 2, nc.hardware.load_link("nvlink4"))
    with pytest.raises(nc.HardwareError, match="CPU model"):
        nc.derive(f, sizes={"q": 256, "x": 256, "d": 64}, hardware=cpu)
    with pytest.raises(nc.HardwareError, match="devices=P"):
        nc.derive(f, sizes={"q": 256, "x": 256, "d": 64}, hardware=nc.hardware.cluster("h100-sxm5", devices="P",
                                                                                     link="nvlink4"))
    with pytest.raises(nc.AxisError, match="input 1 .* carries \\['x', 'd'\\]"):
        nc.derive(f, sizes={"q": 256, "x": 256, "d": 64}, hardware=c, layout=("q", "h", "x"))
    # two heads on four devices: the all-to-all form is refused by the rule, naming the heads and the devices
    forms = device_forms(nc.library.multi_head_attention(h=2), 4)
    (ulysses,) = [m for m in forms if m.label == "reshard h"]
    assert "fewer values than the 4 devices" in ulysses.refused


def test_cli_refuses_a_malformed_cluster():
    from napkin_cat.cli import main
    assert main(["derive", "attention", "--cluster", "h100-sxm5:four:nvlink4", "--sizes", "q=8,x=8,d=8"]) == 2
    assert main(["derive", "attention", "--sweep", "q=8..16"]) == 2            # --sweep belongs to --cluster


@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="6 s: NAPKIN_SLOW=1 (the sweep is tested above)")
def test_cli_sweep_plots(tmp_path):
    from napkin_cat.cli import main
    path = tmp_path / "sweep.png"
    assert main(["derive", "attention", "--cluster", "h100-sxm5:4:nvlink4", "--sizes", "d=16", "--sweep",
                 "q,x=32..64", "--compute", "transfers", "--layout", "q,x,x", "--plot", str(path)]) == 0
    assert path.stat().st_size > 1000


@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="about 20 s: NAPKIN_SLOW=1 (compute='transfers' above)")
def test_the_least_predicted_time_per_device():
    """The default model: each device's algorithm and tiles by least predicted time (derive_for_time)."""
    c = nc.hardware.cluster("h100-sxm5", devices=P, link="nvlink4")
    f, s = nc.library.attention(), {"q": 256, "x": 256, "d": 64}
    r = nc.derive(f, sizes=s, hardware=c, layout=SEQUENCE)
    got = rows(r)
    for label in ("shard q: all-gather x ×2", "shard q: ring x"):
        row = got[label]
        p = nc.hardware.predict_program(c, row.diagram, sizes=s, compute=row.compute)
        assert p.time == pytest.approx(row.time, rel=1e-12)
    assert r.time == min(x.time for x in r.candidates if x.time is not None)
    rng = np.random.default_rng(4)
    Q, K, V = (rng.normal(size=(256, 64)) for _ in range(3))
    assert close(nc.evaluate(r.diagram, Q, K, V), nc.evaluate(f, Q, K, V))
    assert all(x.prediction.hardware == "h100-sxm5" for x in r.local)
