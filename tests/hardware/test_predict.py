"""The time model (``nc.hardware.predict``) and the search that minimises it (``nc.derive(..., hardware=)``):
each term checked by a second route (FLOPs by hand, bytes counted by the plan's run, blocks by the grid),
its errors typed, and the search's choice legal, consistent and the least of what it timed."""
from __future__ import annotations

import math

import numpy as np
import pytest

import napkin_cat as nc
from rewrites import flash_attention, tiled_matmul

BF16 = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}


@pytest.fixture(scope="module")
def h100():
    return nc.hardware.load("h100-sxm5")


def test_the_tensor_term_is_the_products_flops_over_the_peak(h100):
    mm = tiled_matmul(nc.library.matmul()).diagram
    t = nc.hardware.predict(mm, h100, {"a": 512, "b": 256, "c": 384, "g_a": 64, "g_c": 128, "s_b": 32})
    assert t.terms["tensor"] == pytest.approx(2 * 512 * 256 * 384 / float(h100.peak("tensor", "fp32")))
    assert t.blocks == (512 // 64) * (384 // 128)
    (k,) = t.kernels
    assert k.bytes["compulsory"] == 4 * (512 * 256 + 256 * 384 + 512 * 384)


def test_the_bytes_it_charges_are_the_ones_the_plan_moves(h100):
    """A second route: the instrumented run counts the bytes crossing level 0 ↔ 1, ragged tiles included."""
    flash = flash_attention(nc.library.attention(formats=BF16)).diagram
    sizes = {"q": 50, "x": 37, "d": 16, "g_q": 16, "s_x": 16}
    p = nc.plan(flash, sizes)
    rng = np.random.default_rng(0)
    _, counted = p.run(*(rng.standard_normal(s).astype(np.float32) for s in ((50, 16), (37, 16), (37, 16))))
    t = nc.hardware.predict(p, h100)
    assert t.kernels[0].bytes["moved"] == counted.bytes[1]
    assert t.kernels[0].flops["tensor"] == counted.flops["tensor"]
    assert t.blocks == math.ceil(50 / 16)


def test_measured_ceilings_replace_the_datasheet_rates(h100):
    mm = tiled_matmul(nc.library.matmul()).diagram
    sizes = {"a": 256, "b": 256, "c": 256, "g_a": 64, "g_c": 64, "s_b": 32}
    base = nc.hardware.predict(mm, h100, sizes)
    slow = nc.hardware.predict(mm, h100, sizes, ceilings={"tensor:fp32": float(h100.peak("tensor", "fp32")) / 2,
                                                          "hbm": float(h100.hbm) / 4})
    assert slow.terms["tensor"] == pytest.approx(2 * base.terms["tensor"])
    assert slow.terms["hbm"] == pytest.approx(4 * base.terms["hbm"])
    assert any("measured" in a for a in slow.assumptions) and not any("measured" in a for a in base.assumptions)


def test_sequential_pipelines_never_beat_overlapped_ones(h100):
    flash = flash_attention(nc.library.multi_head_attention(formats=BF16)).diagram
    sizes = {"q": 1024, "x": 1024, "d": 64, "h": 8, "g_q": 64, "s_x": 64, "g_h": 1}
    seq = nc.hardware.predict(flash, h100, sizes)
    par = nc.hardware.predict(flash, h100, sizes, overlap="pipelines")
    assert seq.time > par.time > 0
    assert seq.kernels[0].utilisation <= 1 and seq.to_dict()["kernels"][0]["blocks"] == 8 * 1024 // 64


def test_the_tail_of_the_last_wave_costs_a_whole_wave(h100):
    """Blocks run in waves of sm_count × resident: one block more than a wave doubles the compute time."""
    mm = nc.group(nc.group(nc.stream(nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="fp32"), "b", "s_b"),
                           "a", "g_a"), "c", "g_c")
    full = nc.hardware.predict(mm, h100, {"a": 128 * 66, "b": 1024, "c": 128 * 2, "g_a": 128, "g_c": 128, "s_b": 64})
    one_more = nc.hardware.predict(mm, h100, {"a": 128 * 67, "b": 1024, "c": 128 * 2, "g_a": 128, "g_c": 128,
                                              "s_b": 64})
    assert full.kernels[0].waves * 132 * full.kernels[0].resident >= 132
    assert one_more.kernels[0].waves == full.kernels[0].waves + 1 or one_more.kernels[0].utilisation < 1


