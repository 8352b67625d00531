"""What ``benchmarks/calibrate_cpu.py`` prints is a CPU model ``load_cpu`` reads (format 2), also where the call cost's
fit found no positive intercept.

On a 2-core guest of an EPYC Zen 4 (2026-12-04) the 64×64×64 product ran at least as fast per FLOP as the 256×256×64
one, so ``call_cost``'s ``max(0, c)`` was 0 and the script printed ``contraction_call = "0 us"``, which ``load_cpu``
refuses (a hardware quantity is positive): the script's own output did not load.  Now the line is left out where
the intercept is 0, and a model without it charges no call cost.  Second route: the model file assembled from the
script's block is read by the library's loader, its rates and call cost compared with the measurements put in.
"""
from __future__ import annotations

import math
import os
import shutil

import pytest

from napkin_cat.codegen.c import blas_available
from napkin_cat.errors import HardwareError
from napkin_cat.hardware import load_cpu
from tests.scripts import load_script

HEAD = """format = 2
name = "calibrated"
description = "a model assembled from calibrate_cpu.py's block"

[caches]
l1d = "32 KiB"
l2 = "1 MiB"
l3 = "32 MiB"
line = "64 B"

[cores]
vector = "64 B"

"""


def _script():
    return load_script("benchmarks/calibrate_cpu.py")


def measured(call_us: float) -> dict:
    """Measurements as ``calibrate`` returns them (medians and spreads), the call cost ``call_us``."""
    def rate(v):
        return {"median": v, "min": v, "max": v}
    return {"contraction_gflops_by_smallest_dimension": {s: {"gflops": 10.0 * (k + 1)} for k, s in
                                                         enumerate(("1", "2", "64"))},
            "contraction_call_us": rate(call_us), "special_gflops": rate(1.18), "general_gflops": rate(3.6),
            "l3_copy_gbs": rate(34.8), "dram_copy_gbs": rate(17.7)}


@pytest.mark.parametrize("call_us", [3.8, 0.0])
def test_the_printed_block_loads_as_a_cpu_model(tmp_path, call_us):
    path = tmp_path / "calibrated.toml"
    path.write_text(HEAD + _script().toml_block(measured(call_us), "calibrate_cpu.py"))
    cpu = load_cpu(str(path))
    assert cpu.contraction_call == pytest.approx(call_us * 1e-6, abs=1e-12)
    assert cpu.timed and cpu.contraction == ((1, 10e9), (2, 20e9), (64, 30e9))
    assert cpu.l3_bandwidth == pytest.approx(34.8e9) and cpu.special == pytest.approx(1.18e9)


def test_a_zero_call_cost_written_out_is_what_the_loader_refuses(tmp_path):
    """Why the line is left out, not written as 0: the loader refuses a quantity that is not positive."""
    block = _script().toml_block(measured(3.8), "calibrate_cpu.py").replace('"3.8 us"', '"0 us"')
    path = tmp_path / "zero.toml"
    path.write_text(HEAD + block)
    with pytest.raises(HardwareError, match="contraction_call: '0 us' is not positive"):
        load_cpu(str(path))


@pytest.mark.skipif(not blas_available() or shutil.which(os.environ.get("CC", "cc")) is None,
                    reason="the calibration compiles C against OpenBLAS: a C compiler and cblas.h (libopenblas-dev)")
def test_the_calibration_compiles_and_times_every_loop_it_reports(tmp_path):
    """The calibration's C (the scalar loops the model reads and the lane forms printed beside them) compiles with the
    kernel's flags and each loop answers a positive, finite time per value (no timing compared: what the rates are
    is the script's to print)."""
    lib = _script().build(tmp_path)
    for name in ("special", "general", "special_lanes", "general_lanes"):
        seconds = getattr(lib, name)(256)
        assert 0 < seconds < 1e-3 and math.isfinite(seconds), (name, seconds)
    for name in ("gemm", "gemm_bt"):          # a product as stored and with B transposed, per call
        seconds = getattr(lib, name)(32, 16, 8)
        assert 0 < seconds < 1e-2 and math.isfinite(seconds), (name, seconds)
