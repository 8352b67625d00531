"""The CUDA kernel on a GPU: its shared library builds here (the toolkit, no GPU), its CUDA errors are named,
a machine without a GPU says so; on a GPU (``needs_gpu``) it computes what the plan computes, from numpy or
torch, and the driver's shared memory per kernel is the plan's, static + dynamic, byte for byte."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.codegen.cuda import kernel as cudakernel
from napkin_cat.codegen.kernel import cache_dir

from kernels_common import BIG, HAVE_TORCH, NO_GPU, assert_close, big_plan, inputs, needs_gpu, needs_nvcc, outputs

needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch not installed (pip install 'napkin-cat[kernels]'): "
                                                        "torch tensors in and out not checked")


# ---------------------------------------------------------------------- the shared library, built without a GPU
@needs_nvcc
def test_the_shared_library_builds_without_a_gpu_and_exports_the_host_side(algorithms, tmp_path, monkeypatch):
    monkeypatch.setenv("NAPKIN_CACHE", str(tmp_path))
    k = nc.codegen.cuda(algorithms["attention"])
    path = k.build_shared(arch="sm_90")
    assert path.parent == cache_dir() and path.is_relative_to(tmp_path) and path.name.startswith("cuda-sm_90-")
    stamp = path.stat().st_mtime_ns
    again = nc.codegen.cuda(algorithms["attention"])
    assert again.build_shared(arch="sm_90") == path and path.stat().st_mtime_ns == stamp   # cached: source, arch
    assert again.build_shared(arch="sm_80") != path
    lib = k.library("sm_90")
    assert lib.nc_kernels() == len(k.printer.kernels) == 1
    for f in ("nc_run", "nc_configure", "nc_attributes", "nc_error_string", "nc_set_device", "nc_malloc"):
        assert hasattr(lib, f)


@needs_nvcc
def test_a_cuda_error_is_raised_with_its_name_and_text(algorithms):
    """``nc_attributes`` refuses a kernel index out of range before any CUDA call: cudaErrorInvalidValue."""
    k = nc.codegen.cuda(algorithms["matmul"])
    lib = k.library("sm_90")
    code = lib.nc_attributes(5, (ctypes.c_int * len(cudakernel.ATTRIBUTES))())
    assert code == 1
    with pytest.raises(nc.codegen.CodegenError, match=r"nc_attributes\(5\) failed with CUDA error 1 "
                                                      r"\(cudaErrorInvalidValue: invalid argument\)"):
        k.raise_for(lib, code, "nc_attributes(5)")
    k.raise_for(lib, 0, "nothing")          # success raises nothing


def test_the_launcher_checks_every_launch_and_the_final_synchronisation():
    p = nc.plan(nc.unfused(nc.library.attention()), {"q": 4, "x": 5, "d": 3})
    src = nc.codegen.cuda(p).source
    run = src[src.index('extern "C" int nc_run('):src.index('extern "C" int nc_kernels(')]
    assert run.count("nc_err = cudaGetLastError();") == run.count(">>>(") == 3
    assert "NC_TRY(cudaDeviceSynchronize());" in run and run.count("NC_TRY(cudaMalloc(") == run.count("cudaFree(")


# ---------------------------------------------------------------------- no GPU
class FakeDriver:
    """libcuda's entry points that ``device_arch`` calls, answering as a driver with ``devices`` of ``cc``."""

    def __init__(self, init=0, devices=1, cc=(9, 0)):
        self.init, self.devices, self.cc = init, devices, cc

    def cuInit(self, flags):
        return self.init

    def cuGetErrorName(self, err, name):
        name._obj.value = {100: b"CUDA_ERROR_NO_DEVICE"}.get(err, b"CUDA_ERROR_UNKNOWN")
        return 0

    def cuDeviceGetCount(self, count):
        count._obj.value = self.devices
        return 0

    def cuDeviceGet(self, handle, ordinal):
        handle._obj.value = ordinal
        return 0

    def cuDeviceGetAttribute(self, value, attribute, handle):
        value._obj.value = self.cc[attribute - 75]
        return 0


@pytest.fixture
def driver(monkeypatch):
    """Set the driver ``device_arch`` sees: ``driver(None)`` for none, else a :class:`FakeDriver` (what it read
    before and from the fake is forgotten, before and after)."""
    cudakernel.device_arch.cache_clear()

    def use(fake):
        def load():
            if fake is None:
                raise OSError("libcuda.so.1: cannot open shared object file")
            return fake
        monkeypatch.setattr(cudakernel, "driver", load)
    yield use
    cudakernel.device_arch.cache_clear()


NO_DEVICE = r"no CUDA device: .*; use nc.codegen.c\(p\) for the CPU, or run on a GPU"


def test_without_a_driver_running_is_a_typed_error_that_says_what_to_do(algorithms, driver):
    p = algorithms["matmul"]
    k = nc.codegen.cuda(p)
    driver(None)
    with pytest.raises(nc.codegen.ToolNotFoundError, match=r"no CUDA device: this machine has no NVIDIA driver "
                                                           r"\(libcuda.so.1 not found\); use nc.codegen.c\(p\)"):
        k(*inputs(p))
    with pytest.raises(nc.codegen.ToolNotFoundError, match=NO_DEVICE):
        k.attributes()
    with pytest.raises(nc.codegen.ToolNotFoundError, match=NO_DEVICE):
        k.build_shared()                    # no architecture named: the device's, and there is none


