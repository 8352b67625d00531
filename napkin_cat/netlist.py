"""Netlists: a diagram as boxes and wires, up to interchange and symmetry.

A :class:`Netlist` forgets the layering of a diagram.  Its nodes are the
primitive boxes and regions (opaque), copies, discards and merges; swaps are
dissolved into the wiring; each wire has one producer (a node's output port or
an input of the diagram) and one consumer (a node's input port or an output of
the diagram).  Copy trees are flattened into one n-ary copy node whose outputs
are unordered (copy is coassociative and cocommutative in a markov category).

The round trip is evaluation-preserving, and the netlist is the normal form
used by :func:`isomorphic`::

    evaluate(to_diagram(to_netlist(d))) == evaluate(d)
    isomorphic(d, to_diagram(to_netlist(d)))

>>> import napkin_cat as nc
>>> att = nc.library.attention()
>>> net = to_netlist(att)
>>> [n.name for n in net.nodes.values()]
['·', 'SoftMax', '·']
>>> isomorphic(to_diagram(net), att)
True
>>> sw = nc.Diagram.swap(nc.types("q d"), nc.types("x d")) >> nc.Id("x d") @ nc.elementwise("exp", "q d")
>>> isomorphic(sw, nc.elementwise("exp", "q d") @ nc.Id("x d") >> nc.Diagram.swap(nc.types("q d"), nc.types("x d")))
True
"""
from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass
from functools import cached_property, lru_cache

import networkx as nx
from networkx.algorithms.isomorphism import DiGraphMatcher

from napkin_cat.adapter import (Bubble, Diagram, Ty, copy, discard, from_layers, is_structural,
                                layers, swap)
from napkin_cat.errors import RewriteError

INPUT, OUTPUT = "in", "out"


@dataclass(frozen=True, eq=False)
class Node:
    """A node of a netlist: ``kind`` is 'box', 'region', 'copy', 'discard' or 'merge'.

    ``box`` is the discopy box (None for copy and discard); ``dom``/``cod`` are
    the arrays on its input and output ports.
    """

    id: int
    kind: str
    box: object
    dom: tuple
    cod: tuple

    @property
    def name(self) -> str:
        if self.box is not None:
            return self.box.name
        return "copy" if self.kind == "copy" else "discard"

    @property
    def spec(self):
        """The primitive :class:`~napkin_cat.primitive.Spec` of a box node, else None."""
        return self.box.data if self.kind == "box" else None

    @property
    def label(self) -> tuple:
        """What a node *is*, independently of where it sits (used by :func:`isomorphic`)."""
        if self.kind == "box":
            return ("box", self.box.name, self.box.data, self.dom, self.cod)
        if self.kind == "region":
            return ("region", type(self.box).__name__, self.box.name, self.dom, self.cod)
        if self.kind == "copy":
            return ("copy", self.dom, len(self.cod))
        return (self.kind, self.dom, self.cod)

    def __repr__(self):
        return f"Node(#{self.id} {self.name}: {len(self.dom)} → {len(self.cod)})"


@dataclass(frozen=True)
class Wire:
    """A wire: its ``array``, its producer ``src`` and its consumer ``dst``.

    An endpoint is ``(node_id, port)``, ``("in", i)`` or ``("out", j)``.
    """

    id: int
    array: object
    src: tuple
    dst: tuple


def _node_kind(box) -> str:
    kind = is_structural(box)
    if kind is not None:
        return kind
    return "region" if isinstance(box, Bubble) else "box"


