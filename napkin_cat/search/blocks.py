"""Fusion blocks: which operations share a kernel, as differences of down-sets of the data-flow graph.

A kernel partition of a function diagram puts every primitive box in one kernel.  The kernels run
one after another, so the partition is a chain of *down-sets* (sets closed under "is computed
before") ``∅ = D₀ ⊂ D₁ ⊂ … ⊂ D_k = all``, kernel ``i`` being the block ``D_i ∖ D_{i-1}``.  Such a
difference is always convex (no path leaves it and comes back), which is what
``kernel_fusion`` needs; a block must also be connected (fusion joins a kernel with one it feeds; with
``join=True``, a rule book playing ``join`` such as ``sibling_fusion``, two parts of a block may be linked by a
value they both read instead: independent kernels that read one value join, and load it once).
Every kernel partition is such a chain, so the cheapest partition is a shortest path over the
down-sets (the search in :mod:`napkin_cat.search.derivation`), with the costs of the blocks additive
because each kernel keeps its own tiles and its own memory.

A block's kernel is built as ``kernel_formation`` and ``kernel_fusion`` build it: one input per
input port that reads a value from outside the block (each port is loaded), one output per value
read outside (saved once), nothing saved that only a discard reads.  With ``share=True`` (a rule book
with a rule playing ``share``, such as ``shared_load``) a value read by several ports is one input,
loaded once and copied inside the kernel.  With ``fold=True`` (a rule book with a rule playing ``recompute``)
the closed values (:mod:`napkin_cat.rewriting.closed`: positions, constants, comparisons of them) are no
operations: each port that reads one computes it inside its block, for nothing in H (the search's
construction gives the port its own copy by the ``recompute`` rule, and kernel formation computes it inside).
With ``once=True`` (a rule book with a rule playing ``compute_once``, such as ``kernel_common_value``) the kernel
computes each value once: two operations of the block of one label reading the same values (the copies of a
recomputed value its readers brought, a closed value read by several ports) are one, whose value is copied (the
copy law, paper §2), so that the search counts the FLOPs of the kernel the construction makes.  That kernel and
the block's key are :mod:`napkin_cat.search.block_kernel`'s (:class:`OpGraph` inherits them); sets of operations
are bit masks (:func:`~napkin_cat.search.bitsets.bits`, importable from here too).

A rename (:func:`~napkin_cat.syntax.primitive.is_view`) is no operation: it is a *view*, the values of its input
under new axis names.  Between kernels it is left at level 0, in global memory, between the kernel that makes the
value and those that read it renamed, so the producer is partitioned along its name for the axis and each reader
along the other: a tile of a rename's input is a tile of its output (``kernel(f ; rename_{n→m}) ≡ Grid_n(kernel(f))
; rename_{n→m}``, ``proofs/test_rename_views.py``).  The order goes through it (its readers come after its
producer).  A block may hold both ends of a view only where it holds every reader of the view and nothing else
reads it (no output of the function is the view): the kernel then holds the rename inside (:meth:`OpGraph.absorbed`,
the rename folded into its indexing; its partitions are the kernel's, which never cut a rename along the axis it
renames), and neither loads the view nor writes the value for it.  A block holding both ends of a view read also
outside it is no kernel: the view would be both inside and in global memory (:meth:`OpGraph.connected`).

>>> import napkin_cat as nc
>>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))
>>> [g.name(i) for i in range(len(g))], len(g.downsets())
(['·', 'SoftMax', '·'], 4)
>>> sorted(bin(b).count("1") for _, _, b in g.blocks())
[1, 1, 1, 2, 2, 3]
>>> g.subdiagram(0b110).dom, g.subdiagram(0b110).cod
(Ty(Array(q×x), Array(x×d)), Ty(Array(q×d)))
>>> square = nc.Builder(nc.types("n d")); (X,) = square.inputs
>>> net = nc.engine.to_netlist(square.build(square(nc.elementwise("mul", "n d, n d -> n d"), X, X)))
>>> OpGraph(net).subdiagram(1).dom, OpGraph(net, share=True).subdiagram(1).dom
(Ty(Array(n×d), Array(n×d)), Ty(Array(n×d)))
>>> causal = OpGraph(nc.engine.to_netlist(nc.library.causal_attention()), fold=True)
>>> [causal.name(i) for i in range(len(causal))], [b.name for b in causal.subdiagram(0b11).boxes][:4]
(['·', 'where', 'SoftMax', '·'], ['·', 'pos', 'pos', '≤'])
>>> two = nc.Builder(nc.types("n e, e f, e f")); X, A, B = two.inputs            # x ↦ (x·A, x·B)
>>> xA, xB = two(nc.einsum("n e, e f -> n f"), X, A), two(nc.einsum("n e, e f -> n f"), X, B)
>>> net = nc.engine.to_netlist(two.build(xA, xB))
>>> OpGraph(net, share=True).linked(0b11), OpGraph(net, share=True, join=True).linked(0b11)
(False, True)
>>> twice = nc.Builder(nc.types("n e")); (X,) = twice.inputs                     # exp(x) + exp(x)
>>> ex = [twice(nc.elementwise("exp", "n e"), X) for _ in range(2)]
>>> net = nc.engine.to_netlist(twice.build(twice(nc.elementwise("add", "n e, n e -> n e"), *ex)))
>>> [[b.name for b in OpGraph(net, share=True, once=o).subdiagram(0b111).boxes if b.name in ("exp", "add")]
...  for o in (False, True)]
[['exp', 'exp', 'add'], ['exp', 'add']]
>>> OpGraph(net, once=True).distinct(), len(OpGraph(net, once=True))
(2, 3)
>>> renamed = nc.Builder(nc.types("h n")); (X,) = renamed.inputs                 # rename_{n→m}(exp x), then exp
>>> Y = renamed(nc.renaming("h n -> h m"), renamed(nc.elementwise("exp", "h n"), X))
>>> g = OpGraph(nc.engine.to_netlist(renamed.build(renamed(nc.elementwise("exp", "h m", m="n"), Y))))
>>> len(g), len(g.views), g.preds[1], g.direct(0b11), g.subdiagram(0b10).dom
(2, 1, 1, False, Ty(Array(h×m[n])))
>>> g.connected(0b11), [b.name for b in g.subdiagram(0b11).boxes], g.subdiagram(0b11).dom, g.absorbed(0b11) == g.views
(True, ['exp', 'rename', 'exp'], Ty(Array(h×n)), True)
>>> out = renamed.build(Y, renamed(nc.elementwise("exp", "h m", m="n"), Y))   # the view is an output too
>>> nc.engine.to_netlist(out) and OpGraph(nc.engine.to_netlist(out)).connected(0b11)
False
"""
from __future__ import annotations

