"""``napkin table cluster``: a cluster's per-device capacity, its links, and the time of NCCL's ring collectives.

The collectives' counts here are NCCL's documented ring algorithms for an array of ``S`` bytes on ``P`` ranks
(nccl-tests ``doc/PERFORMANCE.md``; the step counts of NCCL's ``src/graph/tuning.cc``): each rank sends and
receives ``chunks`` pieces of ``S/P`` bytes, one message per step.  They are a display of the link's time
(:func:`napkin_cat.hardware.link_time`) on familiar patterns; the counts a derived algorithm's time reads are its
own cost at the device level, never this table.  The bus bandwidth printed is nccl-tests'
``busbw = algbw · chunks / P`` (``2(P−1)/P`` for an all-reduce, ``(P−1)/P`` for an all-gather, a reduce-scatter
or an all-to-all), which for a ring equals the charged link's per-direction bandwidth less the latency's share.

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

from napkin_cat.cli.inputs import CLIError
from napkin_cat.hardware.devices import cluster
from napkin_cat.hardware.linktime import Traffic, link_time
from napkin_cat.hardware.tables import decimal, text_table
from napkin_cat.hardware.units import parse

#: (collective, chunks of S/P bytes each rank sends and receives, messages each rank sends) as functions of P
RING_COLLECTIVES = (("all-gather", lambda P: P - 1, lambda P: P - 1),
                    ("reduce-scatter", lambda P: P - 1, lambda P: P - 1),
                    ("all-reduce", lambda P: 2 * (P - 1), lambda P: 2 * (P - 1)),
                    ("all-to-all", lambda P: P - 1, lambda P: P - 1),
                    ("ring step", lambda P: 1, lambda P: 1))


def cluster_table(args) -> tuple[dict, list]:
    """``(data, lines)`` of ``napkin table cluster`` for the parsed arguments."""
    if args.devices is None:
        raise CLIError("napkin table cluster needs --devices P (the number of GPUs, e.g. 8)")
    c = cluster(args.hardware, devices=args.devices, link=args.link, inter_node_link=args.inter_node_link,
                gpus_per_node=args.gpus_per_node)
    S = int(parse(args.bytes, "bytes", where="--bytes"))
    P = c.devices
    rows, data = [], []
    for name, chunks, messages in RING_COLLECTIVES:
        sent = Fraction(S * chunks(P), P)
        t = link_time(c, Traffic(sent=sent, received=sent, messages=messages(P), bytes_per_value=1))
        seconds = float(t)
        busbw = S / seconds * chunks(P) / P
        data.append({"collective": name, "chunks": chunks(P), "sent_B": float(sent), "messages": messages(P),
                     "time_s": seconds, "algbw_B_per_s": S / seconds, "busbw_B_per_s": busbw})
        rows.append([name, chunks(P), round(float(sent)), messages(P), f"{seconds * 1e6:.2f}",
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
    title = f"NCCL's ring collectives of an array of {S} B (chunk S/P = {decimal(Fraction(S, P))} B)"
    lines.append(text_table(["collective", "chunks", "sent per device (B)", "messages", "time (µs)", "algbw (GB/s)",
                             "busbw (GB/s)"], rows, title=title,
                            notes=["counts: nccl-tests doc/PERFORMANCE.md (each rank sends and receives its chunks, "
                                   "one message per step); busbw = algbw · chunks / P"]))
    return {"cluster": c.to_dict(), "bytes": S, "collectives": data}, lines
