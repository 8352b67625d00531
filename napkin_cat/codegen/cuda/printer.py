"""CUDA C++: one thread block per Grid index (Grids nested along one axis: per innermost tile), the on-chip
variables in one ``__shared__`` arena.

The statements are the C kernel's (:mod:`napkin_cat.codegen.c.family`): the same loop nest, extents,
masks, addresses, arena offsets and element formulas.  What differs: an element loop is one flat loop
strided by ``threadIdx.x`` (each thread decodes its element's indices), a barrier follows every
statement, the arena is ``__shared__`` and the staging storage is a per-thread array (registers).

**A reference, not a fast kernel.**  Every value is fp32 arithmetic in scalar loops over the shared-memory
arena, with one ``__syncthreads()`` per statement; there is no ``mma.sync``/WMMA/``wgmma`` (no tensor
cores), no vectorised or asynchronous loads, no pipelining of a stream's loads.  The tensor-core path is
the Triton backend's (:mod:`napkin_cat.codegen.triton.kernel`).  What this backend is for is an *executed*
check of the plan: the loop nest, masks and arena offsets run on a GPU (``k(*arrays)`` against
``p(*arrays)``), and the plan's shared memory is confirmed byte for byte by ptxas (``k.compile``, no GPU
needed) and by the driver (``k.attributes()``, on a GPU).

Shared memory.  An arena up to the CUDA language's static window (48 KiB) is a static ``__shared__``
array, which ptxas counts; a larger one is dynamic shared memory (``extern __shared__``), opted in by the
launcher (``cudaFuncSetAttribute`` in ``nc_configure``) and asked for by the launch, which ptxas cannot
count.  So ``k.compile(arch=...)`` reports ``smem_static`` (ptxas), ``smem_dynamic`` (the launch's) and
``smem``, their sum, which equals ``p.smem_bytes`` (the plan's peak at level 1) for the kernel of the
largest arena; :mod:`~napkin_cat.codegen.cuda.kernel` builds, runs and asks the driver.  The register
estimate is the values one thread holds: what it stages, and its thread-level variables (a Grid inside a
block around a kernel one level down runs one group per thread, its variables in a per-thread arena).
Those arrays are indexed by counters, so ptxas keeps them in the thread's stack frame (local memory,
cached in L1): the report shows them as ``stack`` bytes beside ``registers``.

Limits come from the hardware model of the target (``nc.hardware.load``): a kernel whose arena exceeds
``memory.smem_per_block`` or whose staged values exceed ``memory.registers_per_thread`` raises
:class:`~napkin_cat.hardware.errors.CapacityError` naming the limit and the value.

>>> import napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 5, "b": 6, "c": 4, "s_b": 3, "g_a": 2})
>>> k = cuda(p)
>>> "__shared__ __align__(16) unsigned char nc_arena[" + str(p.smem_bytes) + "];" in k.source
True
>>> k.printer.kernels["nc_kernel0"]["dynamic"], STATIC_WINDOW
(False, 49152)
"""
from __future__ import annotations

from napkin_cat.codegen.c.family import CFamilyPrinter
from napkin_cat.codegen.cuda.kernel import CudaKernel, model_for, parse_ptxas  # noqa: F401 (model_for: the CLI's)
from napkin_cat.codegen.launch import launches
from napkin_cat.codegen.printer import ident
from napkin_cat.hardware import CapacityError, load
from napkin_cat.plan.ir import GridLoop, Kernel, walk

#: the CUDA C++ language's limit on static ``__shared__`` data per block (Programming Guide, "Shared Memory");
#: beyond it, shared memory must be dynamic whatever the GPU offers (its own limit is the model's)
STATIC_WINDOW = 48 * 1024

#: the header that declares each 16-bit storage format's type, included only by a kernel that holds values of it:
#: parsing the two is about a quarter of a small kernel's compile (measured, nvcc 13.0, ``-cubin`` for sm_90, the
#: fp32 FlashAttention of the README: 1.04 → 0.76 s of CPU without them, five runs each; the same cubin)
HEADERS = {"fp16": "cuda_fp16.h", "bf16": "cuda_bf16.h"}

