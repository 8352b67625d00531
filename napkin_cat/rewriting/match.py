"""Matching sub-diagrams: a pattern's matches, and the diagram with a hole.

A :class:`~napkin_cat.rewriting.pattern.Pattern` (:mod:`napkin_cat.rewriting.pattern`: what is looked for) is
matched in a diagram's :class:`~napkin_cat.rewriting.netlist.Netlist` with networkx's ``DiGraphMatcher``
(subgraph monomorphism), so matches are found across unrelated boxes and through swaps.  A match is kept when
it is

* *exact*: the wires between matched nodes are exactly the pattern's edges, and
* *convex*: no path leaves the matched nodes and comes back (else the
  replacement would need a cycle).

A :class:`Match` is "a diagram with a hole": its :attr:`Match.dom` and
:attr:`Match.cod` are the boundary wires (inputs ordered by pattern variable
then port, outputs likewise), and :meth:`Match.substitute` plugs a replacement
of that type into the hole.

The pattern's names are importable from here too (the rules import ``Pattern, kind, where`` with ``find``).

>>> import napkin_cat as nc
>>> t = nc.types("a", level=1).inside[0]
>>> d = nc.transfer("save", t) >> nc.transfer("load", t.replace(level=0))
>>> p = Pattern({"s": kind("save"), "l": kind("load")}, [("s", 0, "l", 0)])
>>> [m.describe() for m in find(p, d)]
["s=#0 'save', l=#1 'load'"]
>>> find(p, d)[0].substitute(nc.Id(nc.types("a", level=1))).boxes
[]
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import networkx as nx
from networkx.algorithms.isomorphism import DiGraphMatcher

from napkin_cat.syntax.adapter import Ty
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.netlist import INPUT, OUTPUT, Netlist, to_netlist
from napkin_cat.rewriting.pattern import ANY_BOX, Edge, NodeTest, Pattern, feeds_only, kind, structural, where
from napkin_cat.rewriting.splice import normalize, splice
from napkin_cat.rewriting.readback import to_diagram
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.weave import build_box

#: the matching's names, and the pattern's (:mod:`.pattern`) and the netlist's boundary ends that rules import from here
__all__ = ["find", "lazy_find", "near", "is_convex", "Match", "peel_weave", "Pattern", "Edge", "NodeTest", "kind",
           "structural", "where", "feeds_only", "ANY_BOX", "INPUT", "OUTPUT"]


def _ports_fit(have, want) -> bool:
    """Injective assignment of wanted port pairs (None = any) into the graph's pairs."""
    free = list(have)
    for sp, dp in sorted(want, key=lambda pq: (pq[0] is None) + (pq[1] is None)):
        for k, (a, b) in enumerate(free):
            if (sp is None or sp == a) and (dp is None or dp == b):
                del free[k]
                break
        else:
            return False
    return True


def _arc_consistent(pattern: Pattern, net: Netlist, candidates: dict) -> dict:
    """Drop candidates lacking a candidate neighbour along some pattern edge (before VF2)."""
    cands = {v: set(c) for v, c in candidates.items()}
    changed = True
    while changed:
        changed = False
        for e in pattern.edges:
            src = {a for a in cands[e.src] if any(b in cands[e.dst] for b in net.successors[a])}
            dst = {b for b in cands[e.dst] if any(a in cands[e.src] for a in net.predecessors[b])}
            if src != cands[e.src] or dst != cands[e.dst]:
                cands[e.src], cands[e.dst], changed = src, dst, True
    return cands


def _monomorphisms(pattern: Pattern, net: Netlist, candidates: dict):
    if len(pattern.nodes) == 1:
        (var, _), = pattern.nodes
        return [{var: nid} for nid in sorted(candidates[var], key=net.position.get)]
    candidates = _arc_consistent(pattern, net, candidates)
    if any(not c for c in candidates.values()):
        return []
    target = net.graph_on(set().union(*candidates.values()))
    pg = nx.DiGraph()
    for var, _ in pattern.nodes:
        pg.add_node(var, var=var)
    for e in pattern.edges:
        if pg.has_edge(e.src, e.dst):
            pg[e.src][e.dst]["ports"].append((e.src_port, e.dst_port))
        else:
            pg.add_edge(e.src, e.dst, ports=[(e.src_port, e.dst_port)])
    matcher = DiGraphMatcher(target, pg, node_match=lambda g, p: g["nid"] in candidates[p["var"]],
                             edge_match=lambda g, p: _ports_fit(g["ports"], p["ports"]))
    found = [{v: g for g, v in m.items()} for m in matcher.subgraph_monomorphisms_iter()]
    order = net.position
    found.sort(key=lambda m: [order[m[v]] for v, _ in pattern.nodes])
    return found


