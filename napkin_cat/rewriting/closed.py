"""Closed values: what a function computes from none of its inputs (positions, constants, comparisons of them).

A primitive box is *closed* when every value it reads is made, through copies, by closed boxes: a box that
reads nothing (``position``, a constant) is closed, and so is ``x ≤ q`` of two positions.  A closed value is a
constant of the function (boxes are deterministic: paper §2, a markov category's deterministic states), so a
kernel that reads one may compute it instead of loading it, for nothing in H: it reads no level-0 array.

A closed box is *folded* into its readers when it has one output, read (through copies) by boxes only, each
through one port: the derivation search makes no kernel for it, and each reading port computes its own copy
(the copy law ``c ; copy = c ⊗ c`` for a deterministic ``c``).  :func:`tree` is what one port computes: the
closed boxes reached backwards from it, each once per reading port (a tree, as the copies make it).

The law, for a closed diagram ``c: I → X`` and any ``f: X ⊗ Y → Z``::

    (c ⊗ id_Y) ; f  ==  c′ ; f        with c′ = c computed where f runs (inside f's kernel)

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.netlist import to_netlist
>>> net = to_netlist(nc.library.causal_attention(q=4, x=4, d=2))
>>> sorted(net.nodes[n].name for n in closed(net)), sorted(net.nodes[n].name for n in folded(net))
(['pos', 'pos', '≤'], ['pos', 'pos', '≤'])
>>> where_box = next(n for n, node in net.nodes.items() if node.name == "where")
>>> [net.nodes[n].name for n in tree(net, net.ins[where_box][0])]
['pos', 'pos', '≤']
"""
from __future__ import annotations

from napkin_cat.rewriting.netlist import INPUT, OUTPUT, Netlist


def source(net: Netlist, wid):
    """The producer of wire ``wid`` seen through copy nodes: ``(node, port)`` or ``("in", i)``."""
    src = net.wires[wid].src
    while src[0] != INPUT and net.nodes[src[0]].kind == "copy":
        src = net.wires[net.ins[src[0]][0]].src
    return src


def readers(net: Netlist, wid) -> list:
    """The consumers of wire ``wid`` through copies, ``(node, port)`` or ``("out", j)``; discards dropped."""
    dst = net.wires[wid].dst
    if dst[0] == OUTPUT:
        return [dst]
    node = net.nodes[dst[0]]
    if node.kind == "copy":
        return [r for w in net.outs[dst[0]] for r in readers(net, w)]
    return [] if node.kind == "discard" else [dst]


def _primitive(node) -> bool:
    return (node.kind == "box" and node.spec.kind not in ("load", "save")
            and all(a.level == 0 for a in (*node.dom, *node.cod)))


def closed(net: Netlist) -> set:
    """The node ids of the closed boxes of ``net`` (level-0 primitives reading, through copies, closed boxes only)."""
    out = set()
    for nid, node in net.nodes.items():        # topological order: a box's producers come first
        if _primitive(node) and all(source(net, w)[0] in out for w in net.ins[nid]):
            out.add(nid)
    return out


def folded(net: Netlist) -> set:
    """The closed boxes each reading port computes for itself: one output, read by boxes only (not an output of
    the function, not only discarded), reading folded boxes only."""
    made = closed(net)
    out = set()
    for nid in net.nodes:
        if nid not in made or len(net.outs[nid]) != 1:
            continue
        ends = readers(net, net.outs[nid][0])
        if ends and all(e[0] != OUTPUT for e in ends) and all(source(net, w)[0] in out for w in net.ins[nid]):
            out.add(nid)
    return out


def tree(net: Netlist, wid, fold: set | None = None) -> list:
    """The folded boxes the value on wire ``wid`` is computed by (each once per reading port, producers first);
    empty when its producer is not folded."""
    fold = folded(net) if fold is None else fold
    src = source(net, wid)
    if src[0] not in fold:
        return []
    return [n for w in net.ins[src[0]] for n in tree(net, w, fold)] + [src[0]]


__all__ = ["closed", "folded", "tree", "source", "readers"]
