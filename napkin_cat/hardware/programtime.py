"""A device program's predicted time on a cluster, its link traffic read from its own cost.

:func:`~napkin_cat.hardware.linktime.predict_cluster` takes phases whose traffic is given.  Here the traffic is the
cost functor's at the device level, ``nc.cost(d, sizes=...).link`` (per device: values and bytes sent and received,
messages, values held at level 0), so nothing is counted by hand.  The busiest device sets the time (every device
runs the same phases at once); its traffic is cut in two phases::

    ring         the rings' exchanges (:func:`~napkin_cat.algorithms.ring.ring_link`, the counts the cost adds),
                 overlapped: P trips of compute / P each, P − 1 of them hiding their share of the transfer
    collectives  the rest of its link traffic (all-gathers, all-reduces, …), not overlapped

``compute``: the seconds of one device's own work (a number, or a
:class:`~napkin_cat.hardware.prediction.Prediction` of its per-device program); the memory each device holds is the
largest ``held`` at the program's bytes per value, a :class:`~napkin_cat.errors.CapacityError` past its global memory.

A ring step waits for its slowest device.  The cost counts each device's work per step (``Link.work``: the FLOPs of
the folds it runs, a mask's skipped folds not counted), so the ring's trips are charged the slowest device's work at
each step, ``Σ_t max_p work[p][t]``: with ``rate`` (FLOPs per second of one device) each step's seconds are that
work over the rate (``compute`` then the seconds of the device's work outside its rings); without, ``compute`` is the
busiest device's seconds, spread over the steps in proportion to their slowest device's work::

    ring compute = Σ_t max_p work[p][t] / rate                                       (rate given)
                 = compute · Σ_t max_p work[p][t] / max_p Σ_t work[p][t]             (else; = compute when balanced)

A causal mask with contiguous shards leaves device ``p`` ``p + 1`` of ``P`` shards' work: the slowest device sets
every step.  The zigzag order balances it (:mod:`~napkin_cat.algorithms.orders`).

>>> import napkin_cat as nc
>>> c = nc.hardware.cluster("h100-sxm5", devices=4, link="nvlink4")
>>> d = nc.ring(nc.shard(nc.library.attention(), "q", devices=4), "x")
>>> p = predict_program(c, d, sizes={"q": 4096, "x": 4096, "d": 64}, compute=1e-3)
>>> [x.label for x in p.phases], p.bound
(['ring'], 'compute')
"""
from __future__ import annotations

import numbers
from dataclasses import replace

import sympy

from napkin_cat.algorithms.devices import Shard
from napkin_cat.algorithms.ring import Ring, ring_extents, ring_link
from napkin_cat.cost.functor import cost as cost_of
from napkin_cat.hardware.devices import Cluster
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.linktime import ClusterPrediction, Phase, Traffic, link_time, predict_cluster
from napkin_cat.hardware.predict import Prediction
from napkin_cat.syntax.adapter import Bubble
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.sizes import as_sizes


def rings_of(d) -> list:
    """The rings inside the device regions of ``d``."""
    out = []
    for _, box in layers(d):
        if isinstance(box, Shard):
            out += [b for _, b in layers(box.arg) if isinstance(b, Ring)]
        elif isinstance(box, Bubble):
            out += rings_of(box.arg)
    return out


def ring_traffic(d, sizes) -> list:
    """Per device, ``(sent bytes, received bytes, messages)`` of the rings of ``d`` at ``sizes``."""
    env = as_sizes(sizes).env

    def value(e):
        v = sympy.sympify(e).subs(env)
        if not v.is_Integer:
            raise HardwareError(f"{e} is {v} at the sizes {dict(sizes)}: give every size of the program")
        return int(v)
    per = None
    for r in rings_of(d):
        extents = ring_extents(r, value)

        def numel_at(a, n, r=r):
            return value(sympy.Mul(*[n if x.name == r.axis else x.size for x in a.axes]))
        mine = [ring_link(r, numel_at, lambda a: a.dtype.bytes, device=p, extents=extents)
                for p in range(len(extents))]
        per = mine if per is None else [tuple(a + b for a, b in zip(x, y)) for x, y in zip(per, mine)]
    return per or []


def _bytes_per_value(d) -> int:
    return max([a.dtype.bytes for a in (*d.dom.inside, *d.cod.inside)] + [1])


def slowest_steps(link) -> list:
    """Per ring step, the most work any device does at it (``Link.work`` at sizes: a tuple per device over the steps);
    ``[]`` without rings.

    >>> from napkin_cat.cost.record import Link
    >>> slowest_steps(Link(2, (0, 0), (0, 0), (0, 0), work=((4, 0), (4, 4))))
    [4, 4]
    """
    if link is None or not link.work or not any(link.work):
        return []
    n = max(len(w) for w in link.work)
    return [max(w[t] if t < len(w) else 0 for w in link.work) for t in range(n)]


