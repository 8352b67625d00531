"""Device programs written by hand, for tests of the device level (issue 37): what the rules should agree with.

``sharded_softmax(P)``: SoftMax over an axis sharded on ``P`` devices, the two statistics merged across them::

    softmax_x(S) = exp(S − m) / z,   m = max over devices of max_x(S_p),   z = Σ over devices of Σ_x exp(S_p − m)

>>> import numpy as np, napkin_cat as nc
>>> S = np.random.default_rng(0).normal(size=(3, 7))
>>> e = np.exp(S - S.max(1, keepdims=True))
>>> bool(np.allclose(nc.evaluate(sharded_softmax(3), S), e / e.sum(1, keepdims=True)))
True
"""
from __future__ import annotations

from napkin_cat.algorithms.devices import device_region
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.collectives import all_reduce
from napkin_cat.syntax.construct import elementwise, reduce, types


def sharded_softmax(P):
    """SoftMax over ``x`` on ``P`` devices, each holding a shard of ``x``: the row max all-reduced by ``max``, then
    the row sum by ``add`` (input and output ``q x``, sharded along ``x``)."""
    xs = symbol("x") / P
    b = Builder(types("q x", x=xs))
    (S,) = b.inputs
    m = b(all_reduce("q", devices=P, merge="max"), b(reduce("max", "q x -> q", x=xs), S))
    e = b(elementwise("exp", "q x", x=xs), b(elementwise("sub", "q x, q -> q x", x=xs), S, m))
    z = b(all_reduce("q", devices=P, merge="add"), b(reduce("sum", "q x -> q", x=xs), e))
    return device_region(b.build(b(elementwise("div", "q x, q -> q x", x=xs), e, z)), "x", P, symbol("x"))


__all__ = ["sharded_softmax"]
