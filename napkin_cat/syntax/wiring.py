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

from napkin_cat.errors import NapkinError
from napkin_cat.syntax.adapter import Diagram, is_structural, layers


def route(box, values: list, *, merge=None) -> list:
    """What a structural box does to the values on its inputs (the markov category's structure)::

        swap(a, b) ↦ (b, a)      copyₙ(a) ↦ (a, …, a)      discard(a) ↦ ()

    The values may be anything (arrays, value ids, weave flags): every functor moves them
    the same way.  A merge has no meaning as a function of arrays; ``merge(values)`` says
    what a caller makes of one (by default it is refused).

    >>> import napkin_cat as nc
    >>> swap = nc.Diagram.swap(nc.types("a"), nc.types("b")).boxes[0]
    >>> route(swap, ["A", "B"]), route(nc.Diagram.copy(nc.types("a"), 3).boxes[0], ["A"])
    (['B', 'A'], ['A', 'A', 'A'])
    """
    kind = is_structural(box)
    if kind == "swap":
        n = len(box.left)
        return values[n:] + values[:n]
    if kind == "copy":
        return values * len(box.cod)
    if kind == "discard":
        return []
    if kind == "merge" and merge is not None:
        return merge(values)
    raise NapkinError(f"{box.name!r} is not a swap, copy or discard: a merge has no meaning as a function "
                      "of arrays (use an elementwise add)" if kind == "merge" else f"{box.name!r} is not structural")


def trace_values(diagram: Diagram):
    """``(ops, dom_ids, cod_ids)``: ops are ``(box, input ids, output ids)`` in layer order."""
    wires = list(range(len(diagram.dom)))
    fresh = len(wires)
    ops = []
    for offset, box in layers(diagram):
        k = len(box.dom)
        ins = wires[offset:offset + k]
        if is_structural(box) in ("swap", "copy", "discard"):
            outs = route(box, ins)
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
