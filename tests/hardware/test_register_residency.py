"""Two changes of the time model read off run 6 (H200, 2026-12-04, decoding's sweep): a kernel with no product printed
as ``tl.dot`` keeps its tiles in registers (Triton stages no such load in shared memory: checked by compiling the
kernel for sm_90 here), so its residency is the register file's; and each wave of blocks waits ``WAVE`` before its
work overlaps (``terms["wave"] = waves · λ``, λ measured on the device by ``benchmarks/gpu/probes.py``)."""
from __future__ import annotations

import importlib.util
import math

import pytest

import napkin_cat as nc
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.issuing import register_warps
from napkin_cat.hardware.model import load
from napkin_cat.hardware.predict import WAVE, register_cap
from rewrites import flash_attention

H200 = load("h200")
HAVE_TRITON = all(importlib.util.find_spec(m) for m in ("torch", "triton"))
FORMATS = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}
DECODE = {"q": 1, "x": 32768, "d": 128, "h": 32}


@pytest.fixture(scope="module")
def decode():
    """FlashDecoding for the H200 at q = 1 (the split stream), planned at 128-key tiles and 8 parts."""
    r = nc.derive(nc.library.multi_head_attention(formats=FORMATS), sizes=DECODE, hardware="h200")
    tiles = {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}
    assert "p_x" in tiles, "the derived decoding splits its key axis"
    return nc.plan(r.diagram, {**DECODE, **tiles, "s_x": 128, "p_x": 8})


def test_a_kernel_without_a_printed_dot_holds_its_tiles_in_registers(decode):
    (k,) = nc.hardware.predict(decode, H200).kernels
    assert k.bytes["on_chip_per_block"] == 0 < decode.smem_bytes      # staged, the plan would hold 64 KiB
    R = k.bytes["registers_per_block"]
    assert R >= 2 * 128 * 128 * 2                  # at least a K and a V tile of 128 keys × d = 128 in bf16
    assert k.bytes["threads"] == 32 * register_warps(128 * 128) == 256
    assert k.resident == max(1, H200.registers_per_sm * H200.register_bytes // (2 * R))
    assert any("stages nothing in shared memory" in a for a in nc.hardware.predict(decode, H200).assumptions)


@pytest.mark.skipif(not HAVE_TRITON, reason="compiling the printed kernel needs triton (pip install '.[kernels]')")
def test_the_printed_kernel_stages_nothing_either(decode):
    """A second route: Triton's compiler, for sm_90 (no GPU needed), gives the printed decoding kernel about no
    shared memory, where the plan's staged bytes are 64 KiB; its warps are the model's."""
    k = nc.codegen.triton(decode)
    info = k.compile(arch=90, num_warps=k.printer.num_warps, num_stages=k.printer.num_stages, kernels=k.launched())
    assert info["smem"] <= 4096 < decode.smem_bytes
    assert k.printer.num_warps * 32 == nc.hardware.predict(decode, H200).kernels[0].bytes["threads"]


def test_a_kernel_with_a_printed_dot_stages_its_loads():
    flash = flash_attention(nc.library.attention(formats=FORMATS)).diagram
    sizes = {"q": 4096, "x": 4096, "d": 128, "g_q": 128, "s_x": 64}
    (k,) = nc.hardware.predict(flash, H200, sizes).kernels
    # the plan's bytes and the streamed K and V tiles (64 keys × d, bf16) once more: double-buffered
    assert k.bytes["on_chip_per_block"] == nc.plan(flash, sizes).smem_bytes + 2 * 64 * 128 * 2
    assert k.bytes["threads"] == 256                                   # two warpgroups issue 128 rows


def test_tiles_over_the_registers_are_timed_staged():
    """Row sums of 48 Ki fp32 values (a 192 KiB tile) will not fit a block's registers (at most
    :func:`register_cap`, 128 KiB on the H200: 8 warps, half of each thread's 255) but fit its shared memory: the
    kernel is timed staged, as the model timed every kernel before; rows of 32 Ki values (128 KiB) are held in
    registers."""
    d = nc.group(nc.kernel(nc.einsum("q x -> q", dtype="fp32")), "q", "g_q")
    assert register_cap(H200) == 8 * 32 * 128 * 4
    (big,) = nc.hardware.predict(d, H200, {"q": 64, "x": 3 * 2 ** 14, "g_q": 1}).kernels
    assert big.bytes["on_chip_per_block"] == 3 * 2 ** 14 * 4 and big.bytes["threads"] == 128
    (held,) = nc.hardware.predict(d, H200, {"q": 64, "x": 2 ** 15, "g_q": 1}).kernels
    assert held.bytes["on_chip_per_block"] == 0 and held.bytes["registers_per_block"] == 2 ** 15 * 4


def test_each_wave_waits_lambda_and_a_measured_one_replaces_it(decode):
    (k,) = nc.hardware.predict(decode, H200).kernels
    assert k.terms["wave"] == pytest.approx(k.waves * WAVE)
    (m,) = nc.hardware.predict(decode, H200, ceilings={"wave": 3e-6}).kernels
    assert m.terms["wave"] == pytest.approx(m.waves * 3e-6)
    assert m.time - k.time == pytest.approx(m.waves * (3e-6 - WAVE))
    assert k.combine.terms["wave"] == m.combine.terms["wave"] == 0          # the combine's blocks: not charged
    assert k.waves == math.ceil(k.blocks / (H200.sm_count * k.resident))
    with pytest.raises(HardwareError, match="unknown ceilings \\['waves'\\]"):
        nc.hardware.predict(decode, H200, ceilings={"waves": 3e-6})