def is_convex(net: Netlist, chosen: set) -> bool:
    """No path leaves ``chosen`` and re-enters it (search pruned by topological position)."""
    pos = net.position
    hi = max(pos[n] for n in chosen)
    stack = [s for n in chosen for s in net.successors[n] if s not in chosen]
    seen = set()
    while stack:
        x = stack.pop()
        if x in seen or pos[x] > hi:
            continue
        if x in chosen:
            return False
        seen.add(x)
        stack.extend(net.successors[x])
    return True


def _candidates(pattern: Pattern, net: Netlist, within) -> dict | None:
    """Each variable's candidate nodes (its test's pool, or ``within``, filtered by the test), or None as soon as one
    variable has none: the variables with the fewest nodes to test first, a test shared by variables run once."""
    if within is None:   # each variable's candidates among the nodes of the kinds its test can accept
        pools = {var: test.pool(net) for var, test in pattern.nodes}
    else:
        inside = [nid for nid in within if nid in net.nodes]
        pools = {var: inside for var, _ in pattern.nodes}
    tests, nodes, found, by_test = dict(pattern.nodes), net.nodes, {}, {}
    memo = getattr(net, "test_memo", None)      # a fixpoint's remembered verdicts (:mod:`.fixpoint`)
    for var in sorted(pools, key=lambda v: len(pools[v])):
        test = tests[var]               # a predicate on (net, node): one test, one pool, one answer
        got = by_test.get(id(test))
        if got is None:
            if within is None and test.exact and (test.boxes, test.nodes) != (None, None):   # its pool: what it accepts
                got = set(pools[var])
            elif memo is not None and within is None:
                got = memo.tested(test, pools[var], net)
            else:
                got = {nid for nid in pools[var] if test(net, nodes[nid])}
            by_test[id(test)] = got
        if not got:
            return None
        found[var] = got
    return {var: found[var] for var in tests}


def find(pattern: Pattern, source, *, rule: str = "", params: dict | None = None, within=None) -> list:
    """All exact, convex matches of ``pattern`` in a diagram (or netlist), in diagram order; ``within`` (node
    ids) restricts the pattern's nodes to those (what a search building one kernel asks: linear, not a scan).
    The list of :func:`lazy_find`'s matches."""
    return list(lazy_find(pattern, source, rule=rule, params=params, within=within))


def lazy_find(pattern: Pattern, source, *, rule: str = "", params: dict | None = None, within=None):
    """:func:`find`'s matches one at a time, in the same order: a match's exactness, convexity and boundary are
    worked out only when it is asked for, so a caller that takes the first match pays for the placings before it,
    not for all of them (``next(lazy_find(p, d)) == find(p, d)[0]``).

    >>> import napkin_cat as nc
    >>> d = nc.elementwise("exp", "q") >> nc.elementwise("neg", "q") >> nc.elementwise("exp", "q")
    >>> p = Pattern({"f": kind("exp")})
    >>> next(lazy_find(p, d)).key == find(p, d)[0].key, len(find(p, d))
    (True, 2)
    """
    net = source if isinstance(source, Netlist) else to_netlist(source)
    candidates = _candidates(pattern, net, within)
    if candidates is None:
        return
    for nodes in _monomorphisms(pattern, net, candidates):
        if pattern.absorb is not None:
            extra = pattern.absorb(net, dict(nodes))
            if extra is None or set(extra.values()) & set(nodes.values()):
                continue
            absorbed = set(extra.values())
            nodes = {**nodes, **extra}
        else:
            absorbed = set()
        chosen = set(nodes.values())
        kept = chosen - absorbed
        internal = sum(1 for n in kept for w in net.outs[n] if net.wires[w].dst[0] in kept)
        if internal != len(pattern.edges) or not is_convex(net, chosen):
            continue
        m = _boundary(net, nodes, chosen, rule, params or {})
        if pattern.bind is not None:
            bound = pattern.bind(m)
            if bound is None:
                continue
            m = replace(m, vars=dict(bound))
        yield m


