"""Memory is not charged for a value nothing reads (issue 25, family 5).

A box whose output is only discarded makes a value that is dead as it is made: the plan frees it at once
and the runner never holds it between two statements.  The cost functor counted it on the wires until the
discard (``M[1] = 48`` for a kernel whose plan holds 24).
"""
from __future__ import annotations

import numpy as np

import napkin_cat as nc


def kernel_with_a_discarded_gelu():
    b = nc.Builder(nc.types("a b", a=4, b=6))
    (x,) = b.inputs
    b(nc.elementwise("gelu", "a b", a=4, b=6), x)
    return nc.kernel(b.build(b(nc.elementwise("exp", "a b", a=4, b=6), x)))


def test_a_discarded_value_is_not_held():
    k = kernel_with_a_discarded_gelu()
    p = nc.plan(k, {})
    _, counted = p.run(np.ones((4, 6)))
    assert nc.cost(k).M[1] == p.peak[1] == counted.peak[1] == 24
    assert nc.cost(k).flops == counted.flops          # it is still computed


def test_a_discarded_value_in_a_stream_and_a_grid():
    f = nc.library.attention()
    b = nc.Builder(f.dom)
    q, k, v = b.inputs
    b(nc.elementwise("exp", "q d"), q)
    g = b.build(b(f, q, k, v))
    d = nc.group(nc.stream(g, "x", "s_x"), "q", "g_q")
    sizes = {"q": 4, "x": 6, "d": 2, "g_q": 2, "s_x": 4}
    rng = np.random.default_rng(0)
    _, counted = nc.plan(d, sizes).run(rng.normal(size=(4, 2)), rng.normal(size=(6, 2)), rng.normal(size=(6, 2)))
    assert nc.cost(d, sizes=sizes).peak == counted.peak
