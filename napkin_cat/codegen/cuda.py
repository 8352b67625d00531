"""CUDA C++: one thread block per Grid index, the on-chip variables in one static ``__shared__`` arena.

The statements are the C kernel's (:mod:`napkin_cat.codegen.cfamily`): the same loop nest, extents,
masks, addresses, arena offsets and element formulas.  What differs: an element loop is one flat loop
strided by ``threadIdx.x`` (each thread decodes its element's indices), a barrier follows every
statement, the arena is ``__shared__`` and the staging storage is a per-thread array (registers).

Checked by the compiler: ``k.compile(arch="sm_90")`` runs ``nvcc -Xptxas -v`` and reads back, per
kernel, the registers, spills and static shared memory; the shared memory is the layout's arena, which
equals ``p.smem_bytes`` (the plan's peak at level 1) byte for byte.  The register estimate is the values
one thread holds: what it stages, and its thread-level variables (a Grid inside a block around a kernel
one level down runs one group per thread, its variables in a per-thread arena).  Those arrays are indexed
by counters, so ptxas keeps them in the thread's stack frame (local memory, cached in L1): the report
shows them as ``stack`` bytes beside ``registers`` (the compiler's addressing and loop registers).

Limits come from the hardware model of the target (``nc.hardware.load``): a kernel whose arena exceeds
``memory.smem_per_block`` or whose staged values exceed ``memory.registers_per_thread`` raises
:class:`~napkin_cat.hardware.errors.CapacityError` naming the limit and the value.  Static shared memory
is declared up to the CUDA language's static window (48 KiB); a larger arena is dynamic shared memory
(``extern __shared__``, opted in by the launcher), which ptxas does not count.

>>> import napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 5, "b": 6, "c": 4, "s_b": 3, "g_a": 2})
>>> k = cuda(p)
>>> "__shared__ __align__(16) unsigned char nc_arena[" + str(p.smem_bytes) + "];" in k.source
True
"""
from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from napkin_cat.codegen.cfamily import CFamilyPrinter
from napkin_cat.codegen.errors import CodegenError
from napkin_cat.codegen.kernel import GeneratedKernel, tool
from napkin_cat.codegen.printer import ident, launches
from napkin_cat.hardware import CapacityError, load, models

#: the CUDA C++ language's limit on static ``__shared__`` data per block (Programming Guide, "Shared Memory");
#: beyond it, shared memory must be dynamic whatever the GPU offers (its own limit is the model's)
STATIC_WINDOW = 48 * 1024

PRELUDE = r"""#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>

#define NC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NC_MAX(a, b) ((a) > (b) ? (a) : (b))

__device__ __forceinline__ float nc_exp(float x) { return expf(x); }
__device__ __forceinline__ float nc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float nc_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float nc_gelu(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
"""


