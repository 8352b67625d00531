"""The normal form's fixpoint scanned again only where a step changed (:func:`~napkin_cat.rewriting.fixpoint.
fixpoint`), a splice's order keys carried over (:attr:`~napkin_cat.rewriting.netlist.Netlist.position`), and the
prepared forms built from the spliced netlist without a layout (:mod:`napkin_cat.search.forms`), issue 35.

Each against a second route: the incremental fixpoint makes the steps a rescan of every rule after every step makes
(:func:`~napkin_cat.rewriting.fixpoint.rescan_fixpoint`: the same rules at the same matches with the same choices,
the same final netlist) on random programs and library functions, each doubled so that the normal form has values to
merge; a spliced netlist's order keys order its nodes as its order does, and its boxes come in the order of a fresh
read of its layout; a form's graph is the graph of its layout read afresh, and its steps replay to it.
"""
from __future__ import annotations

import random

import pytest

import napkin_cat as nc
from napkin_cat.rewriting import isomorphic, to_diagram, to_netlist
from napkin_cat.rewriting import netlist as netlist_module
from napkin_cat.rewriting import splice as splice_module
from napkin_cat.rewriting.fixpoint import fixpoint, rescan_fixpoint
from napkin_cat.rewriting.match import NodeTest, Pattern, kind
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.rewriting.rules import Rule
from napkin_cat.search.blocks import OpGraph
from napkin_cat.search.forms import prepared_forms
from napkin_cat.testing.programs import random_program

BOOK = rulebook()
NORMAL = tuple(r for role in ("simplify", "normalise") for r in BOOK.role(role))


def doubled(d):
    """``d`` computed twice from the same inputs, both results put out: values for the normal form to merge."""
    b = nc.Builder(d.dom)
    first, second = b(d, *b.inputs), b(d, *b.inputs)
    first = first if isinstance(first, tuple) else (first,)
    second = second if isinstance(second, tuple) else (second,)
    return b.build(*first, *second)


FUNCTIONS = [(f"program {seed}", lambda seed=seed: doubled(random_program(seed, n_ops=5).diagram))
             for seed in range(5)] + \
    [("layer norm", lambda: doubled(nc.library.layer_norm())), ("attention", lambda: doubled(nc.library.attention())),
     ("transformer block", nc.library.transformer_block)]


def moves(steps) -> list:
    return [(s.rule, s.key, s.params) for s in steps]


