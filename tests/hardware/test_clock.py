"""Table 3: the engine on hand-made breakdowns, then the paper's numbers from a derived FlashAttention.

The paper-reproduction tests read the op breakdown off the cost functor (``nc.cost(d).ops``).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware import HardwareError, OpRecord, clock_table, clock_table_of, load
from napkin_cat.hardware.model import from_dict

REGION = (("grid", "r"), ("stream", "c"))


def rec(label, pipeline, flops, dtype="fp16", operands=("fp16", "fp16"), role="body", index=None, region=REGION):
    return OpRecord(label, label, pipeline, flops, 1, region, role, dtype, operands, index)


# ------------------------------------------------------------------------------------------- engine
def test_engine_divides_by_rows_and_rates():
    ops = [rec("mm", "tensor", "6*k*g*s", index=0), rec("tanh", "special", "3*g*s", index=1),
           rec("head", "general", "g*k", role="head")]
    t = clock_table(ops, load("h100-pcie"), {"k": 32, "g": 64, "s": 16}, rows="g", moved="s*k*2")
    assert [c.label for c in t.columns] == ["mm", "tanh"]                  # head ops are not columns
    assert t.column("mm").ops == 6 * 32 * 16 and t.column("mm").clocks == Fraction(6 * 32 * 16, 4096)
    assert t.column("tanh").clocks == Fraction(3 * 16, 16)
    assert t.k_TC == Fraction(3072, 4096)
    g = load("h100-pcie")
    assert t.min_rows == g.f_K * (16 * 32 * 2) * g.sm_count / (t.k_TC * g.hbm)
    assert t.ideal == Fraction(3072) / t.k_TC * g.sm_count * g.f_K


def test_secondary_pipelines_of_one_box_become_its_overhead():
    ops = [rec("soft", "special", "g*s", index=3), rec("soft", "general", "4*g*s", index=3)]
    t = clock_table(ops, load("h100-sxm5"), {"g": 2, "s": 64}, rows="g")
    (col,) = t.columns
    assert col.pipeline == "special" and col.secondary == {"general": Fraction(4 * 64, 512)}
    assert col.secondary_fraction == Fraction(4 * 64, 512) / 4


def test_executions_per_trip_come_from_trips():
    # an op inside a subloop of 4 runs 4 times per stream trip
    op = OpRecord("sub", "sub", "general", "g", "4*n", REGION, "body", "fp32")
    t = clock_table([op], load("a100"), {"g": 8, "n": 10}, rows="g", iterations="n")
    assert t.column("sub").ops == 4 and t.column("sub").rate == 128


def test_engine_errors_name_what_is_missing():
    with pytest.raises(HardwareError, match=r"op 'mm' runs on the tensor pipeline, whose rate depends on the operand "
                                            r"format, but its record gives no operand dtypes"):
        clock_table([rec("mm", "tensor", "g", operands=())], load("h100-sxm5"), {"g": 1}, rows="g")
    two = [rec("a", "general", "g"), rec("b", "general", "g", region=(("stream", "z"),))]
    with pytest.raises(HardwareError, match=r"streams along \['c', 'z'\]; name the stream axis"):
        clock_table(two, load("h100-sxm5"), {"g": 1}, rows="g")
    with pytest.raises(HardwareError, match=r"FLOPs of 'a' = g\*w needs sizes for \['w'\]"):
        clock_table([rec("a", "general", "g*w")], load("h100-sxm5"), {"g": 1}, rows="g")


# ------------------------------------------------------------------------------------------- the paper
PAPER = {"d": 128, "s_x": 64, "g_q": 128}     # Table 1's d and s_x = u_x (no subloop); g_q cancels


@pytest.fixture(scope="module")
def table3(variant):
    _, cost, ops = variant("paper")
    return clock_table_of(cost, load("h100-sxm5"), PAPER, ops=ops)


def test_table3_every_number(table3):
    got = [(c.pipeline, c.ops, c.rate, c.clocks) for c in table3.columns]
    assert got == [("tensor", 16384, 8192, 2),                  # Q-K MatMul (FP8)
                   ("special", 65, 16, Fraction(65, 16)),       # SoftMax exponent: s_x + s_x/u_x
                   ("tensor", 16384, 4096, 4),                  # P-V MatMul (FP16)
                   ("general", 256, 512, Fraction(1, 2))]       # FP16 accumulate: 2d(s_x/u_x)
    assert round(float(table3.columns[1].clocks), 2) == 4.06
    assert table3.k_TC == 6


def test_295_and_1_32_pflops(table3):
    assert table3.moved == 64 * 128 * 1 + 64 * 128 * 2          # K (FP8) and V (FP16) tiles per trip
    assert round(float(table3.min_rows)) == 295                  # errata D-04's corrected formula
    assert round(float(table3.ideal) / 1e15, 2) == 1.32


def test_errata_d14_at_the_boost_clock(table3):
    import dataclasses
    # the errata's 319.6 uses B = 3.35 TB/s (the datasheet); the model file has the appendix's 3352 GB/s
    boosted = dataclasses.replace(table3.gpu, f_K=table3.gpu.boost, hbm=Fraction(335, 100) * 10 ** 12)
    t = dataclasses.replace(table3, gpu=boosted)
    assert round(float(t.min_rows), 1) == 319.6 and round(float(t.ideal) / 1e15, 3) == 1.427


def test_head_dimension_64_halves_the_tensor_clocks(variant):
    _, cost, ops = variant("paper")
    t = clock_table_of(cost, load("h100-sxm5"), {**PAPER, "d": 64}, ops=ops)
    assert t.k_TC == 3 and t.columns[1].clocks == Fraction(65, 16)   # the exponent does not depend on d
    assert round(float(t.min_rows)) == 295     # H and k_TC both halve: the ridge point is the same


def test_h200_moves_the_bandwidth_threshold_only(variant, table3):
    _, cost, ops = variant("paper")
    t = clock_table_of(cost, load("h200"), PAPER, ops=ops)
    assert t.k_TC == table3.k_TC and t.ideal == table3.ideal
    assert t.min_rows == table3.min_rows * Fraction(3352, 4800)     # only HBM bandwidth changed


def test_a100_cannot_run_fp8_and_runs_fp16_at_half_rate(variant):
    _, cost, ops = variant("paper")
    with pytest.raises(HardwareError, match=r"a100: the tensor pipeline has no rate for 'fp8'"):
        clock_table_of(cost, load("a100"), PAPER, ops=ops)
    _, cost16, ops16 = variant("fa3-fp16")
    t = clock_table_of(cost16, load("a100"), PAPER, ops=ops16)
    assert [c.clocks for c in t.columns if c.pipeline == "tensor"] == [8, 8]     # 2048 FLOP/clk on A100


def test_json_and_text(table3):
    import json
    data = json.loads(table3.to_json())
    assert data["k_TC"] == 6 and data["columns"][0]["ops_per_clock"] == 8192
    assert "295.18" in table3.to_text() and "1.319 PFLOP/s" in table3.to_text()


def test_a_model_without_rate_fields_is_refused():
    with pytest.raises(HardwareError, match=r"missing section \[clock\]"):
        from_dict({"format": 1, "name": "x", "hierarchy": "hopper"}, where="x.toml")


def test_a_conversion_is_overhead_by_its_record_whoever_declares_it():
    """§5.7: number-format conversions are not columns but overhead; which boxes convert is the kind's record
    (``conversion=True``): the built-in cast and a kind a user declares alike, a hand-made label not."""
    nc.declare("user_to_bf16", lambda xs, core: [xs[0].astype(np.float32)], conversion=True, replace=True)
    try:
        ops = [rec("mm", "tensor", "2*k*g*s", index=0),
               OpRecord("→fp16", "cast", "general", "g*s", 1, REGION, "body", "fp16", index=1),
               OpRecord("→bf16", "user_to_bf16", "general", "g*s", 1, REGION, "body", "fp16", index=2),
               rec("exp", "special", "g*s", index=3)]
        t = clock_table(ops, load("h100-sxm5"), {"k": 32, "g": 64, "s": 16}, rows="g")
        assert [c.label for c in t.columns] == ["mm", "exp"]
        assert [c.label for c in t.conversions] == ["→fp16", "→bf16"]
        assert t.conversions[0].clocks == Fraction(16, 512)         # g·s/g = 16 ops per thread at 512 per clock
    finally:
        del nc.engine.KINDS["user_to_bf16"]
    with pytest.raises(nc.SignatureError, match="conversion is True or False"):
        nc.declare("user_bad", lambda xs, core: xs, conversion="yes")
