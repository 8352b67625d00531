"""A relative-position bias read by index inside the fused kernel: scores + ``table[q − x + (x_size − 1)]``
(FlexAttention's learnable bias table).  Derived at a memory, the attention stays one kernel that writes no q×x
array to level 0; its plan moves what ``r.H`` says and computes the numpy attention with the bias gathered in
numpy.  (The gather reads the table, which is not woven over q and x, at an index that is: the bias costs one
operation per (q, x) item whatever the table's length r, and the table moves once per group of queries.)"""
from __future__ import annotations

import math

import numpy as np

import napkin_cat as nc
from napkin_cat.syntax.flat import layers

NQ = NX = 32
D = 8
R = NQ + NX - 1                      # every offset q − x, shifted to 0 … R − 1


def relative_bias():
    b = nc.Builder(nc.types("r", r=R))
    (table,) = b.inputs
    qi, xi = b(nc.position("q", q=NQ)), b(nc.position("x", x=NX))
    offset = b(nc.elementwise("shift", "q x", const=NX - 1, dtype="int32", q=NQ, x=NX),
               b(nc.elementwise("sub", "q, x -> q x", dtype="int32", q=NQ, x=NX), qi, xi))
    return b.build(b(nc.gather("r, q x -> q x", q=NQ, x=NX, r=R), table, offset))


def written(d):
    """The arrays the kernels of ``d`` write to level 0 that are not ``d``'s outputs."""
    return [a for _, box in layers(d) if isinstance(box, nc.Region) for a in box.cod.inside if a not in d.cod.inside]


def test_relative_bias_table_stays_inside_the_fused_kernel():
    att = nc.library.masked_attention(None, relative_bias(), q=NQ, x=NX, d=D)
    rng = np.random.default_rng(11)
    Q, K, V = (rng.normal(size=(n, D)) for n in (NQ, NX, NX))
    table = rng.normal(size=R)
    qi, xi = np.arange(NQ)[:, None], np.arange(NX)[None, :]
    S = Q @ K.T / math.sqrt(D) + table[qi - xi + NX - 1]
    P = np.exp(S - S.max(axis=1, keepdims=True))
    reference = (P / P.sum(axis=1, keepdims=True)) @ V
    np.testing.assert_allclose(nc.evaluate(att, Q, K, V, table), reference, rtol=1e-12, atol=1e-12)
    assert nc.cost(relative_bias()).flops == {"general": 3 * NQ * NX}     # sub, shift, gather: none scales with R

    r = nc.derive(att, memory=2000, sizes={})
    assert written(r.diagram) == [] and len(r.variant.kernels) == 1, r.variant     # no q×x array at level 0
    tiles = {k: int(v) for k, v in r.optimum.sizes.items()}
    out, run = nc.plan(r.diagram, tiles).run(Q, K, V, table)
    np.testing.assert_allclose(out, reference, rtol=1e-12, atol=1e-12)
    assert run.transfers == {1: r.H}
    # Q, K, V, O once each, and the table once per group of queries: it is not woven over x, so the stream along x
    # reads the copy its group loaded (the table spread over q and x moved once per trip of the stream)
    assert r.H == 4 * NQ * D + R * -(-NQ // tiles["g_q"])
