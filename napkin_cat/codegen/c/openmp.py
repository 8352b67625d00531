"""C with OpenMP: the CPU kernel's printer (the CUDA kernel's loop nest, run here), and ``c(plan)``.

The printed source is compiled by ``cc`` and called by ctypes in :mod:`~napkin_cat.codegen.c.kernel`.

One launch per chain of Grid loops: ``#pragma omp parallel for`` over the Grid indices (every Grid of the
chain: query blocks and heads alike; Grids nested along one axis, their innermost tiles), each thread with its
own arena (the on-chip variables at the layout's offsets).  What makes it a CPU kernel rather than the CUDA one
run on a CPU:

* element loops are nested ``for`` loops the compiler vectorises (``-O3 -march=native``, no ``-ffast-math``,
  whose finite-math assumption would break the −∞-safe δ): ``exp`` is ``nc_exp``, a branch-free polynomial
  within 2 ulp; max and min are selects (``nc_fmax``, ``nc_fold_max``: libm's ``fmaxf`` is a call that stays
  in the vector loop); sums run in lanes and the online SoftMax's rows in three passes
  (:mod:`napkin_cat.codegen.c.rows`);
* the layout stages nothing (``layout(unstaged=True)``): no statement computes into a buffer and copies;
* a load of an input's own rows is a pointer into the input (:func:`load_views`): the cache makes the copy;
* a contraction of two operands that is a matrix product (one summed axis, one free axis per operand, any
  shared batch axes, a unit stride in each) is one ``cblas_sgemm`` per batch index when BLAS is used
  (``blas=True``, or ``None``: when ``cblas.h`` is found); otherwise element loops (along the output's
  rows where that row is contiguous), several times slower, and the default ``blas=None`` says so once
  (:class:`~napkin_cat.codegen.errors.BlasMissingWarning`; ``$NAPKIN_BLAS=0`` forces it;
  :mod:`~napkin_cat.codegen.c.blas`);
* gcc 12.2 (Debian 12's) vectorises a conditional read (``m[i] ? x[i] : c``) in a loop of constant trip count
  wrongly at ``-O3 -march=native``: as a masked load, wrong where the mask is held in one or two bytes (a causal
  ``where`` over an 8×8 tile: 12 of 64 values wrong in float, 6 in double) and, with an ``int`` mask, for some
  shapes (a band mask over 9×11: 4 wrong in float).  So masks (``bool`` arrays) are held as ``int`` (the kernel
  takes and gives ``bool`` numpy arrays), and an element's operands are read into locals before its form
  (:meth:`CPrinter.bound`), which gcc selects by a blend;
* ``real="double"``: every real value in double (fp32 arrays are float64 numpy arrays, 8 bytes in the arena,
  libm's ``exp`` for ``nc_exp``, ``cblas_dgemm``): the kernel a float64 tensor runs on
  (:mod:`~napkin_cat.codegen.c.real`).

>>> import napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 5, "b": 6, "c": 4, "s_b": 3, "g_a": 2})
>>> src = CPrinter(p, blas=False).doprint_plan()
>>> "#pragma omp for schedule(dynamic, 1)" in src and "const int e_i_a = NC_MIN(2, 5 - 2*i_a);" in src
True
"""
from __future__ import annotations

from napkin_cat.codegen.c.blas import NO_BLAS_ENV, GemmMixin, blas_available, tell_blas_missing
from napkin_cat.codegen.c.family import CFamilyPrinter
from napkin_cat.codegen.c.kernel import FLAGS, LAUNCHER, MAX_THREADS, REAL_NUMPY, CKernel
from napkin_cat.codegen.c.profile import ProfileMixin
from napkin_cat.codegen.c.real import FLOAT, REALS
from napkin_cat.codegen.c.rows import LANES, PRELUDE as ROWS_PRELUDE, RowsMixin
from napkin_cat.codegen.errors import CodegenError
from napkin_cat.codegen.fusion import fused
from napkin_cat.codegen.printer import ident, launches
from napkin_cat.codegen.layout import variable_bytes
from napkin_cat.plan.ir import Load, walk, writes

#: the printer's names, and those of the kernel object (:mod:`.kernel`) and of BLAS (:mod:`.blas`) imported from here
__all__ = ["c", "CPrinter", "load_views", "PRELUDE", "EXP", "CKernel", "FLAGS", "LAUNCHER", "MAX_THREADS",
           "REAL_NUMPY", "blas_available", "tell_blas_missing", "NO_BLAS_ENV"]

