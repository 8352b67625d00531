"""Axes named apart: two axes that share a name but no wire, the one computed wholly after the other, renamed apart.

An axis of a function diagram is not its name: it is a class of *occurrences* ``(wire, name)``, two occurrences being
one axis when one box sees both (a box's signature names one axis once: ``"n f, f o -> n o"``).  The classes are the
connected components of that relation (:func:`axis_classes`).  Two classes of one name are two axes that happen to be
spelled alike: blocks of a stack built from one block (each block's hidden axis ``f``).  Renaming one class is
α-conversion: every box computes what it did (its signature renamed throughout), sizes are kept, so

    evaluate(apart(f)) == evaluate(f)          cost(apart(f)) == cost(f)         (values, transfers and FLOPs)

and the boundary keeps its names: an input or output carrying a renamed class is renamed by a view (a ``rename``
box, the identity on values, left in global memory).

The search partitions a kernel by axis *names* (stream ``f``, group ``n``), so a kernel holding two blocks whose hidden
axes share a name can stream neither alone: the names restrict the search.  But two classes of one name only help it
where a kernel may treat them as one (a group along ``d`` of the projections ``Q, K, V`` that read one ``X``): where
neither class's boxes come before all of the other's.  Where every box of class ``B`` is computed from every box of
class ``A`` (``A ≪ B``: block 2's ``f`` after block 1's), a kernel holding both reduces ``A``'s axis on the way to
``B``, so it can neither group nor stream them as one.  :func:`apart_names` renames those apart, and only those whose
axis reaches no output of the function (an output's axis, attention's ``d`` of ``V`` after the ``d`` that ``Q Kᵀ``
sums, is the function's own: its name is kept)::

    A ≪ B  ⟺  every box of B is a descendant of every box of A
    B is renamed apart from A's name-class  ⟺  B reaches no output and B ≫ every class of that name-class

Classes of one name are taken in the order of their first box; each joins the first name-class (the original name,
then ``f'2``, ``f'3``, …) holding a class it is not ``≫`` (or the original one, for a class an output reaches), else
starts a new one.  Applied again, it renames nothing (``apart(apart(f)) is apart(f)``).

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.netlist import to_netlist
>>> mlp = nc.rename_axis(nc.rename_axis(nc.library.mlp(), "i", "e"), "o", "e")
>>> b = nc.Builder(nc.Ty(mlp.dom.inside[0], *mlp.dom.inside[1:] * 2)); x, w = b.inputs[0], b.inputs[1:]
>>> two = b.build(b(mlp, b(mlp, x, *w[:4]), *w[4:]))      # two blocks: f, and block 1's output e (no residual)
>>> sorted(set(apart_names(to_netlist(two)).values()))
["e'2", "f'2"]
>>> d = apart(two)
>>> d.dom == two.dom, d.cod == two.cod, [b.name for b in d.boxes].count("rename"), bool(nc.equivalent(d, two))
(True, True, 5, True)
>>> apart_names(to_netlist(nc.library.attention()))           # V's d (after the d Q Kᵀ sums) reaches the output
{}
"""
from __future__ import annotations

from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.netlist import INPUT, OUTPUT, Netlist, to_netlist
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import renaming
from napkin_cat.syntax.relabel import map_arrays

#: the node kinds a function's netlist may hold here (a region or a merge: not a function diagram)
KINDS = ("box", "copy", "discard")


def axis_classes(net: Netlist) -> list:
    """The axes of ``net``: the classes of occurrences ``(wire id, name)`` that some box (or copy) sees together,
    each a set, in the order of their first occurrence.

    >>> import napkin_cat as nc
    >>> [sorted(c) for c in axis_classes(to_netlist(nc.einsum("a b, b c -> a c")))]
    [[(0, 'a'), (2, 'a')], [(0, 'b'), (1, 'b')], [(1, 'c'), (2, 'c')]]
    """
    parent: dict = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for w in net.wires.values():
        for a in w.array.names:
            find((w.id, a))
    for nid in net.nodes:
        seen: dict = {}
        for w in (*net.ins[nid], *net.outs[nid]):
            for a in net.wires[w].array.names:
                if a in seen:
                    parent[find((w, a))] = find(seen[a])
                else:
                    seen[a] = (w, a)
    classes: dict = {}
    for w in net.wires.values():
        for a in w.array.names:
            classes.setdefault(find((w.id, a)), set()).add((w.id, a))
    return list(classes.values())


