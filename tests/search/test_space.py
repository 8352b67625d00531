"""The kernel-split space of a form (``paths.Space``) against a brute force: its edges are exactly the pairs of
down-sets whose difference is a connected block of at most ``cap`` operations (plus the whole, fully fused), and a
block is connected (or linked through a value two parts read) exactly when networkx finds its induced subgraph
connected."""
import networkx as nx
import pytest

import napkin_cat as nc
from napkin_cat.search.blocks import OpGraph, bits
from napkin_cat.search.paths import Space

PROGRAMS = {
    "attention backward": lambda: nc.grad(nc.library.attention()),
    "saved backward": lambda: nc.grad(nc.library.attention(), saved=True),
    "swiglu": nc.library.swiglu,
    "mlp": nc.library.mlp,
    "linear cross-entropy": nc.library.linear_cross_entropy,
}


def components(g: OpGraph, block: int, siblings: bool) -> int:
    """The connected components of ``block``'s operations, data flow (and reading one value) as undirected edges."""
    G = nx.Graph()
    G.add_nodes_from(bits(block))
    for i in bits(block):
        for j in bits((g.preds[i] | g.succs[i] | (g.siblings[i] if siblings else 0)) & block):
            G.add_edge(i, j)
    return nx.number_connected_components(G)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_space_has_every_connected_block_up_to_its_cap(name):
    g = OpGraph(nc.engine.to_netlist(PROGRAMS[name]()))
    space = Space(g)
    edges = {(a, b, block) for b, into in space.into.items() for a, block in into}
    downs = g.downsets()
    brute = {(a, b, b & ~a) for a in downs for b in downs
             if a != b and a & ~b == 0 and bin(b & ~a).count("1") <= space.cap and components(g, b & ~a, False) == 1}
    if components(g, g.full, False) == 1:
        brute.add((0, g.full, g.full))
    assert edges == brute and space.cap >= 1
    assert len(g) <= space.cap or not space.exact     # a space is exact only when it holds every block


@pytest.mark.parametrize("name", ["saved backward", "swiglu"])
def test_a_block_is_connected_exactly_when_its_subgraph_is(name):
    g = OpGraph(nc.engine.to_netlist(PROGRAMS[name]()), share=True, join=True)
    masks = range(1, g.full + 1)
    assert [g.connected(m) for m in masks] == [components(g, m, False) == 1 for m in masks]
    assert [g.linked(m) for m in masks] == [components(g, m, True) == 1 for m in masks]
    assert any(g.linked(m) and not g.connected(m) for m in masks)      # siblings link some blocks flow does not
