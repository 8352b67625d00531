"""The link's time (nc.hardware.linktime) against formulas computed by hand here and against NCCL's documented
bus-bandwidth relation (nccl-tests doc/PERFORMANCE.md: busbw = algbw · 2(P−1)/P for an all-reduce, (P−1)/P for an
all-gather or a reduce-scatter, where algbw = S/t and busbw is the link's per-direction bandwidth)."""
from __future__ import annotations

from fractions import Fraction

import pytest
import sympy
from rewrites import tiled_matmul

import napkin_cat as nc
from napkin_cat.errors import CapacityError, HardwareError
from napkin_cat.hardware import Phase, Prediction, Traffic, cluster, link_time, load_link, predict_cluster
from napkin_cat.syntax.axis import symbol

GB = 10 ** 9


def test_a_transfer_is_its_larger_direction_over_the_bandwidth_plus_its_messages():
    c = cluster("h100-sxm5", devices=8, link="nvlink4")
    # by hand: 3 MiB sent, 1 MiB received, fp16, 5 messages on 450 GB/s and 3.4 µs each
    t = link_time(c, Traffic(sent=3 * 2 ** 20, received=2 ** 20, messages=5, bytes_per_value="fp16"))
    assert t == sympy.Rational(3 * 2 ** 20 * 2, 450 * GB) + 5 * sympy.Rational(34, 10 ** 7)
    # full duplex: receiving more than is sent costs the same as sending it
    assert t == link_time(c, Traffic(sent=2 ** 20, received=3 * 2 ** 20, messages=5, bytes_per_value=2))
    # on a switch a value crosses one hop whatever the record says; on a ring its hops
    assert link_time(c, Traffic(sent=10, received=10, bytes_per_value=4, hops=3)) == sympy.Rational(40, 450 * GB)


def test_a_ring_topology_charges_each_hop(tmp_path):
    path = tmp_path / "ring.toml"
    path.write_text('format = 1\nname = "bridge"\ndescription = "two neighbours each"\ntopology = "ring"\n'
                    'scope = "node"\ngpus_per_node = 4\n[bandwidth]\nper_direction = "100 GB/s"\n'
                    '[latency]\nper_message = "1 us"\n')
    c = cluster("a100", devices=4, link=str(path))
    t = link_time(c, Traffic(sent=1000, received=1000, messages=2, bytes_per_value=4, hops=2))
    assert t == sympy.Rational(1000 * 4 * 2, 100 * GB) + 2 * sympy.Rational(1, 10 ** 6)


def ring_all_reduce(P, S):
    """NCCL's ring all-reduce of S bytes on P ranks (PERFORMANCE.md): each rank sends and receives 2(P−1) chunks of
    S/P bytes, one message per step: the counts a cost record of the collective gives."""
    chunk = sympy.Rational(S, P)
    return Traffic(sent=2 * (P - 1) * chunk, received=2 * (P - 1) * chunk, messages=2 * (P - 1), bytes_per_value=1)


def ring_all_gather(P, S):
    chunk = sympy.Rational(S, P)
    return Traffic(sent=(P - 1) * chunk, received=(P - 1) * chunk, messages=P - 1, bytes_per_value=1)


@pytest.mark.parametrize("link,inter,P", [("nvlink4", None, 2), ("nvlink4", None, 8), ("nvlink5", None, 5),
                                          ("pcie5", None, 3), ("nvlink4", "ib-ndr", 16), ("ib-hdr", None, 64)])
def test_nccls_bus_bandwidth_of_a_ring_is_the_links_bandwidth(link, inter, P):
    c = cluster("h100-sxm5", devices=P, link=link, inter_node_link=inter)
    S = 2 ** 30
    for traffic, factor in ((ring_all_reduce(P, S), Fraction(2 * (P - 1), P)),
                            (ring_all_gather(P, S), Fraction(P - 1, P))):
        t = link_time(c, traffic)
        bandwidth_time = t - traffic.messages * sympy.sympify(c.latency)     # the latency is NCCL's separate term
        busbw = sympy.Rational(S) / bandwidth_time * sympy.Rational(factor)
        slowest = min([load_link(name).per_direction for name in (link, inter) if name is not None])
        assert busbw == sympy.Rational(slowest.numerator, slowest.denominator)
        # NCCL's tuning model (src/graph/tuning.cc): time = nsteps · hwLat + S / (busBw · nRanks / nsteps)
        nsteps = traffic.messages
        assert t == nsteps * sympy.sympify(c.latency) + S / (sympy.sympify(c.per_direction) * P / nsteps)