def ring_compute(link, compute, rate=None):
    """The seconds of the rings' trips, every step charged its slowest device (see the module docstring);
    ``compute``: the busiest device's seconds (without ``rate``)."""
    steps = slowest_steps(link)
    if rate is not None:
        if not steps:
            raise HardwareError("rate= charges the rings' steps their work from the cost; this program has no ring "
                                "at the sizes given (give compute= in seconds)")
        return sympy.Rational(sum(steps)) / sympy.sympify(rate)
    if not steps:
        return sympy.sympify(compute)
    busiest = max(sum(w) for w in link.work)
    return sympy.sympify(compute) * sympy.Rational(sum(steps), busiest) if busiest else sympy.sympify(compute)


def program_phases(c: Cluster, d, sizes, compute=0.0, rate=None, link=None) -> tuple:
    """``(phases, device, memory)``: the phases of the busiest ``device`` (the largest link time) of the device
    program ``d`` at ``sizes``, and the bytes each device holds at most (see the module docstring); ``link``:
    ``nc.cost(d, sizes=sizes).link`` where the caller has it already."""
    link = cost_of(d, sizes=sizes).link if link is None else link
    if link is None:
        raise HardwareError("predict_program takes a device program (a diagram with a device region: nc.shard, "
                            "nc.ring, the device rules); this one moves nothing over a link")
    P = len(link.sent)
    if isinstance(c.devices, int) and c.devices != P:
        raise HardwareError(f"the program runs on {P} devices, the cluster {c.name} has {c.devices}: build the "
                            f"cluster with devices={P}")
    rings = ring_traffic(d, sizes) or [(0, 0, 0)] * P
    times = [link_time(c, Traffic(link.sent_bytes[p], link.received_bytes[p], link.messages[p], bytes_per_value=1))
             for p in range(P)]
    p = max(range(P), key=lambda k: float(times[k]))
    sent, received, messages = rings[p]
    rest = Traffic(link.sent_bytes[p] - sent, link.received_bytes[p] - received, link.messages[p] - messages,
                   bytes_per_value=1)
    seconds = compute.time if isinstance(compute, Prediction) else compute
    phases = []
    if rings_of(d):
        phases.append(Phase("ring", Traffic(sent, received, messages, bytes_per_value=1),
                            compute=ring_compute(link, seconds, rate) / P, trips=P, overlapped=P - 1))
        if rate is not None and seconds:
            phases.append(Phase("compute", compute=compute))
    elif seconds:
        phases.append(Phase("compute", compute=compute))
    if rest.messages != 0 or rest.sent != 0 or rest.received != 0:
        phases.append(Phase("collectives", rest))
    if not phases:
        phases.append(Phase("compute", compute=0.0))
    held = max(link.held) * _bytes_per_value(d) if link.held is not None else None
    return phases, p, held


def predict_program(c: Cluster, d, *, sizes, compute=0.0, rate=None) -> ClusterPrediction:
    """The predicted time of the device program ``d`` on the cluster ``c`` at ``sizes``, every count read from
    ``nc.cost(d, sizes=sizes).link`` (see the module docstring); ``compute``: one device's own seconds (the
    busiest's); ``rate``: FLOPs per second of one device, which charges the rings' steps their work from the cost
    (each step its slowest device's), ``compute`` then the work outside the rings.

    >>> import napkin_cat as nc
    >>> c = nc.hardware.cluster("h100-sxm5", devices=4, link="nvlink4")
    >>> plain, zigzag = (nc.ring(nc.shard(nc.library.causal_attention(), "q", 4, order=o), "x")
    ...                  for o in ("contiguous", "zigzag"))
    >>> s = {"q": 8192, "x": 8192, "d": 128}
    >>> t = [predict_program(c, f, sizes=s, rate=c.gpu.peak("tensor", "fp32")).phases[0].compute
    ...      for f in (plain, zigzag)]
    >>> round(t[1] / t[0], 3)                      # the slowest device: 2P + 1 = 9 chunk pairs of 16, against 16
    0.563
    """
    if not isinstance(c, Cluster):
        raise HardwareError(f"predict_program takes a Cluster (nc.hardware.cluster), got {type(c).__name__}")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (numbers.Real, sympy.Number)) or rate <= 0):
        raise HardwareError(f"rate={rate!r}: FLOPs per second of one device, a positive number")
    phases, _, held = program_phases(c, d, sizes, compute, rate)
    p = predict_cluster(c, phases, sizes={str(k): v for k, v in as_sizes(sizes).env.items()}, memory=held)
    if not rings_of(d):
        return p
    how = ("its FLOPs over rate=" if rate is not None else
           "compute= (the busiest device's seconds) spread over the steps in proportion to that work")
    return replace(p, assumptions=p.assumptions + (
        f"a ring step waits for its slowest device: each step charged the most work any device does at it (the "
        f"cost's Link.work, the folds a mask skips not run), {how}",))


__all__ = ["predict_program", "program_phases", "ring_traffic", "rings_of", "slowest_steps", "ring_compute"]
