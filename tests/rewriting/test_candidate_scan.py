"""A pattern's candidates read off the nodes of the kinds its tests accept (issue 35: the derive of a 32-block
transformer scanned every node of its netlist for every rule at every rewrite).

``find`` scans, for a node test that says which node kinds or box kinds it can accept (``kind``, ``structural``,
``where(..., nodes=...)``), only the netlist's nodes of those kinds (:meth:`~napkin_cat.rewriting.netlist.Netlist.
of_kind`), and builds the matcher's graph on the candidates alone (:meth:`~napkin_cat.rewriting.netlist.Netlist.
graph_on`).  Checked against the routes they replace: every rule of the rule book finds the same matches (nodes,
boundary, parameters, in order) as with its tests stripped of their hints (every node scanned), on the library's
functions, on random programs, and on netlists spliced by rewrites (the normal form, kernels formed and fused);
``graph_on`` is ``networkx``'s subgraph of the whole netlist's graph; and ``of_kind`` lists exactly the nodes whose
kinds are asked, in the netlist's order.
"""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

import napkin_cat as nc
from napkin_cat.rewriting.match import Pattern, find
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, random_program

BOOK = rulebook(None)


def unhinted(pattern: Pattern) -> Pattern:
    """The pattern with every node test scanning all nodes (the route before the index)."""
    return replace(pattern, nodes=tuple((v, replace(t, nodes=None, boxes=None)) for v, t in pattern.nodes))


def described(ms) -> list:
    return [(tuple(m.nodes.items()), m.inputs, m.input_wires, m.outputs, m.output_wires, tuple(sorted(m.vars.items(),
            key=str)), m.choice) for m in ms]


def netlists():
    """Library functions, random programs, and netlists a few rewrites and kernel formations have spliced."""
    out = [(name, to_netlist(make())) for name, make in sorted(LIBRARY_FUNCTIONS.items())]
    out += [(f"program {seed}", to_netlist(random_program(seed, n_ops=3 + seed % 4).diagram)) for seed in range(6)]
    rng = random.Random(35)
    for name, make in (("attention", nc.library.attention), ("layer norm", nc.library.layer_norm),
                       ("transformer block", nc.library.transformer_block)):
        net = to_netlist(make())
        for _ in range(6):       # a few rewrites of any rule that applies: spliced netlists
            options = [(r, m) for r in BOOK.rules for m in r.matches(net)]
            if not options:
                break
            r, m = rng.choice(options)
            net = r.fill(m)
        out.append((f"{name} rewritten", net))
    return out


NETS = netlists()


@pytest.mark.parametrize("name,net", NETS, ids=[n for n, _ in NETS])
def test_every_rule_finds_what_a_scan_of_every_node_finds(name, net):
    hinted = 0
    for rule in BOOK.rules:
        pattern = rule.pattern
        hinted += any(t.nodes is not None or t.boxes is not None for _, t in pattern.nodes)
        want = find(unhinted(pattern), net, rule=rule.name, params=dict(rule.params))
        got = find(pattern, net, rule=rule.name, params=dict(rule.params))
        assert described(got) == described(want), (name, rule.name)
    assert hinted >= 5        # the index is exercised: most of the book's patterns say their kinds


@pytest.mark.parametrize("name,net", NETS[:8], ids=[n for n, _ in NETS[:8]])
def test_the_graph_on_some_nodes_is_the_whole_graphs_subgraph(name, net):
    rng = random.Random(name)
    ids = list(net.nodes)
    for _ in range(5):
        part = set(rng.sample(ids, rng.randint(1, len(ids))))
        g, h = net.graph_on(part), net.graph.subgraph(part)
        assert sorted(g.nodes(data=True)) == sorted(h.nodes(data=True))
        assert sorted((a, b, tuple(d["ports"])) for a, b, d in g.edges(data=True)) == \
            sorted((a, b, tuple(d["ports"])) for a, b, d in h.edges(data=True))


@pytest.mark.parametrize("name,net", NETS, ids=[n for n, _ in NETS])
def test_of_kind_lists_the_nodes_of_the_kinds_asked(name, net):
    boxes = sorted({n.spec.kind for n in net.nodes.values() if n.kind == "box"})
    for kinds in [(("copy", None),), (("box", None),), (("region", None), ("box", None))] + \
            [(("box", k),) for k in boxes] + [tuple(("box", k) for k in boxes[:3])]:
        want = [nid for nid, n in net.nodes.items()
                if any(n.kind == a and (b is None or n.spec.kind == b) for a, b in kinds)]
        assert net.of_kind(*kinds) == want, (name, kinds)


@pytest.mark.parametrize("name,net", NETS, ids=[n for n, _ in NETS])
def test_a_tests_pool_holds_every_node_it_accepts(name, net):
    """The law of a hint: the nodes of the kinds a test says it accepts include every node it accepts."""
    accepted = 0
    for rule in BOOK.rules:
        for var, test in rule.pattern.nodes:
            holds = {nid for nid, n in net.nodes.items() if test(net, n)}
            assert holds <= set(test.pool(net)), (name, rule.name, var)
            accepted += len(holds)
    assert accepted