from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.apart import Classes
from napkin_cat.rewriting.closed import folded
from napkin_cat.rewriting.netlist import INPUT, OUTPUT, Netlist
from napkin_cat.search.bitsets import bits
from napkin_cat.search.block_kernel import BlockKernels
from napkin_cat.search.downsets import DownSets
from napkin_cat.syntax.dtype import BOOL
from napkin_cat.syntax.primitive import is_view, kind_of


class OpGraph(BlockKernels, DownSets):
    """The primitive boxes of a function netlist (its *operations*) and the data flow between them.

    Operations are numbered in the netlist's topological order; a set of operations is a bit mask.
    ``share``: a block reads each outside value through one input; ``fold``: closed values are computed by each
    port that reads them, not operations; ``join``: operations that read one value are linked; ``once``: a block's
    kernel computes each value once (see the module docstring).  Renames are :attr:`views`, not operations (a block
    holding a view's producer and all its readers holds it inside, :meth:`absorbed`).
    """

    def __init__(self, net: Netlist, *, share: bool = False, fold: bool = False, join: bool = False,
                 once: bool = False):
        kinds = {n.kind for n in net.nodes.values()}
        if "region" in kinds:
            raise RewriteError("the derivation search starts from a function diagram; this one already has "
                               "kernels or partitions (Kernel, Grid, Stream): derive from the function")
        if "merge" in kinds:
            raise RewriteError("the derivation search does not handle merge nodes; remove them first")
        self.net, self.share, self.once = net, share, once
        self.flags = {"share": share, "fold": fold, "join": join, "once": once}   # (a graph of a renamed net alike)
        self.segments = ()   # the cut the search solves the graph in (:meth:`cut_at`): kernels across it renamed apart
        self._renames = {}   # block -> its kernel's occurrences renamed apart (:meth:`renamed_apart`)
        self._classes = None  # the function's axis classes (:class:`~napkin_cat.rewriting.apart.Classes`), once
        self.folded = folded(net) if fold else set()
        self.views = {nid for nid, n in net.nodes.items() if n.kind == "box" and is_view(n.box)}
        self.nodes = [nid for nid, n in net.nodes.items()
                      if n.kind == "box" and nid not in self.folded and nid not in self.views]
        self.index = {nid: i for i, nid in enumerate(self.nodes)}
        self.preds = [0] * len(self.nodes)
        self.succs = [0] * len(self.nodes)
        self.flows = [0] * len(self.nodes)     # data flow not through a view: what a kernel can fuse along
        self.apart = [0] * len(self.nodes)     # the ends of a view: one kernel only where it holds the view inside
        readers = {}
        for i, nid in enumerate(self.nodes):
            for src in self.sources(nid):
                if src[0] != INPUT and src[0] in self.folded:
                    continue                          # a closed value: each reader computes it
                readers[src] = readers.get(src, 0) | 1 << i
                producer = self._through_views(src)
                if producer[0] != INPUT and producer[0] not in self.folded:
                    j = self.index[producer[0]]
                    self.preds[i] |= 1 << j
                    self.succs[j] |= 1 << i
                    link = self.flows if producer == src else self.apart
                    link[i] |= 1 << j
                    link[j] |= 1 << i
        # with ``join`` (and ``share``): operations that read one value are linked too (sibling fusion joins
        # their kernels, which then load the value once)
        self._keys = {}   # block -> its BlockKey (the graph is not changed once built)
        self._spanned = {}   # (block, through siblings) -> connected
        self._fed = {}       # block -> the operations it feeds directly (:meth:`successors`)
        self._convex = {}    # block -> convex (:meth:`convex`)
        self._below = None   # per operation, every operation its value reaches (:meth:`convex`), made once
        # (segment, budget) -> the segment's kernel-split space (:mod:`.segments` makes them; a graph shared by a
        # call's searches, :class:`~napkin_cat.search.forms.Preparation`, has its spaces made once)
        self.segment_spaces = {}
        self.siblings = [0] * len(self.nodes)
        if join and share:
            for mask in readers.values():
                for i in bits(mask):
                    self.siblings[i] |= mask & ~(1 << i)
        self._viewing = sum(1 << i for i, a in enumerate(self.apart) if a)   # the operations at a view's ends
        # per view: (the bit of the operation whose value it renames, 0 for an input; the operations reading it,
        # through further views; whether anything else reads it: an output of the function)
        self.view_ends = {v: self._view_ends(v) for v in self.views}
        self._viewed = [[] for _ in self.nodes]    # per operation: (readers, whole) of the views of its values
        for producer, readers, outside in self.view_ends.values():
            if producer:
                self._viewed[producer.bit_length() - 1].append((readers, not outside))
        self._moved = {}   # block -> the arrays its kernel moves whole (:meth:`moved`)
        self.compulsory = {}   # (block or array, sizes) -> the values of :meth:`moved` (or the array) at the sizes
        self._ends = None  # per operation: its ports' values and its outputs' readers (:meth:`moved`, made once)
        self._linked = [f | s for f, s in zip(self.flows, self.siblings)]   # data flow or a value read together
        self._through_links = {False: [f | a for f, a in zip(self.flows, self.apart)],
                               True: [f | a for f, a in zip(self._linked, self.apart)]}

    def __len__(self):
        return len(self.nodes)

    def cut_at(self, segments) -> None:
        """The search solves this graph segment by segment (``segments``: masks, :mod:`.segments`), the function's
        axes renamed apart within each segment at most (the book's ``apart`` rule with ``seams``); a block across two
        or more is then a kernel of its own axes renamed apart (:meth:`renamed_apart`)."""
        self.segments = tuple(segments)
        self._keys, self._renames = {}, {}

    def block_nodes(self, block: int) -> set:
        """The node ids of the block's kernel: its operations and the views it holds inside (:meth:`absorbed`)."""
        return {self.nodes[i] for i in bits(block)} | self.absorbed(block)

    def renamed_apart(self, block: int) -> dict:
        """``{(wire id, name): new}``: the axes the block's kernel renames apart where it spans two or more of the
        graph's :attr:`segments` (:func:`~napkin_cat.rewriting.apart.apart_within`: the classes of a name that it
        alone sees and that come wholly after another it sees: two blocks' ``d`` in one kernel are two axes), so
        that a kernel seam fusion joins is partitioned as it would be were every block's axes named apart; empty
        within a segment (renamed apart there already, by the form) and in a graph not cut.  Its :meth:`subdiagram`
        and :meth:`key` are the kernel so renamed; the construction renames them in the function first (the rule
        playing ``apart`` with ``within=``, :func:`~napkin_cat.search.construct.make`)."""
        if len(self.segments) < 2 or sum(1 for s in self.segments if s & block) < 2:
            return {}
        found = self._renames.get(block)
        if found is None:
            if self._classes is None:
                self._classes = Classes(self.net)       # (the function's classes, read once per graph)
            found = self._renames[block] = self._classes.within(self.block_nodes(block))
        return found

    def distinct(self) -> int:
        """The operations that compute distinct values: with ``once``, two of one label reading the same values
        (through copies, a closed value by its tree) count once, as a kernel of them all computes them
        (:func:`_apply_once`); else every operation."""
        if not self.once:
            return len(self.nodes)
        canon, seen = {}, {}
        for nid in self.nodes:
            node = self.net.nodes[nid]
            reads = tuple(("closed", self._closed_key(w)) if s[0] in self.folded else (canon.get(s[0], s[0]), s[1])
                          for s, w in zip(self.sources(nid), self.net.ins[nid]))
            if kind_of(node.spec.kind).commutative and len(set(node.dom)) == 1:
                reads = tuple(sorted(reads, key=str))
            canon[nid] = seen.setdefault((node.label, reads), nid)
        return len(seen)

    def name(self, i: int) -> str:
        return self.net.nodes[self.nodes[i]].name

    def box(self, i: int):
        return self.net.nodes[self.nodes[i]].box

    @property
    def full(self) -> int:
        return (1 << len(self.nodes)) - 1

    # ------------------------------------------------------------------ the wiring, through copies
    def _source(self, wid):
        """The producer of wire ``wid`` seen through copy nodes: ``(node, port)`` or ``("in", i)``."""
        src = self.net.wires[wid].src
        while src[0] != INPUT and self.net.nodes[src[0]].kind == "copy":
            src = self.net.wires[self.net.ins[src[0]][0]].src
        return src

    def _through_views(self, src):
        """The operation (or input) whose value ``src`` is, seen through views (:attr:`views`): a view's value is
        its input's, renamed."""
        while src[0] != INPUT and src[0] in self.views:
            src = self._source(self.net.ins[src[0]][0])
        return src

    def _view_ends(self, v) -> tuple:
        producer = self._through_views(self._source(self.net.ins[v][0]))
        bit = 1 << self.index[producer[0]] if producer[0] != INPUT and producer[0] in self.index else 0
        readers, outside = 0, False
        for r in self.final_readers(self.net.outs[v][0]):
            if r[0] != OUTPUT and r[0] in self.index:
                readers |= 1 << self.index[r[0]]
            else:
                outside = True
        return bit, readers, outside

    def absorbed(self, block: int) -> set:
        """The views a kernel of ``block`` holds inside: those of a value it makes that it reads (a block that
        holds both ends of a view holds all its readers, :meth:`linked`), renamed in the kernel's indexing."""
        return {v for v, (producer, readers, _) in self.view_ends.items() if producer & block and readers & block}

    def final_readers(self, wid) -> list:
        """:meth:`readers` seen through views: a view's readers in its place (an output of the function that a
        view of the value is, as ``("out", j)``)."""
        out = []
        for r in self.readers(wid):
            if r[0] != OUTPUT and r[0] in self.views:
                out += [x for w in self.net.outs[r[0]] for x in self.final_readers(w)]
            else:
                out.append(r)
        return out

    def sources(self, nid) -> list:
        """The producer of each input port of node ``nid`` (through copies)."""
        return [self._source(w) for w in self.net.ins[nid]]

    def readers(self, wid) -> list:
        """The consumers of wire ``wid`` through copies: ``(node, port)`` or ``("out", j)``; discards dropped."""
        dst = self.net.wires[wid].dst
        if dst[0] == OUTPUT:
            return [dst]
        node = self.net.nodes[dst[0]]
        if node.kind == "copy":
            return [r for w in self.net.outs[dst[0]] for r in self.readers(w)]
        if node.kind == "discard":
            return []
        return [dst]

    def units(self) -> list:
        """Masks of operations that share a kernel when each operation read by one operation alone (and not an
        output of the function) joins its reader: what a recomputed copy is for (:mod:`rewrites.recompute`)."""
        parent = list(range(len(self.nodes)))

        def root(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i
        for i, nid in enumerate(self.nodes):
            ends = [r for w in self.net.outs[nid] for r in self.readers(w)]
            if ends and all(e[0] != OUTPUT and e[0] not in self.views for e in ends) and len({e[0] for e in ends}) == 1:
                parent[root(i)] = root(self.index[ends[0][0]])
        out = {}
        for i in range(len(self.nodes)):
            out[root(i)] = out.get(root(i), 0) | 1 << i
        return list(out.values())

    # ------------------------------------------------------------------ blocks (down-sets: :class:`DownSets`)
    def connected(self, block: int) -> bool:
        """The operations of ``block`` are connected by data flow inside it (undirected), through the views it holds
        inside (:meth:`absorbed`); False where it holds both ends of a view that is also read outside it."""
        return self._spans(block, 1)

    def linked(self, block: int) -> bool:
        """:meth:`connected`, or, in a graph built with ``join``, linked by reading one value (two independent parts
        that read one value make one kernel: sibling fusion)."""
        return self._spans(block, 2)

    def direct(self, block: int) -> bool:
        """The operations of ``block`` are connected by data flow that passes no view, and it holds no view inside:
        the blocks a :class:`~napkin_cat.search.paths.Space` sizes its cap by (those a view links are costed under
        the budget of blocks linked otherwise than by data flow, as sibling fusion's)."""
        return self._spans(block, 0)

    def _spans(self, block: int, how: int) -> bool:
        """Whether ``block`` is one component (``how``: 0 by data flow passing no view, 1 through the views it holds
        inside too, 2 through siblings too); kept per block, as the space asks it of each extension under every
        down-set it grows from."""
        found = self._spanned.get((block, how))
        if found is None:
            found = self._spanned[(block, how)] = self._spans_now(block, how)
        return found

    def _spans_now(self, block: int, how: int) -> bool:
        links = self._linked if how == 2 else self.flows
        if block & self._viewing:    # (only operations at a view's end can hold both of its ends)
            rest = block & self._viewing
            while rest:
                low = rest & -rest
                if how == 0 and self.apart[low.bit_length() - 1] & block:
                    return False       # a view inside
                for readers, whole in self._viewed[low.bit_length() - 1]:
                    if readers & block and (not whole or readers & ~block):
                        return False   # a view of a value it makes that is also read outside: between kernels
                rest ^= low
            if how:
                links = self._through_links[how == 2]   # a view held inside links its ends
        seen = todo = block & -block
        while todo:     # the component of the lowest operation, one set bit at a time (no list of bits made)
            low = todo & -todo
            todo ^= low
            nxt = links[low.bit_length() - 1] & block & ~seen
            seen |= nxt
            todo |= nxt
        return seen == block

    def moved(self, block: int) -> tuple | None:
        """The arrays of the block's kernel, its inputs then its outputs, as :meth:`subdiagram` makes them
        (``subdiagram(block).dom.inside + subdiagram(block).cod.inside``), read off the graph without building the
        kernel; None where a box of the graph reads or makes a ``bool`` (a mask: what every algorithm of the kernel
        moves whole then depends on its boxes, :func:`~napkin_cat.search.bounds.moved_whole`).  Where no box does,
        every algorithm of the kernel moves these whole (its compulsory transfers): the search bounds a block by them
        before it builds the block's kernel (:class:`~napkin_cat.search.paths.Block`).

        >>> import napkin_cat as nc
        >>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))
        >>> g.moved(0b110) == (*g.subdiagram(0b110).dom.inside, *g.subdiagram(0b110).cod.inside)
        True
        >>> OpGraph(nc.engine.to_netlist(nc.library.causal_attention())).moved(0b1) is None
        True
        """
        found = self._moved.get(block, False)
        if found is not False:
            return found
        if self._ends is None:
            self._ends = self._port_ends()
        if self._ends is False:
            self._moved[block] = None
            return None
        ins, outs, keys = [], [], set()
        for i in bits(block):
            ports, made = self._ends[i]
            for key, array, producer in ports:
                if not producer & block and key not in keys:
                    keys.add(key)
                    ins.append(array)
            outs += [array for array, readers, outside in made if outside or readers & ~block]
        found = self._moved[block] = (*ins, *outs)
        return found

    def _port_ends(self):
        """Per operation ``(ports, outputs)``: each port read from outside some block as ``(key, array, producer)``
        (the key its value is loaded under, ``producer`` the bit of the operation making it, through views, 0 for
        an input), each output as ``(array, readers, outside)`` (``readers`` the operations reading it, through views,
        ``outside`` whether anything else does: an output of the function); False where a box reads or makes a bool."""
        boxes = [n for n in self.net.nodes.values() if n.kind == "box"]
        if any(a.dtype == BOOL for n in boxes for a in (*n.dom, *n.cod)):
            return False
        out = []
        for nid in self.nodes:
            node = self.net.nodes[nid]
            ports = []
            for p, src in enumerate(self.sources(nid)):
                if src[0] in self.folded:
                    continue               # a closed value: computed inside, never loaded
                made_by = self._through_views(src)      # (a view of a value the block makes is not loaded)
                producer = 1 << self.index[made_by[0]] if made_by[0] in self.index else 0
                ports.append((src if self.share else (nid, p), node.dom[p], producer))
            made = []
            for port, w in enumerate(self.net.outs[nid]):
                readers, outside = 0, False
                for r in self.final_readers(w):
                    if r[0] != OUTPUT and r[0] in self.index:
                        readers |= 1 << self.index[r[0]]
                    else:
                        outside = True
                made.append((node.cod[port], readers, outside))
            out.append((ports, made))
        return out

    def read_together(self, x: int, y: int) -> bool:
        """An operation of ``x`` and one of ``y`` read one value (only in a graph built with ``join``)."""
        return any(self.siblings[i] & y for i in bits(x))

    def blocks(self, max_ops: int | None = None):
        """``(D, D', D' ∖ D)`` for down-sets ``D ⊂ D'`` whose difference is a connected block."""
        downs = self.downsets()
        for a in downs:
            for b in downs:
                if b != a and a & ~b == 0:
                    block = b & ~a
                    if (max_ops is None or bin(block).count("1") <= max_ops) and self.connected(block):
                        yield a, b, block