def test_a_ring_overlaps_each_trips_transfer_a_collective_does_not():
    c = cluster("h100-sxm5", devices=4, link="nvlink4")
    alpha, B = Fraction(34, 10 ** 7), Fraction(450 * GB)
    slice_values, b = 2 ** 22, 2                              # a K/V slice: 8 MiB per step
    step = Fraction(slice_values * b) / B + alpha             # one step's transfer, by hand
    ring = Traffic(sent=3 * slice_values, received=3 * slice_values, messages=3, bytes_per_value=b)
    for compute in (1e-3, 1e-6):                              # compute-bound, then link-bound
        p = predict_cluster(c, [Phase("ring", ring, compute=compute, trips=4, overlapped=3)])
        assert p.time == pytest.approx(3 * max(compute, float(step)) + compute, rel=1e-12)
        assert p.phases[0].bound == ("compute" if compute > step else "link")
        assert p.phases[0].exposed == pytest.approx(3 * max(0.0, float(step) - compute), abs=1e-15)
    gather = Phase("all-gather", ring, compute=1e-3, trips=4)   # the same traffic as a collective: not overlapped
    p = predict_cluster(c, [gather, Phase("local", compute=2e-4)])
    assert p.time == pytest.approx(4e-3 + 3 * float(step) + 2e-4, rel=1e-12)
    assert [x.label for x in p.phases] == ["all-gather", "local"] and p.bound == "compute"
    assert any("not overlapped" in a for a in p.assumptions) and any("max(compute, transfer)" in a
                                                                     for a in predict_cluster(c, [Phase(
                                                                         "r", ring, compute=1, trips=4,
                                                                         overlapped=3)]).assumptions)


def test_counts_symbolic_in_P_are_the_numeric_ones_at_each_P():
    P, n = symbol("P"), symbol("n")
    sym = cluster("h100-sxm5", devices="P", link="nvlink4", inter_node_link="ib-ndr")
    traffic = Traffic(sent=(P - 1) * n / P, received=(P - 1) * n / P, messages=P - 1, bytes_per_value="bf16")
    expr = link_time(sym, traffic)
    assert expr.free_symbols == {P, n}
    for p in (2, 8, 16):
        numeric = cluster("h100-sxm5", devices=p, link="nvlink4", inter_node_link="ib-ndr")
        at = Traffic(sent=(p - 1) * sympy.Rational(2 ** 20, p), received=(p - 1) * sympy.Rational(2 ** 20, p),
                     messages=p - 1, bytes_per_value=2)
        assert expr.subs({P: p, n: 2 ** 20}) == link_time(numeric, at)
        ring = Phase("ring", traffic, compute=1e-4, trips=P, overlapped=P - 1)
        got = predict_cluster(sym, [ring], sizes={"P": p, "n": 2 ** 20})
        want = predict_cluster(numeric, [Phase("ring", at, compute=1e-4, trips=p, overlapped=p - 1)])
        assert got.time == pytest.approx(want.time, rel=1e-12) and got.sizes == {"P": p, "n": 2 ** 20}
    alone = cluster("h100-sxm5", devices="P", link="nvlink4")      # no network link: P must fit one node
    p = predict_cluster(alone, [Phase("ring", traffic, compute=1e-4, trips=P, overlapped=P - 1)],
                        sizes={"P": 8, "n": 2 ** 20})
    assert "P ≤ 8: the devices fit one node of nvlink4" in p.assumptions
    assert p.time == pytest.approx(predict_cluster(sym, [Phase("ring", traffic, compute=1e-4, trips=P,
                                                               overlapped=P - 1)], sizes={"P": 8, "n": 2 ** 20}).time)
    with pytest.raises(HardwareError, match=r"phase 'ring': its time depends on \['P', 'n'\]: give their values "
                                            "in sizes="):
        predict_cluster(sym, [Phase("ring", traffic, compute=1e-4, trips=P, overlapped=P - 1)])