@pytest.mark.parametrize("name,make", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_the_incremental_fixpoint_makes_the_rescans_steps(name, make, monkeypatch):
    net = to_netlist(make())
    scans = []
    counted = Rule.candidates

    def candidates(rule, source, within=None):
        scans.append(rule.name)
        return counted(rule, source, within)
    monkeypatch.setattr(Rule, "candidates", candidates)
    want_net, want = rescan_fixpoint(net, NORMAL, 10_000)
    rescans = len(scans)
    scans.clear()
    got_net, got = fixpoint(net, NORMAL, 10_000)
    assert moves(got) == moves(want), name
    assert got_net.same_as(want_net), name
    assert len(want) >= 2, name                     # the normal form took steps
    assert len(scans) <= rescans, name
    if not name.startswith("program"):
        assert len(scans) < rescans, name           # the incremental one scanned fewer rules
    assert bool(nc.equivalent(to_diagram(got_net), make())), name


def _map(name):
    return lambda m: m.filled(nc.elementwise(name, "q"))


def _reads_two_ahead(net, n):
    """An exp whose reader's reader is a tanh: a verdict that a step two wires away changes."""
    ahead = [e[0] for e in net.consumers(n.id) if e[0] in net.nodes]
    ahead = [e[0] for a in ahead for e in net.consumers(a) if e[0] in net.nodes]
    return n.spec.kind == "exp" and any(net.nodes[a].kind == "box" and net.nodes[a].spec.kind == "tanh" for a in ahead)


#: rules whose verdicts read what the book's rarely do: two wires ahead, the whole netlist (its size), a node id
#: that is not (yet) in it; each turns one kind into another (or drops a pair), so that the fixpoint ends
PROBES = (Rule("absent_next", Pattern({"f": NodeTest("relu whose next id is free",
                                                     lambda net, n: n.id + 1 not in net.nodes, boxes=("relu",))}),
               _map("abs")),
          Rule("whole", Pattern({"f": NodeTest("tanh in a short chain", lambda net, n: len(net.nodes) <= 6,
                                               boxes=("tanh",))}), _map("sigmoid")),
          Rule("two_ahead", Pattern({"f": NodeTest("exp two before a tanh", _reads_two_ahead, boxes=("exp",))}),
               _map("relu")),
          Rule("pair", Pattern({"a": kind("neg"), "b": kind("neg")}, [("a", 0, "b", 0)]), lambda m: nc.Id(m.dom)),
          Rule("square_to_neg", Pattern({"f": kind("square")}), _map("neg")))


@pytest.mark.parametrize("seed", range(12))
def test_the_incremental_fixpoint_forgets_what_a_step_changed(seed):
    """Chains of maps under :data:`PROBES`: every kind of read a remembered verdict may depend on is changed by
    some step (a node two wires ahead, the netlist's size, a node id taken), and the steps are the rescan's."""
    rng = random.Random(seed)
    d = nc.elementwise("exp", "q")
    for _ in range(rng.randint(7, 12)):
        d = d >> nc.elementwise(rng.choice(["exp", "neg", "neg", "tanh", "relu", "square"]), "q")
    net = to_netlist(d)
    want_net, want = rescan_fixpoint(net, PROBES, 1000)
    got_net, got = fixpoint(net, PROBES, 1000)
    assert moves(got) == moves(want) and got_net.same_as(want_net), seed


def test_a_step_limit_still_stops_the_fixpoint():
    net = to_netlist(doubled(nc.library.layer_norm()))
    with pytest.raises(nc.RewriteError, match="no fixpoint after 1 steps"):
        fixpoint(net, NORMAL, 1)


def keyed_in_order(net) -> bool:
    pos = net.position
    return (sorted(net.nodes, key=pos.__getitem__) == list(net.nodes) == net.order
            and len(set(pos.values())) == len(net.nodes) == len(pos))


@pytest.mark.parametrize("gap", [netlist_module.POSITION_GAP, 1])
def test_a_splice_keys_its_nodes_in_their_order(gap, monkeypatch):
    """The order keys a splice carries over (``gap``: room between keys; 1 leaves none, so every splice keys its
    netlist afresh) order the nodes as the netlist does, and its boxes come in the order of its layout read afresh;
    the wires' ids rise along the wires' order (what :meth:`graph_on` sorts by)."""
    monkeypatch.setattr(netlist_module, "POSITION_GAP", gap)
    monkeypatch.setattr(splice_module, "POSITION_GAP", gap)
    book = rulebook(None)
    rng = random.Random(gap)
    carried = spliced = 0
    for make in (nc.library.transformer_block,):
        net = to_netlist(make())
        for _ in range(12):
            options = [(r, m) for r in book.rules for m in r.matches(net)]
            if not options:
                break
            r, m = rng.choice(options)
            net.position            # noqa: B018  (the keys a splice carries)
            net = r.fill(m)
            carried += "position" in net.__dict__
            spliced += 1
            assert keyed_in_order(net), r.name
            assert list(net.wires) == sorted(net.wires), r.name
            fresh = to_netlist(to_diagram(net))
            boxes = [n.label for n in net.nodes.values() if n.kind in ("box", "region")]
            assert boxes == [n.label for n in fresh.nodes.values() if n.kind in ("box", "region")], r.name
    assert carried == spliced >= 8


@pytest.mark.parametrize("gap", [netlist_module.POSITION_GAP, 1])
def test_a_splice_that_grows_its_stretch_keys_it_between_its_neighbours_or_afresh(gap, monkeypatch):
    """One node replaced by two: between keys ``gap`` apart they fit; between consecutive keys they do not, and the
    netlist is keyed afresh (both in their order)."""
    monkeypatch.setattr(netlist_module, "POSITION_GAP", gap)
    monkeypatch.setattr(splice_module, "POSITION_GAP", gap)
    grow = Rule("grow", Pattern({"f": kind("neg")}), lambda m: m.filled(nc.elementwise("neg", "q") >>
                                                                          nc.elementwise("id", "q")))
    net = to_netlist(nc.elementwise("exp", "q") >> nc.elementwise("neg", "q") >> nc.elementwise("tanh", "q"))
    net.position            # noqa: B018  (the keys a splice carries)
    after = grow.fill(grow.matches(net)[0])
    assert [n.name for n in after.nodes.values()] == ["exp", "neg", "id", "tanh"]
    assert ("position" in after.__dict__) == (gap > 1)      # carried, or left to be keyed afresh
    assert keyed_in_order(after)


def stack(k):
    return nc.library.transformer_stack(k)


def test_forms_made_from_the_spliced_netlist_are_their_layouts():
    """Each prepared form of a large function (prepared at every place at once, from the spliced netlist): its
    operation graph is the one its layout read afresh gives, and its steps replay from the function to it."""
    d = stack(2)
    forms = prepared_forms(d, BOOK, sizes={"n": 512, "e": 256, "h": 4, "d": 64, "f": 1024})
    assert len(forms) >= 3 and any(f.net.source is None for f in forms)
    for f in forms:
        fresh = OpGraph(to_netlist(f.diagram), share=f.share, fold=f.fold, join=f.join, once=f.once)
        g = f.graph
        assert [g.name(i) for i in range(len(g))] == [fresh.name(i) for i in range(len(fresh))], f.prepared
        assert (g.preds, g.succs, g.flows) == (fresh.preds, fresh.succs, fresh.flows), f.prepared
        replayed = nc.Trace(f.steps, BOOK.rules).replay(d)
        assert isomorphic(to_netlist(replayed), f.net), f.prepared
