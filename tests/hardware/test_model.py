"""Hardware models: shipped files load and agree with the vendors' peaks; bad files get named errors."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

import napkin_cat as nc
from napkin_cat.hardware import HardwareError, load, models
from napkin_cat.hardware.units import parse

H100 = Path(nc.__file__).parent / "hardware" / "models" / "h100-sxm5.toml"


def test_the_five_models_ship_and_load():
    assert set(models()) >= {"h100-sxm5", "h100-pcie", "h200", "a100", "h800"}
    for name in models():
        g = load(name)
        assert g.name == name and g.sm_count > 0 and g.smem_per_block <= g.smem_per_sm


@pytest.mark.parametrize("name, fp16_tflops", [("h100-sxm5", 989.4), ("h200", 989.4), ("h800", 989.4),
                                              ("h100-pcie", 756.4), ("a100", 311.9)])
def test_tensor_peaks_match_the_datasheets(name, fp16_tflops):
    # an independent route: SMs × FLOP/clk/SM × f_K against the datasheet's dense FP16 peak
    assert float(load(name).peak("tensor", "fp16")) / 1e12 == pytest.approx(fp16_tflops, abs=0.1)


def test_h100_limits_and_the_explicit_clock_assumption():
    g = load("h100-sxm5")
    assert g.smem_per_block == 227 * 1024 and g.register_bytes_per_block == 256 * 1024
    assert g.f_K == Fraction(183, 100) * 10 ** 9 and g.boost == Fraction(198, 100) * 10 ** 9   # errata D-14
    assert g.rate("tensor", "fp8") == 2 * g.rate("tensor", "fp16") == 8192
    assert g.rate("special", "fp16") == 16          # the SFU computes in FP32 whatever the storage format
    assert g.rate("general", "fp8") == g.rate("general", "fp16") == 512   # FP8 arithmetic widened to FP16
    assert load("h800").sm_to_sm == {2: Fraction(327, 100) * 10 ** 12, 4: Fraction(265, 100) * 10 ** 12}
    assert "Luo" in load("h800").sources["bandwidth"]


def test_a100_has_no_fp8_and_no_warpgroups():
    g = load("a100")
    with pytest.raises(HardwareError, match=r"tensor pipeline has no rate for 'fp8'.*\['bf16', 'fp16', 'fp32'\]"):
        g.rate("tensor", "fp8")
    with pytest.raises(HardwareError, match="has no \\[sm\\] warpgroup"):
        g.threads("warpgroup")


def test_a_users_file_loads_by_path(tmp_path):
    text = H100.read_text().replace('name = "h100-sxm5"', 'name = "my-gpu"').replace('count = "132 SMs"',
                                                                                      'count = "100 SMs"')
    path = tmp_path / "my-gpu.toml"
    path.write_text(text)
    g = nc.hardware.load(str(path))
    assert g.name == "my-gpu" and g.sm_count == 100 and g.path == str(path)


def _broken(tmp_path, old, new):
    text = H100.read_text()
    assert old in text
    path = tmp_path / "broken.toml"
    path.write_text(text.replace(old, new))
    return str(path)


@pytest.mark.parametrize("old, new, message", [
    ('smem_per_block = "227 KiB"', "", r"broken.toml: missing field memory.smem_per_block"),
    ('f_K = "1.83 GHz"', 'f_K = "-1.83 GHz"', r"broken.toml: clock.f_K: '-1.83 GHz' is negative"),
    ('hbm = "3352 GB/s"', 'hbm = "3352 GHz"', r"bandwidth.hbm: 'GHz' is a unit of frequency, but a bandwidth"),
    ("[pipelines.special]", "[pipelines.vector]", r"unknown pipeline \[pipelines.vector\]; pipelines are tensor"),
    ('warp = "32 threads"', 'warp = "32 threads"\nwarps = "4 warps"', r"unknown field sm.warps"),
    ('fp16 = "4096 FLOP/clk"', 'fp4 = "4096 FLOP/clk"', r"pipelines.tensor.fp4: unknown dtype 'fp4'"),
    ('count = "132 SMs"', 'count = "0 SMs"', r"sm.count: '0 SMs' is not positive"),
    ('f_K = "1.83 GHz"', "f_K = 1.83", r"clock.f_K: the number 1.83 has no unit"),
    ("format = 1", "format = 2", r"format = 2; this napkin-cat reads format 1"),
    ('m = 64\nn = 8\nk = 32', 'm = 64\nn = -8\nk = 32',
     r"tensor_shapes\[1\]: n = -8 must be a whole number 1 … 4294967296"),
    ('registers_per_thread = "255 registers"', 'registers_per_thread = "0 registers"',
     r"memory.registers_per_thread: '0 registers' is not positive"),
    ('registers_per_block = "65536 registers"', 'registers_per_block = "131072 registers"',
     r"memory.registers_per_block \(131072\) exceeds memory.registers_per_sm \(65536\)"),
    ('smem_per_block = "227 KiB"', 'smem_per_block = "300 KiB"',
     r"memory.smem_per_block \(307200 B\) exceeds memory.smem_per_sm \(233472 B\)"),
    ('hbm = "3352 GB/s"', 'hbm = "0 GB/s"', r"bandwidth.hbm: '0 GB/s' is not positive"),
    ('warpgroup = "128 threads"', 'warpgroup = "100 threads"',
     r"sm.warpgroup = 100 threads is not a whole number of warps \(32 threads each\)"),
    ('warpgroup = "128 threads"\n', "", r"the toy hierarchy 'hopper' has warpgroups \(level 'tensor-core'\), but "
                                        r"\[sm\] gives no warpgroup size"),
    ('hierarchy = "hopper"', 'hierarchy = "volta"', r"field hierarchy = 'volta': no toy hierarchy called 'volta'"),
])
def test_bad_files_name_the_file_and_the_field(tmp_path, old, new, message):
    with pytest.raises(HardwareError, match=message):
        load(_broken(tmp_path, old, new))


def test_a_users_model_with_its_own_toy_hierarchy_beside_it(tmp_path):
    from importlib import resources
    hopper = (resources.files("napkin_cat.hardware") / "hierarchies" / "hopper.toml").read_text()
    (tmp_path / "mine.toml").write_text(hopper.replace('name = "hopper"', 'name = "mine"'))
    path = tmp_path / "gpu.toml"
    path.write_text(H100.read_text().replace('hierarchy = "hopper"', 'hierarchy = "mine.toml"'))
    g = load(str(path))
    assert nc.hardware.hierarchy_of(g).name == "mine"


def test_unknown_names_and_paths():
    with pytest.raises(HardwareError, match="no hardware model called 'b300'; shipped models are a100"):
        load("b300")
    with pytest.raises(HardwareError, match="no hardware file at 'nowhere/x.toml'"):
        load("nowhere/x.toml")


def test_units_are_exact_and_typed():
    assert parse("227 KiB", "bytes") == 232448 and parse("50 MB", "bytes") == 50 * 10 ** 6
    assert parse("9.2 TB/s", "bandwidth") == Fraction(92, 10) * 10 ** 12
    with pytest.raises(HardwareError, match="unknown unit 'parsecs'"):
        parse("3 parsecs", "bytes")
