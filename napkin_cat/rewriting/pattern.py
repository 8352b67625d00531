"""Patterns: the left-hand side of a rule, a small graph of node tests to look for in a netlist.

A :class:`Pattern` names its nodes by variables, each with a :class:`NodeTest` (a named predicate on a netlist
node), and joins them by port-labelled :class:`Edge` s (output ``src_port`` of ``src`` feeds input ``dst_port``
of ``dst``; None: any port).  Finding its occurrences is :mod:`napkin_cat.rewriting.match`'s work; this module
says only what is looked for.

A test that names the node or box kinds it can accept reads only those (its :meth:`NodeTest.pool`); an *exact*
one accepts all of them, so a scan of the whole netlist need not run it.  The law, for an exact test ``t``::

    {n for n in net.nodes if t(net, net.nodes[n])} == set(t.pool(net))

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.netlist import to_netlist
>>> net = to_netlist(nc.elementwise("exp", "q") >> nc.elementwise("neg", "q") >> nc.elementwise("exp", "q"))
>>> t = kind("exp")
>>> t.exact, {n for n in net.nodes if t(net, net.nodes[n])} == set(t.pool(net)), len(t.pool(net))
(True, True, 2)
>>> Pattern({"a": kind("exp"), "b": kind("neg")}, [("a", 0, "b", 0)]).describe()
'a:exp, b:neg; a.0 → b.0'
>>> Pattern({"a": kind("exp")}, [("a", 0, "z", 0)])
Traceback (most recent call last):
    ...
napkin_cat.errors.RewriteError: pattern edge a.0 → z.0 names 'z', which is not a pattern node ['a']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.netlist import OUTPUT


# ---------------------------------------------------------------------- node tests
@dataclass(frozen=True)
class NodeTest:
    """A predicate on netlist nodes, with a name for messages: ``test(net, node) -> bool``."""

    name: str
    test: Callable
    #: the node kinds (``"box"``, ``"copy"``, ``"region"``, …) and box kinds (``Spec.kind``) it can accept, where it
    #: says (None: any): a scan for its candidates reads only those nodes (:meth:`~.netlist.Netlist.of_kind`)
    nodes: tuple | None = None
    boxes: tuple | None = None
    #: it accepts exactly the nodes of the kinds it says (:meth:`pool`): a scan of the whole netlist need not run it
    exact: bool = False

    def __call__(self, net, node) -> bool:
        return bool(self.test(net, node))

    def pool(self, net) -> list:
        """The nodes of ``net`` it can accept by their kinds alone (every node where it does not say)."""
        if self.boxes is not None:
            return net.of_kind(*(("box", k) for k in self.boxes))
        if self.nodes is not None:
            return net.of_kind(*((k, None) for k in self.nodes))
        return list(net.nodes)

    def describe(self) -> str:
        return self.name


def kind(*kinds: str) -> NodeTest:
    """A primitive box whose ``Spec.kind`` is one of ``kinds``."""
    return NodeTest("|".join(kinds), lambda net, n: n.kind == "box" and n.spec.kind in kinds, boxes=tuple(kinds),
                    exact=True)


def structural(name: str) -> NodeTest:
    """A node of structural kind 'copy', 'discard', 'merge' or 'region'."""
    return NodeTest(name, lambda net, n: n.kind == name, nodes=(name,), exact=True)


def where(name: str, test: Callable, *, nodes: tuple | None = None) -> NodeTest:
    """Any named predicate ``test(net, node)``; ``nodes``: the node kinds it can hold on (None: any)."""
    return NodeTest(name, test, nodes=nodes)


ANY_BOX = NodeTest("box", lambda net, n: n.kind in ("box", "region"), nodes=("box", "region"), exact=True)


def feeds_only(test: NodeTest, name: str | None = None) -> NodeTest:
    """A box with at least one output, every output going to a node satisfying ``test``."""
    def fn(net, node):
        ends = net.consumers(node.id)
        return bool(ends) and all(e[0] != OUTPUT and test(net, net.nodes[e[0]]) for e in ends)
    return NodeTest(name or f"box feeding only {test.name}", fn)


# ---------------------------------------------------------------------- patterns
@dataclass(frozen=True)
class Edge:
    """A pattern edge: output ``src_port`` of ``src`` feeds input ``dst_port`` of ``dst`` (None: any)."""

    src: str
    src_port: int | None
    dst: str
    dst_port: int | None

    def __str__(self):
        def p(x):
            return "*" if x is None else x
        return f"{self.src}.{p(self.src_port)} → {self.dst}.{p(self.dst_port)}"


@dataclass(frozen=True)
class Pattern:
    """Pattern nodes ``{var: NodeTest}`` (ordered), edges, optional ``absorb`` and ``bind``.

    ``absorb(net, nodes) -> {var: node id}`` adds nodes determined by the match
    (e.g. every discard of a box's outputs); ``bind(match) -> dict | None``
    binds variables (axis names, sizes, parameters), None rejecting the match.
    """

    nodes: tuple
    edges: tuple = ()
    absorb: Callable | None = None
    bind: Callable | None = None

    def __post_init__(self):
        nodes = tuple(self.nodes.items()) if isinstance(self.nodes, dict) else tuple(self.nodes)
        edges = tuple(e if isinstance(e, Edge) else Edge(*e) for e in self.edges)
        names = [v for v, _ in nodes]
        if not nodes or len(set(names)) != len(names):
            raise RewriteError(f"a pattern needs distinct variable names, got {names}")
        for e in edges:
            for v in (e.src, e.dst):
                if v not in names:
                    raise RewriteError(f"pattern edge {e} names {v!r}, which is not a pattern node {names}")
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "edges", edges)

    @property
    def variables(self) -> tuple:
        return tuple(v for v, _ in self.nodes)

    def describe(self) -> str:
        nodes = ", ".join(f"{v}:{t.describe()}" for v, t in self.nodes)
        return nodes + ("; " + ", ".join(map(str, self.edges)) if self.edges else "")
