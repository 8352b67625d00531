"""``napkin derive ALGORITHM --cluster GPU:P:LINK``: the device form of least predicted step time on a cluster.

With ``--sizes`` (every axis): each candidate's predicted time, memory per device or why it was refused, and the
chosen one.  With ``--sweep AXES=LO..HI`` (powers of two; the other axes from ``--sizes``) the choice at each size
and where it changes; ``--plot`` draws the sweep (:func:`napkin_cat.render.sweeps.plot_cluster_sweep`).

>>> from napkin_cat.cli import main
>>> main(["derive", "matmul", "--cluster", "h100-sxm5:2:nvlink4", "--sizes", "a=256,b=256,c=256",
...       "--compute", "transfers"]) == 0
form ...
chosen: one device  (41.56 µs, compute-bound, 524288 B per device on 2 × h100-sxm5 over nvlink4)
True
>>> main(["derive", "matmul", "--cluster", "h100-sxm5:two:nvlink4", "--sizes", "a=256,b=256,c=256"])
2
"""
from __future__ import annotations

import os

from napkin_cat.cli.inputs import CLIError, parse_memory, parse_sizes
from napkin_cat.hardware.clustered import derive_for_cluster
from napkin_cat.hardware.clustersweep import sweep
from napkin_cat.hardware.devices import cluster
from napkin_cat.render.sweeps import plot_cluster_sweep


def parse_cluster(text: str):
    """``"h100-sxm5:8:nvlink4"`` (or ``…:ib-ndr`` for the link between nodes) → a Cluster; CLIError if malformed."""
    parts = text.split(":")
    if len(parts) not in (3, 4) or not parts[1].isdigit():
        raise CLIError(f"malformed --cluster {text!r}: GPU:DEVICES:LINK[:INTER_NODE_LINK], e.g. h100-sxm5:8:nvlink4")
    return cluster(parts[0], devices=int(parts[1]), link=parts[2],
                   inter_node_link=parts[3] if len(parts) == 4 else None)


def parse_sweep(text: str) -> tuple:
    """``"q,x=4096..1048576"`` → ``(("q", "x"), [4096, 8192, …])``: the axes set together, powers of two."""
    axes, eq, span = text.partition("=")
    names = tuple(a.strip() for a in axes.split(",") if a.strip())
    if not eq or not names or ".." not in span:
        raise CLIError(f"malformed --sweep {text!r}: AXES=LO..HI, e.g. q,x=4096..1048576 (powers of two)")
    return names, parse_memory(span)


def parse_layout(text: str | None, diagram):
    """``"q,x,x"`` → one entry per input: the axis it arrives sharded along (``-``: whole on every device)."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != len(diagram.dom):
        raise CLIError(f"--layout {text!r}: one entry per input ({len(diagram.dom)}), e.g. q,x,x; '-' for whole")
    return tuple(None if p in ("-", "") else p for p in parts)


def cmd_cluster(args, label: str, d, emit, writable_folder):
    """``napkin derive --cluster``: see the module docstring."""
    if args.memory is not None:
        raise CLIError("--cluster reads each device's memory off the cluster: drop --memory")
    c = parse_cluster(args.cluster)
    sizes = parse_sizes(args.sizes)
    layout = parse_layout(args.layout, d)
    options = {"compute": args.compute, "layout": layout}
    if args.sweep is None:
        if args.plot:
            raise CLIError("--plot with --cluster draws a sweep: give --sweep AXES=LO..HI")
        r = derive_for_cluster(d, c, sizes, **options)
        rows = [{"form": x.label, "time_s": x.time, "memory_B": x.memory, "refused": x.refused}
                for x in r.candidates]
        text = [f"{'form':<60} {'time (µs)':>11} {'memory (B)':>14}  refused"]
        text += [f"{x.label[:60]:<60} {'' if x.time is None else f'{x.time * 1e6:.2f}':>11} "
                 f"{'' if x.memory is None else x.memory:>14}  {x.refused or ''}" for x in r.candidates]
        text.append(f"chosen: {r.label}  ({r.time * 1e6:.2f} µs, {r.prediction.bound}-bound, {r.memory} B per "
                    f"device on {c.name})")
        data = {"algorithm": label, "cluster": c.to_dict(), "sizes": dict(r.sizes), "chosen": r.label,
                "prediction": r.prediction.to_dict(), "trace": [s.rule for s in r.trace], "candidates": rows}
        return emit(args, data, text)
    axes, values = parse_sweep(args.sweep)
    s = sweep(d, c, sizes, axes=axes, values=values, **options)
    text = [f"{' = '.join(axes)}: {v}  {p.derivation.label if p.derivation else 'none fits: ' + p.error}"
            for v, p in zip(s.values, s.points)]
    text += [f"change between {a} and {b}: {before} → {after} ({why})" for a, b, before, after, why in s.changes()]
    data = {"algorithm": label, "cluster": c.to_dict(), "axes": list(axes), "values": list(s.values),
            "chosen": list(s.chosen), "times": s.times(), "changes": [list(x) for x in s.changes()]}
    if args.plot:
        writable_folder(os.path.dirname(os.path.abspath(args.plot)))
        plot_cluster_sweep(s, args.plot, title=f"{label} on {c.name}")
        data["plot"] = args.plot
        text.append(args.plot)
    return emit(args, data, text)


__all__ = ["cmd_cluster", "parse_cluster", "parse_sweep", "parse_layout"]
