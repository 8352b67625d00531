"""A chosen schedule made by the rules: the trace that turns the function into the algorithm.

The search picks, for a (prepared) function, its kernels and each kernel's partition; this module
makes that algorithm with the rule book's rules alone, recording every step:

block by block, in execution order:

1. the rule playing ``kernel`` (kernel formation) on each of the block's primitives, at the level asked;
   where the form's closed values are folded (:mod:`.blocks`), first the rule playing ``recompute`` gives
   the primitive its own copy of each closed value it reads (then kernel formation computes it inside);
2. the rule playing ``fuse`` (kernel fusion) on two of its kernels, until the block is one kernel (the rule
   playing ``join``, sibling fusion, on two that no data flow links where none fuses);
   then, if the book has one, the rule playing ``share`` on it (a value it reads in several places loaded
   once; the book's ``simplify`` rules then drop the copies of the reads it discarded), and the rule playing
   ``compute_once`` (a value its operations' own copies compute several times computed once: what the search's
   block function counts, :meth:`~napkin_cat.search.blocks.OpGraph.subdiagram` with ``once``);
3. the rule playing ``stream`` along its streamed axis (``sweep`` for a sliced stream; then ``split`` for a
   stream run in parts by parallel blocks), ``nest`` along each axis streamed inside its trip (a 2-D loop),
   then ``group`` along each grouped axis, with the
   kernel's own tile names (parameters ``axis=`` and ``size=`` of the rules).

Every step is applied at the match that touches the block it is building, so the trace replays
(:meth:`~napkin_cat.rewriting.trace.Trace.replay`) to the same algorithm.
"""
from __future__ import annotations

from napkin_cat.errors import ConstructionError, NapkinError
from napkin_cat.rewriting.closed import folded
from napkin_cat.rewriting.match import near
from napkin_cat.rewriting.netlist import Netlist, to_netlist
from napkin_cat.rewriting.trace import Step
from napkin_cat.search.blocks import OpGraph, bits
from napkin_cat.search.fusion_order import FusionQueue
from napkin_cat.search.variants import parts_key


class Maker:
    """Applies rules one match at a time on a netlist, recording :class:`Step` s (as the driver does)."""

    def __init__(self, diagram):
        self.net = diagram if isinstance(diagram, Netlist) else to_netlist(diagram)
        self.steps = []
        self.made = {}      # the replacements of local rules by hole: alike blocks are built once

    def apply(self, rule, match):
        try:
            after = rule.fill(match, self.made)
        except NapkinError as e:     # a match the rule offered and could not rewrite: the book's fault, not the input's
            raise ConstructionError(f"rule {rule.name!r} offered {match.describe()} and could not rewrite it "
                                    f"(step {len(self.steps)} of the construction): {e}") from e
        self.steps.append(Step.of(rule, match, self.net, after))
        before, self.net = self.net, after
        return after.nodes.keys() - before.nodes.keys(), before.nodes.keys() - after.nodes.keys()


def _legal(rule, net, wanted, within=None, made=None):
    """The legal matches of ``rule`` in ``net`` that ``wanted(match)`` accepts (side conditions checked only
    on those: a partition's condition builds the partition), its nodes among ``within``; ``made``: the maker's
    record of local conditions' verdicts (:meth:`~napkin_cat.rewriting.rules.Rule.failure`)."""
    return [m for m in rule.candidates(net, within) if wanted(m) and rule.failure(m, made) is None]


def _first_legal(rule, net, wanted, within=None, made=None):
    """The first of :func:`_legal`'s matches (side conditions checked up to it, not past), or None."""
    return next((m for m in rule.lazy_candidates(net, within) if wanted(m) and rule.failure(m, made) is None), None)


def _first_in_order(rule, net, wanted, within):
    """:func:`_first_legal` among ``within``; for a one-node pattern (whose candidates come in the order of their
    node) by trying its nodes one at a time in the netlist's order, so that a step pays for the nodes before its
    match, not for every node of ``within`` (a block's kernel formation: linear, not quadratic)."""
    if len(rule.pattern.variables) != 1:
        return _first_legal(rule, net, wanted, within)
    pos = net.position
    for n in sorted((n for n in within if n in pos), key=pos.__getitem__):
        if (m := _first_legal(rule, net, wanted, {n})) is not None:
            return m
    return None


def _shared_closed(net, nid):
    """A folded closed box that ``nid`` reads (itself or through its own closed boxes) through a copy, and the
    copy's port that leads there: ``(box, port)``, or None when every closed value ``nid`` reads is its own."""
    fold, todo = folded(net), [nid]
    while todo:
        n = todo.pop()
        for w in net.ins[n]:
            src = net.wires[w].src[0]
            if src in fold:
                todo.append(src)
            elif src in net.nodes and net.nodes[src].kind == "copy":
                owner = net.wires[net.ins[src][0]].src[0]
                if owner in fold:
                    return owner, net.outs[src].index(w)
    return None