PRELUDE = r"""#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
{blas_include}
#define NC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NC_MAX(a, b) ((a) > (b) ? (a) : (b))

/* max and min that propagate NaN as numpy's do (C99's fmaxf and fminf drop it), as selects: libm's are calls
   in a vector loop.  A SoftMax's row max folds into an accumulator that starts at -inf (+inf) and may drop a
   NaN (the row's sum is NaN then anyway): one vmaxps (vminps). */
static inline {real} nc_fmax({real} a, {real} b) {{ return (a > b || a != a) ? a : b; }}
static inline {real} nc_fmin({real} a, {real} b) {{ return (a < b || a != a) ? a : b; }}
static inline {real} nc_fold_max({real} acc, {real} v) {{ return v > acc ? v : acc; }}
{exp}
static inline {real} nc_sigmoid({real} x) {{ return 1.0{f} / (1.0{f} + nc_exp(-x)); }}
static inline {real} nc_silu({real} x) {{ return x / (1.0{f} + nc_exp(-x)); }}
static inline {real} nc_gelu({real} x) {{
    return 0.5{f} * x * (1.0{f} + tanh{f}(0.7978845608028654{f} * (x + 0.044715{f} * x * x * x)));
}}
static void *nc_alloc(size_t bytes) {{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) return NULL;
    return p;
}}
"""

#: ``nc_exp`` per real type: float's a vectorisable polynomial; double's libm's ``exp`` (correctly rounded to
#: within an ulp: a polynomial of float's degree would round a float64 tensor's values through float's accuracy)
EXP = {"float": "/* exp(x) = 2^n exp(r): n = round(x / ln 2) by the 1.5·2^23 trick (n lands in t's low bits, no "
                "float-to-int\n   conversion), r = x - n ln 2 (Cody-Waite, two steps), 2 exp(r) a degree-6 "
                "near-minimax polynomial, and" + r"""
   2^(n-1) built from t's bits.  At most 2 ulp from exp (checked by the tests); exactly 0 below -125 ln 2
   (2^-125: flushes the lowest binade of normals and the subnormals), +inf above ln FLT_MAX and for +inf,
   NaN for NaN.  Selects only, no call, no branch: an element loop of it vectorises (about 16 vector
   instructions for 16 floats on AVX-512). */
static inline float nc_exp(float x) {
    const float lo = -86.64339798f, hi = 88.72283935546875f;
    const float xc = hi < x ? hi : x;   /* NaN stays NaN */
    const float t = xc * 1.44269504088896341f + 12582912.0f;
    const float n = t - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 2.7673691511e-3f;
    p = p * r + 1.6749631613e-2f;
    p = p * r + 8.3336450160e-2f;
    p = p * r + 3.3332839608e-1f;
    p = p * r + 9.9999982119e-1f;
    p = p * r + 2.0f;
    p = p * r + 2.0f;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits << 23) + 0x3F000000u;   /* 2^(n-1): n - 1 + 127 in the exponent field */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < lo ? 0.0f : p * scale;
}""",
       "double": "static inline double nc_exp(double x) { return exp(x); }"}

