"""Hardware files and hierarchies that escaped as bare Python errors, found by editing the shipped files at random.

Found from outside (issue 31, checked again: 600 random one-field edits of the shipped GPU, toy-hierarchy and CPU
files, each then loaded and used): a toy hierarchy whose level names an object as its ``pool`` raised
``TypeError: unhashable type: 'dict'``; a GPU model whose only fp32 tensor shape lists no dtypes loaded and then
``nc.hardware.predict`` raised ``IndexError: tuple index out of range`` (the divisor search said it in words, the
product table did not); ``nc.cost(f, hierarchy)`` with anything but a cost hierarchy (a toy hierarchy, a name)
raised ``AttributeError: ... no attribute 'check_levels'``.
"""
from __future__ import annotations

from importlib import resources

import pytest

import napkin_cat as nc
from napkin_cat.cost.hierarchy import Hierarchy, Level

MODEL = (resources.files("napkin_cat.hardware") / "models" / "h100-sxm5.toml").read_text()
HIERARCHY = (resources.files("napkin_cat.hardware") / "hierarchies" / "hopper.toml").read_text()
FLASH = nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")
SIZES = {"q": 1024, "x": 1024, "d": 64, "g_q": 64, "s_x": 64}


def _edited(path, text, old, new):
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    return str(path)


def test_a_toy_level_whose_pool_is_not_a_name_is_refused(tmp_path):
    path = _edited(tmp_path / "toy.toml", HIERARCHY, "pool = \"GMEM\"", "pool = {}")
    with pytest.raises(nc.HardwareError, match=r"pool \{\} is not a declared pool"):
        nc.hardware.load_hierarchy(path)


def test_a_gpu_without_a_tensor_shape_for_a_dtype_is_refused_by_predict_naming_it(tmp_path):
    fp32 = nc.hardware.predict(FLASH, "h100-sxm5", SIZES)   # fp32 operands: the TF32 shape, the shipped file
    assert fp32.time > 0
    path = _edited(tmp_path / "gpu.toml", MODEL, 'dtypes = ["fp32"]', "dtypes = []")
    gpu = nc.hardware.load(path)
    assert not gpu.shapes_for("fp32") and gpu.shapes_for("bf16")
    with pytest.raises(nc.HardwareError, match=r"no tensor-core instruction for fp32 operands .* take "
                                               r"\['bf16', 'fp16', 'fp8'\]"):
        nc.hardware.predict(FLASH, gpu, SIZES)


@pytest.mark.parametrize("hierarchy", ["hopper", 3, "toy"])
def test_nc_cost_takes_a_cost_hierarchy_and_names_what_it_got(hierarchy):
    if hierarchy == "toy":
        hierarchy = nc.hardware.load_hierarchy("hopper")
    with pytest.raises(nc.ArgumentError, match=r"nc\.cost's hierarchy is a napkin_cat\.cost\.hierarchy\.Hierarchy"):
        nc.cost(FLASH, hierarchy)


def test_nc_cost_with_a_cost_hierarchy_checks_its_levels():
    two = Hierarchy((Level("global"), Level("SM", nc.symbol("M"), 1)))
    c = nc.cost(FLASH, two, sizes=SIZES)
    q, x, d, g = SIZES["q"], SIZES["x"], SIZES["d"], SIZES["g_q"]
    assert c.H[1] == (q // g) * (2 * d * g + 2 * d * x)     # Q and O once per group, K and V per group: the paper
    with pytest.raises(nc.LevelError, match=r"level 1 is missing from hierarchy"):
        nc.cost(FLASH, Hierarchy((Level("global"),)))