class CudaPrinter(CFamilyPrinter):
    """CUDA C++; ``threads`` per block (a warpgroup, 128, by default); ``hardware``: the model for the limits."""

    backend = "cuda"
    dtypes = {"fp32": "float", "fp16": "__half", "bf16": "__nv_bfloat16"}

    def __init__(self, plan, *, threads: int = 128, hardware="h100-sxm5"):
        super().__init__(plan, threads=threads, hardware=hardware)
        self.threads = threads
        self.hardware = hardware if not isinstance(hardware, str) else load(hardware)
        self.kernels: dict = {}     # launch name -> {"smem": arena bytes, "stage": staged values, "dynamic": bool}
        self.in_thread = False      # inside a Grid spread over the threads: one thread runs each group
        if threads > self.hardware.max_threads_per_block:
            raise CapacityError(f"{threads} threads per block exceed the {self.hardware.name}'s "
                                f"{self.hardware.max_threads_per_block} (sm.max_threads_per_block)")

    def loop(self, space, body, depth):
        if self.in_thread:          # a thread's own group: its element loops are its own, in order
            if not space:
                return [self.line(depth, "{")] + [self.line(depth + 1, b) for b in body] + [self.line(depth, "}")]
            return [self.line(depth, b) for b in self.nested(space, body)]
        if not space:
            return [self.line(depth, "if (threadIdx.x == 0) {")] + [self.line(depth + 1, b) for b in body] + \
                [self.line(depth, "}")]
        total = " * ".join(f"({self.code(e)})" if len(space) > 1 else self.code(e) for _, e, _, _ in space)
        lines = [self.line(depth, f"for (int nc_e = threadIdx.x; nc_e < {total}; nc_e += blockDim.x) {{")]
        div = ""
        for k, (sym, e, _, _) in enumerate(reversed(space)):
            q = "nc_e" + div
            last = k == len(space) - 1
            value = q if last else f"{q} % {self._atomic(e)}"
            lines.insert(1, self.line(depth + 1, f"const int {ident(sym.name)} = {value};"))
            div += f" / {self._atomic(e)}"
        return lines + [self.line(depth + 1, b) for b in body] + [self.line(depth, "}")]

    def _atomic(self, e):
        s = self.code(e)
        return s if s.isidentifier() or s.isdigit() else f"({s})"

    def sync(self, depth):
        return [] if self.in_thread else [self.line(depth, "__syncthreads();")]

    # ------------------------------------------------------------------ the thread level
    def _print_GridLoop(self, s, depth):
        """A Grid inside a block around a kernel one level down: its groups are spread over the threads (the
        paper's thread level); each thread runs its groups' statements alone, its variables in its own arena
        (registers, or local memory where ptxas cannot index them statically)."""
        from napkin_cat.plan.ir import GridLoop, Kernel, walk
        if self.in_thread or not any(isinstance(k, Kernel) and k.level > 1 for k in walk(s.body)):
            return super()._print_GridLoop(s, depth)
        chain = [s]
        while True:
            nxt = [b for b in chain[-1].body if type(b).__name__ != "Free"]
            if len(nxt) == 1 and isinstance(nxt[0], GridLoop) and not (
                    self.trips(nxt[0]).free_symbols & {g.index for g in chain}):
                chain.append(nxt[0])
            else:
                break
        trips = [f"nc_T{k}" for k in range(len(chain))]
        lines = [self.line(depth, f"{{   {self.comment} groups of {', '.join(g.axis for g in chain)}: a thread each")]
        lines += [self.line(depth + 1, f"const int {t} = {self.code(self.trips(g))};") for t, g in zip(trips, chain)]
        lines.append(self.line(depth + 1, f"for (int nc_t = threadIdx.x; nc_t < {' * '.join(trips)}; "
                                          "nc_t += blockDim.x) {"))
        decode, div = [], ""
        for k in reversed(range(len(chain))):
            value = f"nc_t{div}" if k == 0 else f"nc_t{div} % {trips[k]}"
            decode.insert(0, self.line(depth + 2, f"const int {ident(chain[k].index.name)} = {value};"))
            div += f" / {trips[k]}"
        lines += decode
        saved, threads = [], self.threads
        for g in chain:
            saved.append(self.extents.get(g.tile))
            bound = self.enter(g)
            if bound is not None:
                lines.append(self.line(depth + 2, f"const int {ident(bound[0].name)} = {self.code(bound[1])};"))
        self.in_thread, self.threads = True, 1
        try:
            lines += self._lines(chain[-1].body, depth + 2)
        finally:
            self.in_thread, self.threads = False, threads
            for g, sv in zip(reversed(chain), reversed(saved)):
                self.leave(g, sv)
        return lines + [self.line(depth + 1, "}"), self.line(depth, "}")] + self.sync(depth)

    # ------------------------------------------------------------------ launches
    def _print_Launch(self, launch, depth=0):
        self.stage_values = 0
        body = []
        for name, value in self.decode(launch, "nc_b"):
            body.append(self.line(1, f"const int {name} = (int)({value});"))
        body += self.block_body(launch, 1)
        arena = self.arena_bytes(launch)
        thread_bytes = sum(self.arena_bytes(launch, level) for level in self.levels(launch) if level > 1)
        self.check_limits(launch.name, arena, self.stage_values + thread_bytes // 4, self.hardware)
        dynamic = arena > STATIC_WINDOW
        self.kernels[launch.name] = {"smem": arena, "stage": self.stage_values + thread_bytes // 4,
                                     "dynamic": dynamic,
                                     "blocks": launch.blocks}
        head = [f'extern "C" __global__ void __launch_bounds__({self.threads}) '
                f"{launch.name}({self.parameters('__restrict__ ')}) {{"]
        if arena:
            head.append(self.line(1, (f"extern __shared__ __align__(16) unsigned char nc_arena[];   "
                                      f"{self.comment} {arena} B, dynamic") if dynamic else
                                     (f"__shared__ __align__(16) unsigned char nc_arena[{arena}];   "
                                      f"{self.comment} level 1, the plan's columns")))
        for level in self.levels(launch):
            if level > 1:
                head.append(self.line(1, f"__align__(16) unsigned char {self.arena_name(level)}["
                                         f"{max(self.arena_bytes(launch, level), 1)}];   {self.comment} level {level}, "
                                         "one per thread"))
        if self.stage_values:
            head.append(self.line(1, f"float nc_stage[{self.stage_values}];   {self.comment} staged values "
                                     "(registers)"))
        head.append(self.line(1, "const long nc_b = blockIdx.x;" if launch.grids else "const long nc_b = 0;"))
        if not launch.grids:
            head.append(self.line(1, "(void)nc_b;"))
        return head + body + ["}"]

    def check_limits(self, name, arena, stage, gpu):
        """Typed errors naming the limit and the value for a kernel over the model's shared memory or registers."""
        if arena > gpu.smem_per_block:
            raise CapacityError(f"{name} keeps {arena} B of tiles in shared memory per thread block, over the "
                                f"{gpu.name}'s {gpu.smem_per_block} B (memory.smem_per_block): choose smaller tiles")
        if stage > gpu.registers_per_thread:
            raise CapacityError(f"{name} stages {stage} values per thread ({self.threads} threads per block), over "
                                f"the {gpu.name}'s {gpu.registers_per_thread} registers per thread "
                                "(memory.registers_per_thread): choose smaller tiles or more threads")

    def doprint_plan(self) -> str:
        parts = [PRELUDE]
        ls = launches(self.plan)
        for launch in ls:
            parts.append("\n".join(self._print_Launch(launch)))
        work = [v for v in self.globals_() if v.role not in ("input", "output")]
        entry = ["// the launcher: device pointers in, one launch per kernel, in order",
                 f'extern "C" int nc_run({self.parameters(user=True)}) {{']
        for v in work:
            t = self.ctype(v.name)
            entry.append(self.line(1, f"{t} *{ident(v.name)} = nullptr;"))
            entry.append(self.line(1, f"cudaMalloc((void **)&{ident(v.name)}, "
                                      f"{int(self.nominal(v.size))} * sizeof({t}));   {self.comment} workspace"))
        for launch in ls:
            info = self.kernels[launch.name]
            extra = ""
            if info["dynamic"]:
                entry.append(self.line(1, f"cudaFuncSetAttribute({launch.name}, "
                                          f"cudaFuncAttributeMaxDynamicSharedMemorySize, {info['smem']});"))
                extra = f", {info['smem']}"
            entry.append(self.line(1, f"{launch.name}<<<{launch.blocks}, {self.threads}{extra}>>>"
                                      f"({self.arguments()});"))
        for v in work:
            entry.append(self.line(1, f"cudaFree({ident(v.name)});"))
        entry.append(self.line(1, "return (int)cudaDeviceSynchronize();"))
        parts.append("\n".join(entry + ["}"]))
        return "\n\n".join(parts) + "\n"


def model_for(arch, preferred=None):
    """The hardware model of a CUDA architecture (``"sm_90"``, ``90``, ``"9.0"``): the preferred one if it
    matches, else the first shipped model with that compute capability."""
    digits = re.sub(r"\D", "", str(arch))
    if len(digits) < 2:
        raise CodegenError(f"architecture {arch!r}: give it as 'sm_90', 90 or '9.0'")
    cc = f"{digits[:-1]}.{digits[-1]}"
    if preferred is not None and preferred.compute_capability == cc:
        return preferred
    for name in models():
        gpu = load(name)
        if gpu.compute_capability == cc:
            return gpu
    raise CodegenError(f"no hardware model has compute capability {cc} (for {arch!r}); models: {models()}")


class CudaKernel(GeneratedKernel):
    """The CUDA kernel: ``k.compile(arch="sm_90")`` returns what ptxas reports (no GPU needed)."""

    backend = "cuda"
    suffix = ".cu"

    def compile(self, arch="sm_90") -> dict:
        """``nvcc -cubin -Xptxas -v``: ``registers``, ``spills`` (bytes stored), ``smem`` (static shared bytes,
        the most over the kernels), per ``kernels``, beside the plan's ``estimate`` (staged values per thread)."""
        digits = re.sub(r"\D", "", str(arch))
        gpu = model_for(arch, self.printer.hardware)
        for name, info in self.printer.kernels.items():
            self.printer.check_limits(name, info["smem"], info["stage"], gpu)
        nvcc = tool("nvcc", env="NVCC", fallback=("/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc"),
                    purpose="compile the CUDA kernel (pip install nvidia-cuda-nvcc, or the CUDA toolkit)")
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "kernel.cu"
            src.write_text(self.source)
            run = subprocess.run([nvcc, f"-arch=sm_{digits}", "-cubin", "-Xptxas", "-v", "-o",
                                  str(Path(tmp) / "kernel.cubin"), str(src)], capture_output=True, text=True)
        if run.returncode != 0:
            raise CodegenError(f"nvcc rejected the generated CUDA kernel for sm_{digits}:\n{run.stderr[-3000:]}")
        kernels = parse_ptxas(run.stderr)
        return {"arch": f"sm_{digits}", "hardware": gpu.name,
                "registers": max((k["registers"] for k in kernels.values()), default=0),
                "spills": max((k["spills"] for k in kernels.values()), default=0),
                "smem": max((k["smem"] for k in kernels.values()), default=0),
                "estimate": {"registers": max((k["stage"] for k in self.printer.kernels.values()), default=0),
                             "smem": max((k["smem"] for k in self.printer.kernels.values()), default=0)},
                "kernels": kernels}

    def launcher(self) -> str:
        ins, outs = self.shapes()
        return LAUNCHER.format(ins=ins, outs=outs)


def parse_ptxas(text: str) -> dict:
    """Per kernel: ``registers``, ``spills`` (spill stores, bytes), ``stack`` (bytes), ``smem`` (static, bytes)."""
    out, current = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line) or re.search(r"Function properties for (\w+)", line)
        if m:
            current = out.setdefault(m.group(1), {"registers": 0, "spills": 0, "stack": 0, "smem": 0})
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
            current["smem"] = int(s.group(1)) if s else 0
    return out


LAUNCHER = '''"""Build kernel.cu into a shared library and run it on a GPU with torch: python launch.py."""
import ctypes, pathlib, subprocess
import torch

here = pathlib.Path(__file__).parent
subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-o", "kernel.so", "kernel.cu"], cwd=here, check=True)
lib = ctypes.CDLL(str(here / "kernel.so"))
ins = [torch.randn(*s, device="cuda") for s in {ins}]
outs = [torch.empty(*s, device="cuda") for s in {outs}]
assert lib.nc_run(*[ctypes.c_void_p(t.data_ptr()) for t in ins + outs]) == 0
print([o.shape for o in outs])
'''


def cuda(plan, *, threads: int = 128, hardware="h100-sxm5") -> CudaKernel:
    """The CUDA C++ kernel of ``plan`` (see the module docstring)."""
    printer = CudaPrinter(plan, threads=threads, hardware=hardware)
    return CudaKernel(plan, printer.doprint_plan(), printer)
