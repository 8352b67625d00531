"""``napkin codegen``: the kernel of an algorithm's plan, printed, saved, compiled and run from the command line.

Second routes: the printed source is the one ``nc.codegen`` emits for ``nc.plan`` at the same sizes; ``--run``
compares with the numpy runner; ``--compile`` reads ptxas's report beside the plan's ``smem_bytes``.
"""
import importlib.util
import json
import os
import shutil

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.cli import main
from rewrites import flash_attention, tiled_matmul

HAVE_NVCC = shutil.which("nvcc") is not None or os.path.exists("/usr/local/bin/nvcc")
HAVE_CC = shutil.which(os.environ.get("CC", "cc")) is not None
HAVE_TRITON = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found (pip install nvidia-cuda-nvcc, or the CUDA "
                                                      "toolkit at /usr/local/bin/nvcc): napkin codegen --compile "
                                                      "for cuda not checked")
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler (apt-get install gcc): napkin codegen --run for c "
                                                  "not checked")
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="triton/torch not installed (pip install "
                                                          "'napkin-cat[kernels]'): triton --run not checked")

RAGGED = "q=37,x=29,d=8,g_q=16,s_x=8"           # no tile divides its axis: every edge tile is masked


def _json(capsys):
    return json.loads(capsys.readouterr().out)


@needs_cc
def test_the_c_kernel_runs_and_matches_the_numpy_runner(capsys):
    assert main(["codegen", "attention", "--target", "c", "--sizes", RAGGED, "--run", "--json"]) == 0
    data = _json(capsys)
    (row,) = data["run"]["outputs"]
    assert data["run"]["ok"] and row["dtype"] == "fp32" and row["max_error"] < 1e-5 < row["max_value"]
    assert data["sizes"] == {"q": 37, "x": 29, "d": 8, "g_q": 16, "s_x": 8} and data["tiles_chosen"] == {}
    assert main(["codegen", "attention", "--target", "c", "--sizes", RAGGED, "--run"]) == 0
    out = capsys.readouterr().out
    assert "against the numpy runner: y0 (fp32) max |error| = " in out and out.rstrip().endswith("ok")


@needs_cc
def test_a_kernel_off_the_runner_exits_1(capsys, monkeypatch):
    """The check can fail: a kernel whose output is off by 1 somewhere is reported and the status is 1."""
    from napkin_cat.codegen.c import CKernel
    call = CKernel.__call__

    def off_by_one(self, *arrays, **kw):
        y = call(self, *arrays, **kw).copy()
        y[3, 2] += 1.0
        return y
    monkeypatch.setattr(CKernel, "__call__", off_by_one)
    assert main(["codegen", "attention", "--target", "c", "--sizes", RAGGED, "--run"]) == 1
    out = capsys.readouterr().out
    assert "max |error| = 1 " in out and "TOO LARGE" in out


def test_the_printed_source_is_the_kernel_of_the_plan(capsys):
    """stdout is the source alone (so that `> kernel.c` works); the tile choice goes to stderr."""
    assert main(["codegen", "attention", "--target", "c", "--sizes", "q=64,x=48,d=8"]) == 0
    captured = capsys.readouterr()
    assert "chosen by nc.optimal" in captured.err and "chosen" not in captured.out
    chosen = {"g_q": 64, "s_x": 1}        # what `napkin plan` chooses at the H100's shared memory
    assert "{'g_q': 64, 's_x': 1}" in captured.err
    p = nc.plan(flash_attention(nc.library.attention()).diagram, {"q": 64, "x": 48, "d": 8, **chosen})
    assert captured.out == nc.codegen.c(p).source


def test_triton_source_emission(capsys):
    assert main(["codegen", "matmul", "--target", "triton", "--sizes", "a=64,b=40,c=24,g_a=32,g_c=8,s_b=16",
                 "--json"]) == 0
    data = _json(capsys)
    p = nc.plan(tiled_matmul(nc.library.matmul()).diagram, {"a": 64, "b": 40, "c": 24, "g_a": 32, "g_c": 8, "s_b": 16})
    assert "@triton.jit" in data["source"] and "tl.dot(" in data["source"] and "tl.program_id(0)" in data["source"]
    assert data["source"] == nc.codegen.triton(p).source and data["smem_bytes"] == p.smem_bytes


@needs_triton
def test_the_triton_kernel_runs_under_the_interpreter(capsys):
    assert main(["codegen", "matmul", "--target", "triton", "--sizes", "a=19,b=13,c=11,g_a=8,g_c=8,s_b=4",
                 "--run", "--json"]) == 0
    data = _json(capsys)
    assert data["run"]["ok"] and data["run"]["outputs"][0]["max_error"] < 1e-4