def apart_names(net: Netlist, seams=()) -> dict:
    """``{(wire id, name): new name}`` for every occurrence of a class renamed apart (module docstring: a class of a
    name that comes wholly after every class of each name-class before it); empty where no name needs it.

    ``seams`` (node ids, each downstream of the one before): the function cut into parts there, part ``k`` the nodes
    downstream of ``k`` seams; classes are renamed apart within their part only (a class's part: its first node's),
    numbered from ``f'2`` in each part, so parts alike are named alike (the search cuts a large function at such
    seams and solves alike parts once: :mod:`napkin_cat.search.segments`)."""
    pos, ancestors = _order(net)
    cuts = [1 << pos[s] for s in seams]
    by_name: dict = {}
    for cls in axis_classes(net):
        nodes = {e[0] for w, _ in cls for e in (net.wires[w].src, net.wires[w].dst) if e[0] not in (INPUT, OUTPUT)}
        if nodes:
            first = min(nodes, key=pos.__getitem__)
            part = sum(1 for c in cuts if ancestors[first] & c)
            private = all(net.wires[w].dst[0] != OUTPUT for w, _ in cls)
            by_name.setdefault((next(iter(cls))[1], part), []).append(
                (pos[first], cls, sum(1 << pos[n] for n in nodes), nodes, private))
    return _grouped(by_name, ancestors, _names_used(net))


def apart_within(net: Netlist, nodes) -> dict:
    """``{(wire id, name): new name}`` renaming apart the axes of one kernel: :func:`apart_names`'s law with the
    boxes ``nodes`` (node ids: a kernel's operations and the views it holds) in place of the function.

    Among the classes those boxes see, a class is renamed apart where every box that sees it is among ``nodes`` and
    none of its wires is an output of the function (the kernel sees all of it: renaming it is α-conversion of the
    function that touches no other kernel, its inputs renamed by views in global memory), and where it comes wholly
    after every class of a name-class before it *as the kernel sees them* (``B ≫ A∩nodes``).  A kernel that the
    search makes across two segments (:mod:`napkin_cat.search.segments`: seam fusion) holds two blocks' classes of one
    name that the renaming within segments left alike; so renamed, it partitions each alone::

        apart_within(net, every box) ⊇ apart_names(net)      (an output's class aside: the function's own name)

    >>> import napkin_cat as nc
    >>> mlp = nc.rename_axis(nc.rename_axis(nc.library.mlp(), "i", "e"), "o", "e")
    >>> net = to_netlist(nc.library.in_a_row([mlp, mlp], residual=True))
    >>> boxes = [n for n, node in net.nodes.items() if node.kind == "box"]
    >>> sorted(set(apart_within(net, boxes).values())), apart_within(net, boxes[:len(boxes) // 2])
    (["f'2"], {})
    """
    return Classes(net).within(nodes)


class Classes:
    """A function netlist's axis classes read once (:func:`axis_classes`, with each class's boxes and whether an output
    of the function carries it, and the netlist's order), so that :meth:`within` answers each kernel of the function
    by the classes its boxes see alone: ``Classes(net).within(nodes) == apart_within(net, nodes)``."""

    def __init__(self, net: Netlist):
        self.net = net
        self.pos, self.ancestors = _order(net)
        self.used = _names_used(net)
        self.classes = []        # (name, occurrences, boxes, whether an output carries it)
        self.by_box = {}         # box node id -> the indices of the classes it sees
        for cls in axis_classes(net):
            ends = [e for w, _ in cls for e in (net.wires[w].src, net.wires[w].dst)]
            boxes = {n for n, _ in ends if n not in (INPUT, OUTPUT) and net.nodes[n].kind == "box"}
            for n in boxes:
                self.by_box.setdefault(n, []).append(len(self.classes))
            self.classes.append((next(iter(cls))[1], cls, boxes, any(n == OUTPUT for n, _ in ends)))

    def within(self, nodes) -> dict:
        """:func:`apart_within` of ``nodes``."""
        inside, pos = set(nodes), self.pos
        by_name: dict = {}
        for k in sorted({k for n in inside for k in self.by_box.get(n, ())}):
            name, cls, boxes, out = self.classes[k]
            seen = boxes & inside
            whole = not out and boxes <= inside
            by_name.setdefault((name,), []).append(
                (min(pos[n] for n in seen), cls, sum(1 << pos[n] for n in seen), seen, whole))
        return _grouped(by_name, self.ancestors, self.used)


def _order(net: Netlist) -> tuple:
    """``(position, ancestors)``: each node's place in the netlist's order and the mask of the nodes it is computed
    from (a function diagram's nodes only)."""
    bad = {n.kind for n in net.nodes.values()} - set(KINDS)
    if bad:
        raise RewriteError(f"axes are renamed apart in a function diagram; this one holds {sorted(bad)} nodes")
    order = list(net.nodes)
    pos = {n: i for i, n in enumerate(order)}
    ancestors = {}
    for n in order:
        mask = 0
        for w in net.ins[n]:
            src = net.wires[w].src[0]
            if src != INPUT:
                mask |= ancestors[src] | 1 << pos[src]
        ancestors[n] = mask
    return pos, ancestors


def _names_used(net: Netlist) -> set:
    return {a for w in net.wires.values() for a in w.array.names}


