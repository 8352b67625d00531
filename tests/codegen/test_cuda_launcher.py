"""The saved CUDA ``launch.py`` passes ``nc_run`` every argument its signature takes, the block tables of a plan with
a mask from data included (NULL: every trip masked), and random ids as integers: run with a stand-in for torch
and for the loaded library (no GPU here); with ``NAPKIN_SLOW=1`` nvcc compiles the saved kernel.cu as the script
does (about 10 s), else the compile command is only recorded."""
import os
import re
import runpy
import sys
import types

import pytest

import napkin_cat as nc
from kernels_common import needs_nvcc


class _Tensor:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype

    def data_ptr(self):
        return 4096

    def to(self, dtype):
        return _Tensor(self.shape, dtype)


def _torch():
    """A stand-in for torch: what launch.py calls, recording the tensors it makes."""
    t = types.ModuleType("torch")
    made = t.made = []
    for name, floating in (("float32", True), ("float16", True), ("bfloat16", True), ("int32", False),
                           ("int64", False), ("bool", False)):
        setattr(t, name, types.SimpleNamespace(name=name, is_floating_point=floating))

    def make(kind):
        def f(*args, device=None, dtype=None, **_):
            assert device == "cuda"
            shape = args[-1] if kind == "randint" else args
            out = _Tensor(shape, dtype or t.int64)
            made.append((kind, out))
            return out
        return f
    t.randn, t.randint, t.empty = make("randn"), make("randint"), make("empty")
    t.cuda = types.SimpleNamespace(get_device_capability=lambda: (9, 0))
    return t


class _Library:
    def __init__(self, path):
        self.calls = []
        self.nc_error_string = types.SimpleNamespace(restype=None)

    def nc_run(self, *args):
        self.calls.append(args)
        return 0


def _parameters(source: str) -> int:
    (params,) = re.findall(r'extern "C" int nc_run\(([^)]*)\)', source)
    return len([p for p in params.split(",") if p.strip()])


SLOW = bool(os.environ.get("NAPKIN_SLOW"))


@pytest.mark.parametrize("compile_", [pytest.param(True, marks=[needs_nvcc, pytest.mark.skipif(
    not SLOW, reason="nvcc builds kernel.so in about 10 s: NAPKIN_SLOW=1")]), False])
def test_the_launcher_of_a_plan_with_a_mask_from_data_passes_its_block_tables(compile_, tmp_path, monkeypatch):
    flash = nc.group(nc.stream(nc.kernel(nc.library.document_attention(causal=True)), "x", "s_x"), "q", "g_q")
    k = nc.codegen.cuda(nc.plan(flash, {"q": 128, "x": 128, "d": 16, "g_q": 64, "s_x": 32}))
    tables = len(k.printer.block_tables)
    assert tables == 1
    want = len(k.plan.inputs) + len(k.plan.outputs) + tables
    assert _parameters(k.source) == want                   # the printed signature takes the tables last
    _, launch = k.save(tmp_path)
    fake = _torch()
    libraries = []
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr("ctypes.CDLL", lambda path: libraries.append(_Library(path)) or libraries[-1])
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/local/cuda/bin:" + os.environ.get("PATH", ""))
    commands = []
    if not compile_:
        monkeypatch.setattr("subprocess.run", lambda cmd, **kw: commands.append(cmd))
    run = runpy.run_path(str(launch), run_name="__main__")        # nvcc builds kernel.so for sm_90, as on a GPU machine
    if compile_:
        assert (tmp_path / "kernel.so").stat().st_size > 0
    else:
        assert commands == [["nvcc", "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90", "-o", "kernel.so", "kernel.cu"]]
    ((args,),) = [lib.calls for lib in libraries]
    assert len(args) == want
    assert [a.value for a in args[-tables:]] == [None]      # NULL tables: every trip runs masked
    assert [(t.dtype.name, t.shape) for t in run["ins"]] == [("float32", (128, 16))] * 3 + [("int32", (128,))] * 2
    assert [kind for kind, _ in fake.made] == ["randn"] * 3 + ["randint"] * 2 + ["empty"]   # ids as integers
