"""The CUDA C++ kernel: it compiles for sm_80 and sm_90 (no GPU needed) with the shared memory the plan
predicts, byte for byte: ptxas's static bytes under the 48 KiB window, the launch's dynamic bytes past it,
their sum always; registers and spills beside the plan's estimate; limits from the hardware models."""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.hardware import CapacityError

from kernels_common import BIG, big_plan, needs_nvcc

ARCHS = ["sm_80", "sm_90"]


@needs_nvcc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", ["matmul", "attention"])
def test_compiles_with_the_predicted_shared_memory(algorithms, name, arch):
    p = algorithms[name]
    r = nc.codegen.cuda(p).compile(arch=arch)
    # under the static window ptxas counts the whole arena: static == plan, nothing dynamic
    assert r["smem_static"] == r["smem"] == p.smem_bytes > 0 and r["smem_dynamic"] == 0
    assert [k["smem_static"] for k in r["kernels"].values()] == [p.smem_bytes]
    assert r["arch"] == arch and r["hardware"] == {"sm_80": "a100", "sm_90": "h100-sxm5"}[arch]
    print(f"{name} {arch}: registers {r['registers']}, spills {r['spills']} B, smem {r['smem']} B; "
          f"plan: {r['estimate']['registers']} staged values per thread, {p.smem_bytes} B")
    for kernel in r["kernels"].values():
        # the staged values are somewhere the compiler accounts for: registers or the stack frame
        assert kernel["registers"] + kernel["stack"] // 4 >= r["estimate"]["registers"]


@needs_nvcc
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(BIG))
def test_a_tile_past_the_static_window_is_dynamic_shared_memory_and_still_counted(name, arch):
    """Over 48 KiB the arena is ``extern __shared__`` (opted in by the launcher): ptxas counts no static bytes,
    the launch asks for the arena, and their sum is the plan's bytes."""
    p = big_plan(name)
    k = nc.codegen.cuda(p)
    assert "extern __shared__" in k.source and f"cudaFuncAttributeMaxDynamicSharedMemorySize, {p.smem_bytes}" \
        in k.source and f", {p.smem_bytes}>>>(" in k.source
    r = k.compile(arch=arch)
    assert p.smem_bytes > 48 * 1024
    assert (r["smem_static"], r["smem_dynamic"], r["smem"]) == (0, p.smem_bytes, p.smem_bytes)
    assert r["kernels"]["nc_kernel0"]["smem"] == r["estimate"]["smem"] == p.smem_bytes


@needs_nvcc
def test_a_16_bit_format_brings_its_header_and_fp32_kernels_include_neither(algorithms):
    """``cuda_fp16.h`` and ``cuda_bf16.h`` are included by the kernels that hold those formats (here both: bf16
    scores' operands, fp16 values and probabilities), which compile with the plan's arena; an fp32 kernel
    includes neither (the headers cost the compiler's front end a quarter of a small kernel's compile)."""
    from rewrites import flash_attention
    att = nc.library.attention(formats={"Q": "bf16", "K": "bf16", "V": "fp16", "P": "fp16"})
    p = nc.plan(flash_attention(att).diagram, {"q": 9, "x": 11, "d": 8, "g_q": 4, "s_x": 4})
    k = nc.codegen.cuda(p)
    assert "__nv_bfloat16 *__restrict__ x0" in k.source and "__half *__restrict__ x2" in k.source
    assert k.compile(arch="sm_90")["smem"] == p.smem_bytes
    assert k.source.startswith("#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include <math.h>\n")
    for name in ("matmul", "attention"):
        source = nc.codegen.cuda(algorithms[name]).source
        assert source.startswith("#include <math.h>\n") and "#include <cuda_" not in source, name


