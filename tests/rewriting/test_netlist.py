"""Netlists: the round trip preserves evaluation; isomorphism is equality up to interchange/symmetry."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.syntax.flat import is_structural
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting import INPUT, OUTPUT, Netlist, isomorphic, to_diagram, to_netlist
from rewrites.basic import random_diagram

LIBRARY = {
    "matmul": nc.library.matmul,
    "attention": nc.library.attention,
    "mha": nc.library.multi_head_attention,
    "gqa": nc.library.grouped_query_attention,
    "mlp": nc.library.mlp,
    "layer_norm": nc.library.layer_norm,
    "transformer_block": nc.library.transformer_block,
}


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_round_trip_of_the_library(name, helpers):
    d = LIBRARY[name]()
    back = to_diagram(to_netlist(d))
    helpers.well_typed(back)
    assert bool(nc.equivalent(d, back))
    assert isomorphic(d, back)


def test_swaps_are_dissolved_and_boxes_kept():
    d = nc.library.transformer_block()
    net = to_netlist(d)
    kinds = {n.kind for n in net.nodes.values()}
    assert "swap" not in kinds
    boxes = [b for b in d.boxes if is_structural(b) is None]
    assert sorted(n.name for n in net.nodes.values() if n.kind == "box") == sorted(b.name for b in boxes)


def test_every_wire_has_one_producer_and_one_consumer():
    net = to_netlist(nc.library.multi_head_attention())
    ends = [w.dst for w in net.wires.values()]
    assert len(ends) == len(set(ends))
    starts = [w.src for w in net.wires.values()]
    assert len(starts) == len(set(starts))
    assert {w.src for w in net.wires.values() if w.src[0] == INPUT} == {(INPUT, i) for i in range(3)}
    assert [net.wires[w].dst for w in net.outputs] == [(OUTPUT, 0)]


def test_copy_trees_are_flattened():
    t = nc.types("q d")
    tree = nc.Diagram.copy(t, 2) >> nc.Diagram.copy(t, 2) @ nc.Id(t)
    flat = nc.Diagram.copy(t, 3)
    assert [n.kind for n in to_netlist(tree).nodes.values()] == ["copy"]
    assert isomorphic(tree, flat)
    assert isomorphic(flat >> nc.Diagram.swap(t, t) @ nc.Id(t), flat)  # cocommutative


def test_copy_of_one_is_the_identity():
    t = nc.types("q")
    assert len(to_netlist(nc.Diagram.copy(t, 1))) == 0


def test_interchange_and_swap_naturality():
    f, g = nc.elementwise("exp", "a"), nc.elementwise("neg", "b")
    ia, ib = nc.Id("a"), nc.Id("b")
    assert isomorphic((f @ ib) >> (ia @ g), (ia @ g) >> (f @ ib))
    sw = nc.Diagram.swap(nc.types("a"), nc.types("b"))
    assert isomorphic((f @ g) >> sw, sw >> (g @ f))


def test_non_isomorphic_diagrams():
    f, g = nc.elementwise("exp", "a"), nc.elementwise("neg", "a")
    assert not isomorphic(f >> g, g >> f)
    add = nc.elementwise("sub", "a")
    sw = nc.Diagram.swap(nc.types("a"), nc.types("a"))
    assert not isomorphic(add, sw >> add)  # port order of a box matters
    assert not isomorphic(f, nc.elementwise("exp", "a", a=3))  # sizes matter
    assert not isomorphic(nc.Id("a") @ nc.Id("b"), nc.Id("b") @ nc.Id("a"))


def test_regions_are_opaque_nodes():
    inside = nc.at_level(nc.library.matmul(), 1)
    k1 = nc.Kernel.around(inside, level=1)
    k2 = nc.Kernel.around(to_diagram(to_netlist(inside)), level=1)
    net = to_netlist(k1)
    assert [n.kind for n in net.nodes.values()] == ["region"]
    assert isomorphic(k1, k2)
    other = nc.Kernel.around(nc.at_level(nc.einsum("a b, b c -> a c", b=4), 1), level=1)
    assert not isomorphic(k1, other)


def test_multi_array_discard_splits_into_nodes():
    t = nc.types("q, x")
    net = to_netlist(nc.Diagram.copy(t, 0))
    assert [n.kind for n in net.nodes.values()] == ["discard", "discard"]
    assert to_diagram(net) == nc.Diagram.copy(t, 0)


def test_build_rejects_a_badly_typed_wire():
    net = to_netlist(nc.elementwise("exp", "q"))
    conns = net.connections()
    arr = nc.types("x").inside[0]
    conns[0] = (arr, conns[0][1], conns[0][2])
    with pytest.raises(RewriteError, match="plugged into port 0"):
        Netlist.build(net.dom, net.cod, list(net.nodes.values()), conns)


def test_build_rejects_a_cycle():
    f = nc.elementwise("exp", "q")
    net = to_netlist(f >> f)
    a, b = list(net.nodes.values())
    q = net.dom[0]
    conns = [(q, (INPUT, 0), (OUTPUT, 0)), (q, (a.id, 0), (b.id, 0)), (q, (b.id, 0), (a.id, 0))]
    with pytest.raises(RewriteError, match="cycle"):
        Netlist.build(net.dom, net.cod, [a, b], conns)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 31), n_ops=st.integers(1, 25))
def test_round_trip_of_random_diagrams(seed, n_ops):
    d = random_diagram(np.random.default_rng(seed), n_ops)
    back = to_diagram(to_netlist(d))
    assert isomorphic(d, back)
    assert bool(nc.equivalent(d, back, trials=1, seed=seed))
    assert isomorphic(back, to_diagram(to_netlist(back)))