def _own_closed(mk, rule, nid):
    """The ``recompute`` rule applied until ``nid`` reads closed values of its own only (copies of them)."""
    while (found := _shared_closed(mk.net, nid)) is not None:
        owner, port = found
        r = rule.using(consumer=port)
        first = _first_legal(r, mk.net, lambda m: m.nodes["f"] == owner, {owner})
        if first is None:
            raise ConstructionError(f"rule {rule.name!r} cannot give {mk.net.nodes[nid].name!r} its own copy of "
                                    f"the closed value {mk.net.nodes[owner].name!r}")
        mk.apply(r, first)


#: blocks of more operations than this are fused smallest pair first
BALANCED_FROM = 8


def boxes(m) -> int:
    """The boxes of a fusion match's two kernels (``k1``, ``k2``): the balanced order's key."""
    return len(m.box("k1").arg.boxes) + len(m.box("k2").arg.boxes)


def _region_among(net, ids) -> int:
    found = [i for i in ids if net.nodes[i].kind == "region"]
    if len(found) != 1:
        raise ConstructionError(f"expected one new kernel, found {len(found)}")
    return found[0]


def _share(mk, book, region):
    """The book's ``share`` rule on the block's kernel (once: it merges every shared value), then the
    ``simplify`` rules at the discards it left; returns the kernel."""
    share = book.role("share")
    first = _first_legal(share, mk.net, lambda m: m.nodes["k"] == region, _around(mk.net, {region}, share))
    if first is None:
        return region
    new, _ = mk.apply(share, first)
    region = _region_among(mk.net, new)
    drops = {n for n in new if mk.net.nodes[n].kind == "discard"}
    tidy = book.role("simplify") if "simplify" in book.roles else ()
    while drops:
        touches = lambda m: set(m.nodes.values()) & drops  # noqa: E731
        first = next(((r, m) for r in tidy if (m := _first_legal(r, mk.net, touches, _around(mk.net, drops, r)))
                      is not None), None)
        if first is None:
            break
        _, gone = mk.apply(*first)
        drops -= gone
    return region


def _around(net, anchors, rule):
    """:func:`near`, or every node where the rule's pattern absorbs nodes (a match may touch ``anchors`` through
    one of them alone, which need not be near its pattern's nodes)."""
    return None if rule.pattern.absorb is not None else near(net, anchors, rule)


def _once(mk, rule, region):
    """The rule playing ``compute_once`` on the block's kernel where it computes a value twice (once: it merges
    every such value); returns the kernel."""
    first = _first_legal(rule, mk.net, lambda m: m.nodes["k"] == region, {region}, mk.made)
    if first is None:
        return region
    new, _ = mk.apply(rule, first)
    return _region_among(mk.net, new)


def _renamed_apart(mk, graph, path, book):
    """Step 0: where the search's kernel of a block renames its own axes apart (a kernel across segments,
    :meth:`~napkin_cat.search.blocks.OpGraph.renamed_apart`), the rule playing ``apart`` renames those classes in the
    function (``within=`` each such block's nodes: α-conversion, the inputs renamed by views in global memory), and the
    graph of the renamed function (its operations in the same order: each block's kernel is then the one the search
    costed, under the names its partition was chosen by) is the one the blocks are built on."""
    groups = [graph.block_nodes(mask) for mask, _, _ in path if graph.renamed_apart(mask)]
    if not groups:
        return graph
    if "apart" not in book.roles:
        raise ConstructionError("the search renamed a kernel's axes apart but the rule book plays no 'apart' rule")
    rule = book.role("apart").using(within="|".join(" ".join(str(n) for n in sorted(g)) for g in groups))
    first = _first_legal(rule, mk.net, lambda m: True)
    if first is None:
        raise ConstructionError(f"rule {rule.name!r} does not rename apart the axes of the {len(groups)} kernel(s) "
                                f"the search renamed")
    mk.apply(rule, first)
    renamed = OpGraph(mk.net, **graph.flags)
    if [renamed.name(i) for i in range(len(renamed))] != [graph.name(i) for i in range(len(graph))]:
        raise ConstructionError("renaming axes apart changed the order of the function's operations")
    return renamed