@needs_nvcc
def test_kernels_over_and_under_the_window_are_each_counted_and_the_largest_is_the_plans():
    """One kernel per operation: two static arenas (one exactly at the window) and one dynamic."""
    p = nc.plan(nc.unfused(nc.library.attention()), {"q": 64, "x": 128, "d": 64})
    k = nc.codegen.cuda(p)
    r = k.compile(arch="sm_90")
    arenas = {n: i["smem"] for n, i in k.printer.kernels.items()}
    assert list(r["kernels"]) == list(arenas) == ["nc_kernel0", "nc_kernel1", "nc_kernel2"]  # launch order
    assert {n: (x["smem_static"], x["smem_dynamic"]) for n, x in r["kernels"].items()} == {
        "nc_kernel0": (48 * 1024, 0), "nc_kernel1": (32 * 1024, 0), "nc_kernel2": (0, 64 * 1024)}
    assert all(x["smem"] == arenas[n] for n, x in r["kernels"].items())
    assert (r["smem_static"], r["smem_dynamic"], r["smem"]) == (0, p.smem_bytes, p.smem_bytes) == (0, 65536, 65536)


# ---------------------------------------------------------------------- limits and tools
def _matmul(g):
    return nc.plan(nc.group(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"), "c", "g_c"),
                   {"a": 512, "b": 512, "c": 512, "s_b": g, "g_a": g, "g_c": g})


def test_tiles_over_the_shared_memory_of_the_target_are_refused():
    big = _matmul(144)      # 3 tiles of 144×144 fp32: 248832 B, over the H100's 232448 B per block
    with pytest.raises(CapacityError, match=r"keeps 248832 B of tiles in shared memory per thread block, over the "
                                            r"h100-sxm5's 232448 B \(memory.smem_per_block\)"):
        nc.codegen.cuda(big)
    mid = _matmul(128)      # 196608 B: fits the H100, not the A100's 166912 B
    k = nc.codegen.cuda(mid)
    with pytest.raises(CapacityError, match=r"196608 B .* over the a100's 166912 B"):
        k.compile(arch="sm_80")


def test_staging_over_the_registers_of_a_thread_is_refused():
    p = _matmul(64)
    with pytest.raises(CapacityError, match=r"stages 512 values per thread \(8 threads per block\), over the "
                                            r"h100-sxm5's 255 registers per thread"):
        nc.codegen.cuda(nc.plan(nc.group(nc.kernel(nc.library.matmul()), "a", "g_a"),
                                {"a": 64, "b": 64, "c": 64, "g_a": 64}), threads=8)
    assert nc.codegen.cuda(p, threads=128).printer.kernels["nc_kernel0"]["stage"] <= 255


def test_a_missing_nvcc_is_a_typed_error(algorithms, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    k = nc.codegen.cuda(algorithms["matmul"])
    with pytest.raises(nc.codegen.ToolNotFoundError, match=r"nvcc is not on this machine.*nvidia-cuda-nvcc"):
        k.compile(arch="sm_90")


def test_an_unknown_architecture_is_named(algorithms):
    with pytest.raises(nc.codegen.CodegenError, match=r"no hardware model has compute capability 7.5"):
        nc.codegen.cuda(algorithms["matmul"]).compile(arch="sm_75")


@needs_nvcc
def test_the_compilers_report_is_cached_by_source_and_architecture(monkeypatch, tmp_path):
    """A second compile of the same source for the same architecture reads the report nvcc gave the first (no second
    nvcc run) and reports the same; another architecture or another source runs nvcc again; a source nvcc rejects is
    never cached."""
    import subprocess
    monkeypatch.setenv("NAPKIN_CACHE", str(tmp_path))
    runs = []
    real = subprocess.run

    def counted(cmd, *args, **kwargs):
        runs.append(next(a for a in cmd if a.startswith("-arch=")))
        return real(cmd, *args, **kwargs)
    monkeypatch.setattr(subprocess, "run", counted)
    p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
                {"a": 8, "b": 8, "c": 8, "s_b": 4, "g_a": 4})
    k = nc.codegen.cuda(p)
    first = k.compile(arch="sm_90")
    assert k.compile(arch="sm_90") == first and runs == ["-arch=sm_90"]
    assert first["smem"] == p.smem_bytes                   # the cached report is ptxas's, read the same way
    k.compile(arch="sm_80")
    assert runs == ["-arch=sm_90", "-arch=sm_80"]
    broken = nc.codegen.cuda(p)
    broken.source = k.source.replace("__global__", "__global__ this is not C++", 1)
    for _ in range(2):
        with pytest.raises(nc.codegen.CodegenError, match="nvcc rejected"):
            broken.compile(arch="sm_90")
    assert runs[2:] == ["-arch=sm_90", "-arch=sm_90"]
