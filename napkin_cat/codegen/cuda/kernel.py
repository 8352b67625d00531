"""The CUDA kernel object: its compiler's report without a GPU, its shared library, and its run on a GPU.

* ``k.compile(arch="sm_90")`` runs ``nvcc -cubin -Xptxas -v`` (no GPU needed; its report cached by the digest of
  the source, the architecture and the compiler) and reports, overall and per
  kernel, the shared memory three ways: ``smem_static`` (what ptxas counts: the ``__shared__`` arena when it
  fits the language's 48 KiB static window), ``smem_dynamic`` (what the launch asks for: the arena past
  the window, ``extern __shared__``, which ptxas never sees) and ``smem``, their sum.  Law: ``smem ==
  p.smem_bytes`` for the kernel of the largest arena (the overall numbers are that kernel's), and
  ``smem_static == p.smem_bytes`` when the arena fits the window.  Beside them: ``registers``, ``spills``
  and ``stack`` (bytes), and the plan's ``estimate``.
* ``k.build_shared(arch="sm_90")`` builds the source into a shared library (``nvcc -shared -Xcompiler
  -fPIC -arch=sm_XY``, the CUDA runtime linked statically, nvcc's default), cached in
  :func:`~napkin_cat.codegen.kernel.cache_dir` by the digest of the source, flags and compiler; it needs
  the toolkit, not a GPU.  The library exports ``nc_run`` (the launches, in order, each followed by
  ``cudaGetLastError``, then ``cudaDeviceSynchronize``; the first CUDA error is returned), ``nc_attributes``
  (per kernel, what ``cudaFuncGetAttributes`` says after the launcher's ``cudaFuncSetAttribute``) and
  small helpers (error names, device memory).
* On a GPU: ``k(*arrays)`` (numpy in → numpy out, or torch CUDA tensors in → torch tensors out) builds for
  the device's architecture (read from the driver) and runs; ``k(*arrays, block_mask=...)`` (or ``blocks=``)
  reads the data's block tables (:meth:`~napkin_cat.codegen.kernel.GeneratedKernel.block_arguments`, checked on
  the host against the data), copies them to the device and passes them to ``nc_run``, whose kernels skip a
  *none* trip and run a *full* one without making its mask (the C family's loop nest); without, NULL (every trip
  runs masked); ``k.run_device(inputs, outputs)`` runs on
  torch CUDA tensors the caller allocated, with no copy and no allocation (for timing with
  ``torch.cuda.Event`` around it: what is timed is ``nc_run``, whose closing ``cudaDeviceSynchronize`` is
  part of it, and, for a plan of several kernels, the ``cudaMalloc``/``cudaFree`` of its workspace);
  ``k.attributes()`` is the driver's account per kernel, so ``smem_static + smem_dynamic == p.smem_bytes``
  is checked by the driver as well as by ptxas.  A CUDA error raises
  :class:`~napkin_cat.codegen.errors.CodegenError` naming it; without a GPU,
  :class:`~napkin_cat.codegen.errors.ToolNotFoundError`.

Kernels are launched on the default stream of the device the arrays live on (device 0 for numpy).

>>> import napkin_cat as nc
>>> from napkin_cat.codegen.cuda import cuda
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 5, "b": 6, "c": 4, "s_b": 3, "g_a": 2})
>>> k = cuda(p)
>>> [f for f in ("nc_run", "nc_attributes", "nc_configure") if f'extern "C" int {f}(' in k.source]
['nc_run', 'nc_attributes', 'nc_configure']
>>> arch_digits("sm_90"), arch_digits(90), arch_digits("9.0")
('90', '90', '90')
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from napkin_cat.codegen.errors import CodegenError, ToolNotFoundError
from napkin_cat.codegen.kernel import GeneratedKernel, cache_dir, digest, tool
from napkin_cat.errors import ShapeError
from napkin_cat.hardware import load, models

#: what to do instead, in every "no CUDA device" message
NO_DEVICE_HINT = "use nc.codegen.c(p) for the CPU, or run on a GPU"
#: the torch dtype of a variable's format
TORCH = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
#: the fields of ``nc_attributes``'s ``out`` array, in order (see the printed comment above it)
ATTRIBUTES = ("smem_static", "registers", "local", "max_dynamic_smem", "smem_dynamic", "threads", "max_threads",
              "binary_version")


def arch_digits(arch) -> str:
    """The digits of a CUDA architecture given as ``"sm_90"``, ``90`` or ``"9.0"``."""
    digits = re.sub(r"\D", "", str(arch))
    if len(digits) < 2:
        raise CodegenError(f"architecture {arch!r}: give it as 'sm_90', 90 or '9.0'")
    return digits


def model_for(arch, preferred=None):
    """The hardware model of a CUDA architecture (``"sm_90"``, ``90``, ``"9.0"``): the preferred one if it
    matches, else the first shipped model with that compute capability."""
    digits = arch_digits(arch)
    cc = f"{digits[:-1]}.{digits[-1]}"
    if preferred is not None and preferred.compute_capability == cc:
        return preferred
    for name in models():
        gpu = load(name)
        if gpu.compute_capability == cc:
            return gpu
    raise CodegenError(f"no hardware model has compute capability {cc} (for {arch!r}); models: {models()}")


def driver():
    """The CUDA driver library (``libcuda.so.1``), loaded by ctypes."""
    return ctypes.CDLL("libcuda.so.1")


@functools.cache
def device_arch(device: int = 0) -> str:
    """``"sm_XY"`` of CUDA device ``device``, read from the driver once per process (a cached call; what it raises is
    not cached); :class:`ToolNotFoundError` where there is no driver or no device."""
    try:
        cu = driver()
    except OSError:
        raise ToolNotFoundError(f"no CUDA device: this machine has no NVIDIA driver (libcuda.so.1 not found); "
                                f"{NO_DEVICE_HINT}") from None
    count = ctypes.c_int(0)
    err = cu.cuInit(0)
    if err == 0:
        err = cu.cuDeviceGetCount(ctypes.byref(count))
    if err != 0 or count.value == 0:
        why = f"CUresult {err}" if err else "0 devices"
        name = ctypes.c_char_p()
        if err and cu.cuGetErrorName(err, ctypes.byref(name)) == 0 and name.value:
            why += f" ({name.value.decode()})"
        raise ToolNotFoundError(f"no CUDA device: the NVIDIA driver reports {why}; {NO_DEVICE_HINT}")
    if not 0 <= device < count.value:
        raise CodegenError(f"CUDA device {device} does not exist: this machine has {count.value} "
                           f"(0 to {count.value - 1})")
    handle, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if cu.cuDeviceGet(ctypes.byref(handle), device) or \
            cu.cuDeviceGetAttribute(ctypes.byref(major), 75, handle) or \
            cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, handle):     # compute capability major, minor
        raise CodegenError(f"the NVIDIA driver did not give the compute capability of CUDA device {device}")
    return f"sm_{major.value}{minor.value}"


def _is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


class CudaKernel(GeneratedKernel):
    """The CUDA kernel (see the module docstring): ``compile`` anywhere nvcc is, ``build_shared`` likewise,
    ``k(*arrays)``, ``run_device`` and ``attributes`` on a GPU."""

    backend = "cuda"
    suffix = ".cu"

    def __init__(self, plan, source: str, printer):
        super().__init__(plan, source, printer)
        self._libraries: dict = {}      # path of a built library -> the library, loaded

    # ------------------------------------------------------------------ the compiler's report
    def compile(self, arch="sm_90") -> dict:
        """``nvcc -cubin -Xptxas -v``: ``smem_static`` (ptxas), ``smem_dynamic`` (the launch's), ``smem`` (their
        sum), ``registers``, ``spills`` (bytes stored) and ``stack`` per ``kernels``; overall, the shared memory
        of the kernel of the largest arena and the most registers and spills; the plan's ``estimate``."""
        digits = arch_digits(arch)
        gpu = model_for(arch, self.printer.hardware)
        self._check_limits(gpu)
        ptxas, kernels = parse_ptxas(self._ptxas_report(digits)), {}
        for name, info in self.printer.kernels.items():        # in launch order
            k = kernels[name] = ptxas.get(name, {"registers": 0, "spills": 0, "stack": 0, "smem_static": 0})
            k["smem_dynamic"] = info["smem"] if info["dynamic"] else 0
            k["smem"] = k["smem_static"] + k["smem_dynamic"]
        largest = max(kernels.values(), key=lambda k: k["smem"], default={})
        return {"arch": f"sm_{digits}", "hardware": gpu.name,
                "registers": max((k["registers"] for k in kernels.values()), default=0),
                "spills": max((k["spills"] for k in kernels.values()), default=0),
                **{key: largest.get(key, 0) for key in ("smem_static", "smem_dynamic", "smem")},
                "estimate": {"registers": max((k["stage"] for k in self.printer.kernels.values()), default=0),
                             "smem": max((k["smem"] for k in self.printer.kernels.values()), default=0)},
                "kernels": kernels}

    def _ptxas_report(self, digits: str) -> str:
        """What ``nvcc -cubin -Xptxas -v`` says of the source for ``sm_<digits>``: kept in
        :func:`~napkin_cat.codegen.kernel.cache_dir` by the digest of the source, the architecture and the compiler
        (its path, size and time), as the shared libraries are; a rejected source is never kept."""
        nvcc = _nvcc()
        found = os.stat(nvcc)
        path = cache_dir() / f"ptxas-sm_{digits}-{digest(self.source, nvcc, found.st_size, found.st_mtime_ns)}.txt"
        if path.exists():
            return path.read_text()
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "kernel.cu"
            src.write_text(self.source)
            run = subprocess.run([nvcc, f"-arch=sm_{digits}", "-cubin", "-Xptxas", "-v", "-o",
                                  str(Path(tmp) / "kernel.cubin"), str(src)], capture_output=True, text=True)
        if run.returncode != 0:
            raise CodegenError(f"nvcc rejected the generated CUDA kernel for sm_{digits}:\n{run.stderr[-3000:]}")
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(run.stderr)
        partial.replace(path)                 # atomic: a concurrent reader sees the whole report or none
        return run.stderr

    def _check_limits(self, gpu):
        for name, info in self.printer.kernels.items():
            self.printer.check_limits(name, info["smem"], info["stage"], gpu)

    # ------------------------------------------------------------------ the shared library
    def build_shared(self, arch=None) -> Path:
        """The shared library for ``arch`` (default: CUDA device 0's), built by nvcc or found in the cache.
        Where a hardware model has ``arch``'s compute capability, its limits are checked first."""
        arch = device_arch() if arch is None else arch
        digits = arch_digits(arch)
        try:
            gpu = model_for(arch, self.printer.hardware)
        except CodegenError:
            gpu = None          # a GPU no model describes: its driver will say what it refuses
        if gpu is not None:
            self._check_limits(gpu)
        nvcc = _nvcc()
        flags = ["-shared", "-Xcompiler", "-fPIC", f"-arch=sm_{digits}"]
        path = cache_dir() / f"cuda-sm_{digits}-{digest(self.source, flags, nvcc)}.so"
        if not path.exists():
            work, tmp = path.with_suffix(f".{os.getpid()}.cu"), path.with_suffix(f".{os.getpid()}.tmp")
            work.write_text(self.source)
            run = subprocess.run([nvcc, *flags, "-o", str(tmp), str(work)], capture_output=True, text=True)
            work.unlink(missing_ok=True)
            if run.returncode != 0:
                tmp.unlink(missing_ok=True)
                raise CodegenError(f"nvcc could not build the CUDA kernel into a shared library for sm_{digits}:\n"
                                   f"{run.stderr[-3000:]}")
            os.replace(tmp, path)
        return path

    def library(self, arch=None):
        """The loaded shared library for ``arch`` (default: CUDA device 0's), its functions' types set."""
        path = self.build_shared(arch)
        libs = self._libraries
        if path not in libs:
            lib = ctypes.CDLL(str(path))
            # the block tables (:mod:`napkin_cat.plan.blocks`) last: device pointers, or NULL (every trip run masked)
            n = len(self.plan.inputs) + len(self.plan.outputs) + len(self.printer.block_tables)
            lib.nc_run.argtypes, lib.nc_run.restype = [ctypes.c_void_p] * n, ctypes.c_int
            lib.nc_attributes.argtypes, lib.nc_attributes.restype = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)], \
                ctypes.c_int
            for f in ("nc_error_name", "nc_error_string"):
                getattr(lib, f).argtypes, getattr(lib, f).restype = [ctypes.c_int], ctypes.c_char_p
            lib.nc_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
            lib.nc_free.argtypes = [ctypes.c_void_p]
            for f in ("nc_to_device", "nc_to_host"):
                getattr(lib, f).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
            libs[path] = lib
        return libs[path]

    @staticmethod
    def raise_for(lib, code: int, what: str):
        """Nothing for 0; for a CUDA error code, a :class:`CodegenError` naming ``what`` failed and the error."""
        if code:
            name, text = lib.nc_error_name(code), lib.nc_error_string(code)
            raise CodegenError(f"{what} failed with CUDA error {code} ({(name or b'?').decode()}: "
                               f"{(text or b'?').decode()})")

    # ------------------------------------------------------------------ on a GPU
    def __call__(self, *arrays, block_mask=None, blocks=None):
        """Run on a GPU: numpy arrays in, numpy arrays out (via device 0), or torch CUDA tensors in, torch
        tensors out (on their device); one array, or a tuple of them, as ``p(*arrays)`` returns.  ``block_mask``
        / ``blocks``: the data's block mask or its tables, read and checked on the host
        (:meth:`~napkin_cat.codegen.kernel.GeneratedKernel.block_arguments`) and copied to the device beside the
        inputs; none: every trip runs masked."""
        if any(_is_torch(x) for x in arrays):
            host = [None if x is None else x.detach().cpu().numpy() for x in arrays] \
                if block_mask is not None or blocks is not None else ()
            ys = self._call_torch(arrays, self.block_arguments(host, block_mask, blocks))
        else:
            xs = self.check(arrays)
            ys = self._call_numpy(xs, self.block_arguments(xs, block_mask, blocks))
        return ys[0] if len(ys) == 1 else tuple(ys)

    def _call_numpy(self, xs, tables=()):
        """``nc_run`` on device copies of ``xs`` and of the block ``tables`` (int8 host arrays; None: NULL)."""
        lib = self.library(device_arch(0))
        self.raise_for(lib, lib.nc_set_device(0), "cudaSetDevice(0)")
        _, shapes = self.shapes()
        ys = [np.empty(s, self.numpy_dtype(n)) for s, n in zip(shapes, self.plan.outputs)]
        tables = list(tables) or [None] * len(self.printer.block_tables)
        ptrs, table_ptrs = [], []
        try:
            for a in xs + ys + [t for t in tables if t is not None]:
                ptrs.append(ctypes.c_void_p())
                self.raise_for(lib, lib.nc_malloc(ctypes.byref(ptrs[-1]), max(a.nbytes, 1)),
                               f"cudaMalloc of {a.nbytes} B")
            given = iter(ptrs[len(xs) + len(ys):])
            table_ptrs = [None if t is None else next(given) for t in tables]
            for ptr, x in [*zip(ptrs, xs), *((p, t) for p, t in zip(table_ptrs, tables) if t is not None)]:
                self.raise_for(lib, lib.nc_to_device(ptr, x.ctypes.data, x.nbytes), "the copy of an input to the GPU")
            self.raise_for(lib, lib.nc_run(*ptrs[:len(xs) + len(ys)], *table_ptrs), self._launches())
            for ptr, y in zip(ptrs[len(xs):], ys):
                self.raise_for(lib, lib.nc_to_host(y.ctypes.data, ptr, y.nbytes), "the copy of an output from the GPU")
        finally:
            for ptr in ptrs:
                lib.nc_free(ptr)
        return ys

    def _call_torch(self, arrays, tables=()):
        import torch
        ins, outs = self.shapes()
        if len(arrays) != len(ins):
            raise ShapeError(f"the cuda kernel takes {len(ins)} array(s) of shapes {ins}, got {len(arrays)}")
        device = self._torch_device(arrays, "inputs")
        xs = [x.to(dtype=self._torch_dtype(torch, n)).contiguous() for n, x in zip(self.plan.inputs, arrays)]
        ys = [torch.empty(s, dtype=self._torch_dtype(torch, n), device=device) for s, n in zip(outs, self.plan.outputs)]
        self.run_device(xs, ys, blocks=[None if t is None else torch.from_numpy(t).to(device) for t in tables] or None)
        return ys

    def run_device(self, inputs, outputs, *, blocks=None):
        """Run ``nc_run`` on torch CUDA tensors the caller allocated, all on one device, C-contiguous, of the
        plan's shapes and formats: no copy, no allocation, no synchronisation but ``nc_run``'s own.  ``blocks``:
        the block tables on that device (int8, of the tables' shapes: :meth:`block_arguments`'s, which checks them
        against the data, moved there once); None: NULL, every trip runs masked.  Returns ``outputs``."""
        import torch
        ins, outs = self.shapes()
        if len(inputs) != len(ins) or len(outputs) != len(outs):
            raise ShapeError(f"run_device takes {len(ins)} input(s) of shapes {ins} and {len(outs)} output(s) of "
                             f"shapes {outs}, got {len(inputs)} and {len(outputs)}")
        device = self._torch_device(list(inputs) + list(outputs), "arguments")
        for role, names, shapes, tensors in (("input", self.plan.inputs, ins, inputs),
                                             ("output", self.plan.outputs, outs, outputs)):
            for k, (name, want, t) in enumerate(zip(names, shapes, tensors)):
                dtype = self._torch_dtype(torch, name)
                if tuple(t.shape) != want or t.dtype != dtype or not t.is_contiguous():
                    raise ShapeError(f"{role} {k} ({name}) must be a contiguous {dtype} tensor of shape {want}, got "
                                     f"{'a contiguous' if t.is_contiguous() else 'a strided'} {t.dtype} tensor of "
                                     f"shape {tuple(t.shape)}")
        tables = list(self.printer.block_tables.values())
        blocks = [None] * len(tables) if blocks is None else list(blocks)
        if len(blocks) != len(tables):
            raise ShapeError(f"run_device takes {len(tables)} block table(s) (shapes {[t.shape for t in tables]}), "
                             f"got {len(blocks)}")
        for t, b in zip(tables, blocks):
            if b is not None and (tuple(b.shape) != tuple(t.shape) or b.dtype != torch.int8 or b.device != device
                                  or not b.is_contiguous()):
                raise ShapeError(f"block table {t.number} (stream over {t.loop.axis!r}) must be a contiguous int8 "
                                 f"tensor of shape {tuple(t.shape)} on {device}, got {b.dtype} of shape "
                                 f"{tuple(b.shape)} on {b.device}")
        index = device.index if device.index is not None else torch.cuda.current_device()
        lib = self.library(device_arch(index))
        self.raise_for(lib, lib.nc_set_device(index), f"cudaSetDevice({index})")
        self.raise_for(lib, lib.nc_run(*[t.data_ptr() for t in (*inputs, *outputs)],
                                       *[None if b is None else b.data_ptr() for b in blocks]), self._launches())
        return outputs

    def attributes(self, device: int = 0) -> dict:
        """Per kernel (launch order), what the driver says on CUDA device ``device``: ``smem_static``
        (``sharedSizeBytes``), ``smem_dynamic`` (what the launch asks for), ``smem`` (their sum), ``registers``,
        ``local`` (bytes per thread), ``max_dynamic_smem`` (after the launcher's opt-in), ``threads`` (per block,
        launched), ``max_threads``, ``binary_version`` (e.g. 90)."""
        lib = self.library(device_arch(device))
        self.raise_for(lib, lib.nc_set_device(device), f"cudaSetDevice({device})")
        out, buf = {}, (ctypes.c_int * len(ATTRIBUTES))()
        for k, name in enumerate(self.printer.kernels):
            self.raise_for(lib, lib.nc_attributes(k, buf), f"nc_attributes({k}) (cudaFuncGetAttributes of {name})")
            info = dict(zip(ATTRIBUTES, buf))
            info["smem"] = info["smem_static"] + info["smem_dynamic"]
            out[name] = info
        return out

    def _launches(self) -> str:
        return f"nc_run (the launches of {', '.join(self.printer.kernels) or 'no kernel'})"

    def _torch_dtype(self, torch, name):
        dt = self.plan.variable_map[name].dtype
        if dt not in TORCH:
            raise CodegenError(f"the cuda kernel exchanges {sorted(TORCH)} tensors with torch; {name} is {dt}: cast "
                               "it in the diagram (nc.cast) to one of them")
        return getattr(torch, TORCH[dt])

    @staticmethod
    def _torch_device(tensors, what):
        devices = {t.device for t in tensors if _is_torch(t)}
        if len(devices) != 1 or any(not _is_torch(t) for t in tensors) or next(iter(devices)).type != "cuda":
            raise CodegenError(f"the cuda kernel's {what} must all be torch tensors on one CUDA device (or all numpy "
                               f"arrays), got {[type(t).__name__ for t in tensors]} on {sorted(map(str, devices))}")
        return next(iter(devices))

    # ------------------------------------------------------------------ files
    def launcher(self) -> str:
        """``launch.py``: random inputs of the plan's shapes and formats (ids and masks as random integers), one
        ``nc_run``; the block tables (one per stream that skips by a mask from data) passed NULL, every trip run
        masked (right on the random ids it makes; ``k(*arrays, block_mask=...)`` passes the tables of real data,
        derived from it: :mod:`napkin_cat.plan.condition`)."""
        ins, outs = self.shapes()
        formats = {**TORCH, "int32": "int32", "bool": "bool"}
        return LAUNCHER.format(ins=ins, outs=outs,
                               dtypes=[formats.get(self.plan.variable_map[n].dtype, "float32")
                                       for n in self.plan.inputs],
                               out_dtypes=[formats.get(self.plan.variable_map[n].dtype, "float32")
                                           for n in self.plan.outputs],
                               tables=len(self.printer.block_tables))


