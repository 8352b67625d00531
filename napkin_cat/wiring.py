"""Values view of a diagram: each box with the value ids it reads and writes.

Swaps and copies only move or alias values, and discards drop them, so the
boxes that compute are listed with the ids of their input and output values.
This is the view the streaming analysis and the cost functor walk.

>>> import napkin_cat as nc
>>> ops, dom, cod = trace_values(nc.library.attention())
>>> [(box.name, ins, outs) for box, ins, outs in ops]
[('·', [0, 1], [3]), ('SoftMax', [3], [4]), ('·', [4, 2], [5])]
"""
from __future__ import annotations

from napkin_cat.adapter import Diagram, is_structural, layers


def trace_values(diagram: Diagram):
    """``(ops, dom_ids, cod_ids)``: ops are ``(box, input ids, output ids)`` in layer order."""
    wires = list(range(len(diagram.dom)))
    fresh = len(wires)
    ops = []
    for offset, box in layers(diagram):
        k = len(box.dom)
        ins = wires[offset:offset + k]
        kind = is_structural(box)
        if kind == "swap":
            n = len(box.left)
            outs = ins[n:] + ins[:n]
        elif kind == "copy":
            outs = ins * len(box.cod)
        elif kind == "discard":
            outs = []
        else:
            outs = list(range(fresh, fresh + len(box.cod)))
            fresh += len(box.cod)
            ops.append((box, ins, outs))
        wires[offset:offset + k] = outs
    return ops, list(range(len(diagram.dom))), wires


def consumers(ops, cod_ids) -> dict:
    """value id -> list of (op index, port); the diagram's outputs appear as op index -1."""
    out = {}
    for i, (_, ins, _) in enumerate(ops):
        for p, v in enumerate(ins):
            out.setdefault(v, []).append((i, p))
    for p, v in enumerate(cod_ids):
        out.setdefault(v, []).append((-1, p))
    return out
