"""A chosen schedule made by the rules: the trace that turns the function into the algorithm.

The search picks, for a (prepared) function, its kernels and each kernel's partition; this module
makes that algorithm with the rule book's rules alone, recording every step:

1. the rule playing ``kernel`` (kernel formation) on every primitive, at the level asked;
2. the rule playing ``fuse`` (kernel fusion) on two kernels of one block, until each block is one kernel;
3. per kernel, the rule playing ``stream`` along its streamed axis, then ``group`` along each grouped
   axis, with the kernel's own tile names (parameters ``axis=`` and ``size=`` of the rules).

Every step is applied at the match that touches the block it is building, so the trace replays
(:meth:`~napkin_cat.rewriting.trace.Trace.replay`) to the same algorithm.
"""
from __future__ import annotations

from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.trace import Step
from napkin_cat.search.blocks import bits


class Maker:
    """Applies rules one match at a time on a netlist, recording :class:`Step` s (as the driver does)."""

    def __init__(self, diagram):
        self.net = to_netlist(diagram)
        self.steps = []

    def apply(self, rule, match):
        after = rule.fill(match)
        self.steps.append(Step(rule.name, match.key, match.describe(), self.net, after,
                               fresh=self.net.source is not None, params=tuple(sorted(match.params.items()))))
        before, self.net = self.net, after
        return set(after.nodes) - set(before.nodes), set(before.nodes) - set(after.nodes)


def _region_among(net, ids) -> int:
    found = [i for i in ids if net.nodes[i].kind == "region"]
    if len(found) != 1:
        raise RewriteError(f"expected one new kernel, found {len(found)}")
    return found[0]


def make(form, graph, path, book, level: int):
    """``(diagram, steps)``: ``form`` (whose ops are ``graph``'s) partitioned as ``path`` by the book's rules.

    ``path``: ``[(block mask, Variant, {axis: tile name})]`` in execution order.
    """
    kernel_rule, fuse_rule = book.role("kernel").using(level=level), book.role("fuse")
    stream_rule, group_rule = book.role("stream"), book.role("group")
    mk = Maker(form)
    owner = {}                         # netlist node id of a kernel -> index of its block in the path
    block_of = {}
    for k, (mask, _, _) in enumerate(path):
        for i in bits(mask):
            block_of[graph.nodes[i]] = k
    # 1. every primitive its own kernel
    while True:
        options = [m for m in kernel_rule.matches(mk.net) if m.nodes["f"] in block_of]
        if not options:
            break
        m = options[0]
        new, _ = mk.apply(kernel_rule, m)
        owner[_region_among(mk.net, new)] = block_of[m.nodes["f"]]
    left = [n for n, node in mk.net.nodes.items() if node.kind == "box"]
    if left:
        raise RewriteError(f"kernel formation left {[mk.net.nodes[n].name for n in left]} outside any kernel")
    # 2. fuse within each block
    count = {k: sum(1 for v in owner.values() if v == k) for k in range(len(path))}
    while any(c > 1 for c in count.values()):
        options = [m for m in fuse_rule.matches(mk.net)
                   if m.nodes["k1"] in owner and m.nodes["k2"] in owner
                   and owner[m.nodes["k1"]] == owner[m.nodes["k2"]]]
        if not options:
            stuck = [k for k, c in count.items() if c > 1]
            raise RewriteError(f"kernel fusion cannot join the kernels of block(s) {stuck}: no legal match")
        m = options[0]
        k = owner[m.nodes["k1"]]
        new, gone = mk.apply(fuse_rule, m)
        for g in gone:
            owner.pop(g, None)
        owner[_region_among(mk.net, new)] = k
        count[k] -= 1
    # 3. partition each kernel
    region = {k: nid for nid, k in owner.items()}
    for k, (_, variant, names) in enumerate(path):
        steps = ([(stream_rule, variant.stream)] if variant.stream else []) + \
            [(group_rule, a) for a in variant.groups]
        for rule, axis in steps:
            r = rule.using(axis=axis, size=names[axis])
            options = [m for m in r.matches(mk.net) if m.nodes["k"] == region[k]]
            if not options:
                raise RewriteError(f"rule {rule.name!r} does not apply along {axis!r} to kernel {k}")
            new, _ = mk.apply(r, options[0])
            region[k] = _region_among(mk.net, new)
    return mk.net.diagram, tuple(mk.steps)
