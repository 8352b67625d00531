"""The C kernel object: its shared library compiled by ``cc``, and its run on numpy arrays through ctypes.

``c(plan)`` (:mod:`napkin_cat.codegen.c.openmp`) prints the source; :class:`CKernel` compiles it once (``-O3
-march=native -fopenmp``, :data:`FLAGS`; OpenBLAS linked where the printer calls it) into a shared library cached
in :func:`~napkin_cat.codegen.kernel.cache_dir` by the digest of the source, the flags, the compiler and the CPU,
and calls its ``nc_run_in`` on the arrays' buffers, with a workspace kept between runs
(:mod:`~napkin_cat.codegen.c.workspace`).  Its law is the plan's: for the plan ``p`` it was printed from,
``c(p)(*xs)`` equals ``p.run(*xs)``'s outputs up to the rounding of its real type.

Values cross as numpy arrays of the kernel's real type (:data:`REAL_NUMPY`: float32, or float64 for
``real="double"``); a mask (``bool``) crosses as ``int32``, the width the code holds it in (see
:mod:`~napkin_cat.codegen.c.openmp` on gcc 12.2).

>>> import napkin_cat as nc
>>> from napkin_cat.codegen.c import c
>>> p = nc.plan(nc.library.matmul(), {"a": 2, "b": 3, "c": 2})
>>> k = c(p, blas=False)
>>> "-fopenmp" in k.flags(), "-lopenblas" in k.flags()
(True, False)
>>> k.numpy_dtype(p.inputs[0]).__name__, c(p, blas=False, real="double").numpy_dtype(p.inputs[0]).__name__
('float32', 'float64')
"""
from __future__ import annotations

import ctypes
import functools
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

from napkin_cat.codegen.c.blas import blas_available
from napkin_cat.codegen.c.profile import StatementTime
from napkin_cat.codegen.c.workspace import Workspaces
from napkin_cat.codegen.errors import CodegenError, ToolNotFoundError
from napkin_cat.codegen.kernel import GeneratedKernel, cache_dir, digest, tool

#: the numpy type of a C kernel's real values
REAL_NUMPY = {"float": np.float32, "double": np.float64}

#: the compiler's flags (no ``-ffast-math``: its finite-math assumption would break the −∞-safe δ)
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math")

#: the most OpenMP threads a run asks for: each thread reserves a stack (a million threads crashed the process, a
#: segmentation fault under a 6 GiB address-space limit), and past the machine's cores more threads only wait
MAX_THREADS = 1024