@needs_cc
def test_compile_builds_the_c_library(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NAPKIN_CACHE", str(tmp_path))
    assert main(["codegen", "matmul", "--target", "c", "--sizes", "a=9,b=11,c=7", "--compile", "--json"]) == 0
    data = _json(capsys)
    library = data["compile"]["library"]
    assert library.startswith(str(tmp_path)) and library.endswith(".so") and os.path.getsize(library) > 1000
    assert "source" in data and "run" not in data


@needs_cc
def test_out_saves_the_source_and_a_launcher(tmp_path, capsys):
    mine = tmp_path / "mine.py"          # an algorithm the library has never named
    mine.write_text("import napkin_cat as nc\n"
                    "diagram = nc.einsum('u v, w v -> u w') >> nc.elementwise('sigmoid', 'u w')\n")
    out = tmp_path / "kernel"
    assert main(["codegen", str(mine), "--target", "c", "--sizes", "u=33,v=17,w=9", "--out", str(out), "--run"]) == 0
    text = capsys.readouterr().out
    assert f"c kernel and launcher written: {out / 'kernel.c'}, {out / 'launch.py'}" in text and "ok" in text
    assert "nc_run(" in (out / "kernel.c").read_text() and "ctypes.CDLL" in (out / "launch.py").read_text()


@needs_nvcc
def test_cuda_compile_reports_the_plans_shared_memory(capsys):
    sizes = "q=256,x=256,d=32,g_q=32,s_x=32"        # 32·32·4 B tiles: under the 48 KiB static window
    assert main(["codegen", "attention", "--target", "cuda", "--sizes", sizes, "--compile", "sm_80", "--json"]) == 0
    data = _json(capsys)
    r = data["compile"]
    assert r["arch"] == "sm_80" and r["hardware"] == "a100" and r["smem"] == data["smem_bytes"] > 0
    assert r["spills"] >= 0 and r["registers"] > 0 and "source" in data
    assert main(["codegen", "attention", "--target", "cuda", "--sizes", sizes, "--compile"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sm_90 (h100-sxm5): ") and f"ptxas reports {data['smem_bytes']} B static shared memory = " \
        f"the arena's {data['smem_bytes']} B" in out


@needs_nvcc
def test_cuda_tiles_chosen_for_the_gpu_compiled_for(capsys):
    """Without --hardware, the tiles napkin plan would choose are chosen for --compile's GPU (past 48 KiB: dynamic)."""
    assert main(["codegen", "attention", "--target", "cuda", "--sizes", "q=512,x=512,d=64", "--compile", "sm_80",
                 "--json"]) == 0
    data = _json(capsys)
    assert data["capacity"]["hardware"] == "a100" and data["compile"]["dynamic_smem"] == {"nc_kernel0":
                                                                                           data["smem_bytes"]}
    assert data["smem_bytes"] <= nc.hardware.load("a100").smem_per_block


def _one_line(capsys, message):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("napkin: error: ") and message in err, err


BAD = [
    (["codegen", "attention", "--target", "rust"], "invalid choice: 'rust' (choose from 'triton', 'cuda', 'c')"),
    (["codegen", "flash_attention", "--target", "c"], "'flash_attention' is a derivation, not an algorithm"),
    (["codegen", "attention", "--target", "c", "--sizes", "q=64"], "add d=…, x=… to --sizes"),
    (["codegen", "attention", "--target", "c", "--compile", "sm_90", "--sizes", "q=8,x=8,d=8"],
     "the c target compiles for this CPU"),
    (["codegen", "attention", "--target", "cuda", "--run", "--sizes", "q=8,x=8,d=8"], "--run needs a GPU"),
    (["codegen", "attention", "--target", "c", "--derivation", "flash", "--sizes", "q=8,x=8,d=8"],
     "unknown derivation 'flash'"),
    (["codegen", "attention", "--target", "cuda", "--compile", "sm_75", "--sizes", "q=8,x=8,d=8"],
     "no hardware model has compute capability 7.5"),
]


@pytest.mark.parametrize("argv, message", BAD, ids=[b[1][:24] for b in BAD])
def test_bad_input_is_one_line_and_status_2(argv, message, capsys):
    assert main(argv) == 2
    _one_line(capsys, message)


def test_a_plan_the_backend_refuses(capsys):
    """Tiles that fit the H100 (chosen for it) but not the A100 the kernel is compiled for: the limit is named."""
    assert main(["codegen", "matmul", "--target", "cuda", "--sizes", "a=512,b=512,c=512,g_a=128,g_c=128,s_b=128",
                 "--hardware", "h100-sxm5", "--compile", "sm_80"]) == 2
    _one_line(capsys, "nc_kernel0 keeps 196608 B of tiles in shared memory per thread block, over the a100's "
                      "166912 B (memory.smem_per_block)")
    assert main(["codegen", "matmul", "--target", "c", "--sizes", "a=512,b=512,c=512,g_a=256,g_c=256,s_b=256"]) == 2
    _one_line(capsys, "level 1 holds up to 196608 values at once in this plan, over its capacity of 58112")


def test_missing_compilers(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NAPKIN_CACHE", str(tmp_path))       # nothing cached: the C kernel must be compiled
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert main(["codegen", "attention", "--target", "cuda", "--sizes", "q=64,x=64,d=8", "--compile"]) == 2
    _one_line(capsys, "nvcc is not on this machine")
    assert main(["codegen", "attention", "--target", "c", "--sizes", "q=64,x=64,d=8", "--run"]) == 2
    _one_line(capsys, "cc is not on this machine")


def test_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["codegen", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage: napkin codegen" in out and "{triton,cuda,c}" in out and "--compile [ARCH]" in out


def test_json_source_is_valid_c_and_numpy_agrees(capsys):
    """The JSON names the plan's sizes (tiles chosen included): planning at them gives the same kernel."""
    assert main(["codegen", "matmul", "--target", "c", "--sizes", "a=9,b=11,c=7", "--json"]) == 0
    data = _json(capsys)
    p = nc.plan(tiled_matmul(nc.library.matmul()).diagram, data["sizes"])
    A, B = np.ones((9, 11)), np.ones((11, 7))
    assert np.array_equal(p(A, B), A @ B) and data["source"] == nc.codegen.c(p).source
