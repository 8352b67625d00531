"""What several tests of the search share: a small program (layer norm then a matmul) and a counter of the partitions
the search costs (its cost records built, ``iocost.cost`` through :mod:`napkin_cat.search.curves`)."""
from __future__ import annotations

import napkin_cat as nc
from napkin_cat.search import curves


def ln_matmul():
    """``LayerNorm(X; g, b) · W``: ``n d, d, d, d e → n e``."""
    L = nc.library
    b = nc.Builder(nc.types("n d, d, d, d e"))
    X, g, be, W = b.inputs
    return b.build(b(nc.einsum("n d, d e -> n e"), b(L.layer_norm(), X, g, be), W))


def counted_costings(monkeypatch) -> list:
    """A one-element list holding how many partitions the search has costed since (``curves.cost`` patched)."""
    calls = [0]
    real = curves.cost

    def counting(*a, **k):
        calls[0] += 1
        return real(*a, **k)
    monkeypatch.setattr(curves, "cost", counting)
    return calls


def random_search(seed: int, memories: list):
    """A random concrete program's search at level 1 (:func:`~napkin_cat.testing.programs.random_program`): ``(p, graph,
    space, search, evaluate, lower)`` with ``evaluate(curve, k)`` its H* at ``memories[k]`` and ``lower(choice)`` its
    compulsory transfers at the program's sizes; None where the program has no operation."""
    from napkin_cat.search.blocks import OpGraph
    from napkin_cat.search.context import KernelCache, search_of
    from napkin_cat.search.paths import Space
    from napkin_cat.testing.programs import random_program
    p = random_program(seed, concrete=True)
    graph = OpGraph(nc.engine.to_netlist(p.diagram))
    if len(graph) == 0:
        return None
    sizes = {str(k): int(v) for k, v in p.sizes.items()}
    given = nc.Sizes(sizes)
    return (p, graph, Space(graph), search_of(1, KernelCache()), lambda curve, k: curve.at_all(sizes, memories)[k][0],
            lambda ch: ch.compulsory_at(given))
