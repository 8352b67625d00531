"""Columns of a diagram: independent boxes share a column (a greedy foliation, by interchange).

>>> import napkin_cat as nc
>>> sm, exp = nc.softmax("q x", over="x"), nc.elementwise("exp", "q x")
>>> [[b.name for _, b in col] for col in foliate((sm >> exp) @ (sm >> exp))]
[['SoftMax', 'SoftMax'], ['exp', 'exp']]
"""
from __future__ import annotations

from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import layers


def foliate(diagram: Diagram) -> list[list[tuple[int, object]]]:
    """Group the layers into columns of independent boxes: ``[(offset before the column, box)]``.

    Each box goes to the earliest column after the boxes that made its inputs
    and after any box that removed a wire from between them (the interchange
    law); a box without inputs starts a column of its own.  Linear in boxes
    times live wires.

    >>> import napkin_cat as nc
    >>> sm, exp = nc.softmax("q x", over="x"), nc.elementwise("exp", "q x")
    >>> [[b.name for _, b in col] for col in foliate((sm >> exp) @ (sm >> exp))]
    [['SoftMax', 'SoftMax'], ['exp', 'exp']]
    """
    wires = [(i, 0) for i in range(len(diagram.dom))]      # (wire id, first free column)
    bounds = [0] * (len(wires) + 1)                         # the same, for the gaps between wires
    placed, n_cols, floor, fresh = [], 0, 0, len(wires)
    for offset, box in layers(diagram):
        k, m = len(box.dom), len(box.cod)
        ins = wires[offset:offset + k]
        c = max([floor] + [r for _, r in ins] + bounds[offset + 1:offset + k]) if k else n_cols
        if not k:
            floor = c + 1
        n_cols = max(n_cols, c + 1)
        right = wires[offset][0] if offset < len(wires) else None
        outs = [(fresh + j, c + 1) for j in range(m)]
        fresh += m
        placed.append((c, box, [i for i, _ in ins] or [right], [i for i, _ in outs]))
        wires[offset:offset + k] = outs
        edge = [max(bounds[offset], bounds[offset + k], c + 1)] if not m else [bounds[offset]]
        bounds[offset:offset + k + 1] = edge + [c + 1] * (m - 1) + ([bounds[offset + k]] if m else [])
    by_column = [[] for _ in range(n_cols)]
    for seq, (c, box, ins, outs) in enumerate(placed):
        by_column[c].append((seq, box, ins, outs))
    current, columns = list(range(len(diagram.dom))), []
    for entries in by_column:
        pos = {w: p for p, w in enumerate(current)}
        order = sorted((pos.get(ins[0], len(current)), len(box.dom) > 0, seq, box, outs)
                       for seq, box, ins, outs in entries)
        nxt, ptr = [], 0
        for p, _, _, box, outs in order:
            nxt += current[ptr:p] + outs
            ptr = p + len(box.dom)
        current = nxt + current[ptr:]
        columns.append([(p, box) for p, _, _, box, _ in order])
    return columns
