"""A block's kernel: its operations as one function diagram, and the block's canonical key (the kernel cache's).

A block (a bit mask of a :class:`~napkin_cat.search.blocks.OpGraph`'s operations) becomes the kernel
``kernel_formation`` and ``kernel_fusion`` build: one input per port that reads a value from outside the block (one per
value with ``share``), one output per value read outside, each closed value computed by the port that reads it
(``fold``), each value computed once (``once``: two operations of one label reading the same wires are one, the copy
law of paper §2; :func:`apply_once`).  Its key names its operations' labels and wiring in topological order, so the
law is::

    graph.key(b) == graph'.key(b')   ⟹   graph.subdiagram(b) == graph'.subdiagram(b')

:class:`BlockKernels` holds these methods for :class:`~napkin_cat.search.blocks.OpGraph` (which reads the data flow);
:class:`BlockKey` hashes the key once.

>>> import napkin_cat as nc
>>> from napkin_cat.search.blocks import OpGraph
>>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))
>>> g.subdiagram(0b011).cod, g.key(0b011) == g.key(0b011), g.key(0b011) == g.key(0b110)
(Ty(Array(q×x)), True, False)
"""
from __future__ import annotations

from napkin_cat.rewriting.apart import node_box, renamed_array
from napkin_cat.rewriting.netlist import OUTPUT
from napkin_cat.search.bitsets import bits
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.primitive import kind_of


class BlockKernels:
    """A block's kernel as a function diagram (:meth:`subdiagram`) and its canonical key (:meth:`key`), for a graph
    of operations with ``net``, ``nodes``, ``folded``, ``share``, ``once``, ``sources``, ``final_readers``,
    ``_source``, ``_through_views`` and a memo ``_keys`` (:class:`~napkin_cat.search.blocks.OpGraph`; see the module
    docstring)."""

    def subdiagram(self, block: int) -> Diagram:
        """The block's operations as a function diagram: per-port inputs, outputs read outside."""
        return self._sub(block)[0]

    def _sub(self, block: int):
        ops = bits(block)
        inside = {self.nodes[i] for i in ops}
        names = self.renamed_apart(block)      # the kernel's own axes renamed apart (a kernel across segments)
        ports, dom, value = [], [], {}
        for i in ops:
            nid = self.nodes[i]
            for p, src in enumerate(self.sources(nid)):
                if self._through_views(src)[0] not in inside and src[0] not in self.folded:
                    key = src if self.share else (nid, p)
                    value[(nid, p)] = key
                    if key not in ports:
                        ports.append(key)
                        dom.append(renamed_array(self.net.nodes[nid].dom[p], self.net.ins[nid][p], names))
        b = Builder(Ty(*dom))
        wires = dict(zip(ports, b.inputs))
        feed = {port: wires[key] for port, key in value.items()}
        made, outs = {}, []
        seen = {} if self.once else None      # (label, the wires read) → the outputs: each value computed once
        for i in ops:
            nid = self.nodes[i]
            node = self.net.nodes[nid]
            args = [feed[(nid, p)] if (nid, p) in feed else self._made(b, src, made, names)
                    if src[0] not in self.folded else self._closed(b, w, seen)
                    for p, (src, w) in enumerate(zip(self.sources(nid), self.net.ins[nid]))]
            got = apply_once(b, node, args, seen, node_box(self.net, nid, names) if names else None)
            for port, (w, wire) in enumerate(zip(self.net.outs[nid], got)):
                made[(nid, port)] = wire
                if any(r[0] == OUTPUT or r[0] not in inside for r in self.final_readers(w)):
                    outs.append(wire)
        return b.build(*outs), tuple(ports)

    def _made(self, b, src, made, names=None):
        """The wire of value ``src`` made in ``b``: an operation's output (in ``made``), or a view of one that the
        block holds inside (:meth:`~napkin_cat.search.blocks.OpGraph.absorbed`), its rename applied once in ``b``
        (kept in ``made`` under the view's port; its axes renamed by ``names`` as the kernel's)."""
        if src not in made:
            got = b(node_box(self.net, src[0], names or {}),
                    self._made(b, self._source(self.net.ins[src[0]][0]), made, names))
            made.update({(src[0], p): w for p, w in enumerate(got if isinstance(got, tuple) else (got,))})
        return made[src]

    def _closed(self, b, wid, seen=None):
        """The folded value on wire ``wid`` computed in ``b`` (its closed boxes once for this port; once for the
        block where ``seen`` is its memo, :func:`apply_once`)."""
        nid, port = self._source(wid)
        node = self.net.nodes[nid]
        return apply_once(b, node, [self._closed(b, w, seen) for w in self.net.ins[nid]], seen)[port]

    def _closed_key(self, wid) -> tuple:
        nid, port = self._source(wid)
        return self.net.nodes[nid].label, port, tuple(self._closed_key(w) for w in self.net.ins[nid])

    def _view_key(self, src, local) -> tuple:
        """The key of a view held inside a block (its label, port and what it renames), down to the block's
        operation whose value it is."""
        if src[0] in local:
            return local[src[0]], src[1]
        node = self.net.nodes[src[0]]
        return "view", node.label, src[1], self._view_key(self._source(self.net.ins[src[0]][0]), local)

    def key(self, block: int) -> "BlockKey":
        """A canonical key of the block's kernel: its operations' labels and wiring in topological order.

        Equal keys mean equal sub-diagrams (the same boxes wired the same way), wherever the block sits.  A
        block's key is made once per graph (the search asks for it at every edge into the block, and the kernel
        cache and the space's budget hash it each time): a :class:`BlockKey`, whose hash is computed once.
        """
        found = self._keys.get(block)
        if found is None:
            found = self._keys[block] = BlockKey(self._key(block))
        return found

    def _key(self, block: int) -> tuple:
        ops = bits(block)
        local = {self.nodes[i]: k for k, i in enumerate(ops)}
        outside, out = {}, []
        for i in ops:
            nid = self.nodes[i]
            node = self.net.nodes[nid]
            srcs = tuple((local[s[0]], s[1]) if s[0] in local else
                         ("closed", self._closed_key(w)) if s[0] in self.folded else
                         self._view_key(s, local) if self._through_views(s)[0] in local else
                         ("in", outside.setdefault(s if self.share else (nid, p), len(outside)))
                         for p, (s, w) in enumerate(zip(self.sources(nid), self.net.ins[nid])))
            read = tuple(any(r[0] == OUTPUT or r[0] not in local for r in self.final_readers(w))
                         for w in self.net.outs[nid])
            out.append((node.label, srcs, read))
        names = self.renamed_apart(block)
        if names:     # the kernel's axes renamed apart: which occurrences, by op and port (equal keys, equal kernels)
            out.append(("apart", tuple(sorted((k, side, p, a, names[(w, a)]) for k, i in enumerate(ops)
                                              for side, ws in (("in", self.net.ins[self.nodes[i]]),
                                                               ("out", self.net.outs[self.nodes[i]]))
                                              for p, w in enumerate(ws) for a in self.net.wires[w].array.names
                                              if (w, a) in names))))
        return (*out, ("computed once",)) if self.once else tuple(out)   # a kernel of one value fewer, once


