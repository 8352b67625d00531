"""Isomorphism of diagrams: equal up to interchange, swaps and copy (co)associativity/commutativity.

Two diagrams are isomorphic when their netlists are, as labelled graphs (VF2 via
networkx's ``DiGraphMatcher``); regions are compared by the isomorphism class of their inside.

>>> import napkin_cat as nc
>>> f = nc.elementwise("exp", "a")
>>> isomorphic(f @ nc.Id("b"), nc.Diagram.swap(nc.types("a"), nc.types("b")) >> nc.Id("b") @ f
...            >> nc.Diagram.swap(nc.types("b"), nc.types("a")))
True
"""
from __future__ import annotations

from collections import Counter

import networkx as nx
from networkx.algorithms.isomorphism import DiGraphMatcher

from napkin_cat.rewriting.netlist import INPUT, OUTPUT, Netlist, to_netlist
from napkin_cat.syntax.adapter import Diagram


def _labelled_graph(net: Netlist) -> nx.DiGraph:
    g = nx.DiGraph()
    for nid, node in net.nodes.items():
        g.add_node(nid, label=node.label, node=node)
    for i, a in enumerate(net.dom):
        g.add_node((INPUT, i), label=(INPUT, i, a), node=None)
    for j, a in enumerate(net.cod):
        g.add_node((OUTPUT, j), label=(OUTPUT, j, a), node=None)
    for w in net.wires.values():
        a = w.src if w.src[0] in (INPUT, OUTPUT) else w.src[0]
        b = w.dst if w.dst[0] in (INPUT, OUTPUT) else w.dst[0]
        sport = "*" if w.src[0] not in (INPUT, OUTPUT) and net.nodes[w.src[0]].kind == "copy" \
            else w.src[1]
        port = (sport, w.dst[1])
        if g.has_edge(a, b):
            g[a][b]["ports"] = tuple(sorted(g[a][b]["ports"] + (port,), key=repr))
        else:
            g.add_edge(a, b, ports=(port,))
    return g


def _same_node(x: dict, y: dict) -> bool:
    if x["label"] != y["label"]:
        return False
    n1, n2 = x["node"], y["node"]
    if n1 is not None and n1.kind == "region":
        return isomorphic(n1.box.arg, n2.box.arg)
    return True


def isomorphic(d1: Diagram, d2: Diagram) -> bool:
    """Structural equality up to interchange, swaps, and copy (co)associativity/commutativity.

    Boxes are compared by name, data (the primitive spec), dom and cod; regions
    also by the isomorphism class of their inside.

    >>> import napkin_cat as nc
    >>> f, g = nc.elementwise("exp", "a"), nc.elementwise("neg", "b")
    >>> isomorphic(f @ g, (f @ nc.Id("b")) >> (nc.Id("a") @ g))
    True
    >>> isomorphic(f @ g, nc.elementwise("neg", "a") @ g)
    False
    """
    n1 = d1 if isinstance(d1, Netlist) else to_netlist(d1)
    n2 = d2 if isinstance(d2, Netlist) else to_netlist(d2)
    if n1.dom != n2.dom or n1.cod != n2.cod or len(n1.nodes) != len(n2.nodes) \
            or len(n1.wires) != len(n2.wires):
        return False
    if Counter(n.label for n in n1.nodes.values()) != Counter(n.label for n in n2.nodes.values()):
        return False
    g1, g2 = _labelled_graph(n1), _labelled_graph(n2)
    matcher = DiGraphMatcher(g1, g2, node_match=_same_node,
                             edge_match=lambda e, f: e["ports"] == f["ports"])
    return matcher.is_isomorphic()