def test_errors_name_what_is_wrong(h100):
    mm = tiled_matmul(nc.library.matmul()).diagram
    sizes = {"a": 64, "b": 64, "c": 64, "g_a": 32, "g_c": 32, "s_b": 16}
    with pytest.raises(nc.hardware.HardwareError, match="unknown ceilings \\['tensr'\\]"):
        nc.hardware.predict(mm, h100, sizes, ceilings={"tensr": 1.0})
    with pytest.raises(nc.hardware.HardwareError, match="overlap 'some'"):
        nc.hardware.predict(mm, h100, sizes, overlap="some")
    with pytest.raises(nc.hardware.HardwareError, match="needs sizes="):
        nc.hardware.predict(mm, h100)
    with pytest.raises(nc.AxisError, match="the size of 'a' must be a positive int, got 6.5"):
        nc.hardware.predict(mm, h100, {**sizes, "a": 6.5})
    with pytest.raises(nc.hardware.HardwareError, match="computes in global memory, outside any kernel"):
        nc.hardware.predict(nc.library.matmul(), h100, {"a": 4, "b": 4, "c": 4})
    with pytest.raises(nc.hardware.HardwareError, match="over the h100-sxm5's 232448 B"):
        nc.hardware.predict(mm, h100, {"a": 1024, "b": 1024, "c": 1024, "g_a": 512, "g_c": 512, "s_b": 64})


# ---------------------------------------------------------------------- derive(hardware=)
@pytest.fixture(scope="module")
def derived_on_h100():
    att = nc.library.multi_head_attention(formats=BF16)
    sizes = {"q": 2048, "x": 2048, "d": 64, "h": 16}
    return att, sizes, nc.derive(att, sizes=sizes, hardware="h100-sxm5")


def test_the_chosen_tiles_are_legal_on_the_hardware(derived_on_h100, h100):
    att, sizes, r = derived_on_h100
    tiles = {str(k): v for k, v in r.optimum.exact_sizes.items()}
    assert set(tiles) == {"g_q", "g_h", "s_x"}
    assert tiles["g_h"] == 1 and tiles["g_q"] % 64 == 0 and tiles["s_x"] % 16 == 0   # wgmma m64, k16
    assert all(v & (v - 1) == 0 and 2048 % v == 0 for v in tiles.values())
    p = nc.plan(r.diagram, {**sizes, **tiles})
    assert p.smem_bytes <= h100.smem_per_block


def test_the_winner_is_the_fastest_it_timed_and_its_time_is_predicts(derived_on_h100):
    att, sizes, r = derived_on_h100
    times = [t for _, _, t, _ in r.timings]
    assert r.prediction.time == min(times) == times[0] and len(times) > 3
    exact = nc.hardware.predict(nc.plan(r.diagram, r.optimum.sizes), "h100-sxm5")     # the sizes and the tiles
    assert exact.time == pytest.approx(r.prediction.time, rel=1e-9)


def test_the_winner_is_made_by_the_rules(derived_on_h100):
    att, sizes, r = derived_on_h100
    assert nc.isomorphic(r.trace.replay(att), r.diagram)
    small = {"q": 64, "x": 64, "d": 64, "h": 2, **{str(k): min(v, 64) for k, v in r.optimum.exact_sizes.items()}}
    assert nc.equivalent(att, r.diagram, sizes=small, rtol=2e-2, atol=2e-2)     # P rounded to bf16


def test_derive_with_hardware_needs_sizes_and_time_options_need_hardware():
    with pytest.raises(nc.NapkinError, match="times kernels at concrete sizes"):
        nc.derive(nc.library.matmul(), hardware="h100-sxm5")
    with pytest.raises(nc.NapkinError, match=r"\['overlap'\]: these options are the time model's"):
        nc.derive(nc.library.matmul(), memory=1024, sizes={"a": 64, "b": 64, "c": 64}, overlap="pipelines")