class CPrinter(ProfileMixin, GemmMixin, RowsMixin, CFamilyPrinter):
    """C99 with OpenMP; ``blas``: contractions that are matrix products by ``cblas_sgemm``; ``poison``: fill each
    block's arena with NaN first (a test's check that no value is read before it is written); ``real``: the C
    type of every real value (``"float"``, or ``"double"``: fp32 arrays held, computed and exchanged as double,
    libm's double functions, ``cblas_dgemm``; :mod:`~napkin_cat.codegen.c.real`); ``profile``: each statement
    timed (:mod:`~napkin_cat.codegen.c.profile`)."""

    backend = "c"
    dtypes = {"fp32": "float", "fp16": "_Float16", "int32": "int", "bool": "int"}
    held_width = {"bool": 4}     # a mask as wide as an int: gcc 12.2 miscompiles narrower ones (module docstring)
    simd_reduction = "#pragma omp simd reduction({op}:{var})"
    # max and min as selects (the prelude's nc_fmax, nc_fold_max, ...): libm's fmaxf is a call gcc does not vectorise
    fmax, fold_max = "nc_fmax", "nc_fold_max"
    helpers = {**FLOAT.helpers, "max": "nc_fmax", "min": "nc_fmin", "exp": "nc_exp"}
    # a CPU thread stages an aliased output by copying it: a few more arena bytes cost less than that pass
    unstaged_layout = True
    # a trip on which a mask from positions is true on every pair runs without it (FullTrips): in loops of their own
    # where those trips are ranges of the loop's index (codegen/trips.py), else under this test
    if_positions = "if ({condition}) {{   {comment} the mask is true on every pair of this trip: not made, read as true"

    def __init__(self, plan, *, blas: bool | None = None, poison: bool = False, real: str = "float",
                 profile: bool = False):
        if real not in REALS:
            raise CodegenError(f"real={real!r}: the C kernel computes real values as {' or '.join(map(repr, REALS))}")
        if blas is None:
            blas = blas_available()
            if not blas:
                tell_blas_missing()
        self.real = REALS[real]
        self.profile_setup(profile)
        super().__init__(plan, blas=blas, poison=poison, real=real)
        self.blas, self.poison = blas, poison
        self.views = load_views(self)

    def prepared(self, plan):
        """The plan with its elementwise maps fused into their reader (:func:`~napkin_cat.codegen.fusion.fused`):
        the chain over a tile is one loop, and a mask's ``where`` on a full trip reads the scores themselves."""
        return fused(plan)

    # ------------------------------------------------------------------ loads the cache makes
    def declare(self, v) -> str:
        load = self.views.get(v.name)
        if load is None:
            return super().declare(v)
        return (f"const {self.ctype(v.name)} *{ident(v.name)};   {self.comment} "
                f"{'×'.join(str(self.nominal(e)) for _, e in v.shape) or '1'}, a view of {load.src.var}")

    def _print_Load(self, s, depth):
        if self.views.get(s.dst.var) is not s:
            return super()._print_Load(s, depth)
        start = {a: 0 for a in self.variables[s.src.var].axes}
        pointer = f"{ident(s.dst.var)} = {ident(s.src.var)} + {self.code(self.offset(s.src, start))};"
        return [self.line(depth, f"{pointer}   {self.comment} {self.ref(s.dst)} ← view of {self.ref(s.src)} "
                                 "(the cache loads it)")]

    def bound(self, reads: list) -> tuple[list, list]:
        """Each operand read into a local before the element's form: gcc 12.2 if-converts a read inside a
        conditional form (``m ? x[i] : c``) into a masked load and vectorises it wrongly at constant trip counts
        (module docstring); a value read first is selected by a blend, which it vectorises correctly."""
        names = [f"nc_a{k}" for k in range(len(reads))]
        return [f"const {self.real.ctype} {n} = {r};" for n, r in zip(names, reads)], names

    # ------------------------------------------------------------------ element loops: nested, vectorised
    def loop(self, space, body, depth):
        if not space:
            return [self.line(depth, "{")] + [self.line(depth + 1, b) for b in body] + [self.line(depth, "}")]
        return [self.line(depth, b) for b in self.nested(space, body)]

    # ------------------------------------------------------------------ launches and the entry point
    def _print_Launch(self, launch, depth=0):
        self.stage_values = self.row_values = 0
        inner = 2 if launch.grids else 1
        first = self.launch_locals(launch, inner)      # (before the body: its statements name this launch)
        at = depth + inner + (1 if launch.grids else 0)
        body = [self.line(at, f"memset({self.arena_name(lvl)}, 0xff, {max(self.arena_bytes(launch, lvl), 1)});"
                              f"   {self.comment} poison: NaN until written") for lvl in self.levels(launch)
                if self.poison]
        for name, value in self.decode(launch, "nc_b"):
            body.append(self.line(at, f"const int {name} = (int)({value});"))
        body += self.block_body(launch, at)
        alloc, release = first, []
        for level in self.levels(launch):
            name = self.arena_name(level)
            size = self.arena_bytes(launch, level)
            alloc.append(self.line(inner, f"unsigned char *{name} = (unsigned char *)nc_alloc({max(size, 1)});   "
                                          f"{self.comment} level {level}: {size} B, the plan's columns"))
            release.append(self.line(inner, f"free({name});"))
        r = self.real.ctype
        alloc.append(self.line(inner, f"{r} *nc_stage = ({r} *)nc_alloc({max(self.stage_values, 1)} * "
                                      f"sizeof({r}));"))
        release.append(self.line(inner, "free(nc_stage);"))
        if self.row_values:
            alloc.append(self.line(inner, f"{r} *nc_rows = ({r} *)nc_alloc({2 * self.row_values} * sizeof({r}));"
                                          f"   {self.comment} per-row scalars of a SoftMax in passes"))
            release.append(self.line(inner, "free(nc_rows);"))
        out = [f"static void {launch.name}({self.parameters('restrict ')}, int nc_threads) {{"]
        if not launch.grids:
            return out + [self.line(1, "(void)nc_threads;")] + alloc + body + release + ["}"]
        return out + [self.line(1, "#pragma omp parallel num_threads(nc_threads)"), self.line(1, "{")] + alloc + [
            self.line(2, "#pragma omp for schedule(dynamic, 1)"),
            self.line(2, f"for (long nc_b = 0; nc_b < {launch.blocks}; ++nc_b) {{")] + body + [
            self.line(2, "}")] + release + [self.line(1, "}"), "}"]

    def doprint_plan(self) -> str:
        """The whole source: prelude, one function per launch, and ``nc_run`` (the entry point)."""
        r = self.real
        parts = [PRELUDE.format(blas_include="#include <cblas.h>" if self.blas else "", real=r.ctype, f=r.suffix,
                                exp=EXP[r.ctype]) + ROWS_PRELUDE.format(lanes=LANES, real=r.ctype) +
                 self.profile_declaration()]
        ls = launches(self.plan)
        for launch in ls:
            parts.append("\n".join(self._print_Launch(launch)))
        parts += self.profile_definitions()
        work = self.workspace()
        within = [f"void nc_run_in({self.parameters('restrict ')}, int nc_threads) {{   {self.comment} the "
                  "workspace given (the caller keeps it between runs: napkin_cat.codegen.c.workspace)"]
        if self.blas:
            within.append(self.line(1, "openblas_set_num_threads(1);   /* parallel over the Grid, not inside a tile "
                                       "*/"))
        for launch in ls:
            within.append(self.line(1, f"{launch.name}({self.arguments()}, nc_threads);"))
        parts.append("\n".join(within + ["}"]))
        entry = [f"void nc_run({self.parameters('restrict ', user=True)}, int nc_threads) {{"]
        for v in work:
            entry.append(self.line(1, f"{self.ctype(v.name)} *{ident(v.name)} = ({self.ctype(v.name)} *)nc_alloc("
                                      f"{self.layout_bytes(v)});   {self.comment} workspace (level 0)"))
        entry.append(self.line(1, f"nc_run_in({self.arguments()}, nc_threads);"))
        for v in work:
            entry.append(self.line(1, f"free({ident(v.name)});"))
        parts.append("\n".join(entry + ["}"]))
        return "\n\n".join(parts) + "\n"

    def workspace(self) -> list:
        """The level-0 variables that are neither inputs nor outputs, in the entry points' order: the workspace
        ``nc_run`` allocates at each run and ``nc_run_in`` takes (:mod:`~napkin_cat.codegen.c.workspace`)."""
        return [v for v in self.globals_() if v.role not in ("input", "output")]

    def layout_bytes(self, v) -> int:
        return variable_bytes(v, self.sizes, self.width)


