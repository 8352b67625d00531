"""The CUDA kernel reads the data's block tables: its printed kernels skip a *none* trip and run a *full* one without
the mask (the C family's loop nest, which the C kernel executes here), nvcc compiles it, and ``k(*arrays,
block_mask=...)`` copies the tables to the device and passes them to ``nc_run`` after the inputs and outputs.

No GPU here: the host side runs against a stand-in for the shared library whose "device memory" is host memory,
so the bytes that reach each pointer ``nc_run`` gets are read back and compared with the tables computed in numpy
from the ids.  What the kernels then do with the tables on a GPU is checked by the C kernel (same statements,
tests/codegen/test_c_block_mask.py) and, on a GPU, by nothing yet.
"""
import ctypes

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.codegen.cuda import kernel as cudakernel
from kernels_common import needs_nvcc

N, D, G, S = 128, 16, 32, 32
IDS = np.repeat(np.arange(5), [20, 44, 12, 32, 20]).astype(np.int32)


def _kernel():
    flash = nc.group(nc.stream(nc.kernel(nc.library.document_attention()), "x", "s_x"), "q", "g_q")
    return nc.codegen.cuda(nc.plan(flash, {"q": N, "x": N, "d": D, "g_q": G, "s_x": S}))


def _states(ids):
    """Per (query tile, key tile): 0 no pair of equal ids, 2 every pair, 1 some: from the definition."""
    out = np.empty((N // G, N // S), np.int8)
    for i in range(N // G):
        for j in range(N // S):
            same = ids[i * G:(i + 1) * G, None] == ids[None, j * S:(j + 1) * S]
            out[i, j] = 2 if same.all() else 1 if same.any() else 0
    return out


class _Device:
    """The library's host side over host memory: what was copied where, and what ``nc_run`` was given."""

    def __init__(self):
        self.buffers, self.runs = {}, []

    def nc_set_device(self, device):
        return 0

    def nc_malloc(self, ptr, n):
        buf = ctypes.create_string_buffer(n)
        self.buffers[ctypes.addressof(buf)] = buf
        ptr._obj.value = ctypes.addressof(buf)
        return 0

    def nc_to_device(self, dst, src, n):
        ctypes.memmove(dst.value, src, n)
        return 0

    def nc_to_host(self, dst, src, n):
        ctypes.memmove(dst, src.value, n)
        return 0

    def nc_run(self, *args):
        self.runs.append(args)
        return 0

    def nc_free(self, ptr):
        return 0

    def read(self, ptr, n, dtype):
        return np.frombuffer(ctypes.string_at(ptr.value, n * np.dtype(dtype).itemsize), dtype)


@pytest.fixture
def device(monkeypatch):
    dev = _Device()
    monkeypatch.setattr(cudakernel, "device_arch", lambda device=0: "sm_90")
    monkeypatch.setattr(cudakernel.CudaKernel, "library", lambda self, arch=None: dev)
    return dev


def test_the_printed_kernel_reads_its_table_and_nc_run_takes_it_last():
    k = _kernel()
    (table,) = k.printer.block_tables.values()
    assert tuple(table.shape) == (N // G, N // S)
    src = k.source
    assert "float *y0, const signed char *nc_blocks0) {" in src[src.index('extern "C" int nc_run('):]
    kernel = src[:src.index('extern "C" int nc_run(')]
    assert f"nc_blocks0 ? (int)nc_blocks0[{N // S}*i_q + i_x] : 1;" in kernel
    assert "if (nc_state_i_x == 0) continue;" in kernel and "if (nc_state_i_x == 2) {" in kernel


def test_the_tables_reach_the_device_and_nc_run(device):
    rng = np.random.default_rng(3)
    k = _kernel()
    xs = [rng.normal(size=(N, D)).astype(np.float32) for _ in range(3)] + [IDS, IDS]
    want = _states(IDS)
    assert set(np.unique(want)) == {0, 1, 2}             # the data has none, partial and full blocks
    k(*xs, block_mask=k.block_mask(*xs))
    ((*args, table),) = device.runs
    assert len(args) == len(xs) + 1                          # inputs, the output, then the one table
    np.testing.assert_array_equal(device.read(table, want.size, np.int8).reshape(want.shape), want)
    np.testing.assert_array_equal(device.read(args[3], N, np.int32), IDS)     # the ids went where they belong
    k(*xs, blocks=[want])
    np.testing.assert_array_equal(device.read(device.runs[-1][-1], want.size, np.int8).reshape(want.shape), want)
    k(*xs)
    assert device.runs[-1][-1] is None                       # no block mask: NULL, every trip runs masked


def test_a_wrong_table_is_refused_before_anything_reaches_the_device(device):
    k = _kernel()
    xs = [np.zeros((N, D), np.float32)] * 3 + [IDS, IDS]
    wrong = _states(IDS)
    wrong[wrong == 1] = 2                                    # partial blocks claimed full: their mask would be dropped
    with pytest.raises(nc.BlockMaskError):
        k(*xs, blocks=[wrong])
    assert device.buffers == {} and device.runs == []


@needs_nvcc
def test_nvcc_compiles_the_kernel_that_reads_the_tables():
    k = _kernel()
    report = k.compile(arch="sm_90")
    assert report["smem"] == k.plan.smem_bytes and report["spills"] == 0