@dataclass(frozen=True, eq=False)
class Netlist:
    """Boxes and wires of a diagram (see module docstring); nodes are in topological order."""

    dom: tuple
    cod: tuple
    nodes: dict
    wires: dict
    ins: dict    # node id -> input wire ids, by port
    outs: dict   # node id -> output wire ids, by port
    inputs: tuple
    outputs: tuple
    source: object = None  # the diagram it was read from, if any

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, dom, cod, nodes, connections, source=None) -> "Netlist":
        """A netlist from nodes (in a preferred order) and ``(array, src, dst)`` connections.

        Nodes are re-sorted topologically (stably); every port must be connected once.
        """
        order = _topological(nodes, connections)
        ins = {n.id: [None] * len(n.dom) for n in order}
        outs = {n.id: [None] * len(n.cod) for n in order}
        inputs, outputs = [None] * len(dom), [None] * len(cod)
        wires = {}
        byid = {n.id: n for n in order}
        for wid, (array, src, dst) in enumerate(connections):
            wires[wid] = Wire(wid, array, src, dst)
            for end, table, boundary, side in ((src, outs, inputs, "cod"), (dst, ins, outputs, "dom")):
                owner, port = end
                slot = boundary if owner in (INPUT, OUTPUT) else table[owner]
                if slot[port] is not None:
                    raise RewriteError(f"netlist: port {port} of {_where(owner, byid)} is connected twice")
                slot[port] = wid
                want = (dom if owner == INPUT else cod)[port] if owner in (INPUT, OUTPUT) \
                    else getattr(byid[owner], side)[port]
                if want != array:
                    raise RewriteError(f"netlist: a wire carrying {array} is plugged into port {port} of "
                                       f"{_where(owner, byid)}, which carries {want}")
        for table, side in ((ins, "input"), (outs, "output")):
            for nid, ports in table.items():
                if None in ports:
                    raise RewriteError(f"netlist: {side} port {ports.index(None)} of {_where(nid, byid)} "
                                       "is not connected")
        for ports, side in ((inputs, INPUT), (outputs, OUTPUT)):
            if None in ports:
                raise RewriteError(f"netlist: diagram {side}put {ports.index(None)} is not connected")
        return cls(tuple(dom), tuple(cod), {n.id: n for n in order}, wires,
                   {k: tuple(v) for k, v in ins.items()}, {k: tuple(v) for k, v in outs.items()},
                   tuple(inputs), tuple(outputs), source)

    def connections(self):
        """The ``(array, src, dst)`` triples (the input of :meth:`build`)."""
        return [(w.array, w.src, w.dst) for w in self.wires.values()]

    # ------------------------------------------------------------------ views
    @cached_property
    def diagram(self) -> Diagram:
        """The diagram it was read from, else its layout by :func:`to_diagram` (computed once)."""
        return self.source if self.source is not None else to_diagram(self)

    def same_as(self, other: "Netlist") -> bool:
        """Equal node ids, boxes and connections (a cheap check that two derivations agree)."""
        return (self.dom == other.dom and self.cod == other.cod and self.nodes.keys() == other.nodes.keys()
                and all(n.label == other.nodes[k].label and (n.box is None or n.box == other.nodes[k].box)
                        for k, n in self.nodes.items())
                and set(self.connections()) == set(other.connections()))

    @cached_property
    def position(self) -> dict:
        """Node id → index in the topological order."""
        return {nid: k for k, nid in enumerate(self.nodes)}

    @cached_property
    def successors(self) -> dict:
        return {nid: [self.wires[w].dst[0] for w in ws if self.wires[w].dst[0] != OUTPUT]
                for nid, ws in self.outs.items()}

    @cached_property
    def predecessors(self) -> dict:
        return {nid: [self.wires[w].src[0] for w in ws if self.wires[w].src[0] != INPUT]
                for nid, ws in self.ins.items()}

    @cached_property
    def graph(self) -> nx.DiGraph:
        """A networkx DiGraph of the nodes; edge attribute ``ports``: ``(src_port, dst_port)`` pairs."""
        g = nx.DiGraph()
        for nid, node in self.nodes.items():
            g.add_node(nid, nid=nid)
        for w in self.wires.values():
            (a, p), (b, q) = w.src, w.dst
            if a in (INPUT, OUTPUT) or b in (INPUT, OUTPUT):
                continue
            if g.has_edge(a, b):
                g[a][b]["ports"].append((p, q))
            else:
                g.add_edge(a, b, ports=[(p, q)])
        return g

    def consumers(self, nid: int) -> list:
        """The consumer endpoint of each output of node ``nid``."""
        return [self.wires[w].dst for w in self.outs[nid]]

    def producers(self, nid: int) -> list:
        return [self.wires[w].src for w in self.ins[nid]]

    def __len__(self):
        return len(self.nodes)

    def __repr__(self):
        return (f"Netlist({len(self.dom)} → {len(self.cod)}; {len(self.nodes)} nodes, "
                f"{len(self.wires)} wires)")


def _where(owner, byid) -> str:
    if owner in (INPUT, OUTPUT):
        return f"the diagram's {owner}puts"
    return f"node #{owner} {byid[owner].name!r}" if owner in byid else f"node #{owner}"


