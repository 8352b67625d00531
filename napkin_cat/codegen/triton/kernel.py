"""The Triton kernel object: run under Triton's interpreter on CPU tensors, compiled for a GPU without one.

``k(*arrays)`` runs the kernel with ``TRITON_INTERPRET=1`` in a worker process (the interpreter must be
switched on before ``triton`` is imported, so it never is in the caller's process); torch tensors in,
torch tensors out (numpy in, numpy out).  ``k.compile(arch=90)`` runs ``triton.compile`` for
``GPUTarget("cuda", arch, 32)`` in a second worker and returns the shared memory Triton allocates.

Why that is not ``p.smem_bytes``.  The plan counts each on-chip value once, at its tile's size, and
keeps a stream's state (the accumulator) on chip beside the tiles.  Triton places values itself: block
tensors, the accumulator among them, live in registers; shared memory holds the operands of ``tl.dot``
on their way to the tensor cores and the tiles a Stream loop loads, **once per pipelining stage in
flight**: with ``num_stages = s`` the loads of the next ``s − 1`` trips are issued while one trip
computes.  Measured on the derived matmul and FlashAttention plans, each stage past the second adds
exactly the padded bytes of the stream's loads (``k.compile(...)["stream_loads"]``), and a two-stage
matmul's shared memory is the plan's minus its accumulator (which Triton keeps in registers).
``tests/codegen/test_triton.py`` checks both.
"""
from __future__ import annotations

import atexit
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import sympy

from napkin_cat.codegen.errors import CodegenError, ToolNotFoundError
from napkin_cat.errors import ShapeError
from napkin_cat.codegen.kernel import GeneratedKernel, cache_dir, digest
from napkin_cat.codegen.triton.printer import SIGNATURE, TritonPrinter  # noqa: F401 (SIGNATURE: re-exported)

WORKER = Path(__file__).with_name("worker.py")
#: the running workers, one per mode (``interpret``: True, False), started on first use and closed at exit
WORKERS: dict = {}


def require(*packages):
    """A :class:`~napkin_cat.errors.ToolNotFoundError` naming the first of ``packages`` that is not installed."""
    for p in packages:
        if importlib.util.find_spec(p) is None:
            raise ToolNotFoundError(f"{p} is not installed; it is needed to run or compile Triton kernels "
                                    "(pip install 'napkin-cat[kernels]')")