def near(net, anchors, rule):
    """The nodes of ``net`` that a match of ``rule`` touching ``anchors`` can use: those within ``p − 1`` wires of an
    anchor (either way), ``p`` the pattern's nodes, when its edges join them (a match maps each edge onto a wire,
    so its nodes lie that close to the one it shares with ``anchors``); None (every node) for a pattern whose
    edges do not join its nodes.  What a construction step whose match touches a known part asks, so that the
    pattern is looked for there, not in the whole netlist (nodes a pattern *absorbs* are not restricted by it).

    >>> import napkin_cat as nc
    >>> from napkin_cat.rewriting.match import Pattern, kind
    >>> from napkin_cat.rewriting.rules import Rule
    >>> d = nc.elementwise("exp", "q") >> nc.elementwise("neg", "q") >> nc.elementwise("exp", "q")
    >>> net = to_netlist(d)
    >>> pair = Rule("pair", Pattern({"a": kind("exp"), "b": kind("neg")}, [("a", 0, "b", 0)]), None)
    >>> [net.nodes[n].name for n in sorted(near(net, {list(net.nodes)[0]}, pair), key=net.position.get)]
    ['exp', 'neg']
    >>> near(net, set(), Rule("apart", Pattern({"a": kind("exp"), "b": kind("neg")}), None)) is None
    True
    """
    variables = rule.pattern.variables
    joined, todo = {variables[0]}, [variables[0]]
    while todo:
        v = todo.pop()
        for e in rule.pattern.edges:
            for a, b in ((e.src, e.dst), (e.dst, e.src)):
                if a == v and b not in joined:
                    joined.add(b)
                    todo.append(b)
    if len(joined) != len(variables):
        return None
    found, frontier = {a for a in anchors if a in net.nodes}, set(anchors) & net.nodes.keys()
    for _ in range(len(variables) - 1):
        step = set()
        for n in frontier:
            step.update(net.successors[n], net.predecessors[n])
        frontier = step - found - {INPUT, OUTPUT}
        found |= frontier
    return found


def _boundary(net, nodes, chosen, rule, params):
    ins, in_w, outs, out_w = [], [], [], []
    for var, nid in nodes.items():
        for port, w in enumerate(net.ins[nid]):
            if net.wires[w].src[0] not in chosen:
                ins.append((var, port))
                in_w.append(w)
        for port, w in enumerate(net.outs[nid]):
            if net.wires[w].dst[0] not in chosen:
                outs.append((var, port))
                out_w.append(w)
    return Match(net, dict(nodes), tuple(ins), tuple(in_w), tuple(outs), tuple(out_w), {}, dict(params), rule)