def _topological(nodes, connections):
    """Stable topological sort: the given order where legal (Kahn's algorithm, a heap on rank)."""
    rank = {n.id: k for k, n in enumerate(nodes)}
    byid = {n.id: n for n in nodes}
    succ = {n.id: [] for n in nodes}
    indeg = dict.fromkeys(rank, 0)
    for _, (a, _p), (b, _q) in connections:
        if a in rank and b in rank:
            succ[a].append(b)
            indeg[b] += 1
    heap = [rank[n] for n, d in indeg.items() if d == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        node = nodes[heapq.heappop(heap)]
        out.append(node)
        for b in succ[node.id]:
            indeg[b] -= 1
            if indeg[b] == 0:
                heapq.heappush(heap, rank[b])
    if len(out) != len(nodes):
        stuck = sorted((byid[n].name for n, d in indeg.items() if d > 0))
        raise RewriteError(f"netlist has a cycle through {stuck}: the replaced sub-diagram was not convex")
    return out


# ---------------------------------------------------------------------- diagram → netlist
def to_netlist(diagram: Diagram) -> Netlist:
    """Read a diagram's boxes and wires (swaps dissolved, copy trees flattened)."""
    wires = {}                 # wid -> [array, src, dst]
    copy_outs = {}             # copy node id -> list of output wids
    nodes = []
    state = []
    for i, arr in enumerate(diagram.dom.inside):
        wires[i] = [arr, (INPUT, i), None]
        state.append(i)
    fresh = len(state)
    for nid, (offset, box) in enumerate(layers(diagram)):
        k = len(box.dom)
        taken = state[offset:offset + k]
        kind = _node_kind(box)
        if kind == "swap":
            nl = len(box.left)
            state[offset:offset + k] = taken[nl:] + taken[:nl]
            continue
        if kind == "copy":
            n = len(box.cod)
            (w,) = taken
            if n == 1:
                continue
            arr, src = wires[w][0], wires[w][1]
            news = list(range(fresh, fresh + n))
            fresh += n
            if src[0] in copy_outs:  # copy of a copy: flatten into the first copy node
                owner = src[0]
                copy_outs[owner].remove(w)
                del wires[w]
            else:
                owner = nid
                wires[w][2] = (nid, 0)
                copy_outs[nid] = []
                nodes.append([nid, "copy", None, (arr,)])
            for v in news:
                wires[v] = [arr, (owner, None), None]
            copy_outs[owner].extend(news)
            state[offset:offset + 1] = news
            continue
        if kind == "discard":
            for j, w in enumerate(taken):
                did = nid if j == 0 else (nid, j)
                wires[w][2] = (did, 0)
                nodes.append([did, "discard", None, (wires[w][0],)])
            state[offset:offset + k] = []
            continue
        for j, w in enumerate(taken):
            wires[w][2] = (nid, j)
        news = list(range(fresh, fresh + len(box.cod)))
        fresh += len(news)
        for j, (v, arr) in enumerate(zip(news, box.cod.inside)):
            wires[v] = [arr, (nid, j), None]
        nodes.append([nid, kind, box, tuple(box.dom.inside)])
        state[offset:offset + k] = news
    for j, w in enumerate(state):
        wires[w][2] = (OUTPUT, j)
    # discards split from one multi-array layer get fresh ids after the layer indices
    top = len(diagram.inside)
    ids = {}
    for entry in nodes:
        if isinstance(entry[0], tuple):
            ids[entry[0]], top = top, top + 1
        else:
            ids[entry[0]] = entry[0]
    for owner, ws in copy_outs.items():
        for port, w in enumerate(ws):
            wires[w][1] = (owner, port)
    built = []
    for old, kind, box, dom in nodes:
        if kind == "copy":
            cod = dom * len(copy_outs[old])
        elif kind == "discard":
            cod = ()
        else:
            cod = tuple(box.cod.inside)
        built.append(Node(ids[old], kind, box, dom, cod))

    def end(e):
        return e if e[0] in (INPUT, OUTPUT) else (ids[e[0]], e[1])
    connections = [(a, end(s), end(d)) for a, s, d in wires.values()]
    return Netlist.build(tuple(diagram.dom.inside), tuple(diagram.cod.inside), built, connections,
                         source=diagram)


# ---------------------------------------------------------------------- netlist → diagram
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


def to_diagram(net: Netlist) -> Diagram:
    """Lay a netlist out as a diagram: nodes in topological order, swaps to gather inputs.

    A copy node is laid out lazily, as binary copies made just before each
    consumer (which keeps the diagram narrow); discards go right after their
    wire appears.  Composes once (:func:`napkin_cat.adapter.from_layers`).
    """
    state = list(net.inputs)
    arrays = {w.id: w.array for w in net.wires.values()}
    items = []
    lazy = {}     # output wire of a copy node, not yet laid out -> the copy node
    holder = {}   # copy node -> the wire in ``state`` carrying its value
    left = {}     # copy node -> outputs not yet laid out

    def emit(pos, box, k, outs):
        items.append((_ty(tuple(arrays[w] for w in state[:pos])), box,
                      _ty(tuple(arrays[w] for w in state[pos + k:]))))
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
            if owner != OUTPUT and net.nodes[owner].kind == "discard":
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


# ---------------------------------------------------------------------- isomorphism
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