def test_a_driver_without_a_device_is_named(algorithms, driver):
    k = nc.codegen.cuda(algorithms["matmul"])
    driver(FakeDriver(init=100))
    with pytest.raises(nc.codegen.ToolNotFoundError, match=r"no CUDA device: the NVIDIA driver reports CUresult 100 "
                                                           r"\(CUDA_ERROR_NO_DEVICE\); use nc.codegen.c"):
        k(*inputs(algorithms["matmul"]))
    driver(FakeDriver(devices=0))
    with pytest.raises(nc.codegen.ToolNotFoundError, match=r"reports 0 devices"):
        k.attributes()


def test_the_architecture_is_the_devices_compute_capability(driver):
    driver(FakeDriver(cc=(8, 6), devices=2))
    assert cudakernel.device_arch(1) == "sm_86"
    with pytest.raises(nc.codegen.CodegenError, match=r"CUDA device 2 does not exist: this machine has 2 \(0 to 1\)"):
        cudakernel.device_arch(2)


@pytest.mark.skipif(not NO_GPU, reason="this machine has a CUDA device: the GPU tests below run instead")
def test_this_machine_has_no_gpu_and_says_so(algorithms):
    p = algorithms["attention"]
    with pytest.raises(nc.codegen.ToolNotFoundError, match=NO_DEVICE):
        nc.codegen.cuda(p)(*inputs(p))


def test_wrong_arguments_are_refused_before_the_device_is_asked(algorithms):
    p = algorithms["matmul"]
    k = nc.codegen.cuda(p)
    with pytest.raises(nc.ShapeError, match=r"argument 0 \(x0, axes \['a', 'b'\]\) must have shape \(9, 11\)"):
        k(np.zeros((2, 2), np.float32), np.zeros((11, 7), np.float32))


@needs_torch
def test_run_device_takes_cuda_tensors_only(algorithms):
    import torch
    p = algorithms["matmul"]
    k = nc.codegen.cuda(p)
    xs = [torch.from_numpy(x) for x in inputs(p)]
    with pytest.raises(nc.codegen.CodegenError, match=r"must all be torch tensors on one CUDA device .* on \['cpu'\]"):
        k.run_device(xs, [torch.empty(9, 7)])
    with pytest.raises(nc.ShapeError, match=r"run_device takes 2 input\(s\) of shapes \[\(9, 11\), \(11, 7\)\] and 1"):
        k.run_device(xs[:1], [])


# ---------------------------------------------------------------------- on a GPU
@needs_gpu
@pytest.mark.parametrize("name", ["matmul", "attention", "mha", "gqa", "mlp"])
def test_the_kernel_computes_what_the_plan_computes(algorithms, name):
    p = algorithms[name]
    xs = inputs(p, seed=1)
    got = nc.codegen.cuda(p)(*xs)
    assert all(isinstance(g, np.ndarray) for g in outputs(got))
    assert_close(got, p(*xs))


@needs_gpu
@pytest.mark.parametrize("name", sorted(BIG))
def test_past_the_static_window_it_runs_and_the_driver_counts_the_plans_bytes(name):
    p = big_plan(name)
    k = nc.codegen.cuda(p)
    xs = inputs(p, seed=2, scale=0.5)
    assert_close(k(*xs), p(*xs), rtol=1e-3, atol=1e-4)
    a = k.attributes()["nc_kernel0"]
    assert (a["smem_static"], a["smem_dynamic"], a["smem"]) == (0, p.smem_bytes, p.smem_bytes)
    assert a["max_dynamic_smem"] >= p.smem_bytes and a["threads"] == 128 <= a["max_threads"]


@needs_gpu
@pytest.mark.parametrize("name", ["matmul", "attention"])
def test_the_driver_and_ptxas_agree_with_the_plan(algorithms, name):
    p = algorithms[name]
    k = nc.codegen.cuda(p)
    a = k.attributes()["nc_kernel0"]
    arch = cudakernel.device_arch(0)
    r = k.compile(arch=arch)
    assert a["smem_static"] == a["smem"] == r["smem_static"] == p.smem_bytes and a["smem_dynamic"] == 0
    assert a["registers"] == r["kernels"]["nc_kernel0"]["registers"] and a["binary_version"] == int(arch[3:])


@needs_gpu
def test_several_kernels_with_a_workspace_run_and_each_is_counted():
    p = nc.plan(nc.unfused(nc.library.attention()), {"q": 64, "x": 128, "d": 64})
    k = nc.codegen.cuda(p)
    xs = inputs(p, seed=4, scale=0.5)
    assert_close(k(*xs), p(*xs), rtol=1e-3, atol=1e-4)
    a = k.attributes()
    assert {n: (x["smem_static"], x["smem_dynamic"]) for n, x in a.items()} == {
        "nc_kernel0": (48 * 1024, 0), "nc_kernel1": (32 * 1024, 0), "nc_kernel2": (0, 64 * 1024)}
    assert max(x["smem"] for x in a.values()) == p.smem_bytes


@needs_gpu
@needs_torch
def test_torch_tensors_in_torch_tensors_out_and_preallocated_outputs(algorithms):
    import torch
    p = algorithms["attention"]
    k = nc.codegen.cuda(p)
    xs = inputs(p, seed=5)
    ts = [torch.from_numpy(x).cuda() for x in xs]
    y = k(*ts)
    assert isinstance(y, torch.Tensor) and y.is_cuda
    assert_close(y.cpu().numpy(), p(*xs))
    out = torch.full_like(y, float("nan"))
    ptr = out.data_ptr()
    assert k.run_device(ts, [out])[0] is out and out.data_ptr() == ptr
    assert_close(out.cpu().numpy(), p(*xs))
    with pytest.raises(nc.ShapeError, match=r"output 0 \(y0\) must be a contiguous torch.float32 tensor .* a strided"):
        k.run_device(ts, [torch.empty(y.shape[::-1], device="cuda").t()])
