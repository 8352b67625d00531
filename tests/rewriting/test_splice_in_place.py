"""A rewrite's splice and the normal form of the spliced netlist, made in place: the splice sorts the stretch of the
order it touches and patches the tables (:func:`~napkin_cat.rewriting.splice.splice`, against its specification
:func:`~napkin_cat.rewriting.splice.splice_rebuild` at the rule book's matches), and
:func:`~napkin_cat.rewriting.splice.normalize` merges copies of
copies into the chain's first copy, one-output copies dissolved, the nodes' order kept, without the rebuild
of the whole netlist that :func:`~napkin_cat.rewriting.splice.normalize_rebuild` (its specification) makes.

Checked against the rebuild on netlists made abnormal at random (a copy's outputs cut into a chain of copies, a
one-output copy put on a wire, the wires listed in a shuffled order so that a copy's ports are not in the order of
its wires) from the library's functions and random programs: the same nodes in the same order, the same
connections in the same order, each port fed and read as there (wire ids aside); and by a second route, the
normal form reads back to a diagram isomorphic to the function the netlist was read from, and evaluates as it.
"""
from __future__ import annotations

import random

import pytest

import napkin_cat as nc
from napkin_cat.rewriting import INPUT, OUTPUT, Netlist, isomorphic, to_diagram, to_netlist
from napkin_cat.rewriting.netlist import Node
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.rewriting.splice import normalize, normalize_rebuild, splice, splice_rebuild
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, random_program


def shape(net: Netlist) -> tuple:
    """Everything of a netlist but its wire ids: the nodes in order (ids and what they are), the connections in the
    wires' order, what feeds each input port and what reads each output port, the diagram's inputs and outputs."""
    w = net.wires
    return (list(net.nodes), [n.label for n in net.nodes.values()], [(x.array, x.src, x.dst) for x in w.values()],
            {k: [w[i].src for i in v] for k, v in net.ins.items()},
            {k: [w[i].dst for i in v] for k, v in net.outs.items()},
            [w[i].dst for i in net.inputs], [w[i].src for i in net.outputs])


def abnormal(net: Netlist, rng: random.Random) -> Netlist:
    """``net`` with copies cut into chains, one-output copies put on wires, and its wires in a shuffled order."""
    nodes = list(net.nodes.values())
    conns = [[w.array, w.src, w.dst] for w in net.wires.values()]
    fresh = max(net.nodes, default=0) + 1
    for c in [n for n in nodes if n.kind == "copy" and len(n.cod) >= 2]:
        if rng.random() < 0.3:
            continue
        j = rng.randint(1, len(c.cod) - 1)        # c keeps ports 0 … j−1 and feeds a new copy the rest
        d = Node(fresh, "copy", None, c.dom, c.dom * (len(c.cod) - j))
        fresh += 1
        for conn in conns:
            if conn[1][0] == c.id and conn[1][1] >= j:
                conn[1] = (d.id, conn[1][1] - j)
        conns.append([c.dom[0], (c.id, j), (d.id, 0)])
        k = nodes.index(c)
        nodes[k] = Node(c.id, "copy", None, c.dom, c.dom * (j + 1))
        nodes.insert(k + 1, d)
    for conn in rng.sample(conns, min(3, len(conns))):   # a one-output copy on a wire, just before its reader
        e = Node(fresh, "copy", None, (conn[0],), (conn[0],))
        fresh += 1
        reader = conn[2][0]
        at = len(nodes) if reader == OUTPUT else next(i for i, n in enumerate(nodes) if n.id == reader)
        nodes.insert(at, e)
        conns.append([conn[0], (e.id, 0), conn[2]])
        conn[2] = (e.id, 0)
    rng.shuffle(conns)
    return Netlist.build(net.dom, net.cod, nodes, [tuple(c) for c in conns])


FUNCTIONS = [(name, make) for name, make in sorted(LIBRARY_FUNCTIONS.items())][:8] + \
    [(f"program {seed}", lambda seed=seed: random_program(seed, n_ops=4).diagram) for seed in range(4)]


@pytest.mark.parametrize("name,make", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_normal_form_in_place_is_the_rebuilt_one(name, make):
    d = make()
    net = to_netlist(d)
    rng = random.Random(name)
    changed = 0
    for _ in range(3):
        bad = abnormal(net, rng)
        got, want = normalize(bad), normalize_rebuild(bad)
        assert shape(got) == shape(want), name
        changed += got is not bad
        assert normalize(got) is got       # normal: nothing left to merge or dissolve
        assert isomorphic(to_diagram(got), d), name
    assert changed == 3                      # every abnormal netlist had something to normalise


def test_the_normal_form_computes_the_function():
    d = nc.library.layer_norm()
    bad = abnormal(to_netlist(d), random.Random(0))
    got = normalize(bad)
    assert len([n for n in bad.nodes.values() if n.kind == "copy"]) > len([n for n in got.nodes.values()
                                                                             if n.kind == "copy"])
    assert bool(nc.equivalent(to_diagram(got), d))


def test_near_a_normal_splice_nothing_is_rebuilt():
    net = to_netlist(nc.library.attention())
    assert normalize(net, near=set(net.nodes)) is net and normalize(net) is net
    assert all(w.src[0] == INPUT or w.src[0] in net.nodes for w in net.wires.values())


SPLICED = [nc.library.attention, nc.library.layer_norm, nc.library.transformer_block,
           lambda: random_program(3, n_ops=5).diagram]


@pytest.mark.parametrize("k", range(len(SPLICED)))
def test_splice_in_place_is_the_rebuilt_one(k):
    """:func:`splice` (the stretch of the order it touches sorted, the tables copied and patched) against
    :func:`splice_rebuild` (every wire renumbered, the whole order sorted), at legal matches of the rule book's
    rules, one after the other; and the fresh ids a splice sets without a scan are the scan's."""
    book = rulebook(None)
    rng = random.Random(k)
    net, steps, spliced = to_netlist(SPLICED[k]()), 0, 0
    for steps in range(12):
        options = [(r, m) for r in book.rules for m in r.matches(net)]
        if not options:
            break
        r, m = rng.choice(options)
        rn = to_netlist(r.rhs(m))
        args = (net, set(m.nodes.values()), m.input_wires, m.output_wires, rn)
        got, want = splice(*args), splice_rebuild(*args)
        assert shape(got) == shape(want), r.name
        known = got.__dict__.get("fresh_ids")
        assert known is None or known == (max(got.nodes, default=-1) + 1, max(got.wires, default=-1) + 1), r.name
        spliced += known is not None
        net = normalize(got)
    assert steps >= 4 and spliced >= 1       # rewrites were spliced, and fresh ids were set without a scan
