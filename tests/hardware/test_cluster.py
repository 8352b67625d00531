"""Links as data and the device level (nc.hardware.link, nc.hardware.devices): the shipped links' numbers against
their sources' published figures, each device's capacity against its GPU model, the charged link across nodes,
and one typed error per bad input."""
from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import HardwareError
from napkin_cat.hardware import cluster, links, load_link
from napkin_cat.hardware.units import parse
from napkin_cat.syntax.axis import symbol

#: the figures the sources print (link.toml [sources]), in their own terms: NVLink totals both directions,
#: networks are rated in bits per second, PCIe 5.0 x16 at 64 GB/s per direction
PUBLISHED = {"nvlink4": ("900 GB/s", 2), "nvlink5": ("1.8 TB/s", 2), "pcie5": ("64 GB/s", 1),
             "ib-ndr": ("400 Gb/s", 1), "ib-hdr": ("200 Gb/s", 1)}
#: NCCL's tuning model (src/graph/tuning.cc), hwLat[hardware][Ring][Simple] in µs
NCCL_RING_LATENCY_US = {"nvlink4": 3.4, "nvlink5": 3.4, "pcie5": 5.7, "ib-ndr": 14.0, "ib-hdr": 14.0}


def test_shipped_links_match_their_published_figures():
    assert links() == sorted(PUBLISHED)
    for name, (figure, directions) in PUBLISHED.items():
        link = load_link(name)
        total = Fraction(figure.split()[0]) * {"GB/s": 10 ** 9, "TB/s": 10 ** 12, "Gb/s": Fraction(10 ** 9, 8)}[
            figure.split()[1]]
        assert link.per_direction * directions == total, name
        assert link.latency == Fraction(str(NCCL_RING_LATENCY_US[name])) / 10 ** 6, name
        assert {"bandwidth", "topology", "latency"} <= set(link.sources) and link.name == name
        assert link.to_dict()["per_direction_B_per_s"] == float(link.per_direction)
    assert load_link("nvlink4").gpus_per_node == 8 and load_link("ib-ndr").gpus_per_node is None
    assert load_link(load_link("pcie5")).name == "pcie5"


def test_units_of_a_link():
    assert parse("400 Gb/s", "bandwidth") == 50 * 10 ** 9 and parse("3.4 us", "time") == Fraction(34, 10 ** 7)
    assert parse("14 us", "time") == parse("14000 ns", "time") == parse("0.014 ms", "time")
    with pytest.raises(HardwareError, match="'us' is a unit of time, but a bandwidth is expected"):
        parse("3 us", "bandwidth")
    with pytest.raises(HardwareError, match="more than any device has: a time is at most 1 s"):
        parse("2 s", "time")


GOOD = """format = 1
name = "my-link"
description = "a test link"
topology = "{topology}"
scope = "{scope}"
{extra}
[sources]
bandwidth = "made up"
[bandwidth]
per_direction = "{bw}"
[latency]
per_message = "2 us"
"""


def write(tmp_path, **fields):
    values = {"topology": "switch", "scope": "node", "extra": "gpus_per_node = 4", "bw": "100 GB/s", **fields}
    path = tmp_path / "link.toml"
    path.write_text(GOOD.format(**values))
    return str(path)


def test_a_link_of_ones_own_and_its_errors(tmp_path):
    mine = load_link(write(tmp_path))
    assert (mine.per_direction, mine.latency, mine.gpus_per_node) == (10 ** 11, Fraction(2, 10 ** 6), 4)
    cases = [({"topology": "torus"}, "topology = 'torus'; a link's topology is one of switch, ring"),
             ({"scope": "rack"}, "scope = 'rack'; a link's scope is one of node, network"),
             ({"extra": ""}, "missing field gpus_per_node"),
             ({"scope": "network"}, "a network link .* gpus_per_node and max_gpus belong to a node's link"),
             ({"bw": "64 B/clk"}, "a link has no clock"),
             ({"bw": "64 GHz"}, "'GHz' is a unit of frequency, but a bandwidth is expected"),
             ({"extra": "gpus_per_node = 8\nmax_gpus = 4"}, r"max_gpus = 4 must be a whole number 8 …"),
             ({"extra": "gpus_per_node = 0"}, r"gpus_per_node = 0 must be a whole number 1 …"),
             ({"extra": "gpus_per_node = 4\nlanes = 16"}, r"unknown field\(s\) \['lanes'\]")]
    for fields, message in cases:
        with pytest.raises(HardwareError, match=message):
            load_link(write(tmp_path, **fields))
    path = tmp_path / "old.toml"
    path.write_text(GOOD.format(topology="switch", scope="node", extra="gpus_per_node = 4", bw="1 GB/s")
                    .replace("format = 1", "format = 2"))
    with pytest.raises(HardwareError, match="format = 2; this version reads link files of format = 1"):
        load_link(str(path))
    path.write_text(GOOD.format(topology="switch", scope="node", extra="gpus_per_node = 4", bw="1 GB/s")
                    .replace("[latency]\nper_message = \"2 us\"\n", ""))
    with pytest.raises(HardwareError, match=r"missing section \[latency\]"):
        load_link(str(path))
    with pytest.raises(HardwareError, match="no link called 'nvlink9'; shipped links are ib-hdr, ib-ndr, nvlink4"):
        load_link("nvlink9")