# ---------------------------------------------------------------------- matches
@dataclass(frozen=True, eq=False)
class Match:
    """A matched sub-netlist and its context: a diagram with a hole of type ``dom → cod``.

    ``nodes`` maps pattern variables to node ids; ``inputs``/``outputs`` are the
    boundary ports ``(var, port)`` in order, ``input_wires``/``output_wires``
    the netlist wires crossing the boundary; ``vars`` the bound variables;
    ``params`` the rule's parameters.
    """

    net: Netlist
    nodes: dict
    inputs: tuple
    input_wires: tuple
    outputs: tuple
    output_wires: tuple
    vars: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    rule: str = ""

    @property
    def diagram(self):
        """The diagram the match was found in (laid out once if the netlist was spliced)."""
        return self.net.diagram

    @property
    def dom(self) -> Ty:
        return Ty(*(self.net.wires[w].array for w in self.input_wires))

    @property
    def cod(self) -> Ty:
        return Ty(*(self.net.wires[w].array for w in self.output_wires))

    def node(self, var: str):
        return self.net.nodes[self.nodes[var]]

    def box(self, var: str):
        return self.node(var).box

    def spec(self, var: str):
        return self.node(var).spec

    @property
    def key(self) -> tuple:
        """The position of the match: ``((var, node id), …)`` (stable for a given diagram)."""
        return tuple(self.nodes.items())

    @property
    def choice(self) -> tuple:
        """Its parameters, ``((name, value), …)`` sorted: the rule's own and the choice the match makes among
        the candidates at one position (which consumer, which operands first, an axis name it invents)."""
        return tuple(sorted(self.params.items()))

    @property
    def identity(self) -> tuple:
        """``(key, choice)``: what tells this match from every other candidate of its rule in its netlist, so
        what a trace records to find it again (:meth:`~napkin_cat.rewriting.rules.Rule.relocate`)."""
        return self.key, self.choice

    @property
    def hole(self) -> tuple:
        """What the match is, wherever it sits in its netlist: per pattern variable (in the match's order) its node's
        kind, box (by value) and arrays, and where each of its wires ends (``(var, port)`` of a matched node, or the
        index of the boundary port it crosses); then the matched nodes' order in the netlist and the parameters.

        A right-hand side that reads only these (:attr:`~napkin_cat.rewriting.rules.Rule.local`) makes equal
        replacements at matches of equal holes: the blocks of a stack, alike, are rewritten alike.

        >>> import napkin_cat as nc
        >>> d = nc.elementwise("exp", "q") >> nc.elementwise("neg", "q") >> nc.elementwise("exp", "q")
        >>> a, b = find(Pattern({"f": kind("exp")}), d)
        >>> a.hole == b.hole, a.key == b.key
        (True, False)
        """
        net = self.net
        var = {nid: v for v, nid in self.nodes.items()}
        crossing_in = {w: i for i, w in enumerate(self.input_wires)}
        crossing_out = {w: i for i, w in enumerate(self.output_wires)}

        def end(w, side, crossing):
            owner, port = getattr(net.wires[w], side)
            return (var[owner], port) if owner in var else crossing[w]
        nodes = tuple((v, node.kind, node.box, node.dom, node.cod,
                       tuple(end(w, "src", crossing_in) for w in net.ins[nid]),
                       tuple(end(w, "dst", crossing_out) for w in net.outs[nid]))
                      for v, nid in self.nodes.items() for node in (net.nodes[nid],))
        order = tuple(var[n] for n in sorted(var, key=net.position.__getitem__))
        return nodes, order, self.inputs, self.outputs, self.choice

    def describe(self) -> str:
        return ", ".join(f"{v}=#{n} {self.net.nodes[n].name!r}" for v, n in self.nodes.items())

    def __repr__(self):
        return f"Match({self.rule + ': ' if self.rule else ''}{self.describe()}; {self.dom} → {self.cod})"

    # ------------------------------------------------------------- building replacements
    def wiring(self):
        """A :class:`~napkin_cat.syntax.builder.Builder` on the hole's inputs and ``{(var, port): wire}``."""
        b = Builder(self.dom)
        return b, dict(zip(self.inputs, b.inputs))

    def filled(self, diagram):
        """The hole filled by one ``diagram`` whose inputs are the hole's inputs in order and whose outputs are its
        outputs in order (a rule whose right-hand side is one box or region: ``filled(d) = d`` wired in)."""
        outer, ins = self.wiring()
        got = outer(diagram, *(ins[port] for port in self.inputs))
        got = got if isinstance(got, tuple) else (got,)
        return self.finish(outer, dict(zip(self.outputs, got)))

    def finish(self, builder, outs: dict):
        """The replacement built in ``builder``; ``outs`` maps each boundary output port to a wire."""
        missing = [p for p in self.outputs if p not in outs]
        if missing:
            raise RewriteError(f"rule {self.rule!r}: the right-hand side gives no wire for boundary "
                               f"output(s) {missing}; it must give one for each of {list(self.outputs)}")
        return builder.build(*(outs[p] for p in self.outputs))

    # ------------------------------------------------------------- the hole
    def fill(self, replacement, rn: Netlist | None = None) -> Netlist:
        """The netlist with the matched nodes replaced by ``replacement`` (of type dom → cod); ``rn``: its netlist,
        where the caller has read it already."""
        if replacement.dom != self.dom or replacement.cod != self.cod:
            raise RewriteError(
                f"rule {self.rule!r}: the replacement has type {replacement.dom} → {replacement.cod} "
                f"but the matched sub-diagram has type {self.dom} → {self.cod}; both sides of a rule "
                "must have the same type")
        rn = to_netlist(replacement) if rn is None else rn
        spliced = splice(self.net, set(self.nodes.values()), self.input_wires, self.output_wires, rn)
        offset = self.net.fresh_ids[0]
        near = {n + offset for n in rn.nodes}
        for w in (*self.input_wires, *self.output_wires):
            near.update(e[0] for e in (self.net.wires[w].src, self.net.wires[w].dst) if e[0] not in (INPUT, OUTPUT))
        return normalize(spliced, near)

    def substitute(self, replacement):
        """The diagram with the matched nodes replaced by ``replacement`` (of type dom → cod)."""
        return to_diagram(self.fill(replacement))


# ---------------------------------------------------------------------- tools for right-hand sides
def peel_weave(box, axis: str):
    """The box without its weave over ``axis`` (the inverse of weaving one box).

    >>> import napkin_cat as nc
    >>> b = nc.elementwise("exp", "q x").boxes[0]
    >>> peel_weave(b, "q").dom
    Ty(Array(x))
    """
    spec = box.data
    if axis not in spec.weave_names:
        raise RewriteError(f"box {box.name!r} is not weaved over {axis!r} (weaves {list(spec.weave_names)})")

    def drop(arr):
        return arr.replace(axes=tuple(a for a in arr.axes if a.name != axis))
    weaves = [w for w in spec.weaves if w.name != axis]
    return build_box(spec.kind, [drop(a) for a in box.dom.inside], [drop(a) for a in box.cod.inside],
                     weaves, dict(spec.params), name=box.name)
