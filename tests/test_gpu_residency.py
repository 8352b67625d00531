"""A printed kernel's resources as the compiler gives them, here, without a GPU (``TritonKernel.compile``: registers and
spilled bytes per thread read off the cubin), and ``benchmarks/gpu/residency.py``, which sets the blocks per SM those
resources allow beside the time model's."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

import napkin_cat as nc

GPU = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu"
HAVE = all(importlib.util.find_spec(m) for m in ("torch", "triton"))
pytestmark = pytest.mark.skipif(not HAVE, reason="compiling a printed kernel needs torch and triton "
                                                 "(pip install '.[kernels]')")
FORMATS = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}
DECODE = {"q": 1, "x": 32768, "d": 128, "h": 32}


def _residency():
    sys.path.insert(0, str(GPU))
    try:
        return importlib.import_module("residency")
    finally:
        sys.path.remove(str(GPU))


@pytest.fixture(scope="module")
def decode():
    """FlashDecoding for the H200 (its split stream), the diagram and the pick's tiles."""
    r = nc.derive(nc.library.multi_head_attention(formats=FORMATS), sizes=DECODE, hardware="h200")
    return r.diagram, {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}


def _compiled(diagram, tiles):
    k = nc.codegen.triton(nc.plan(diagram, {**DECODE, **tiles}))
    return k, k.compile(arch=90, num_warps=k.printer.num_warps, num_stages=k.printer.num_stages, kernels=k.launched())


def test_compile_reads_registers_off_the_cubin_without_a_gpu(decode):
    """Registers per thread are the compiler's (never 0 for want of a GPU), more for larger tiles, within a thread's
    255; spilled bytes are stated."""
    diagram, tiles = decode
    regs = {}
    for s in (16, 128):
        k, info = _compiled(diagram, {**tiles, "s_x": s, "p_x": 8})
        parts = info["kernels"][k.launched()[0]]
        assert parts["resources_from"] in ("cuobjdump --dump-resource-usage", "the loaded kernel"), parts
        assert 0 < parts["registers"] <= 255 and parts["stack"] >= 0
        regs[s] = parts["registers"]
    assert regs[16] < regs[128]          # a 128-key tile holds eight times the keys in its threads' registers


def test_the_audit_sets_the_blocks_the_compiled_resources_allow(decode):
    """``residency.audit``: one row per launch (the split's combine its own), the compiler's resources, and the
    blocks per SM by CUDA's rules, worked here again from the registers it reports: a 128-key decoding block's
    threads take at least half the register file, so one block fits."""
    res = _residency()
    gpu = nc.hardware.load("h200")
    diagram, tiles = decode
    rows = res.audit("decode", diagram, DECODE, {**tiles, "s_x": 128, "p_x": 8}, gpu)
    assert [x["combine"] for x in rows] == [False, True]
    parts = rows[0]
    threads = parts["warps"] * 32
    assert parts["registers"] * threads > gpu.registers_per_sm // 2
    assert parts["compiled_resident"] == 1 == parts["limits"]["registers"]
    assert parts["model_resident"] == nc.hardware.predict(nc.plan(diagram, {**DECODE, **tiles, "s_x": 128,
                                                                             "p_x": 8}), gpu).kernels[0].resident
    small = res.compiled_residency(gpu, registers=64, smem=0, warps=4)
    assert small["blocks"] == 8 and small["limits"]["threads"] == 16      # 64 registers x 128 threads: 8 blocks
    assert res.compiled_residency(gpu, registers=32, smem=200 * 1024, warps=4)["blocks"] == 1   # shared memory