def make(form, graph, path, book, level: int):
    """``(diagram, steps)``: ``form`` (whose ops are ``graph``'s) partitioned as ``path`` by the book's rules.

    ``path``: ``[(block mask, Variant, {axis: tile name})]`` in an order where each block comes after the
    blocks it reads.  Block by block: its operations become kernels, are fused into one, and it is
    partitioned, before the next block's operations become kernels; so the only unpartitioned kernels
    fusion can pair are the block's own.
    """
    kernel_rule, fuse_rule = book.role("kernel").using(level=level), book.role("fuse")
    stream_rule, group_rule = book.role("stream"), book.role("group")
    own = book.role("recompute") if graph.folded else None
    own = own[-1] if isinstance(own, tuple) else own
    join_rule = book.role("join") if "join" in book.roles else None
    mk = Maker(graph.net)       # the form's netlist, whose node ids name the graph's operations
    graph = _renamed_apart(mk, graph, path, book)
    for k, (mask, variant, names) in enumerate(path):
        ops = {graph.nodes[i] for i in bits(mask)} | graph.absorbed(mask)   # (the views it holds inside too)
        mine = set()
        # 1. every operation of the block its own kernel
        while True:
            first = _first_in_order(kernel_rule, mk.net, lambda m: m.nodes["f"] in ops, ops)
            if first is None:
                break
            if own is not None and _shared_closed(mk.net, first.nodes["f"]) is not None:
                f = first.nodes["f"]
                _own_closed(mk, own, f)
                first = _first_legal(kernel_rule, mk.net, lambda m: m.nodes["f"] == f, {f})
            new, _ = mk.apply(kernel_rule, first)
            mine.add(_region_among(mk.net, new))
        if len(mine) != len(ops):
            raise ConstructionError(f"kernel formation made {len(mine)} kernels for the {len(ops)} operations of "
                                    f"block {k}")
        # 2. fuse them into one (in a large block, the smallest pair first, from a heap (:mod:`.fusion_order`): each
        #    fusion rebuilds both kernels, so joining them as a balanced tree costs n log n box rebuilds, not n²)
        #    two parts that no data flow links but a value both read are joined by the rule playing ``join``
        queue = FusionQueue(fuse_rule, mk.net, mine, boxes) if len(ops) > BALANCED_FROM else None
        while len(mine) > 1:
            both = lambda m: m.nodes["k1"] in mine and m.nodes["k2"] in mine  # noqa: E731
            rule = fuse_rule
            if queue is not None:
                first = queue.pop(mk.net)
            else:
                first = _first_legal(fuse_rule, mk.net, both, mine)
            if first is None and join_rule is not None:     # (rare: no data flow links the parts left)
                options = _legal(join_rule, mk.net, both, mine)
                rule, first = join_rule, min(options, key=boxes) if queue is not None and options else \
                    next(iter(options), None)
            if first is None:
                why = [f"{r.name} at {m.describe()}: {r.failure(m)[1]}" for r in (fuse_rule, join_rule) if r is not None
                       for m in r.candidates(mk.net, mine) if both(m)]
                raise ConstructionError(f"kernel fusion cannot join the {len(mine)} kernels of block {k} "
                                        f"({sorted(graph.name(i) for i in bits(mask))}) that the search chose: no "
                                        f"legal match{'; ' + '; '.join(why[:3]) if why else ''}")
            before = mk.net
            new, gone = mk.apply(rule, first)
            mine = (mine - gone) | {_region_among(mk.net, new)}
            if queue is not None:
                queue.update(before, mk.net, mine)
        (region,) = mine
        if "share" in book.roles:
            region = _share(mk, book, region)
        if "compute_once" in book.roles:
            region = _once(mk, book.role("compute_once"), region)
        # 3. partition it
        first = book.role("sweep") if getattr(variant, "sliced", False) else stream_rule
        steps = ([(first, variant.stream)] if variant.stream else []) + \
            ([(book.role("split"), variant.stream)] if getattr(variant, "parts", None) else []) + \
            [(book.role("nest"), a) for a in getattr(variant, "inner", ())] + \
            [(group_rule, a) for a in variant.groups]
        for rule, axis in steps:
            r = rule.using(axis=axis, parts=names[parts_key(axis)]) if rule.name == book.roles.get("split") \
                else rule.using(axis=axis, size=names[axis])
            first = _first_legal(r, mk.net, lambda m: m.nodes["k"] == region, {region})
            if first is None:
                raise ConstructionError(f"rule {rule.name!r} does not apply along {axis!r} to kernel {k}")
            new, _ = mk.apply(r, first)
            region = _region_among(mk.net, new)
    left = [n for n, node in mk.net.nodes.items() if node.kind == "box" and n not in graph.views]
    if left:
        raise ConstructionError(f"kernel formation left {[mk.net.nodes[n].name for n in left]} outside any kernel")
    return mk.net.diagram, tuple(mk.steps)
