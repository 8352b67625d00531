"""Issue 25, family 7: bad input is a typed error naming what is wrong (API), or one line on stderr with exit
status 2 (CLI); nothing hangs, nothing is silently clamped."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.cli import main
from napkin_cat.codegen.errors import CodegenError
from napkin_cat.hardware import CapacityError, HardwareError

MODELS_DIR = Path(nc.hardware.__file__).parent / "models"

MM = nc.stream(nc.library.matmul(), "b", "s_b")
#: the issue asks for each refusal within a second; twice that is allowed on a loaded CI runner
WITHIN_S = 2.0


def _doc(axes_size=None, box=None, layers=None):
    arr = {"axes": [["a", axes_size]] if axes_size is not None else [], "level": 0, "dtype": "fp32"}
    return json.dumps({"napkin_cat": 1, "diagram": {"dom": [arr], "cod": [] if box else [arr],
                                                    "layers": layers if layers is not None else
                                                    ([{"offset": 0, "box": box}] if box else [])}})


@pytest.mark.parametrize("call, error, message", [
    (lambda: nc.kernel(nc.library.attention(), level=1.5), nc.LevelError,
     r"a kernel's level must be a whole number 1 … 16.* got 1\.5"),
    (lambda: nc.kernel(nc.library.attention(), level="1"), nc.LevelError, r"got '1'"),
    (lambda: nc.plan(nc.kernel(nc.library.matmul()), {"a": 4, "b": 4, "c": 4}, memory="abc"), nc.MemoryLimitError,
     r"memory= gives a capacity in values per level .* got 1: 'abc'"),
    (lambda: nc.optimal(nc.cost(nc.group(MM, "a", "g_a")), memory=float("nan")), nc.MemoryLimitError,
     r"memory nan is not a number"),
    (lambda: nc.optimal(nc.cost(nc.group(MM, "a", "g_a")), memory="9^99999999"), nc.MemoryLimitError,
     r"more than any level holds \(at most 2\^64\)"),
    (lambda: nc.cost("attention"), nc.NapkinError, r"nc.cost takes a napkin_cat Diagram, got the str 'attention'"),
    (lambda: nc.equivalent("attention", nc.library.attention()), nc.NapkinError, r"the first is a str"),
    (lambda: nc.codegen.c(nc.library.matmul()), CodegenError, r"takes a plan .*plan the diagram first: nc.plan"),
    (lambda: nc.evaluate(MM, np.ones((3, 4)), np.ones((4, 2)), sizes={"s_b": 2.7}), nc.AxisError,
     r"the size of 's_b' must be a positive int, got 2\.7"),
    (lambda: nc.evaluate(MM, np.ones((3, 4)), np.ones((4, 2)), sizes={"s_b": 9}), nc.ShapeError,
     r"the stream size of 'b' \(s_b = 9\) exceeds the axis \(b = 4\); legal sizes are 1 … 4"),
    (lambda: nc.evaluate(nc.reduce("max", "a b -> a"), np.ones((3, 0))), nc.ShapeError,
     r"axis 'b' is empty \(size 0"),
    (lambda: nc.evaluate(nc.softmax("a b", over="b"), np.ones((3, 0))), nc.ShapeError, r"axis 'b' is empty"),
    (lambda: nc.codegen.c(nc.plan(nc.kernel(nc.elementwise("exp", "a")), {"a": 2 ** 40})), CodegenError,
     r"more than a kernel's 32-bit indices reach"),
    (lambda: nc.softmax("beta x", over="x", beta=4), nc.SignatureError,
     r"beta=4 is softmax's own 'beta', not the size of the axis 'beta'.* sizes=\{'beta': …\}"),
    (lambda: nc.loads(_doc(["Mod", 1, 0])), nc.SerialisationError, r"Mod\(1, 0\) has no value"),
    (lambda: nc.loads(_doc(box={"type": "copy", "dom": [{"axes": [], "level": 0, "dtype": "fp32"}], "n": 10_000})),
     nc.SerialisationError, r"a copy makes at most 1024 copies"),
    (lambda: nc.loads(_doc(box={"type": "copy", "dom": [{"axes": [], "level": 0, "dtype": "fp32"}], "n": 10 ** 18})),
     nc.SerialisationError, r"at most 1024 copies"),
])
def test_bad_api_input_is_a_typed_error(call, error, message):
    t0 = time.perf_counter()
    with pytest.raises(error, match=message):
        call()
    assert time.perf_counter() - t0 < WITHIN_S


def test_the_c_kernels_threads_are_checked():
    k = nc.codegen.c(nc.plan(nc.kernel(nc.elementwise("exp", "a", a=4)), {}))
    with pytest.raises(CodegenError, match=r"threads must be an int 1 … 1024 .* got 0"):
        k(np.ones(4, "f4"), threads=0)
    with pytest.raises(CapacityError, match=r"threads must be a positive int"):
        nc.codegen.cuda(nc.plan(nc.kernel(nc.elementwise("exp", "a", a=4)), {}), threads=-1)


def test_a_grid_without_a_size_is_refused_when_read():
    doc = json.loads(nc.dumps(nc.group(nc.library.attention(), "q", "g_q")))
    doc["diagram"]["layers"][0]["box"]["params"].pop("size")
    with pytest.raises(nc.SerialisationError, match=r"a Grid needs params axis .* and size"):
        nc.loads(json.dumps(doc))


def test_a_nan_constant_round_trips():
    d = nc.elementwise("shift", "a", const=float("nan"))
    assert nc.loads(nc.dumps(d)) == d


@pytest.mark.parametrize("edit, message", [
    (('count = "132 SMs"', 'count = "132.7 SMs"'), r"sm.count = '132.7 SMs' must be a whole number"),
    (('count = "132 SMs"', 'count = "0.5 SMs"'), r"sm.count = '0.5 SMs' must be a whole number"),
    (('register_bytes = "4 B"', 'register_bytes = "0.5 B"'), r"memory.register_bytes = '0.5 B' must be a whole"),
])
def test_a_hardware_file_with_fractional_counts_is_refused(tmp_path, edit, message):
    text = (MODELS_DIR / "h100-sxm5.toml").read_text().replace(*edit)
    path = tmp_path / "gpu.toml"
    path.write_text(text)
    with pytest.raises(HardwareError, match=message):
        nc.hardware.load(str(path))


@pytest.mark.parametrize("argv, message", [
    (["cost", "attention", "--sizes", "q=²"], r"'q=²' is not name=positive-int"),
    (["derive", "attention", "--memory", "2^1..2^100000", "--sizes", "q=64,x=64,d=16"], r"more values than any level"),
    (["derive", "attention", "--memory", "9^99999999", "--sizes", "q=64,x=64,d=16"], r"more values than any level"),
    (["cost", "attention", "--derived", "--memory", "9^99999999"], r"more than any level holds"),
    (["cost", "attention", "--sizes", "zz=5"], r"size given for 'zz', which the diagram does not have; its axes "
                                               r"and tiles are \['d', 'q', 'x'\]"),
    (["table", "overlap", "--overhead", "bogus=1"], r"overhead for \['bogus'\].* legal keys are"),
    (["codegen", "matmul", "--target", "c", "--sizes", "a=4,b=4,c=4", "--seed", "-1", "--run"],
     r"'-1' is not a whole number ≥ 0"),
])
def test_bad_command_lines_exit_2_with_one_line(argv, message, capsys):
    t0 = time.perf_counter()
    assert main(argv) == 2
    assert time.perf_counter() - t0 < WITHIN_S
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("napkin")
    assert re.search(message, err), err


def test_a_hardware_file_with_fractional_sms_exits_2(tmp_path, capsys):
    path = tmp_path / "gpu.toml"
    path.write_text((MODELS_DIR / "h100-sxm5.toml").read_text().replace('count = "132 SMs"', 'count = "132.7 SMs"'))
    assert main(["table", "config", "--hardware", str(path)]) == 2
    assert "must be a whole number" in capsys.readouterr().err