class _Worker:
    def __init__(self, interpret: bool):
        env = dict(os.environ)
        if interpret:
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)
        env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=env)

    def ask(self, request: dict) -> dict:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.log.seek(0)
            raise CodegenError(f"the Triton worker stopped:\n{self.log.read()[-3000:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise CodegenError(f"Triton failed on the generated kernel:\n{answer['error']}")
        return answer

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def worker(interpret: bool) -> _Worker:
    """The running Triton worker process of the mode ``interpret`` (started, or restarted where it stopped)."""
    w = WORKERS.get(interpret)
    if w is None or w.proc.poll() is not None:
        require("torch", "triton")
        w = WORKERS[interpret] = _Worker(interpret)
    return w


@atexit.register
def _close_workers():
    for w in WORKERS.values():
        try:
            w.close()
        except Exception:    # the process is going away: nothing to report to
            pass


def _at(expr, sizes: dict):
    """``expr`` (a size expression) at ``sizes`` (by symbol name)."""
    e = sympy.sympify(expr)
    return e.subs({s: sizes[str(s)] for s in e.free_symbols if str(s) in sizes})


class TritonKernel(GeneratedKernel):
    """The Triton kernel (see the module docstring)."""

    backend = "triton"
    suffix = ".py"

    def path(self) -> Path:
        p = cache_dir() / f"triton-{digest(self.source)}.py"
        if not p.exists():
            tmp = p.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(self.source)
            os.replace(tmp, p)
        return p

    def __call__(self, *arrays, block_mask=None, blocks=None):
        """Run under the interpreter (CPU); torch tensors in, torch tensors out (numpy in, numpy out).  The
        runtime sizes may differ from the plan's; a bf16 array travels as float32 and is converted to its
        format in the worker (outputs in bf16 come back as float32).  ``block_mask`` / ``blocks``: the data's
        block mask or its tables, as the C kernel takes them (checked:
        :meth:`~napkin_cat.codegen.kernel.GeneratedKernel.block_arguments`); without, every trip runs masked."""
        return self._run(arrays, block_mask, blocks, lines=False)[0]

    def executions(self, *arrays, block_mask=None, blocks=None) -> tuple:
        """Run as ``k(*arrays)`` does, counting the times each line of :attr:`source` runs (every program of every
        launch, the interpreter running them one after another): ``(outputs, {line number from 1: times})``.  A
        statement in a loop's body runs once per program per trip it takes, so the count of a line tells how often
        the kernel does what it prints (``tests/codegen/test_triton_whole_trips.py`` counts the masks made so)."""
        return self._run(arrays, block_mask, blocks, lines=True)

    def _run(self, arrays, block_mask, blocks, lines: bool) -> tuple:
        as_torch = any(type(a).__module__.startswith("torch") for a in arrays)
        xs = self.check([a.detach().float().cpu().numpy() if type(a).__module__.startswith("torch") else a
                         for a in arrays])
        tables = [t for t in self.block_arguments(xs, block_mask, blocks) if t is not None]
        formats = [self.plan.variable_map[n].dtype for n in self.plan.inputs] + [None] * len(tables)
        xs = xs + tables
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for k, x in enumerate(xs):
                paths.append(os.path.join(tmp, f"x{k}.npy"))
                np.save(paths[-1], x)
            answer = worker(interpret=True).ask({"op": "run", "source": str(self.path()), "arrays": paths,
                                                 "formats": formats, "out": tmp, "lines": lines})
            ys = [np.load(p) for p in answer["outputs"]]
        if as_torch:
            import torch
            ys = [torch.from_numpy(y) for y in ys]
        return ys[0] if len(ys) == 1 else tuple(ys), {int(n): c for n, c in answer.get("lines", {}).items()}

    def check(self, arrays) -> list:
        """The arguments as C-ordered arrays (float32 for 16-bit brain floats), their shapes checked: an
        axis whose size is a runtime argument takes any length, the same on every input."""
        ins, _ = self.shapes()
        if len(arrays) != len(ins):
            raise ShapeError(f"the triton kernel takes {len(ins)} array(s) of shapes {ins}, got {len(arrays)}")
        runtime, seen, out = {str(s) for s in self.printer.runtime}, {}, []
        for k, (name, want, x) in enumerate(zip(self.plan.inputs, ins, arrays)):
            x = np.asarray(x)
            shape = self.plan.variable_map[name].shape
            if x.ndim != len(want):
                raise ShapeError(f"argument {k} ({name}) has {x.ndim} axes; it needs {len(want)}: "
                                 f"{[a for a, _ in shape]}")
            for (a, e), n, w in zip(shape, x.shape, want):
                if str(e) in runtime:
                    if seen.setdefault(str(e), (n, name))[0] != n:
                        raise ShapeError(f"axis {a!r} of argument {k} ({name}) has {n} values but {seen[str(e)][1]} "
                                         f"gave size {e} = {seen[str(e)][0]}")
                elif n != w:
                    raise ShapeError(f"argument {k} ({name}, axes {[b for b, _ in shape]}) must have {w} values "
                                     f"along {a!r} (fixed in the kernel), got shape {x.shape}")
            dt = self.plan.variable_map[name].dtype
            out.append(np.ascontiguousarray(x, dtype=np.float32 if dt == "bf16" else self.numpy_dtype(name)))
        return out

    def launched(self, sizes: dict | None = None) -> list[str]:
        """The kernels the launcher runs at ``sizes`` (names to values; the plan's sizes by default): per launch, its
        even variant where every division it assumed holds at those sizes, else its ragged one (the test the
        launcher makes, :mod:`~napkin_cat.codegen.triton.host`, evaluated here).

        >>> import napkin_cat as nc
        >>> f = nc.kernel(nc.library.matmul())
        >>> k = triton(nc.plan(nc.group(f, "a", "g_a"), {"a": 96, "b": 8, "c": 8, "g_a": 32}))
        >>> k.launched(), k.launched({"a": 80})
        (['nc_kernel0'], ['nc_kernel0_ragged'])
        """
        at = {str(k): v for k, v in self.plan.sizes.items()}
        at.update({str(k): v for k, v in (sizes or {}).items()})
        out = []
        for launch in self.printer.signature():
            even = self.printer.assumed.get(launch)
            if launch.endswith("_ragged") and launch[:-len("_ragged")] in self.printer.assumed:
                continue
            divides = all(int(_at(full, at)) % tile == 0 for full, tile in even or ())
            out.append(launch if divides else launch + "_ragged")
        return out

    def compile(self, arch=90, *, num_warps: int = 4, num_stages: int = 3, kernels=None) -> dict:
        """``triton.compile`` for ``GPUTarget("cuda", arch, 32)``: ``smem`` (bytes Triton allocates, the most over
        the kernels), per ``kernels``, beside ``plan_smem`` (``p.smem_bytes``) and the stream's loads.  ``kernels``:
        the names of those to compile (e.g. :meth:`launched`: those a run at given sizes launches); all by default,
        each launch's ragged variant included."""
        digits = int("".join(c for c in str(arch) if c.isdigit()))
        every = self.printer.signature()
        chosen = list(every) if kernels is None else list(kernels)
        unknown = [name for name in chosen if name not in every]
        if unknown or not chosen:
            raise CodegenError(f"cannot compile {unknown or 'no kernel'}: the kernel's functions are {sorted(every)}")
        kernels = {name: every[name] for name in chosen}
        answer = worker(interpret=False).ask({"op": "compile", "source": str(self.path()), "kernels": kernels,
                                              "arch": digits, "warps": num_warps, "stages": num_stages})
        ks = answer["kernels"]
        return {"arch": digits, "num_warps": num_warps, "num_stages": num_stages,
                "smem": max(k["smem"] for k in ks.values()), "plan_smem": self.plan.smem_bytes, "kernels": ks,
                "stream_loads": self.printer.stream_load_bytes()}

    def launcher(self) -> str:
        ins, outs = self.shapes()
        return LAUNCHER.format(ins=ins)


LAUNCHER = '''"""Run kernel.py: on a GPU with torch, or on the CPU with TRITON_INTERPRET=1 python launch.py."""
import os
import torch
import kernel

device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
ins = [torch.randn(*s, device=device) for s in {ins}]
print([o.shape for o in kernel.nc_run(*ins)])
'''


def triton(plan, *, precision: str = "ieee", runtime=True, num_warps: int | None = None,
           num_stages: int | None = None, smem_per_block: int | None = None) -> TritonKernel:
    """The Triton kernel of ``plan`` (see the module docstring; the options are
    :class:`~napkin_cat.codegen.triton.printer.TritonPrinter`'s)."""
    if not hasattr(plan, "variable_map"):
        raise CodegenError(f"nc.codegen.triton takes a plan (nc.plan(diagram, sizes)), got {type(plan).__name__}")
    printer = TritonPrinter(plan, precision=precision, runtime=runtime, num_warps=num_warps, num_stages=num_stages,
                            smem_per_block=smem_per_block)
    return TritonKernel(plan, printer.doprint_plan(), printer)
