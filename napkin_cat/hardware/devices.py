"""The device level: P GPUs, each with its global memory, joined by a link (a level above global memory).

The paper's hierarchy stops at one GPU's global memory.  A cluster adds one level above it: ``P`` devices, each a
GPU of a model (:mod:`napkin_cat.hardware.model`) whose global memory is the capacity of level 0 on that device,
joined by a link (:mod:`napkin_cat.hardware.link`).  Where the devices span more than one node, the nodes are
joined by a second, network link::

    M_0 per device   = gpu.gmem                               (the device's capacity)
    nodes            = ⌈P / gpus_per_node⌉
    the link charged = link                          if P ≤ gpus_per_node (or the link joins nodes itself)
                     = the slower of link and inter_node_link  otherwise  (a ring across nodes waits for its
                                                               slowest hop: bandwidth min, latency max)

``P`` is an int or a symbol (a cost symbolic in the number of devices); with a symbol and a network link the
charged link is a ``Piecewise`` in ``P``.  The time a transfer takes over it is :mod:`napkin_cat.hardware.linktime`'s.

>>> c = cluster("h100-sxm5", devices=8, link="nvlink4")
>>> c.capacity, c.nodes, float(c.per_direction) / 1e9
(80000000000, 1, 450.0)
>>> big = cluster("h100-sxm5", devices=64, link="nvlink4", inter_node_link="ib-ndr")
>>> big.nodes, float(big.per_direction) / 1e9, float(big.latency) * 1e6
(8, 50.0, 14.0)
>>> cluster("h100-sxm5", devices=16, link="nvlink4")
Traceback (most recent call last):
...
napkin_cat.errors.HardwareError: devices=16 span 2 nodes of 8 GPUs joined by nvlink4: give inter_node_link= ...
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import sympy

from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.link import Link, links, load_link
from napkin_cat.hardware.model import GPU, load
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.collectives import LARGEST_DEVICES

#: the GPU model fields a cluster reads: each device's capacity (level 0) and its memory bandwidth
NEEDED = ("gmem", "hbm")


def network_links() -> list[str]:
    """The shipped links that join nodes (``scope = "network"``): the choices of ``inter_node_link=``."""
    return [name for name in links() if load_link(name).scope == "network"]


@dataclass(frozen=True)
class Cluster:
    """``devices`` GPUs of one model (``gpu``), joined within a node by ``link`` and between nodes by
    ``inter_node_link`` (None: one node, or a link that joins nodes itself); see the module docstring."""

    gpu: GPU
    devices: int | sympy.Symbol
    link: Link
    inter_node_link: Link | None = None
    gpus_per_node: int | None = None

    @property
    def capacity(self) -> int:
        """Bytes each device holds at level 0 (its global memory)."""
        return self.gpu.gmem

    @property
    def nodes(self):
        """⌈P / gpus_per_node⌉ (P for a network link alone: every GPU its own node and port; an expression for a
        symbolic P)."""
        if self.gpus_per_node is None:
            return 1 if self.link.scope == "node" else self.devices
        if isinstance(self.devices, int):
            return math.ceil(self.devices / self.gpus_per_node)
        return sympy.ceiling(self.devices / self.gpus_per_node)

    def _charged(self, attribute: str, pick):
        intra = getattr(self.link, attribute)
        if self.inter_node_link is None:
            return intra
        both = pick(intra, getattr(self.inter_node_link, attribute))
        if isinstance(self.devices, int):
            return intra if self.devices <= self.gpus_per_node else both
        return sympy.Piecewise((sympy.Rational(intra), self.devices <= self.gpus_per_node),
                               (sympy.Rational(both), True))

    @property
    def per_direction(self):
        """The bandwidth a transfer is charged at (bytes per second, each direction): the link's, or the slower
        of the two links' where the devices span nodes."""
        return self._charged("per_direction", min)

    @property
    def latency(self):
        """The seconds a message is charged: the link's, or the larger of the two links' where the devices span
        nodes."""
        return self._charged("latency", max)

    @property
    def name(self) -> str:
        links_ = self.link.name + (f" + {self.inter_node_link.name}" if self.inter_node_link is not None else "")
        return f"{self.devices} × {self.gpu.name} over {links_}"

    def to_dict(self) -> dict:
        """A JSON-ready summary (a symbolic P as its name)."""
        def num(v):
            return float(v) if not isinstance(v, sympy.Basic) or v.is_number else str(v)
        return {"gpu": self.gpu.name, "devices": self.devices if isinstance(self.devices, int) else str(self.devices),
                "capacity_B": self.capacity, "nodes": num(self.nodes), "gpus_per_node": self.gpus_per_node,
                "link": self.link.to_dict(),
                "inter_node_link": None if self.inter_node_link is None else self.inter_node_link.to_dict(),
                "per_direction_B_per_s": num(self.per_direction), "latency_s": num(self.latency)}


