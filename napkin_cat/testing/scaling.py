"""Programs that grow with a parameter, for measuring how the functors and the search scale (per-box time,
work counted): a deep MLP whose every layer has a width axis of its own, so its weights (all of distinct sizes)
live beside the chain until used.

>>> from napkin_cat.testing.scaling import deep_mlp
>>> d = deep_mlp(3)
>>> [str(a) for a in d.dom.inside], str(d.cod.inside[0])
(['n×c0', 'c0×c1', 'c1×c2', 'c2×c3'], 'n×c3')
>>> [b.data.kind for b in d.boxes if b.data is not None].count("relu")
2
"""
from __future__ import annotations

from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import einsum, elementwise, types


def deep_mlp(k: int, act: str = "relu") -> Diagram:
    """``k`` dense layers n×c0 → n×c1 → … → n×ck, ``act`` between them, each product named "·"."""
    b = Builder(types(", ".join(["n c0"] + [f"c{i} c{i + 1}" for i in range(k)])))
    x, *ws = b.inputs
    for i, w in enumerate(ws):
        x = b(einsum(f"n c{i}, c{i} c{i + 1} -> n c{i + 1}"), x, w)
        if i < k - 1:
            x = b(elementwise(act, f"n c{i + 1}"), x)
    return b.build(x)