def apply_once(b, node, args, seen, box=None) -> tuple:
    """The outputs of ``node``'s box (or ``box``: it renamed) applied in ``b`` to the wires ``args``; with a memo
    ``seen`` (a dict), the
    outputs of the box of one label applied to the same wires before, if any (one value computed once: boxes are
    deterministic, paper §2), the operands of a kind that commutes compared as a set where they are of one array
    type (as ``common_value`` compares them)."""
    key = None
    if seen is not None:
        reads = tuple(w.id for w in args)
        if kind_of(node.spec.kind).commutative and len(set(node.dom)) == 1:
            reads = tuple(sorted(reads))
        key = (node.label, reads)
        if key in seen:
            return seen[key]
    got = b(Diagram.id(node.box.dom).then(node.box) if box is None else box, *args)
    got = got if isinstance(got, tuple) else (got,)
    if key is not None:
        seen[key] = got
    return got


class BlockKey:
    """A block's canonical key (:meth:`BlockKernels.key`): a tuple of its operations' labels and wiring, hashed once.

    Equal to another key exactly when the tuples are equal; its hash is the tuple's, so a key may be looked up
    in a dict or set many times for the price of one hash of the (deep) tuple.

    >>> a, b = BlockKey((("·", (("in", 0),), (True,)),)), BlockKey((("·", (("in", 0),), (True,)),))
    >>> a == b, hash(a) == hash(b), a == BlockKey(()), len({a, b})
    (True, True, False, 1)
    """

    __slots__ = ("parts", "_hash")

    def __init__(self, parts: tuple):
        self.parts, self._hash = parts, hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, BlockKey) and self._hash == other._hash
                                 and self.parts == other.parts)

    def __repr__(self) -> str:
        return f"BlockKey({self.parts!r})"


__all__ = ["BlockKernels", "BlockKey", "apply_once"]