PRELUDE = r"""#include <math.h>

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
    dialect = "cuda"      # the kinds' CUDA forms: their C forms unless they have their own
    dtypes = {"fp32": "float", "fp16": "__half", "bf16": "__nv_bfloat16", "int32": "int", "bool": "unsigned char"}

    def __init__(self, plan, *, threads: int = 128, hardware="h100-sxm5"):
        super().__init__(plan, threads=threads, hardware=hardware)
        self.threads = threads
        self.hardware = hardware if not isinstance(hardware, str) else load(hardware)
        self.kernels: dict = {}     # launch name -> {"smem": arena bytes, "stage": staged values, "dynamic": bool}
        self.in_thread = False      # inside a Grid spread over the threads: one thread runs each group
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise CapacityError(f"threads must be a positive int (threads per block), got {threads!r}")
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

    def headers(self) -> str:
        """``#include`` lines of the :data:`HEADERS` of the formats the kernel's variables hold (none for fp32).

        >>> import napkin_cat as nc
        >>> p = nc.plan(nc.library.matmul(), {"a": 2, "b": 3, "c": 2})
        >>> CudaPrinter(p).headers()
        ''
        """
        held = {v.dtype for v in self.variables.values()}
        return "".join(f"#include <{HEADERS[f]}>\n" for f in sorted(HEADERS) if f in held)

    def doprint_plan(self) -> str:
        parts = [self.headers() + PRELUDE]
        ls = launches(self.plan)
        for launch in ls:
            parts.append("\n".join(self._print_Launch(launch)))
        parts.append(self.host(ls))
        return "\n\n".join(parts) + "\n"

    # ------------------------------------------------------------------ the host side
    def host(self, ls) -> str:
        """The host functions of the shared library (see :mod:`~napkin_cat.codegen.cuda.kernel`): ``nc_configure``
        (the opt-ins to dynamic shared memory), ``nc_run`` (the launcher), ``nc_attributes`` (what the driver
        says of each kernel), and the small helpers a caller without torch needs.  Every one returns a
        ``cudaError_t`` (0: success) that ``nc_error_name``/``nc_error_string`` name."""
        c, t = self.comment, self.indent
        dyn = [(launch.name, self.kernels[launch.name]["smem"]) for launch in ls
               if self.kernels[launch.name]["dynamic"]]
        configure = [f"{c} the launcher's opt-ins to dynamic shared memory (past the static window)",
                     'extern "C" int nc_configure(void) {', f"{t}cudaError_t nc_err = cudaSuccess;"]
        configure += [f"{t}NC_TRY(cudaFuncSetAttribute({n}, cudaFuncAttributeMaxDynamicSharedMemorySize, {b}));"
                      for n, b in dyn] or [f"{t}{c} none: every arena fits the static window"]
        configure += [f"{t}return (int)nc_err;", "}"]
        work = [v for v in self.globals_() if v.role not in ("input", "output")]
        run = [f"{c} the launcher: device pointers in, one launch per kernel, in order; the first CUDA error "
               "stops it (0: success)",
               f'extern "C" int nc_run({self.parameters(user=True)}) {{']
        for v in work:
            run.append(f"{t}{self.ctype(v.name)} *{ident(v.name)} = nullptr;   {c} workspace")
        run.append(f"{t}cudaError_t nc_err = (cudaError_t)nc_configure();")
        for v in work:
            run.append(f"{t}NC_TRY(cudaMalloc((void **)&{ident(v.name)}, {int(self.nominal(v.size))} * "
                       f"sizeof({self.ctype(v.name)})));")
        for launch in ls:
            info = self.kernels[launch.name]
            extra = f", {info['smem']}" if info["dynamic"] else ""
            run.append(f"{t}if (nc_err == cudaSuccess) {{")
            run.append(f"{t}{t}{launch.name}<<<{launch.blocks}, {self.threads}{extra}>>>({self.arguments()});")
            run.append(f"{t}{t}nc_err = cudaGetLastError();")
            run.append(f"{t}}}")
        run.append(f"{t}NC_TRY(cudaDeviceSynchronize());   {c} the caller's timing includes it")
        run += [f"{t}cudaFree({ident(v.name)});" for v in work]
        run += [f"{t}return (int)nc_err;", "}"]
        names = [launch.name for launch in ls]
        attributes = [
            f"{c} what the driver says of kernel k (in launch order), after nc_configure: out[0] static shared bytes,",
            f"{c} out[1] registers, out[2] local bytes per thread, out[3] the most dynamic shared bytes it may use,",
            f"{c} out[4] the dynamic shared bytes its launch asks for, out[5] threads per block launched,",
            f"{c} out[6] the most threads per block, out[7] the binary's architecture (e.g. 90)",
            f'extern "C" int nc_kernels(void) {{ return {len(ls)}; }}',
            'extern "C" int nc_attributes(int kernel, int *out) {',
            f"{t}const void *const nc_fns[] = {{{', '.join(f'(const void *){n}' for n in names) or 'nullptr'}}};",
            f"{t}const int nc_dynamic[] = {{{', '.join(str(dict(dyn).get(n, 0)) for n in names) or '0'}}};",
            f"{t}if (kernel < 0 || kernel >= {len(ls)}) return (int)cudaErrorInvalidValue;",
            f"{t}cudaFuncAttributes nc_a;",
            f"{t}cudaError_t nc_err = (cudaError_t)nc_configure();",
            f"{t}NC_TRY(cudaFuncGetAttributes(&nc_a, nc_fns[kernel]));",
            f"{t}if (nc_err != cudaSuccess) return (int)nc_err;",
            f"{t}out[0] = (int)nc_a.sharedSizeBytes;",
            f"{t}out[1] = nc_a.numRegs;",
            f"{t}out[2] = (int)nc_a.localSizeBytes;",
            f"{t}out[3] = nc_a.maxDynamicSharedSizeBytes;",
            f"{t}out[4] = nc_dynamic[kernel];",
            f"{t}out[5] = {self.threads};",
            f"{t}out[6] = nc_a.maxThreadsPerBlock;",
            f"{t}out[7] = nc_a.binaryVersion;",
            f"{t}return 0;",
            "}"]
        return "\n\n".join([HOST, "\n".join(configure), "\n".join(run), "\n".join(attributes)])


#: the host side every CUDA kernel's library exports beside ``nc_run``: errors by name, the device, and
#: memory for a caller without torch (numpy arrays in and out)
HOST = r"""// ---------------------------------------------------------------- host side
#define NC_TRY(call) do { if (nc_err == cudaSuccess) nc_err = (call); } while (0)

extern "C" const char *nc_error_name(int code) { return cudaGetErrorName((cudaError_t)code); }
extern "C" const char *nc_error_string(int code) { return cudaGetErrorString((cudaError_t)code); }
extern "C" int nc_set_device(int device) { return (int)cudaSetDevice(device); }
extern "C" int nc_malloc(void **ptr, size_t bytes) { return (int)cudaMalloc(ptr, bytes); }
extern "C" int nc_free(void *ptr) { return (int)cudaFree(ptr); }
extern "C" int nc_to_device(void *dst, const void *src, size_t bytes) {
    return (int)cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
}
extern "C" int nc_to_host(void *dst, const void *src, size_t bytes) {
    return (int)cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
}"""


def cuda(plan, *, threads: int = 128, hardware="h100-sxm5") -> CudaKernel:
    """The CUDA C++ kernel of ``plan`` (see the module docstring)."""
    printer = CudaPrinter(plan, threads=threads, hardware=hardware)
    return CudaKernel(plan, printer.doprint_plan(), printer)
