"""Issue 31, family 3: plans that ``nc.plan`` accepted and whose run raised or computed a wrong answer, found by
the fuzz over random programs and random partitions (:func:`napkin_cat.testing.checks.algorithm`).

* A split stream inside two groups along one other axis: its partials buffer was one inner tile wide and not
  indexed by the outer group, so every group wrote the same rows (a wrong sum where the tiles divide, a
  numpy reshape error where they are ragged).  It spans the whole axis now (:mod:`napkin_cat.plan.partials`).
* A split stream whose head makes one of its outputs (an operation on a value the stream does not read per
  trip): the combine, a launch after the parts, held no head value (a ``KeyError`` at plan time).  The plan
  refuses it with a ``LoweringError`` naming the stream and its head.
* An output without axes written inside a sliced stream's trip (a scalar passed through, beside a reduction
  streamed inside the slice): the runner's view of it was ``x[()]``, a copied numpy scalar, and the store
  raised ``TypeError: 'numpy.float64' object does not support item assignment``.

The expected values are numpy's, written from the mathematics (a column sum, ``silu``).
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.cost.numeric import at


def _column_sum_split_in_nested_groups(a: int, b: int):
    """``y_b = Σ_a x_ab``, the sum streamed along ``a`` in 2 parts, inside a group of ``b`` inside another."""
    d = nc.einsum("a b -> b", a=a, b=b)
    return nc.group(nc.group(nc.stream(nc.kernel(d), "a", "s_a", parts=2), "b", "g_b"), "b", "h_b")


@pytest.mark.parametrize("a, b, tiles", [
    (3, 8, {"s_a": 2, "g_b": 4, "h_b": 2}),       # every tile divides: the groups overwrote each other's rows
    (3, 5, {"s_a": 2, "g_b": 4, "h_b": 3}),       # ragged: the run raised numpy's reshape error
    (7, 13, {"s_a": 3, "g_b": 6, "h_b": 4}),
], ids=["dividing", "ragged", "ragged-wide"])
def test_a_split_stream_inside_nested_groups_computes_the_sum_and_counts_its_cost(a, b, tiles):
    alg = _column_sum_split_in_nested_groups(a, b)
    p = nc.plan(alg, tiles)
    x = np.random.default_rng(0).normal(size=(a, b))
    got, counted = p.run(x)
    np.testing.assert_allclose(got, x.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(p(x), x.sum(axis=0), rtol=1e-12)
    c = at(alg, tiles)
    assert counted.transfers == c.H and counted.flops == c.flops
    (parts,) = [v for v in p.variables if v.name.endswith("_parts")]
    assert parts.shape == (("parts_a", 2), ("b", b))      # each group's partials in its own rows of the whole axis


def _silu_beside_a_dead_sum():
    """``silu(y)`` of a scalar input, beside a sum of ``x`` that nothing reads."""
    b = nc.Builder(nc.types("a, ()", a=5))
    x, y = b.inputs
    b(nc.reduce("sum", "a -> ()", a=5), x)
    return b.build(b(nc.elementwise("silu", "()"), y))


def test_a_split_stream_whose_head_makes_an_output_is_refused_at_plan_time():
    d = _silu_beside_a_dead_sum()
    alg = nc.stream(nc.kernel(d), "a", "s_a", parts=2)
    y = np.float64(0.75)
    assert np.isclose(nc.evaluate(alg, np.ones(5), y, sizes={"s_a": 2}), y / (1 + np.exp(-y)))
    with pytest.raises(nc.LoweringError, match=r"Stream\(axis=a, size=s_a, parts=2\).*head \(load; silu; save\).*"
                                               r"stream it unsplit"):
        nc.plan(alg, {"s_a": 2})
    unsplit = nc.plan(nc.stream(nc.kernel(d), "a", "s_a"), {"s_a": 2})
    assert np.isclose(unsplit(np.ones(5), y), y / (1 + np.exp(-y)))


def test_an_output_without_axes_is_written_inside_a_sliced_streams_trip():
    """``(Σ_a m_xa, c)``: the sum streamed along ``a`` inside a sliced stream along ``x``; ``c`` (no axes) is stored
    in every trip of ``x``."""
    b = nc.Builder(nc.types("x a, ()", x=5, a=3))
    m, c = b.inputs
    d = b.build(b(nc.reduce("sum", "x a -> x", x=5, a=3), m), c)
    alg = nc.stream(nc.stream(nc.kernel(d), "a", "s_a"), "x", "s_x", sliced=True)
    tiles = {"s_a": 2, "s_x": 2}
    p = nc.plan(alg, tiles)
    M, C = np.arange(15.).reshape(5, 3), np.float64(0.5)
    (total, same), counted = p.run(M, C)
    np.testing.assert_allclose(total, M.sum(axis=1))
    assert same.shape == () and same == C
    fast_total, fast_same = p(M, C)
    np.testing.assert_allclose(fast_total, M.sum(axis=1))
    assert fast_same == C
    cost = at(alg, tiles)
    assert counted.transfers == cost.H and counted.peak == {lvl: v for lvl, v in cost.M.items() if lvl > 0}