def test_per_device_memory_is_a_constraint_and_compute_is_the_devices_prediction():
    c = cluster("h100-sxm5", devices=8, link="nvlink4")
    per_device = Prediction(time=2e-3, kernels=(), hardware="h100-sxm5", sizes={}, overlap="sequential",
                            assumptions=("rates are the h100-sxm5 model's",))
    n = symbol("n")
    p = predict_cluster(c, [Phase("local", compute=per_device, trips=3)], sizes={"n": 10 ** 9}, memory=60 * n)
    assert p.time == pytest.approx(6e-3) and p.memory == 60 * 10 ** 9
    assert "local (per device): rates are the h100-sxm5 model's" in p.assumptions
    assert any("80000000000 B" in a and "level 0" in a for a in p.assumptions)
    with pytest.raises(CapacityError, match="each device holds 90000000000 B at level 0 .* more than the "
                                            "h100-sxm5's 80000000000 B: use more devices"):
        predict_cluster(c, [Phase("local", compute=1e-3)], sizes={"n": 10 ** 9}, memory=90 * n)
    assert p.to_dict()["phases"][0]["time_s"] == pytest.approx(6e-3)


def test_bad_records_are_refused_by_name():
    c = cluster("h100-sxm5", devices=2, link="pcie5")
    cases = [(lambda: Traffic(sent=-1), r"sent=-1: a count is a number ≥ 0"),
             (lambda: Traffic(received="two"), "received='two': a count is a number ≥ 0 or a sympy expression, "
                                              "not a str"),
             (lambda: Traffic(messages=True), "messages=True: a count is a number ≥ 0 or a sympy expression, "
                                             "not a bool"),
             (lambda: Traffic(bytes_per_value="fp7"), "bytes_per_value='fp7': a number of bytes or a dtype"),
             (lambda: Traffic(bytes_per_value=0), "bytes_per_value=0: a positive whole number of bytes"),
             (lambda: Phase("ring", trips=2, overlapped=3), "phase 'ring': overlapped=3 of trips=2"),
             (lambda: Phase("x", traffic=5), "phase 'x': traffic= is a Traffic record"),
             (lambda: Phase("x", compute=-1.0), r"phase 'x': compute=-1.0: a time in seconds is a number ≥ 0"),
             (lambda: predict_cluster("h100-sxm5", [Phase("x")]), "predict_cluster takes a Cluster"),
             (lambda: predict_cluster(c, []), "predict_cluster takes a non-empty sequence of Phase records"),
             (lambda: link_time(None, Traffic()), "link_time takes a Cluster")]
    for make, message in cases:
        with pytest.raises(HardwareError, match=message):
            make()


def test_a_row_parallel_product_combines_the_devices_predict_with_an_all_reduce():
    P, a, b, c_ = 4, 4096, 2048, 4096
    part = tiled_matmul(nc.library.matmul()).diagram            # each device: a × (b/P) times (b/P) × c, fp32
    local = nc.hardware.predict(part, "h100-sxm5", {"a": a, "b": b // P, "c": c_, "g_a": 128, "g_c": 128, "s_b": 32})
    c = cluster("h100-sxm5", devices=P, link="nvlink4")
    chunk = sympy.Rational(a * c_, P)                            # the partial sums' all-reduce, NCCL's ring counts
    reduce = Traffic(sent=2 * (P - 1) * chunk, received=2 * (P - 1) * chunk, messages=2 * (P - 1),
                     bytes_per_value="fp32")
    p = predict_cluster(c, [Phase("partial product", compute=local), Phase("all-reduce", reduce)])
    by_hand = local.time + 2 * (P - 1) / P * a * c_ * 4 / 450e9 + 2 * (P - 1) * 3.4e-6
    assert p.time == pytest.approx(by_hand, rel=1e-12) and p.phases[0].compute == pytest.approx(local.time)
    assert [x.bound for x in p.phases] == ["compute", "link"]
    assert f"partial product (per device): {local.assumptions[0]}" in p.assumptions
