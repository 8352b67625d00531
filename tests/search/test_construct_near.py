"""Building the winner without rescanning the function (issue 35).

* :func:`~napkin_cat.search.construct.near`: a construction step whose match touches a known part (the kernel it
  builds, the discards it left) looks for the pattern within ``p − 1`` wires of it.  Second route: the whole
  netlist scanned (``within=None``) and its matches touching the part kept: the same matches, in the same order.
* :func:`~napkin_cat.search.forms.least_work_first` with a call's record of the replacements' FLOPs (``works``,
  keyed by the replacement diagram): the order FLOPs counted by hand give, each distinct replacement costed once
  however many alike places offer it.
* :attr:`Form.net <napkin_cat.search.forms.Form>`: the netlist a fresh read of the form's diagram gives (its node
  ids are those the graph's operations, the construction and the trace's replay use).
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.rewriting.match import ANY_BOX, Pattern, find, where
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.rewriting.rules import Rule
from napkin_cat.search.construct import near
from napkin_cat.search.forms import least_work_first, prepared_forms
from rewrites import pairwise_contraction


ANYTHING = where("node", lambda net, n: True)


def _chain(p):
    """A rule whose pattern is a path of ``p`` nodes ``v0 → v1 → …`` (any kind, any ports)."""
    names = [f"v{j}" for j in range(p)]
    edges = [(a, None, b, None) for a, b in zip(names, names[1:])]
    return Rule(f"chain{p}", Pattern({v: ANYTHING for v in names}, edges), None)


def _functions():
    return {"causal_grad": nc.grad(nc.library.causal_attention(), wrt=[0, 1, 2]),
            "block": nc.library.transformer_block(),
            "backward": nc.grad(nc.library.attention(lse=True), wrt=[0, 1, 2], saved=True, aux=1)}


@pytest.mark.parametrize("name", ["causal_grad", "block", "backward"])
@pytest.mark.parametrize("p", [2, 3])
def test_near_finds_every_match_touching_the_anchor(name, p):
    net, rule = to_netlist(_functions()[name]), _chain(p)
    everywhere = find(rule.pattern, net)
    assert everywhere, f"no {p}-chain in {name}: the test would check nothing"
    checked = 0
    for anchor in net.nodes:
        want = [m.key for m in everywhere if anchor in m.nodes.values()]
        room = near(net, {anchor}, rule)
        got = [m.key for m in find(rule.pattern, net, within=room) if anchor in m.nodes.values()]
        assert got == want, f"{name}, anchor #{anchor} {net.nodes[anchor].name!r}: {got} != {want}"
        assert len(room) < len(net.nodes) or len(net.nodes) <= 2 * p   # it does restrict the scan
        checked += bool(want)
    assert checked > 3


def test_near_reads_every_node_for_a_pattern_in_pieces():
    apart = Rule("apart", Pattern({"a": ANY_BOX, "b": ANY_BOX}), None)     # no edge joins a and b
    net = to_netlist(nc.library.attention())
    assert near(net, {next(iter(net.nodes))}, apart) is None


SIZES = dict(a=256, b=16, c=256, e=16)
#: multiply-adds by hand of each order of (a b)(b c)(c e) → (a e) at SIZES (the pair first, then the third; the
#: pair (0 2) shares no axis: an outer product a b c e, then summed over b and c with (b c))
a, b, c, e = SIZES.values()
BY_HAND = {"((0 1) 2)": a * b * c + a * c * e, "(0 (1 2))": b * c * e + a * b * e, "((0 2) 1)": 2 * a * b * c * e}


def test_least_work_first_costs_each_replacement_once_per_call():
    one = nc.einsum("a b, b c, c e -> a e")
    two = one @ one                                  # two alike places: equal replacements
    places = {}
    for m in pairwise_contraction.matches(two):
        places.setdefault(m.key, []).append(m)
    assert len(places) == 2
    works, orders = {}, []
    for choices in places.values():
        orders.append([m.params["order"] for m in least_work_first(pairwise_contraction, choices, SIZES, works)])
    hand = sorted(BY_HAND, key=lambda o: (BY_HAND[o], ["((0 1) 2)", "(0 (1 2))", "((0 2) 1)"].index(o)))
    assert orders[0] == orders[1] == hand[: len(orders[0])]
    assert orders[0][0] == "(0 (1 2))"              # the rule's own order puts ((0 1) 2) first
    # one entry per distinct replacement (a key that also held the place would cost each twice; one that held
    # less than the diagram, the rule's name or the place, would give every choice the first one's FLOPs)
    assert len(works) == len(places[next(iter(places))])
    assert len(set(works.values())) == len(works)
    # without a record: the same order
    assert [m.params["order"] for m in least_work_first(pairwise_contraction, next(iter(places.values())),
                                                        SIZES)] == orders[0]


def test_a_forms_netlist_is_a_fresh_read_of_its_diagram():
    forms = prepared_forms(nc.library.attention(), rulebook())
    assert len(forms) > 1
    for f in forms:
        fresh = to_netlist(f.diagram)
        assert f.net is f.graph.net
        assert list(f.net.nodes) == list(fresh.nodes)
        assert [n.name for n in f.net.nodes.values()] == [n.name for n in fresh.nodes.values()]
        ends = lambda net: {w: (x.src, x.dst) for w, x in net.wires.items()}  # noqa: E731
        assert ends(f.net) == ends(fresh)


@pytest.mark.parametrize("within", [False, True])
def test_a_patterns_candidates_are_each_variables_own(within):
    """``find`` tests a node once per distinct test (the variables sharing one test share its answer): second route,
    the matches counted from the netlist's own boxes and wires."""
    net = to_netlist(nc.library.transformer_block())
    room = set(net.nodes) if within else None
    boxes = [n for n in net.nodes if net.nodes[n].kind in ("box", "region")]
    pair = Pattern({"a": ANY_BOX, "b": ANYTHING}, [("a", None, "b", None)])
    want = sorted((a, b) for a in boxes for b in net.successors[a]
                  if sum(net.wires[w].dst[0] == b for w in net.outs[a]) == 1)   # exact: the one wire between them
    got = sorted((m.nodes["a"], m.nodes["b"]) for m in find(pair, net, within=room))
    assert got and set(got) <= set(want)
    kinds = {net.nodes[b].kind for _, b in got}
    assert kinds - {"box", "region"}, "a variable read another's candidates (a copy or discard never matches b)"
    same = Pattern({"a": ANY_BOX, "b": ANY_BOX}, [("a", None, "b", None)])
    both = sorted((m.nodes["a"], m.nodes["b"]) for m in find(same, net, within=room))
    assert both == [p for p in got if net.nodes[p[1]].kind in ("box", "region")]