def _devices(devices):
    if isinstance(devices, str):
        if not devices.isidentifier():
            spelled = f" (a number written as text: give the int {int(devices)})" if devices.strip().isdigit() else ""
            raise HardwareError(f"devices={devices!r}: a symbolic number of devices is named like an axis ('P')"
                                f"{spelled}")
        devices = symbol(devices)
    if isinstance(devices, sympy.Integer):
        devices = int(devices)
    if isinstance(devices, bool) or not isinstance(devices, (int, sympy.Symbol)):
        raise HardwareError(f"devices={devices!r}: the number of devices P is a positive int or a symbol "
                            "(a name such as 'P')")
    if isinstance(devices, int) and devices < 1:
        raise HardwareError(f"devices={devices}: a cluster has at least one device (P ≥ 1)")
    if isinstance(devices, int) and devices > LARGEST_DEVICES:
        raise HardwareError(f"devices={devices}: a cluster has at most 2^20 = {LARGEST_DEVICES} devices "
                            f"(LARGEST_DEVICES, as a device region)")
    if isinstance(devices, sympy.Symbol):
        devices = symbol(devices.name)          # the one positive-integer symbol of that name, as the cost's
    return devices


def _gpu(gpu) -> GPU:
    if not isinstance(gpu, (GPU, str)) and not hasattr(gpu, "__fspath__"):
        raise HardwareError(f"a cluster's devices are GPUs: give a GPU model or its name, got "
                            f"{type(gpu).__name__} (a CPU model has no global memory or link to join)")
    gpu = load(gpu)
    missing = [f for f in NEEDED if getattr(gpu, f, None) is None]
    if missing:
        raise HardwareError(f"{gpu.name}: a cluster reads each device's {' and '.join(NEEDED)} (its capacity at "
                            f"level 0 and its memory bandwidth); the model has no {', '.join(missing)}")
    return gpu


def cluster(gpu, *, devices, link, inter_node_link=None, gpus_per_node: int | None = None) -> Cluster:
    """``devices`` GPUs of the model ``gpu`` (a name, a path, or a :class:`~napkin_cat.hardware.model.GPU`) joined
    by ``link`` within a node (a name such as ``"nvlink4"``, a path, or a :class:`~napkin_cat.hardware.link.Link`)
    and by ``inter_node_link`` between nodes; ``gpus_per_node`` defaults to the link's (an NVL72 rack is
    ``link="nvlink5", gpus_per_node=72``).  A HardwareError names the argument at fault and what is legal."""
    gpu = _gpu(gpu)
    devices = _devices(devices)
    link = load_link(link)
    inter = None if inter_node_link is None else load_link(inter_node_link)
    if inter is not None and inter.scope != "network":
        raise HardwareError(f"inter_node_link={inter.name!r} joins the GPUs of one node (scope = \"node\"); the "
                            f"link between nodes is a network link: {', '.join(network_links())}")
    if link.scope == "network":
        if inter is not None or gpus_per_node is not None:
            raise HardwareError(f"link={link.name!r} is a network link (one port per GPU, every GPU its own node): "
                                "give it alone, or as inter_node_link= beside a node's link (nvlink4, pcie5, ...)")
        return Cluster(gpu, devices, link)
    if gpus_per_node is None:
        gpus_per_node = link.gpus_per_node
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise HardwareError(f"gpus_per_node={gpus_per_node!r}: a node holds a positive whole number of GPUs")
    if link.max_gpus is not None and gpus_per_node > link.max_gpus:
        raise HardwareError(f"gpus_per_node={gpus_per_node}: {link.name} joins at most {link.max_gpus} GPUs in one "
                            "domain")
    if isinstance(devices, int) and devices > gpus_per_node and inter is None:
        raise HardwareError(f"devices={devices} span {math.ceil(devices / gpus_per_node)} nodes of {gpus_per_node} "
                            f"GPUs joined by {link.name}: give inter_node_link= (one of "
                            f"{', '.join(network_links())}), or gpus_per_node= where one {link.name} domain holds "
                            "them all")
    return Cluster(gpu, devices, link, inter, gpus_per_node)