class CKernel(GeneratedKernel):
    """The C kernel: ``k(*arrays, threads=1)`` compiles it once (cached by source hash) and runs it; its fp32
    arrays are float32 numpy arrays, float64 ones where it was printed with ``real="double"``."""

    backend = "c"
    suffix = ".c"

    def flags(self) -> list[str]:
        return [*FLAGS, *(["-lopenblas"] if self.printer.blas else []), "-lm"]

    def library_path(self) -> Path:
        """Compile (or find in the cache) the shared library; ``$CC`` overrides ``cc``."""
        cc = tool("cc", env="CC", fallback=("gcc", "clang"), purpose="compile the C kernel (apt-get install gcc)")
        if self.printer.blas and not blas_available():
            raise ToolNotFoundError("this kernel calls cblas_sgemm, but cblas.h (OpenBLAS: Debian's libopenblas-dev) "
                                    "is not installed; install it or print the kernel with blas=False")
        cpu = platform.machine() + _cpu_model()
        path = cache_dir() / f"c-{digest(self.source, self.flags(), cc, cpu)}.so"
        if not path.exists():
            work = path.with_suffix(f".{os.getpid()}.c")
            work.write_text(self.source)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            run = subprocess.run([cc, str(work), "-o", str(tmp), *self.flags()], capture_output=True, text=True)
            work.unlink(missing_ok=True)
            if run.returncode != 0:
                raise CodegenError(f"{cc} rejected the generated C kernel:\n{run.stderr[-3000:]}")
            os.replace(tmp, path)
        return path

    def function(self):
        """``nc_run_in`` of the compiled library (inputs, outputs, workspace, block tables, threads)."""
        if getattr(self, "_fn", None) is None:
            lib = ctypes.CDLL(str(self.library_path()))
            fn = lib.nc_run_in
            n = len(self.plan.inputs) + len(self.plan.outputs) + len(self.workspaces.sizes) + \
                len(self.printer.block_tables)
            fn.argtypes = [ctypes.c_void_p] * n + [ctypes.c_int]
            fn.restype = None
            self._lib, self._fn = lib, fn
        return self._fn

    @functools.cached_property
    def workspaces(self) -> Workspaces:
        """The workspace sets the kernel's runs take, kept between runs (:mod:`~napkin_cat.codegen.c.workspace`;
        ``k.workspaces.release()`` gives the free ones back to the system)."""
        return Workspaces([self.printer.layout_bytes(v) for v in self.printer.workspace()])

    def numpy_dtype(self, name: str):
        """The numpy type of a global variable's values: an fp32 array's is the kernel's real type."""
        if self.plan.variable_map[name].dtype == "fp32":
            return REAL_NUMPY[self.printer.real.ctype]
        return super().numpy_dtype(name)

    def held_dtype(self, name: str):
        """The numpy type the compiled code reads and writes a global variable in: a ``bool`` array's is ``int32``
        (masks are held as ``int``: see the module docstring), any other array's its :meth:`numpy_dtype`."""
        return np.int32 if self.plan.variable_map[name].dtype == "bool" else self.numpy_dtype(name)

    def __call__(self, *arrays, threads: int = 1, out=None, block_mask=None, blocks=None):
        """Run on float32 arrays (float64 for ``real="double"``; masks as bool arrays); ``out``: arrays to write
        the outputs into (C-contiguous, of the outputs' numpy types).  ``block_mask``: the data's
        (:meth:`block_mask`, ``"data"`` to derive it here, or a :class:`~napkin_cat.algorithms.blockmask.BlockMask`
        checked against it), read at the kernel's tiles before the run; or ``blocks``, those tables themselves,
        checked too (:meth:`~napkin_cat.codegen.kernel.GeneratedKernel.block_arguments`).  The workspace is a set
        of :attr:`workspaces`, kept for the next run."""
        tables = self.block_arguments(arrays, block_mask, blocks)
        if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
            raise CodegenError(f"threads must be an int 1 … {MAX_THREADS} (OpenMP threads over the Grid), got "
                               f"{threads!r}")
        xs = [np.ascontiguousarray(x, dtype=self.held_dtype(n)) for n, x in zip(self.plan.inputs, self.check(arrays))]
        _, shapes = self.shapes()
        types = [self.numpy_dtype(n) for n in self.plan.outputs]
        ys = list(out) if out is not None else [np.empty(s, t) for s, t in zip(shapes, types)]
        for y, want, t in zip(ys, shapes, types):
            if y.shape != want or y.dtype != t or not y.flags.c_contiguous:
                raise CodegenError(f"an output array must be C-contiguous {np.dtype(t).name} of shape {want}, got "
                                   f"{y.dtype} {y.shape}")
        held = [y if y.dtype == self.held_dtype(n) else np.empty(y.shape, self.held_dtype(n))
                for n, y in zip(self.plan.outputs, ys)]
        fn = self.function()
        with self.workspaces.held() as work:
            fn(*[x.ctypes.data for x in xs], *[h.ctypes.data for h in held], *work,
               *[None if t is None else t.ctypes.data for t in tables], int(threads))
        for y, h in zip(ys, held):
            if h is not y:
                np.not_equal(h, 0, out=y)
        return ys[0] if len(ys) == 1 else tuple(ys)

    def statement_times(self) -> list:
        """Per statement timed (a kernel printed with ``profile=True``), its seconds since the last read, the
        threads' summed, as :class:`~napkin_cat.codegen.c.profile.StatementTime` records in print order; the
        timings reset (:mod:`~napkin_cat.codegen.c.profile`)."""
        if self.printer.profiled is None:
            raise CodegenError("this kernel times no statement: print it with nc.codegen.c(plan, profile=True)")
        self.function()
        n = max(len(self.printer.profiled), 1)
        out = (ctypes.c_double * n)()
        read = self._lib.nc_profile_read
        read.argtypes, read.restype = [ctypes.c_void_p], None
        read(ctypes.addressof(out))
        return [StatementTime(label, s, launch, float(out[k]))
                for k, (label, s, launch) in enumerate(self.printer.profiled)]

    def launcher(self) -> str:
        ins, outs = self.shapes()
        return LAUNCHER.format(flags=" ".join(self.flags()), ins=ins, outs=outs,
                               real=np.dtype(REAL_NUMPY[self.printer.real.ctype]).name)


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith(("model name", "flags")):
                return line
    except OSError:
        pass
    return platform.processor()


LAUNCHER = '''"""Compile kernel.c and run it on random inputs: python launch.py (needs cc with OpenMP)."""
import ctypes, pathlib, subprocess
import numpy as np

here = pathlib.Path(__file__).parent
subprocess.run("cc kernel.c -o kernel.so {flags}".split(), cwd=here, check=True)
lib = ctypes.CDLL(str(here / "kernel.so"))
ins = [np.random.default_rng(0).standard_normal(s, dtype=np.{real}) for s in {ins}]
outs = [np.empty(s, np.{real}) for s in {outs}]
lib.nc_run(*[ctypes.c_void_p(a.ctypes.data) for a in ins + outs], ctypes.c_int(1))
print([o.shape for o in outs])
'''