def _grouped(by_name: dict, ancestors: dict, used: set) -> dict:
    """The renaming of :func:`apart_names`: per name (key ``(name, …)``), its classes ``(first, class,
    mask, nodes, private)`` taken in the order of their first node, each joining the first name-class it is not
    wholly after (or the original one, where not ``private``), else starting a new one under a fresh name (not in
    ``used``)."""
    out = {}
    for key, found in by_name.items():
        name = key[0]
        if len(found) < 2:
            continue
        found.sort(key=lambda t: t[0])
        groups: list = []        # [(name, [node masks of its classes])]
        for _, cls, mask, nodes, private in found:
            after = [private and all(ancestors[n] & m == m for n in nodes) for g in groups for m in g[1]]
            k = 0
            for g in groups:
                if not all(after[k:k + len(g[1])]):
                    g[1].append(mask)
                    new = g[0]
                    break
                k += len(g[1])
            else:
                new = name if not groups else _fresh(name, len(groups) + 1, used)
                groups.append((new, [mask]))
            if new != name:
                out.update((occ, new) for occ in cls)
    return out


def _fresh(name: str, k: int, used: set) -> str:
    """``f'2`` for the second name-class of ``f`` (a name no array of the function uses; ``'`` is legal in an axis
    name, never in a name the constructors make from an einsum string)."""
    new = f"{name}'{k}"
    while new in used:
        new += "'"
    return new


def renamed(net: Netlist, names: dict, input_wires=None, output_wires=None) -> Diagram:
    """The nodes of ``net`` with the occurrences ``names`` (:func:`apart_names`) renamed, as a diagram from the
    arrays of ``input_wires`` to those of ``output_wires`` (default: the netlist's own inputs and outputs), each
    boundary array that carries a renamed occurrence renamed by a view there."""
    input_wires = net.inputs if input_wires is None else tuple(input_wires)
    output_wires = net.outputs if output_wires is None else tuple(output_wires)

    def array(w):
        return renamed_array(net.wires[w].array, w, names)

    def view(arr, to):
        sig = " ".join(arr.names) + " -> " + " ".join(to.names)
        return renaming(sig, level=arr.level, dtype=arr.dtype, sizes={a.name: a.size for a in arr.axes})
    b = Builder(Ty(*(net.wires[w].array for w in input_wires)))
    wire = {}
    for w, x in zip(input_wires, b.inputs):
        to = array(w)
        wire[w] = x if to is net.wires[w].array else b(view(net.wires[w].array, to), x)
    for nid, node in net.nodes.items():
        ins = [wire[w] for w in net.ins[nid]]
        if node.kind == "copy":
            wire.update((w, ins[0]) for w in net.outs[nid])
            continue
        if node.kind == "discard":
            continue
        got = b(node_box(net, nid, names), *ins)
        wire.update(zip(net.outs[nid], got if isinstance(got, tuple) else (got,)))
    outs = []
    for w in output_wires:
        arr, was = array(w), net.wires[w].array
        outs.append(wire[w] if arr is was else b(view(arr, was), wire[w]))
    return b.build(*outs)


def node_box(net: Netlist, nid, names: dict) -> Diagram:
    """The box of node ``nid`` as a diagram, its axes renamed by the occurrences ``names`` (``{(wire id, name): new}``,
    :func:`apart_names`) on its wires; the box itself where none is renamed."""
    box = Diagram.id(net.nodes[nid].box.dom).then(net.nodes[nid].box)
    new = {a: names[(w, a)] for w in (*net.ins[nid], *net.outs[nid]) for a in net.wires[w].array.names
           if (w, a) in names}
    return renamed_box(box, tuple(sorted(new.items()))) if new else box


def renamed_array(array, wire, names: dict):
    """``array`` (the one on wire ``wire``) with the occurrences ``names`` renamed (sizes kept)."""
    axes = tuple(Axis(names[(wire, a.name)], a.size) if (wire, a.name) in names else a for a in array.axes)
    return array if axes == array.axes else array.replace(axes=axes)


def renamed_box(box: Diagram, new: tuple) -> Diagram:
    """``box`` (one box) with its axes renamed by ``new`` (``((old, new), …)``), sizes kept: the functor
    :func:`~napkin_cat.syntax.relabel.map_arrays` remembers per box and array (keyed by ``new``), so a box met again
    under one renaming (a block's boxes, alike in every block) is renamed once."""
    to = dict(new)

    def fa(arr):
        if not any(a.name in to for a in arr.axes):
            return arr
        return arr.replace(axes=tuple(Axis(to[a.name], a.size) if a.name in to else a for a in arr.axes))
    return map_arrays(box, fa, lambda n: to.get(n, n), key=("apart", new))


def apart(diagram: Diagram) -> Diagram:
    """``diagram`` with its axes renamed apart (module docstring); ``diagram`` itself where none needs it."""
    net = to_netlist(diagram)
    names = apart_names(net)
    return renamed(net, names) if names else diagram


__all__ = ["KINDS", "axis_classes", "apart_names", "apart_within", "Classes", "renamed", "node_box", "renamed_array",
           "renamed_box", "apart"]
