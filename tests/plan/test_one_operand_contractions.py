"""The plan runner on contractions that sum an axis only one operand carries (issue 25, family 2).

The runner made such a contraction one BLAS call (``tensordot``), which sums only the axes both operands
carry and keeps every other: ``a, b -> b`` raised ``axes don't match array``, a full contraction ran to a
matrix, and a stream's accumulator grew by broadcasting (twice the transfers counted).  Only contractions
``tensordot`` computes go to it now; the others run as the primitive says.
"""
from __future__ import annotations

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.syntax.axis import symbol


def _inputs(d, sizes, seed=0):
    env = {symbol(k): v for k, v in sizes.items()}
    rng = np.random.default_rng(seed)
    return [rng.normal(size=tuple(int(sympy.sympify(a.size).subs(env)) for a in arr.axes)) for arr in d.dom.inside]


def _check(function, algorithm, sizes):
    xs = _inputs(function, sizes)
    y, counted = nc.plan(algorithm, sizes).run(*xs)
    want = nc.evaluate(function, *xs)
    assert np.shape(y) == np.shape(want)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-12)
    c = nc.cost(algorithm, sizes=sizes)
    assert (counted.transfers, counted.flops, counted.peak) == (c.H, c.flops, c.peak)
    assert np.allclose(nc.plan(algorithm, sizes)(*xs), want)        # the fast run too
    return counted


def test_an_axis_summed_by_one_operand():
    f = nc.einsum("a, b -> b", a=3, b=4)
    _check(f, nc.kernel(f), {})


def test_a_full_contraction_after_flash_attention_is_a_scalar():
    from rewrites import flash_attention
    f = nc.einsum("k n_, K k -> ")
    d = flash_attention(f).diagram
    _check(f, d, {"k": 3, "n_": 7, "K": 5, "s_k": 2})


def test_a_stream_beside_a_dead_reduction_counts_what_it_moves():
    from rewrites import flash_attention
    b = nc.Builder(nc.types("size, w z N"))
    a, m = b.inputs
    out = b(nc.einsum("size, w z N -> size"), a, m)
    b(nc.reduce("sum", "size -> "), a)
    f = b.build(out)
    counted = _check(f, flash_attention(f).diagram, {"size": 3, "w": 5, "z": 3, "N": 1, "s_w": 1})
    assert counted.transfers == {1: 3 + 5 * 3 + 3 + 3}     # size in, w·z·N in slices, size out; the dead sum's size