def test_each_device_holds_its_gpus_global_memory():
    for gpu in nc.hardware.models():
        c = cluster(gpu, devices=4, link="nvlink4")
        assert c.capacity == nc.hardware.load(gpu).gmem and c.nodes == 1
        assert c.per_direction == load_link("nvlink4").per_direction
    assert cluster("h100-sxm5", devices=1, link="pcie5").nodes == 1


def test_the_charged_link_across_nodes():
    nv, ib = load_link("nvlink4"), load_link("ib-ndr")
    one = cluster("h100-sxm5", devices=8, link="nvlink4", inter_node_link="ib-ndr")
    assert (one.nodes, one.per_direction, one.latency) == (1, nv.per_direction, nv.latency)
    many = cluster("h100-sxm5", devices=9, link="nvlink4", inter_node_link="ib-ndr")
    assert (many.nodes, many.per_direction, many.latency) == (2, ib.per_direction, ib.latency)
    assert cluster("h100-sxm5", devices=64, link="nvlink4", inter_node_link="ib-ndr").nodes == 8
    # an NVL72 rack: one NVLink domain of 72
    rack = cluster("h100-sxm5", devices=72, link="nvlink5", gpus_per_node=72)
    assert rack.nodes == 1 and rack.per_direction == 900 * 10 ** 9
    # a network link alone: every GPU its own port
    net = cluster("a100", devices=16, link="ib-hdr")
    assert net.per_direction == 25 * 10 ** 9 and net.nodes == 16
    # P symbolic: the charged link is piecewise in P, the same as the numeric cluster at each P
    sym = cluster("h100-sxm5", devices="P", link="nvlink4", inter_node_link="ib-ndr")
    P = sym.devices
    assert P == symbol("P")
    for p in (1, 8, 9, 64):
        numeric = cluster("h100-sxm5", devices=p, link="nvlink4", inter_node_link="ib-ndr")
        assert sym.per_direction.subs(P, p) == numeric.per_direction
        assert sym.latency.subs(P, p) == numeric.latency
        assert sympy.sympify(sym.nodes).subs(P, p) == numeric.nodes
    assert sym.to_dict()["devices"] == "P" and one.to_dict()["per_direction_B_per_s"] == 450e9


def test_cluster_errors_name_the_argument_and_what_is_legal():
    cases = [(dict(devices=0), r"devices=0: a cluster has at least one device \(P ≥ 1\)"),
             (dict(devices=True), "the number of devices P is a positive int or a symbol"),
             (dict(devices=2.5), "the number of devices P is a positive int or a symbol"),
             (dict(devices="2P"), "a symbolic number of devices is named like an axis"),
             (dict(link="nvlink9"), "no link called 'nvlink9'; shipped links are ib-hdr, ib-ndr, nvlink4, nvlink5, "
                                    "pcie5"),
             (dict(devices=16), "devices=16 span 2 nodes of 8 GPUs joined by nvlink4: give inter_node_link= "
                                r"\(one of ib-hdr, ib-ndr\)"),
             (dict(inter_node_link="pcie5"), "inter_node_link='pcie5' joins the GPUs of one node .* ib-hdr, ib-ndr"),
             (dict(link="ib-ndr", inter_node_link="ib-hdr"), "link='ib-ndr' is a network link"),
             (dict(gpus_per_node=300), "gpus_per_node=300: nvlink4 joins at most 256 GPUs"),
             (dict(gpus_per_node=0), "gpus_per_node=0: a node holds a positive whole number of GPUs")]
    for kwargs, message in cases:
        args = {"devices": 4, "link": "nvlink4", **kwargs}
        with pytest.raises(HardwareError, match=message):
            cluster("h100-sxm5", **args)
    with pytest.raises(HardwareError, match="no hardware model called 'b300'"):
        cluster("b300", devices=2, link="nvlink4")
    with pytest.raises(HardwareError, match="a cluster's devices are GPUs: give a GPU model or its name, got CPU"):
        cluster(nc.hardware.load_cpu("epyc-zen4"), devices=2, link="nvlink4")
    no_memory = dataclasses.replace(nc.hardware.load("h100-sxm5"), gmem=None)
    with pytest.raises(HardwareError, match="h100-sxm5: a cluster reads each device's gmem and hbm .* the model has "
                                            "no gmem"):
        cluster(no_memory, devices=2, link="nvlink4")
