"""Toy hierarchies: levels as data, placement of arrays (level, pool, quantization), the offers check."""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.errors import LevelError
from napkin_cat.hardware import HardwareError, check_offers, hierarchy_of, load, load_hierarchy, placement


def test_hopper_levels_offers_and_partition():
    h = hierarchy_of(load("h100-sxm5"))
    assert [lv.name for lv in h.levels] == ["GMEM", "SMEM", "registers", "tensor-core"]
    assert h.level(3).offers == ("tensor",) and set(h.level("registers").offers) == {"general", "special"}
    assert h.partition("x") == {"block": "g_x", "warpgroup": "w_x", "thread": "t_x"}
    assert h.asynchronous == ("tensor",) and load_hierarchy("ampere").asynchronous == ()


def test_placement_of_a_recoloured_diagram():
    # Q·Kᵀ on the tensor cores (blue), the exponent on the threads (green)
    mm = nc.apply("contract", "a k, b k -> a b", level=3, dtype=nc.FP8, out_dtype=nc.FP16)
    ex = nc.elementwise("exp", "a b", level=2, dtype=nc.FP16)
    up = (nc.apply("save", "a b", level=3, out_level=1, dtype=nc.FP16)
          >> nc.apply("load", "a b", level=1, out_level=2, dtype=nc.FP16))
    placed = placement(mm >> up >> ex, "hopper")
    where = {(p.array.names, p.array.level, p.role): (p.level, p.pool, p.dtype) for p in placed}
    assert where[(("a", "k"), 3, "operand")] == ("tensor-core", "SMEM", "fp8")
    assert where[(("a", "b"), 3, "value")] == ("tensor-core", "registers", "fp16")
    assert where[(("a", "b"), 2, "value")] == ("registers", "registers", "fp16")
    ampere = {(p.array.names, p.role): p.pool for p in placement(mm, "ampere")}
    assert ampere[(("a", "k"), "operand")] == "registers"


def test_softmax_on_tensor_cores_is_refused_with_the_legal_level():
    check_offers(nc.einsum("a k, b k -> a b", level=3), "hopper")
    with pytest.raises(LevelError, match=r"box 'SoftMax' uses the special pipeline on level 'tensor-core', which "
                                         r"offers only \['tensor'\]; recolour it onto registers"):
        check_offers(nc.softmax("a b", over="b", level=3), "hopper")


def test_transfers_pipe_through_smem():
    to_threads = nc.apply("save", "a b", level=3, out_level=2)
    with pytest.raises(LevelError, match=r"moves between tensor-core and registers, which are not parent and child"):
        check_offers(to_threads, "hopper")
    check_offers(nc.apply("save", "a b", level=3, out_level=1), "hopper")


def test_unknown_level_and_hierarchy_file_errors(tmp_path):
    with pytest.raises(LevelError, match=r"level 7 is not in the toy hierarchy 'hopper'"):
        load_hierarchy("hopper").level(7)
    bad = tmp_path / "h.toml"
    bad.write_text('format = 1\nscaling_unit = "warpgroup"\n[[pool]]\nname = "SMEM"\ncapacity = "smem_per_block"\n'
                   '[[level]]\nindex = 0\nname = "S"\nunit = "block"\npool = "SMEM"\noffers = ["vector"]\n')
    with pytest.raises(HardwareError, match=r"level 'S' offers: unknown \['vector'\]; legal: tensor, special, general"):
        load_hierarchy(str(bad))
