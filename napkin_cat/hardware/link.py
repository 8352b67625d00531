"""Links between GPUs as data: NVLink, PCIe, InfiniBand, read from a small, versioned TOML file (``format = 1``).

A link is what joins the devices of a cluster (:mod:`napkin_cat.hardware.devices`): how fast one GPU sends and
receives over it, what each message costs, and how the GPUs are wired.  Like a GPU model
(:mod:`napkin_cat.hardware.model`) it is read, never coded: ``load_link("nvlink4")`` reads ``links/nvlink4.toml``
shipped with the package, ``load_link("my-link.toml")`` a user's file.  Every quantity carries its unit
(:mod:`napkin_cat.hardware.units`) and is stored exactly in base units (bytes per second, seconds).

The format (``?`` marks an optional field)::

    format = 1, name, description
    topology       "switch": every GPU reaches every other at its full bandwidth (NVSwitch, a PCIe switch tree,
                   a non-blocking fat tree); "ring": each GPU is wired to two neighbours only, and a value for
                   a GPU h places away crosses h links
    scope          "node": the link joins the GPUs of one node; "network": it joins nodes (one port per GPU)
    gpus_per_node? (scope "node", required there) the GPUs one node holds: the default of nc.hardware.cluster
    max_gpus?      (scope "node") the most GPUs the link can join in one domain (at least gpus_per_node)
    [sources]      free text: where each value comes from
    [bandwidth]    per_direction: what one GPU sends (and, at the same time, receives) per second
    [latency]      per_message: what each message costs beyond its bytes (a ring step, one send)

The bandwidth is per direction because a link is full duplex: a device sends and receives at once, so a
transfer costs ``max(sent, received)`` bytes over it, not their sum (:mod:`napkin_cat.hardware.linktime`).

>>> nv = load_link("nvlink4")
>>> float(nv.per_direction) / 1e9, float(nv.latency) * 1e6, nv.topology, nv.gpus_per_node
(450.0, 3.4, 'switch', 8)
>>> float(load_link("ib-ndr").per_direction) / 1e9        # 400 Gb/s
50.0
>>> load_link("nvlink9")
Traceback (most recent call last):
...
napkin_cat.errors.HardwareError: no link called 'nvlink9'; shipped links are ib-hdr, ib-ndr, nvlink4, nvlink5, pcie5 ...
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from napkin_cat.hardware import files
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.units import LARGEST, parse, unit_of

FORMAT = 1
TOPOLOGIES = ("switch", "ring")
SCOPES = ("node", "network")
TOP = {"format", "name", "description", "topology", "scope", "gpus_per_node", "max_gpus", "sources", "bandwidth",
       "latency"}


@dataclass(frozen=True)
class Link:
    """A validated link model (quantities exact, in base units: bytes per second, seconds).

    ``per_direction``: bytes one GPU sends per second over the link, and receives at the same time;
    ``latency``: seconds per message; ``topology``, ``scope``, ``gpus_per_node``, ``max_gpus``: see the module."""

    name: str
    description: str
    topology: str
    scope: str
    per_direction: Fraction
    latency: Fraction
    gpus_per_node: int | None = None
    max_gpus: int | None = None
    sources: dict = field(default_factory=dict)
    path: str = ""

    def to_dict(self) -> dict:
        """A JSON-ready summary (bandwidth in bytes per second, latency in seconds)."""
        return {"name": self.name, "description": self.description, "topology": self.topology, "scope": self.scope,
                "per_direction_B_per_s": float(self.per_direction), "latency_s": float(self.latency),
                "gpus_per_node": self.gpus_per_node, "max_gpus": self.max_gpus, "sources": dict(self.sources),
                "path": self.path}


def links() -> list[str]:
    """The names of the shipped links."""
    return files.shipped("links")


def load_link(name_or_path) -> Link:
    """A link by name (``"nvlink4"``, ``"ib-ndr"``, ...) or from the path of a user's TOML file."""
    if isinstance(name_or_path, Link):
        return name_or_path
    data, where = files.read_named(name_or_path, "links", "link", plural="links",
                                   hint=": see napkin_cat/hardware/link.py for the format")
    return link_from_dict(data, where=where)


def _quantity(data, section, key, dimension, where):
    sec = data.get(section)
    if not isinstance(sec, dict):
        raise HardwareError(f"{where}: missing section [{section}] (with {key} = a {dimension} and its unit)")
    files.known_fields(sec, (key,), f"{where}: [{section}]", f"[{section}]")
    if key not in sec:
        raise HardwareError(f"{where}: missing field {section}.{key} (a {dimension}, with its unit)")
    if isinstance(sec[key], str) and unit_of(sec[key]) == "B/clk":
        raise HardwareError(f"{where}: {section}.{key} = {sec[key]!r}: a link has no clock; write bytes or bits "
                            "per second (GB/s, Gb/s)")
    return parse(sec[key], dimension, where=f"{where}: {section}.{key}")


def _choice(data, key, legal, where):
    value = files.text(data, key, where)
    if value not in legal:
        raise HardwareError(f"{where}: {key} = {value!r}; a link's {key} is one of {', '.join(legal)}")
    return value


def link_from_dict(data: dict, *, where: str = "<dict>") -> Link:
    """The :class:`Link` a parsed link file describes, every field checked (a HardwareError naming the field)."""
    if not isinstance(data, dict):
        raise HardwareError(f"{where}: a link file is a TOML table, got {type(data).__name__}")
    extra = sorted(set(data) - TOP)
    if extra:
        raise HardwareError(f"{where}: unknown field(s) {extra}; a link file has {sorted(TOP)}")
    if data.get("format") != FORMAT:
        raise HardwareError(f"{where}: format = {data.get('format')!r}; this version reads link files of "
                            f"format = {FORMAT}")
    topology = _choice(data, "topology", TOPOLOGIES, where)
    scope = _choice(data, "scope", SCOPES, where)
    most = LARGEST["count"]
    per_node = data.get("gpus_per_node")
    max_gpus = data.get("max_gpus")
    if scope == "network" and (per_node is not None or max_gpus is not None):
        raise HardwareError(f"{where}: a network link (scope = \"network\") joins nodes, one port per GPU; "
                            "gpus_per_node and max_gpus belong to a node's link (scope = \"node\")")
    if scope == "node":
        if per_node is None:
            raise HardwareError(f"{where}: missing field gpus_per_node (a node's link says how many GPUs one node "
                                "holds, e.g. gpus_per_node = 8)")
        per_node = files.whole(per_node, f"{where}: gpus_per_node", most=most)
        if max_gpus is not None:
            max_gpus = files.whole(max_gpus, f"{where}: max_gpus", least=per_node, most=most)
    return Link(name=files.text(data, "name", where), description=files.text(data, "description", where),
                topology=topology, scope=scope,
                per_direction=_quantity(data, "bandwidth", "per_direction", "bandwidth", where),
                latency=_quantity(data, "latency", "per_message", "time", where),
                gpus_per_node=per_node, max_gpus=max_gpus, sources=files.texts(data, "sources", where), path=where)
