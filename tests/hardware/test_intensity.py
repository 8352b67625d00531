"""Appendix A.4: transfers per FLOP from the cost functor's optimum, per-level minima on real bandwidths."""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.hardware import HardwareError, load, matmul_intensity


def test_h100_values_per_second_and_the_transfers_per_flop():
    t = matmul_intensity("h100-sxm5")
    assert [round(float(lv.values_per_s) / 1e12, 1) for lv in t.levels] == [1.7, 6.0]     # the appendix's values
    M, b = sympy.Symbol("M", positive=True), nc.symbol("b")
    assert sympy.simplify(t.per_flop - (M ** sympy.Rational(-1, 2) + 1 / (2 * b))) == 0


def test_minima_satisfy_the_bound_with_equality():
    t = matmul_intensity("h100-sxm5")
    M, b = sympy.Symbol("M", positive=True), nc.symbol("b")
    for lv in t.levels:
        at = t.per_flop.subs({M: lv.memory, b: lv.min_b_at_memory})
        assert abs(float(at - lv.ratio)) < 1e-12
        assert float(lv.min_b) < float(lv.min_b_at_memory)            # finite memory needs a larger b
    gmem, l2 = t.levels
    assert gmem.memory == 132 * l2.memory                            # M_L2 = N_SM · M_SM (intermediate caching)
    assert round(float(gmem.min_b), 1) == 295.2                      # the FP16 roofline ridge (cf. 295)


def test_a100_has_no_l2_bandwidth_and_h200_needs_smaller_b():
    import pytest
    with pytest.raises(HardwareError, match="gives no bandwidth.l2_to_smem"):
        matmul_intensity("a100")
    assert matmul_intensity("h200").levels[0].min_b < matmul_intensity(load("h100-sxm5")).levels[0].min_b
