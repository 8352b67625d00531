"""The link's time: a device's transfers over the link from the cost's counts, and a cluster's predicted time.

The cost functor counts, per device, the values it sends and receives over the link and the messages it sends
(the device level's H; :class:`Traffic` is that record).  A link (:mod:`napkin_cat.hardware.link`) is full
duplex: a device sends and receives at once, each direction at the link's per-direction bandwidth ``B``, and
each message costs the link's latency ``α``.  On the cluster's charged link (:mod:`napkin_cat.hardware.devices`)::

    T_link(traffic) = max(sent, received) · bytes_per_value · hops / B  +  messages · α

``hops`` (the links a value crosses) counts only on a ring topology; through a switch every value crosses one.
The step counts of an algorithm (a ring all-gather sends ``P − 1`` messages, an all-reduce ``2(P − 1)``) are the
record's ``messages``: data the cost gives, not constants here.

A device's program is a sequence of :class:`Phase` s.  A phase runs ``trips`` trips of ``compute`` seconds each
(the existing :func:`~napkin_cat.hardware.predict.predict` of the per-device program, or a number) and moves its
``traffic``; ``overlapped`` trips (a ring: each trip's next slice arrives from the neighbour while the current one
is used) overlap their share of the transfer with their compute, the rest do not::

    overlapped = 0 (a collective):  T = trips · c + T_link(traffic)
    overlapped = S ≥ 1 (a ring):    x = T_link(traffic) / S           (traffic and messages spread over S trips)
                                    T = S · max(c, x) + (trips − S) · c
    the cluster:                    T = Σ_phases T                     (every device runs the same phases at once)

>>> from napkin_cat.hardware.devices import cluster
>>> c = cluster("h100-sxm5", devices=8, link="nvlink4")
>>> t = link_time(c, Traffic(sent=2 ** 20, received=2 ** 20, messages=1, bytes_per_value=2))
>>> round(float(t) * 1e6, 3)      # µs: 2 MiB at 450 GB/s + 3.4 µs
8.06
>>> ring = Phase("ring", compute=1e-3, trips=8, overlapped=7,
...              traffic=Traffic(sent=7 * 2 ** 24, received=7 * 2 ** 24, messages=7, bytes_per_value=2))
>>> p = predict_cluster(c, [ring])
>>> round(p.time * 1e3, 3), p.phases[0].bound    # 7 · max(1 ms, 32 MiB / 450 GB/s + 3.4 µs) + 1 ms
(8.0, 'compute')
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from napkin_cat.errors import CapacityError
from napkin_cat.hardware.devices import Cluster
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.predict import Prediction
from napkin_cat.syntax.dtype import DTYPES, as_dtype
from napkin_cat.syntax.sizes import as_sizes


def _count(value, what: str, kind: str = "count"):
    """A count of the record (values, messages, hops, trips) or a time (seconds): a number ≥ 0 or an expression
    (symbolic in P and the sizes)."""
    if isinstance(value, (bool, str)):
        raise HardwareError(f"{what}={value!r}: a {kind} is a number ≥ 0 or a sympy expression, not a "
                            f"{type(value).__name__}")
    try:
        v = sympy.sympify(value)
    except (sympy.SympifyError, TypeError):
        raise HardwareError(f"{what}={value!r}: a {kind} is a number ≥ 0 or an expression in the sizes") from None
    if not isinstance(v, sympy.Expr) or (v.is_number and (not v.is_real or v < 0)):
        raise HardwareError(f"{what}={value!r}: a {kind} is a number ≥ 0 or an expression in the sizes")
    return v


@dataclass(frozen=True)
class Traffic:
    """What one device moves over the link: ``sent`` and ``received`` values, ``messages`` it sends (each charged
    the latency), each value ``bytes_per_value`` bytes (or a dtype's name), crossing ``hops`` links on a ring
    topology.  Counts are numbers or expressions (symbolic in ``P`` and the sizes)."""

    sent: object = 0
    received: object = 0
    messages: object = 0
    bytes_per_value: object = 4
    hops: object = 1

    def __post_init__(self):
        for name in ("sent", "received", "messages", "hops"):
            object.__setattr__(self, name, _count(getattr(self, name), name))
        b = self.bytes_per_value
        if isinstance(b, str):
            if b not in DTYPES:
                raise HardwareError(f"bytes_per_value={b!r}: a number of bytes or a dtype ({', '.join(DTYPES)})")
            b = as_dtype(b).bytes
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise HardwareError(f"bytes_per_value={self.bytes_per_value!r}: a positive whole number of bytes or a "
                                "dtype's name")
        object.__setattr__(self, "bytes_per_value", b)


def link_time(c: Cluster, traffic: Traffic):
    """Seconds one device spends moving ``traffic`` over the cluster's charged link, exactly (a sympy number, or an
    expression in the record's symbols and P): ``max(sent, received) · bytes · hops / B + messages · α``."""
    if not isinstance(c, Cluster):
        raise HardwareError(f"link_time takes a Cluster (nc.hardware.cluster), got {type(c).__name__}")
    hops = traffic.hops if c.link.topology == "ring" or (
        c.inter_node_link is not None and c.inter_node_link.topology == "ring") else sympy.Integer(1)
    volume = sympy.Max(traffic.sent, traffic.received) * traffic.bytes_per_value * hops
    return volume / sympy.sympify(c.per_direction) + traffic.messages * sympy.sympify(c.latency)


@dataclass(frozen=True)
class Phase:
    """One phase of every device's program (see the module docstring): ``trips`` trips of ``compute`` seconds each
    (a number or a :class:`~napkin_cat.hardware.prediction.Prediction` of the per-device program for one trip),
    ``traffic`` over the link, ``overlapped`` of the trips overlapping their share of it (0: not overlapped)."""

    label: str
    traffic: Traffic = field(default_factory=Traffic)
    compute: object = 0.0
    trips: object = 1
    overlapped: object = 0

    def __post_init__(self):
        if not isinstance(self.traffic, Traffic):
            raise HardwareError(f"phase {self.label!r}: traffic= is a Traffic record, got "
                                f"{type(self.traffic).__name__}")
        compute = self.compute.time if isinstance(self.compute, Prediction) else self.compute
        object.__setattr__(self, "trips", _count(self.trips, f"phase {self.label!r}: trips"))
        object.__setattr__(self, "overlapped", _count(self.overlapped, f"phase {self.label!r}: overlapped"))
        _count(compute, f"phase {self.label!r}: compute", "time in seconds")
        if self.trips.is_number and self.overlapped.is_number and self.overlapped > self.trips:
            raise HardwareError(f"phase {self.label!r}: overlapped={self.overlapped} of trips={self.trips}: at most "
                                "every trip overlaps a transfer")

    @property
    def seconds_per_trip(self):
        return sympy.sympify(self.compute.time if isinstance(self.compute, Prediction) else self.compute)


def phase_time(c: Cluster, phase: Phase) -> dict:
    """``{"time", "compute", "link"}``: the phase's seconds, its compute's and its transfer's (exact or symbolic)."""
    compute = phase.trips * phase.seconds_per_trip
    link = link_time(c, phase.traffic)
    if phase.overlapped == 0:
        return {"time": compute + link, "compute": compute, "link": link}
    s, per_trip = phase.overlapped, phase.seconds_per_trip
    time = s * sympy.Max(per_trip, link / s) + (phase.trips - s) * per_trip
    return {"time": time, "compute": compute, "link": link}


@dataclass(frozen=True)
class PhaseTime:
    """One phase's prediction (seconds): its time, its compute, its transfer, the transfer not hidden by compute,
    and which of compute and link sets it."""

    label: str
    time: float
    compute: float
    link: float
    exposed: float
    bound: str

    def to_dict(self) -> dict:
        return {"label": self.label, "time_s": self.time, "compute_s": self.compute, "link_s": self.link,
                "exposed_link_s": self.exposed, "bound": self.bound}


@dataclass(frozen=True)
class ClusterPrediction:
    """The predicted time of every device's program on a cluster (seconds), each phase's, and what it assumes."""

    time: float
    phases: tuple
    cluster: str
    sizes: dict
    memory: int | None = None
    assumptions: tuple = ()

    @property
    def bound(self) -> str:
        """What sets the longest phase: ``compute`` or ``link``."""
        return max(self.phases, key=lambda p: p.time).bound

    def to_dict(self) -> dict:
        return {"time_s": self.time, "cluster": self.cluster, "bound": self.bound, "memory_B": self.memory,
                "sizes": {str(k): int(v) for k, v in self.sizes.items()},
                "phases": [p.to_dict() for p in self.phases], "assumptions": list(self.assumptions)}


def _at(expr, named: dict):
    """``expr`` with each symbol that ``named`` names (by its name, whatever its assumptions) replaced."""
    expr = sympy.sympify(expr)
    return expr.subs({s: named[str(s)] for s in expr.free_symbols if str(s) in named})


def _number(expr, what: str) -> float:
    expr = sympy.sympify(expr)
    if not expr.is_number:
        names = sorted(str(s) for s in expr.free_symbols)
        raise HardwareError(f"{what} depends on {names}: give their values in sizes= (e.g. sizes={{'{names[0]}': 8}})")
    return float(expr)


def cluster_assumptions(c: Cluster, phases) -> tuple:
    """What a cluster prediction assumes (each a sentence a measurement can refute)."""
    link = c.link
    out = [f"each device's global memory ({c.capacity} B, the {c.gpu.name} model's) is its capacity at level 0",
           "every device runs the same phases at the same time: the per-device counts are the busiest device's",
           "the link is full duplex: a device sends and receives at once, so a transfer takes max(sent, received) · "
           "bytes / per-direction bandwidth, plus the latency per message",
           f"{link.name}: {float(link.per_direction) / 1e9:g} GB/s per direction, {float(link.latency) * 1e6:g} µs "
           f"per message ({link.topology} topology: " + ("every device reaches every other through the switch at "
                                                         "its full bandwidth)" if link.topology == "switch" else
                                                         "a value crosses hops links of the ring)"),
           "no other traffic shares the link, and no software overhead beyond the latency per message (a "
           "collective library's fixed launch latency is not charged)"]
    if c.inter_node_link is not None:
        inter = c.inter_node_link
        out.append(f"where the devices span nodes of {c.gpus_per_node} GPUs, every transfer is charged at the slower "
                   f"link ({inter.name}: {float(inter.per_direction) / 1e9:g} GB/s per direction, "
                   f"{float(inter.latency) * 1e6:g} µs per message): a ring across nodes waits for its slowest hop "
                   "(an all-to-all's share within a node is not credited)")
    elif c.link.scope == "node" and not isinstance(c.devices, int):
        out.append(f"P ≤ {c.gpus_per_node}: the devices fit one node of {c.link.name}")
    if any(p.overlapped != 0 for p in phases):
        out.append("a ring overlaps each trip's transfer with the trip's compute (double-buffered: the next slice "
                   "arrives while the current one is used): time per trip = max(compute, transfer)")
    if any(p.overlapped == 0 and p.traffic.messages != 0 for p in phases):
        out.append("a collective is not overlapped: its transfer time adds to the compute")
    for p in phases:
        if isinstance(p.compute, Prediction):
            out.extend(f"{p.label} (per device): {a}" for a in p.compute.assumptions)
    return tuple(out)


def predict_cluster(c: Cluster, phases, *, sizes: dict | None = None, memory=None) -> ClusterPrediction:
    """The predicted time of the ``phases`` every device of the cluster ``c`` runs (see the module docstring), at
    ``sizes`` (values of P and of any symbol in the counts); ``memory``: the bytes each device holds at level 0
    (the cost's M at level 0), a :class:`~napkin_cat.errors.CapacityError` past the device's global memory."""
    if not isinstance(c, Cluster):
        raise HardwareError(f"predict_cluster takes a Cluster (nc.hardware.cluster), got {type(c).__name__}")
    phases = tuple(phases)
    if not phases or any(not isinstance(p, Phase) for p in phases):
        raise HardwareError("predict_cluster takes a non-empty sequence of Phase records")
    named = {str(k): v for k, v in as_sizes(sizes).env.items()}
    held = None
    if memory is not None:
        held = _number(_at(memory, named), "memory=")
        if held > c.capacity:
            raise CapacityError(f"each device holds {held:.0f} B at level 0 (global memory), more than the "
                                f"{c.gpu.name}'s {c.capacity} B: use more devices (P = {c.devices}) or a "
                                "partition that holds less per device")
    out = []
    for p in phases:
        t = {k: _number(_at(v, named), f"phase {p.label!r}: its {k}") for k, v in phase_time(c, p).items()}
        exposed = t["time"] - t["compute"]
        bound = "link" if t["link"] > t["compute"] else "compute"
        out.append(PhaseTime(p.label, t["time"], t["compute"], t["link"], max(exposed, 0.0), bound))
    return ClusterPrediction(sum(p.time for p in out), tuple(out), c.name, named,
                             None if held is None else int(held), cluster_assumptions(c, phases))