def _nvcc() -> str:
    return tool("nvcc", env="NVCC", fallback=("/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc"),
                purpose="compile the CUDA kernel (pip install nvidia-cuda-nvcc, or the CUDA toolkit)")


def parse_ptxas(text: str) -> dict:
    """Per kernel: ``registers``, ``spills`` (spill stores, bytes), ``stack`` (bytes), ``smem_static`` (bytes)."""
    out, current = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line) or re.search(r"Function properties for (\w+)", line)
        if m:
            current = out.setdefault(m.group(1), {"registers": 0, "spills": 0, "stack": 0, "smem_static": 0})
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
        if m:
            current["stack"], current["spills"] = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            current["smem_static"] = int(s.group(1)) if s else 0
    return out


LAUNCHER = '''"""Build kernel.cu into a shared library and run it on a GPU with torch: python launch.py."""
import ctypes, pathlib, subprocess
import torch

here = pathlib.Path(__file__).parent
major, minor = torch.cuda.get_device_capability()
subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", f"-arch=sm_{{major}}{{minor}}", "-o", "kernel.so",
                "kernel.cu"], cwd=here, check=True)
lib = ctypes.CDLL(str(here / "kernel.so"))
lib.nc_error_string.restype = ctypes.c_char_p


def random(shape, dtype):
    if dtype.is_floating_point:
        return torch.randn(*shape, device="cuda", dtype=dtype)
    return torch.randint(0, 2 if dtype == torch.bool else 4, tuple(shape), device="cuda").to(dtype)


ins = [random(s, getattr(torch, t)) for s, t in zip({ins}, {dtypes})]
outs = [torch.empty(*s, device="cuda", dtype=getattr(torch, t)) for s, t in zip({outs}, {out_dtypes})]
# the block tables of the streams that skip by a mask from data: NULL, every trip runs masked
tables = [ctypes.c_void_p(None)] * {tables}
code = lib.nc_run(*[ctypes.c_void_p(t.data_ptr()) for t in ins + outs], *tables)
assert code == 0, f"CUDA error {{code}}: {{lib.nc_error_string(code).decode()}}"
print([o.shape for o in outs])
'''
