"""Netlists: a diagram as boxes and wires, up to interchange and symmetry.

A :class:`Netlist` forgets the layering of a diagram.  Its nodes are the
primitive boxes and regions (opaque), copies, discards and merges; swaps are
dissolved into the wiring; each wire has one producer (a node's output port or
an input of the diagram) and one consumer (a node's input port or an output of
the diagram).  Copy trees are flattened into one n-ary copy node whose outputs
are unordered (copy is coassociative and cocommutative in a markov category).

The round trip is evaluation-preserving (the way back is
:mod:`napkin_cat.rewriting.readback`), and the netlist is the normal form used by
:func:`napkin_cat.rewriting.isomorphism.isomorphic`::

    evaluate(to_diagram(to_netlist(d))) == evaluate(d)
    isomorphic(d, to_diagram(to_netlist(d)))

>>> import napkin_cat as nc
>>> att = nc.library.attention()
>>> net = to_netlist(att)
>>> [n.name for n in net.nodes.values()]
['·', 'SoftMax', '·']
>>> nc.isomorphic(net.diagram, att)
True
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from functools import cached_property

import networkx as nx

from napkin_cat.rewriting.readback import to_diagram
from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.wiring import traverse
from napkin_cat.errors import RewriteError

INPUT, OUTPUT = "in", "out"
#: the spacing of :attr:`Netlist.position`'s keys
POSITION_GAP = 1 << 32


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
        """The primitive :class:`~napkin_cat.syntax.primitive.Spec` of a box node, else None."""
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
    def fresh_ids(self) -> tuple:
        """``(node id, wire id)`` one past the largest in use: where a splice numbers what it adds (a splice that
        knows them without a scan sets them on the netlist it makes).

        >>> import napkin_cat as nc
        >>> to_netlist(nc.library.attention()).fresh_ids
        (3, 6)
        """
        return max(self.nodes, default=-1) + 1, max(self.wires, default=-1) + 1

    @cached_property
    def position(self) -> dict:
        """Node id → its place in the topological order: a key that orders the nodes as :attr:`nodes` does (``a``
        comes before ``b`` iff ``position[a] < position[b]``), not an index.  The keys are spaced
        :data:`POSITION_GAP` apart, so that a splice keys the stretch it sorts again between its neighbours' keys and
        copies the rest (:func:`~napkin_cat.rewriting.splice.splice`), instead of numbering every node again.

        >>> import napkin_cat as nc
        >>> net = to_netlist(nc.library.attention())
        >>> sorted(net.nodes, key=net.position.get) == list(net.nodes)
        True
        """
        return dict(zip(self.nodes, range(0, len(self.nodes) * POSITION_GAP, POSITION_GAP)))

    @cached_property
    def order(self) -> list:
        """The node ids in topological order (:attr:`nodes`' order) as a list: what a splice slices."""
        return list(self.nodes)

    @cached_property
    def by_kind(self) -> dict:
        """``(node kind, box kind or None) → [node id]`` in the netlist's order, and ``(node kind, None)`` for every
        node of that kind (a box under both its keys)."""
        out: dict = {}
        for nid, n in self.nodes.items():
            out.setdefault((n.kind, None), []).append(nid)
            if n.kind == "box":
                out.setdefault(("box", getattr(n.spec, "kind", None)), []).append(nid)
        return out

    def of_kind(self, *keys) -> list:
        """The ids of the nodes under ``keys`` (``(node kind, box kind or None)``: ``("copy", None)``, ``("box",
        "exp")``), in the netlist's order; a scan for a pattern's candidates reads these alone."""
        kinds = self.by_kind
        if len(keys) == 1:
            return kinds.get(keys[0], [])
        found = set().union(*(kinds.get(k, ()) for k in keys))
        return sorted(found, key=self.position.__getitem__)

    @cached_property
    def successors(self) -> "_Adjacent":
        """Node id → the nodes its outputs feed (read per node, on demand: a rewrite asks near its match)."""
        return _Adjacent(self.outs, self.wires, "dst", OUTPUT)

    @cached_property
    def predecessors(self) -> "_Adjacent":
        """Node id → the nodes that feed its inputs."""
        return _Adjacent(self.ins, self.wires, "src", INPUT)

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

    def graph_on(self, nodes: set) -> nx.DiGraph:
        """``self.graph.subgraph(nodes)`` built from those nodes' own wires, not from a graph of the whole netlist
        (what a pattern's matcher reads: its candidates alone): the nodes in the netlist's order, each edge's
        ``ports`` in the order of the wires (the matches found on it are sorted by position).

        >>> import napkin_cat as nc
        >>> net = to_netlist(nc.library.attention())
        >>> part = set(list(net.nodes)[:2])
        >>> g, h = net.graph_on(part), net.graph.subgraph(part)
        >>> sorted(g.nodes) == sorted(h.nodes) and sorted(g.edges(data=True)) == sorted(h.edges(data=True))
        True
        """
        g = nx.DiGraph()
        for nid in sorted(nodes, key=self.position.get):
            g.add_node(nid, nid=nid)
        found = [w for a in nodes for w in self.outs[a] if self.wires[w].dst[0] in nodes]
        for w in sorted(found):     # the wires' order is their ids' (every netlist numbers its wires in order)
            (a, p), (b, q) = self.wires[w].src, self.wires[w].dst
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


class _Adjacent(dict):
    """``{node id: [neighbour ids]}`` filled on first access of each node (a dict, so ``in``, ``len`` and
    iteration see only what was read; use ``[nid]``)."""

    def __init__(self, ports: dict, wires: dict, end: str, boundary: str):
        super().__init__()
        self._ports, self._wires, self._end, self._boundary = ports, wires, end, boundary

    def __missing__(self, nid):
        out = [getattr(self._wires[w], self._end)[0] for w in self._ports[nid]]
        out = [x for x in out if x != self._boundary]
        self[nid] = out
        return out


def _where(owner, byid) -> str:
    if owner in (INPUT, OUTPUT):
        return f"the diagram's {owner}puts"
    return f"node #{owner} {byid[owner].name!r}" if owner in byid else f"node #{owner}"


def _topological(nodes, connections):
    """Stable topological sort: the given order where legal (Kahn's algorithm, a heap on rank)."""
    return stable_order(nodes, ((a, b) for _, (a, _p), (b, _q) in connections))


def stable_order(nodes, edges) -> list:
    """``nodes`` (with ``.id``) sorted topologically by ``edges`` (``(a, b)`` ids: a before b; ids not among the
    nodes are ignored), keeping the given order where legal (Kahn's algorithm, a heap on rank).

    >>> from types import SimpleNamespace as N
    >>> [n.id for n in stable_order([N(id=1, name="f"), N(id=2, name="g")], [(2, 1)])]
    [2, 1]
    """
    rank = {n.id: k for k, n in enumerate(nodes)}
    byid = {n.id: n for n in nodes}
    succ = {n.id: [] for n in nodes}
    indeg = dict.fromkeys(rank, 0)
    for a, b in edges:
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
    """Read a diagram's boxes and wires (swaps dissolved, copy trees flattened).

    One :func:`~napkin_cat.syntax.wiring.traverse` whose values are wire ids: the wiring moves them;
    a wire that a wiring layer drops ends in a discard node, and a wire it puts out several times
    goes into a copy node with one fresh wire per branch (a branch copied again joins that node).
    """
    wires = {}                 # wid -> [array, src, dst]
    copy_outs = {}             # copy node id -> list of output wids
    nodes = []
    for i, arr in enumerate(diagram.dom.inside):
        wires[i] = [arr, (INPUT, i), None]
    fresh = [len(wires)]

    def node(step, kind):
        nid, box = step.index, step.box
        for j, w in enumerate(step.ins):
            wires[w][2] = (nid, j)
        news = list(range(fresh[0], fresh[0] + len(box.cod)))
        fresh[0] += len(news)
        for j, (v, arr) in enumerate(zip(news, box.cod.inside)):
            wires[v] = [arr, (nid, j), None]
        nodes.append([nid, kind, box, tuple(box.dom.inside)])
        return news

    def on_wiring(step, outs):
        nid, renamed = step.index, list(outs)
        for j, w in enumerate(step.ins):
            n = outs.count(w)
            if n == 0:           # dropped: a discard node
                did = nid if j == 0 else (nid, j)
                wires[w][2] = (did, 0)
                nodes.append([did, "discard", None, (wires[w][0],)])
            elif n > 1:          # put out n times: a copy node, one wire per branch
                arr, src = wires[w][0], wires[w][1]
                news = list(range(fresh[0], fresh[0] + n))
                fresh[0] += n
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
                it = iter(news)
                renamed = [next(it) if v == w else v for v in renamed]
        return renamed

    def on_box(step):
        return node(step, "region" if isinstance(step.box, Bubble) else "box")
    state = traverse(diagram, range(len(diagram.dom)), on_box, merge=lambda step: node(step, "merge"),
                     on_wiring=on_wiring)
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
