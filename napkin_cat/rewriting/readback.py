"""Netlist → diagram: lay a netlist out again as layers of a string diagram.

Nodes go in topological order; the inputs of each node are gathered by swaps; a
copy node is laid out lazily as binary copies just before each consumer (which
keeps the diagram narrow); a discard goes right after its wire appears.  The
read-back is evaluation-preserving::

    evaluate(to_diagram(to_netlist(d))) == evaluate(d)

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.netlist import to_netlist
>>> att = nc.library.attention()
>>> [b.name for b in to_diagram(to_netlist(att)).boxes if b.name in ("·", "SoftMax")]
['·', 'SoftMax', '·']
"""
from __future__ import annotations

from functools import lru_cache

from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.flat import copy, discard, from_layers, swap


@lru_cache(maxsize=4096)
def _swap_box(a, b):
    return swap(Ty(a), Ty(b)).boxes[0]


@lru_cache(maxsize=4096)
def _copy_box(a, n):
    return copy(Ty(a), n).boxes[0]


@lru_cache(maxsize=4096)
def _discard_box(a):
    return discard(Ty(a)).boxes[0]


@lru_cache(maxsize=65536)
def _ty(arrays: tuple):
    return Ty(*arrays)


def to_diagram(net) -> Diagram:
    """Lay a :class:`~napkin_cat.rewriting.netlist.Netlist` out as a diagram (see module docstring).

    A copy node is laid out lazily, as binary copies made just before each
    consumer (which keeps the diagram narrow); discards go right after their
    wire appears.  Composes once (:func:`napkin_cat.syntax.flat.from_layers`).
    """
    state = list(net.inputs)
    arrays = {w.id: w.array for w in net.wires.values()}
    items = []
    lazy = {}     # output wire of a copy node, not yet laid out -> the copy node
    holder = {}   # copy node -> the wire in ``state`` carrying its value
    left = {}     # copy node -> outputs not yet laid out

    types = {}    # the wires beside a layer (their ids) -> their type, made once per layout

    def typed(wids: tuple):
        ty = types.get(wids)
        if ty is None:
            ty = types[wids] = _ty(tuple(arrays[w] for w in wids))
        return ty

    def emit(pos, box, k, outs):
        items.append((typed(tuple(state[:pos])), box, typed(tuple(state[pos + k:]))))
        state[pos:pos + k] = outs

    def materialize(w):
        """Put wire ``w`` in ``state``, copying its copy node's value if needed."""
        c = lazy.pop(w, None)
        if c is None:
            return
        if c not in holder:
            materialize(net.ins[c][0])
            holder[c] = net.ins[c][0]
        pos = state.index(holder[c])
        if left[c] == 1:
            state[pos] = w
            del holder[c]
        else:
            emit(pos, _copy_box(arrays[w], 2), 1, [w, holder[c]])
            left[c] -= 1

    def move(src, dst):
        while src < dst:
            emit(src, _swap_box(arrays[state[src]], arrays[state[src + 1]]), 2,
                 [state[src + 1], state[src]])
            src += 1
        while src > dst:
            emit(src - 1, _swap_box(arrays[state[src - 1]], arrays[state[src]]), 2,
                 [state[src], state[src - 1]])
            src -= 1

    def gather(wids):
        """Make ``wids`` adjacent, in order; return the offset of the first."""
        for w in wids:
            materialize(w)
        if not wids:
            return len(state)
        anchor = state.index(wids[0])
        for j in range(1, len(wids)):
            p = state.index(wids[j])
            if p < anchor:
                move(p, anchor + j - 1)
                anchor -= 1
            else:
                move(p, anchor + j)
        return anchor

    def discard_now(wids):
        for w in wids:
            owner = net.wires[w].dst[0]
            if owner in net.nodes and net.nodes[owner].kind == "discard":
                materialize(w)
                emit(state.index(w), _discard_box(arrays[w]), 1, [])

    discard_now(net.inputs)
    for nid, node in net.nodes.items():
        if node.kind == "discard":
            continue
        if node.kind == "copy":
            left[nid] = len(net.outs[nid])
            lazy.update(dict.fromkeys(net.outs[nid], nid))
        else:
            wids = list(net.ins[nid])
            pos = gather(wids)
            emit(pos, node.box, len(wids), list(net.outs[nid]))
        discard_now(net.outs[nid])
    for j, w in enumerate(net.outputs):
        materialize(w)
        move(state.index(w), j)
    return from_layers(_ty(tuple(net.dom)), _ty(tuple(net.cod)), items)
