"""``napkin table cluster``: a cluster's per-device capacity, its links, and the time of its collectives.

The collectives' counts are the library's own: the cost at the device level of a one-collective diagram
(:func:`collective_rows`, ``nc.cost(d).link`` of an all-gather, a reduce-scatter, an all-reduce, an all-to-all, and
one exchange of a ring, :mod:`napkin_cat.algorithms.ring`) for an array of ``S`` bytes on ``P`` devices: each sends
and receives ``chunks`` pieces of ``S/P`` bytes, with its messages.  They equal NCCL's ring algorithms (nccl-tests
``doc/PERFORMANCE.md``; the step counts of NCCL's ``src/graph/tuning.cc``), which the tests check.  The bus bandwidth
printed is nccl-tests' ``busbw = algbw · chunks / P`` (``2(P−1)/P`` for an all-reduce, ``(P−1)/P`` for an
all-gather, a reduce-scatter or an all-to-all), which for a ring equals the charged link's per-direction bandwidth
less the latency's share.

>>> from napkin_cat.cli import main
>>> main(["table", "cluster", "--devices", "4", "--link", "pcie5", "--bytes", "64 MiB"]) == 0
cluster: 4 × h100-sxm5 over pcie5
...
all-reduce      6       100663296            6         1607.06    41.76         62.64
all-to-all      3       50331648             3         803.53     83.52         62.64
ring step       1       16777216             1         267.84     250.55        62.64
...
True
"""
from __future__ import annotations

from fractions import Fraction

import sympy

from napkin_cat.algorithms.devices import shard
from napkin_cat.algorithms.ring import ring
from napkin_cat.cli.inputs import CLIError
from napkin_cat.cost.functor import cost
from napkin_cat.syntax.collectives import all_gather, all_reduce, all_to_all, reduce_scatter
from napkin_cat.syntax.construct import einsum
from napkin_cat.hardware.devices import cluster
from napkin_cat.hardware.linktime import Traffic, link_time
from napkin_cat.hardware.tables import decimal, text_table
from napkin_cat.hardware.units import parse

def _whole(arrays) -> sympy.Expr:
    return sum((sympy.Mul(*[x.size for x in a.axes]) * a.dtype.bytes for a in arrays), sympy.Integer(0))


def collective_rows(P: int) -> list:
    """``[(name, share, messages)]`` of each collective on ``P`` devices, read off the cost of a one-collective
    diagram (``nc.cost(d).link``, symbolic: shards of ``n/P``): ``share``, the bytes each device sends per byte of
    the array the collective is named for (the array gathered, scattered or reduced whole; an all-to-all's per-device
    buffer; the array a ring passes round), and its messages; a ring step is one of a ring's ``P − 1`` exchanges.

    >>> [(name, str(share), m) for name, share, m in collective_rows(4)][:3]
    [('all-gather', '3/4', 3), ('reduce-scatter', '3/4', 3), ('all-reduce', '3/2', 6)]
    """
    gathered = all_gather("n", axis="n", devices=P)
    scattered = reduce_scatter("n", axis="n", devices=P)
    reduced = all_reduce("n", devices=P)
    exchanged = all_to_all("a b", gather="a", scatter="b", devices=P)
    ringed = ring(shard(einsum("q, x -> q"), "q", devices=P), "x")
    (r,) = ringed.boxes[0].arg.boxes
    rows = [("all-gather", gathered, _whole(gathered.cod.inside), 1),
            ("reduce-scatter", scattered, _whole(scattered.dom.inside), 1),
            ("all-reduce", reduced, _whole(reduced.dom.inside), 1),
            ("all-to-all", exchanged, _whole(exchanged.dom.inside), 1),
            ("ring step", ringed, _whole(a for a in ringed.dom.inside if r.axis in a.names), P - 1)]
    out = []
    for name, d, whole, steps in rows:
        link = cost(d).link
        share = sympy.nsimplify(sympy.simplify(link.sent_bytes / whole / steps))
        if not share.is_number:
            raise CLIError(f"{name}: the bytes it sends are not proportional to its array ({link.sent_bytes} per "
                           f"{whole})")
        out.append((name, share, int(sympy.sympify(link.messages) / steps)))
    return out


def cluster_table(args) -> tuple[dict, list]:
    """``(data, lines)`` of ``napkin table cluster`` for the parsed arguments."""
    if args.devices is None:
        raise CLIError("napkin table cluster needs --devices P (the number of GPUs, e.g. 8)")
    c = cluster(args.hardware, devices=args.devices, link=args.link, inter_node_link=args.inter_node_link,
                gpus_per_node=args.gpus_per_node)
    S = int(parse(args.bytes, "bytes", where="--bytes"))
    P = c.devices
    rows, data = [], []
    for name, share, messages in collective_rows(P):
        sent = Fraction(S) * Fraction(str(share))
        chunks = int(share * P)
        t = link_time(c, Traffic(sent=sent, received=sent, messages=messages, bytes_per_value=1))
        seconds = float(t)
        busbw = S / seconds * chunks / P
        data.append({"collective": name, "chunks": chunks, "sent_B": float(sent), "messages": messages,
                     "time_s": seconds, "algbw_B_per_s": S / seconds, "busbw_B_per_s": busbw})
        rows.append([name, chunks, round(float(sent)), messages, f"{seconds * 1e6:.2f}",
                     f"{S / seconds / 1e9:.2f}", f"{busbw / 1e9:.2f}"])
    links = [c.link] + ([c.inter_node_link] if c.inter_node_link is not None else [])
    lines = [f"cluster: {c.name}",
             f"per device: {c.capacity} B of global memory ({c.gpu.name}: the capacity M at level 0)"]
    lines += [f"link {link.name}: {float(link.per_direction) / 1e9:g} GB/s per direction, "
              f"{float(link.latency) * 1e6:g} µs per message ({link.topology}"
              + (f", {link.gpus_per_node} GPUs per node)" if link.scope == "node" else ", between nodes)")
              for link in links]
    lines.append(f"charged: {float(c.per_direction) / 1e9:g} GB/s per direction, {float(c.latency) * 1e6:g} µs per "
                 f"message ({c.nodes} node{'s' if c.nodes != 1 else ''})")
    title = f"collectives of an array of {S} B (chunk S/P = {decimal(Fraction(S, P))} B)"
    lines.append(text_table(["collective", "chunks", "sent per device (B)", "messages", "time (µs)", "algbw (GB/s)",
                             "busbw (GB/s)"], rows, title=title,
                            notes=["counts: the cost of each collective at the device level (each device sends and "
                                   "receives its chunks, one message per step: NCCL's ring algorithms, nccl-tests "
                                   "doc/PERFORMANCE.md); busbw = algbw · chunks / P"]))
    return {"cluster": c.to_dict(), "bytes": S, "collectives": data}, lines
