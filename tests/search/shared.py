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