def load_views(printer) -> dict:
    """The loads a CPU thread makes by pointing into the input instead of copying: variable → its ``Load``.

    A load qualifies when its tile is the whole destination, its source is an input (never written), nothing
    else writes the destination, the two hold the same format, and every axis of the tile longer than 1 has
    the input's stride (the tile is the input's own rows: a slice of the outermost axes, all of the others).
    The cache then does what the copy did, without the copy's pass over the tile.
    """
    stmts = list(walk(printer.plan.body))
    writers: dict = {}
    for s in stmts:
        for v in writes(s):
            writers[v] = writers.get(v, 0) + 1
    out = {}
    for s in stmts:
        if not isinstance(s, Load) or not s.dst.whole or writers.get(s.dst.var) != 1:
            continue
        dst, src = printer.variables[s.dst.var], printer.variables[s.src.var]
        if src.role != "input" or dst.level == 0 or dst.dtype != src.dtype or dst.axes != src.axes or dst.buffers != 1:
            continue
        sd, ss = printer.strides(dst.name), printer.strides(src.name)
        if all(sd[a] == ss[a] for a, e in dst.shape if int(printer.nominal(e)) > 1):
            out[dst.name] = s
    return out


def c(plan, *, blas: bool | None = None, poison: bool = False, real: str = "float", profile: bool = False) -> CKernel:
    """The C/OpenMP kernel of ``plan`` (see the module docstring); ``real="double"``: in double precision;
    ``profile=True``: each statement timed (:mod:`~napkin_cat.codegen.c.profile`, ``k.statement_times()``)."""
    printer = CPrinter(plan, blas=blas, poison=poison, real=real, profile=profile)
    return CKernel(plan, printer.doprint_plan(), printer)
