"""The order of a large block's fusion steps: the legal fusion of fewest boxes first, kept in a heap.

A block of many operations is fused smallest pair first (each fusion rebuilds both kernels, so joining them as
a balanced tree costs n log n box rebuilds, not n²).  The step taken is the first of the rule's legal matches
among the block's kernels sorted (stably) by their kernels' boxes::

    step = min(legal matches, key=(boxes of its kernels, its place in the rule's candidate order))

Listing every legal match to take the least makes each step cost the whole block (quadratic in all).
:class:`FusionQueue` keeps one entry per *placing* (the pattern's nodes) in a heap keyed by ``(boxes, positions of
the pattern's nodes)`` (the candidate order is the order of those positions), and after a step finds again only the
placings on nodes the step changed (gone, new, another node, another position), with every node a match rests on
(its pattern's and those its pattern absorbed, e.g. a fusion's partner), so a step costs the candidates it touched:

* a placing whose nodes are unchanged keeps its key, and fusion only merges nodes, so a path between two unchanged
  nodes stays one: a placing that was not convex stays not convex, and the candidates of unchanged nodes are among
  those already queued;
* a queued placing is checked when it reaches the top, on the netlist of now (the rule's conditions, convexity, the
  nodes its pattern absorbs): one whose match has moved to more boxes is queued again at its key of now; one with no
  legal match waits aside and is queued again after the next step, which may make it legal.

(Not covered: a match that moves, with none of its nodes changed, to *fewer* boxes (its absorbed partner no longer
convex, the next one smaller); it is taken when it reaches the top at its older key.)

So the heap pops the same step as the sorted list (tested against it on random programs).
"""
from __future__ import annotations

import heapq
import itertools

from napkin_cat.rewriting.match import near


class FusionQueue:
    """The fusion candidates of ``rule`` among the kernels ``mine`` of ``net``, least ``size(match)`` first, then
    in the rule's candidate order; :meth:`pop` the first legal one, :meth:`update` after a step.

    >>> import napkin_cat as nc
    >>> from napkin_cat.rewriting.match import Pattern, kind
    >>> from napkin_cat.rewriting.netlist import to_netlist
    >>> from napkin_cat.rewriting.rules import Rule
    >>> d = nc.elementwise("exp", "q") >> nc.elementwise("neg", "q") >> nc.elementwise("exp", "q")
    >>> net = to_netlist(d)
    >>> pair = Rule("pair", Pattern({"a": kind("exp", "neg"), "b": kind("exp", "neg")}, [("a", 0, "b", 0)]), None)
    >>> q = FusionQueue(pair, net, set(net.nodes), lambda m: 2)
    >>> [net.nodes[n].name for n in q.pop(net).nodes.values()]
    ['exp', 'neg']
    """

    def __init__(self, rule, net, mine: set, size):
        self.rule, self.size = rule, size
        self.variables = rule.pattern.variables
        self.heap, self.aside = [], []
        self.live, self.rests, self.by_node = {}, {}, {}   # placing (its pattern nodes) → its entry's token, the
        self.tokens = itertools.count()                    # nodes its match rests on; node → placings on it
        self._queue(net, rule.candidates(net, mine))

    def _push(self, net, m, placing):
        token = self.live[placing] = next(self.tokens)
        self.rests[placing] = tuple(m.nodes.values())     # its nodes and those its pattern absorbed
        for n in self.rests[placing]:
            self.by_node.setdefault(n, set()).add(placing)
        pos = net.position
        heapq.heappush(self.heap, (self.size(m), tuple(pos[n] for n in placing), token, placing))

    def _queue(self, net, found, nodes=None, placings=()):
        """Queue the placings of ``found`` (those on ``nodes`` or among ``placings`` where ``nodes`` is given)."""
        for m in found:
            placing = tuple(m.nodes[v] for v in self.variables)
            if placing in self.live or nodes is not None and placing not in placings and \
                    not nodes.intersection(placing):
                continue                        # one entry per placing (its choices are checked when it pops)
            self._push(net, m, placing)

    def _forget(self, placing):
        if self.live.pop(placing, None) is not None:
            for n in self.rests.pop(placing):
                self.by_node[n].discard(placing)

    def pop(self, net):
        """The first legal candidate in ``net`` in the queue's order (removed from the queue), or None."""
        while self.heap:
            entry = heapq.heappop(self.heap)
            size, _, token, placing = entry
            if self.live.get(placing) != token:
                continue                        # a node of it is gone or changed: queued again if still a placing
            legal = [m for m in self.rule.lazy_candidates(net, set(placing))
                     if tuple(m.nodes[v] for v in self.variables) == placing and self.rule.failure(m) is None]
            if not legal:
                self.aside.append(entry)
                continue
            m = min(legal, key=self.size)
            if self.size(m) > size:             # its match moved (a node it absorbs is another now): queued again
                self._forget(placing)
                self._push(net, m, placing)
                continue
            self._forget(placing)
            return m
        return None

    def update(self, before, after, mine: set):
        """After a step from netlist ``before`` to ``after`` (``mine``: the block's kernels now): the placings resting
        on a node it changed (gone, new, another node, another position) found again, with those around the changed
        kernels; those set aside queued again."""
        old_nodes, old_pos, now, pos = before.nodes, before.position, after.nodes, after.position
        changed = {n for n in self.by_node if n not in now or old_nodes.get(n) is not now[n] or
                   old_pos.get(n) != pos[n]} | {n for n in mine if n not in old_nodes}
        again = set()
        for n in changed:
            for placing in list(self.by_node.get(n, ())):
                self._forget(placing)
                if set(placing) <= mine:
                    again.add(placing)
            self.by_node.pop(n, None)
        for entry in self.aside:
            if self.live.get(entry[3]) == entry[2]:
                heapq.heappush(self.heap, entry)
        self.aside = []
        fresh = changed & mine
        if fresh or again:
            around = near(after, fresh, self.rule)
            within = mine if around is None else (around & mine).union(*again)
            self._queue(after, self.rule.candidates(after, within), fresh, again)
