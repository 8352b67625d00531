"""Triton: one program per Grid index, on-chip variables as block tensors, a ``for`` loop per Stream.

The same printer over the same IR (:class:`~napkin_cat.codegen.printer.CodePrinter`), in Triton's terms:

=================  ===========================================================================
plan               Triton
=================  ===========================================================================
Grid loops         ``tl.program_id(0)``, decoded into the loop indices (Grids nested along one
                   axis: a program per innermost tile); the axis the streamed inputs do not
                   carry varies fastest (blocks that share their streamed tiles run together
                   and meet them in L2)
Stream loop        ``for i in range(trips)``; the stream's state is the loop-carried tensors
on-chip variable   a block tensor, each axis padded to a power of two (at least 16, ``tl.dot``'s
                   smallest side), an axis of extent 1 dropped; its current extents make its mask;
                   a stream's state is fp32 whatever its format (the accumulators)
sizes              an axis size no on-chip shape or parameter depends on is a runtime argument
                   (sequence lengths, batch, heads); tiles are ``tl.constexpr``-like literals.
                   Where the plan's tiles divide its sizes, a kernel without masks is printed
                   beside the masked one and the launcher picks it when the sizes allow
                   (:mod:`~napkin_cat.codegen.triton.host`)
Load / Store       ``tl.load`` / ``tl.store`` with the ragged edge masked (``other=0``)
contraction        ``tl.dot`` for a matrix product: on 16-bit (or fp8) operands of one format, the
                   tensor cores in that format with an fp32 accumulator (``acc=`` when the
                   product is summed into a state); on fp32 operands at ``precision``
                   (``"ieee"``: exact fp32 products, ``"tf32"``); else a broadcast product summed
                   over the contracted axes
SoftMax family     ``tl.max`` / ``tl.exp`` / ``tl.sum`` per row, masked scores at −∞, the −∞-safe δ
views between      no kernel: the launcher binds a rename's output to its input's buffer
kernels            (:mod:`~napkin_cat.codegen.triton.views`); anything else outside a kernel is refused
=================  ===========================================================================

Every value computed is set to 0 outside its mask, so padding never reaches a sum; a reduction
masks its input with its identity.  Split and join have no form here (a tensor cannot be cut at a
runtime offset): they raise :class:`~napkin_cat.codegen.errors.UnknownKindError`.

>>> import napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 5, "b": 6, "c": 4, "s_b": 3, "g_a": 2})
>>> src = TritonPrinter(p).doprint_plan()
>>> "tl.dot(" in src and "for i_b in range(0, (b + 2) // 3):" in src      # b is a runtime size
True
>>> "for i_b in range(0, 2):" in TritonPrinter(p, runtime=False).doprint_plan()
True
"""
from __future__ import annotations

from dataclasses import replace

import sympy

from napkin_cat.codegen.triton import host
from napkin_cat.codegen.errors import CodegenError
from napkin_cat.codegen.launch import launches
from napkin_cat.codegen.printer import CodePrinter, ident
from napkin_cat.codegen.triton.indices import TritonIndexKindsMixin
from napkin_cat.codegen.triton.structures import TritonKindsMixin
from napkin_cat.codegen.triton.trips import TritonTripsMixin
from napkin_cat.codegen.triton.views import aliases, is_kernel_launch
from napkin_cat.plan.ir import GridLoop, Load, Ref, StreamLoop, walk, reads, writes
from napkin_cat.syntax.dtype import as_dtype

PRELUDE = '''import torch
import triton
import triton.language as tl


@triton.jit
def nc_tanh(x):
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


@triton.jit
def nc_gelu(x):
    return 0.5 * x * (1.0 + nc_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
'''


#: operand formats ``tl.dot`` takes to the tensor cores as they are (products in that format, fp32 sums)
DOT_FORMATS = ("fp16", "bf16", "fp8")
PRECISIONS = ("ieee", "tf32", "tf32x3")
#: the most warps of a Triton program: a thread block holds at most 1024 threads (32 warps) on NVIDIA GPUs
MAX_WARPS = 32
#: the deepest software pipeline asked of Triton: every stage keeps another copy of each streamed tile in shared
#: memory, which holds a handful
MAX_STAGES = 16
#: a global array's pointer type in a Triton signature
SIGNATURE = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "fp8": "fp8e4nv", "int32": "i32", "bool": "i1"}


def divides_always(full, tile: int) -> bool:
    """Whether ``tile`` divides ``full`` (a polynomial in sizes with integer coefficients) at every integer value of
    its sizes: every coefficient a multiple of ``tile`` (sufficient; a tile of 1 always divides).

    >>> n, m = sympy.symbols("n m", integer=True)
    >>> divides_always(4*n + 8*m, 4), divides_always(n, 1), divides_always(2*n + 1, 2), divides_always(n, 4)
    (True, True, False, False)
    """
    if tile == 1:
        return True
    try:
        poly = sympy.Poly(sympy.expand(full), *sorted(full.free_symbols, key=str))
    except sympy.PolynomialError:
        return False
    return all(c.is_Integer and int(c) % tile == 0 for c in poly.coeffs())


def padded(n: int) -> int:
    """A block side: the next power of two, at least 16."""
    p = 16
    while p < n:
        p *= 2
    return p


class TritonPrinter(TritonTripsMixin, TritonIndexKindsMixin, TritonKindsMixin, CodePrinter):
    """Triton (Python).  ``precision``: ``tl.dot``'s input precision on fp32 operands (``"ieee"``: exact fp32
    products); ``runtime``: the sizes passed at run time (True: every eligible one, False: none, or names);
    ``num_warps``, ``num_stages``: the launch (default: read off the plan, :mod:`.host`);
    ``smem_per_block``: the shared memory the stages must fit (bytes; Hopper's by default)."""

    backend = "triton"
    dialect = "triton"
    dtypes = {"fp32": "tl.float32", "fp16": "tl.float16", "bf16": "tl.bfloat16", "fp8": "tl.float8e4nv",
              "int32": "tl.int32", "bool": "tl.int1"}
    torch_dtypes = {"fp32": "torch.float32", "fp16": "torch.float16", "bf16": "torch.bfloat16"}
    #: ``{max}(a, b)``, ``{min}(a, b)``, ``{exp}(x)`` in a form, and the functions of libm's (C's helper names, so one
    #: template such as ``{sqrt}({0})`` prints in C and Triton alike) that triton.language has
    helpers = {"max": "tl.maximum", "min": "tl.minimum", "exp": "tl.exp", "sqrt": "tl.sqrt", "log": "tl.log",
               "sin": "tl.sin", "cos": "tl.cos", "fabs": "tl.abs", "erf": "tl.erf", "fma": "tl.fma",
               "floor": "tl.floor", "log2": "tl.log2", "exp2": "tl.exp2"}
    min_template = "tl.minimum({0}, {1})"
    max_template = "tl.maximum({0}, {1})"
    div_template = "{0} // {1}"
    and_template = "({0} & {1})"
    or_template = "({0} | {1})"
    not_template = "(not {0})"
    where_template = "tl.where({0}, {1}, {2})"
    comment = "#"
    ident = staticmethod(ident)
    dot_formats = DOT_FORMATS

    def __init__(self, plan, *, precision: str = "ieee", runtime=True, num_warps: int | None = None,
                 num_stages: int | None = None, smem_per_block: int | None = None):
        if precision not in PRECISIONS:
            raise CodegenError(f"precision {precision!r}: tl.dot's input precision on fp32 operands is one of "
                               f"{PRECISIONS}")
        super().__init__(plan, precision=precision)
        self.precision = precision
        #: views between kernels, output → input: the launcher binds the output to the input's buffer (:mod:`.views`)
        self.aliases = aliases(self.plan)
        self.temps = 0
        self.runtime = host.runtime_sizes(self.plan, runtime)
        fixed = {e for t in self.block_tables.values() for _, start, extent in t.loop.data.box
                 for e in sympy.sympify(start + extent).free_symbols if e in self.plan.sizes}
        if fixed & set(self.runtime):
            if runtime is not True:
                raise CodegenError(f"runtime sizes {sorted(map(str, fixed & set(self.runtime)))} index a block table "
                                   "(its shape is the plan's trips): they are fixed where a stream skips by the "
                                   "data's block mask")
            self.runtime = tuple(e for e in self.runtime if e not in fixed)
        for s in self.runtime:
            self.sizes.pop(s, None)
        self._nominal.clear()       # what was substituted at the sizes before the runtime ones were let go
        self.indices = {s.index for s in walk(self.plan.body) if isinstance(s, (GridLoop, StreamLoop))}
        self.even = True            # printing the variant that takes the plan's divisibility for granted
        self.assumed: dict = {}     # launch name -> the (full, tile) pairs its even variant assumed divisible
        self._assumed: set = set()
        for name, n, most in (("num_warps", num_warps, MAX_WARPS), ("num_stages", num_stages, MAX_STAGES)):
            if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= most):
                raise CodegenError(f"{name} must be a positive int of at most {most}, got {n!r}")
        self.num_warps = num_warps or host.num_warps(self)
        self.num_stages = num_stages or host.num_stages(self, smem_per_block or host.SMEM_PER_BLOCK)

    def number(self, value) -> str:
        v = float(value)
        return f'float("{v}")' if v != v or v in (float("inf"), float("-inf")) else repr(v)

    # ------------------------------------------------------------------ sizes: runtime, even, extents
    def _divides(self, full, tile) -> bool:
        """Whether ``tile`` divides ``full`` in the variant being printed (runtime sizes: as at the plan's).  A
        division that holds at every value of the runtime sizes (:func:`divides_always`: a tile of 1, ``2·n`` by 2)
        is no assumption: the even variant alone is printed where it made no other."""
        if not (tile.is_Integer and full.is_number is not None):
            return False
        if full.is_Integer:
            return int(full) % int(tile) == 0
        if divides_always(full, int(tile)):
            return True
        if self.even and full.free_symbols <= set(self.runtime):
            at_plan = full.subs(self.plan.sizes)
            if at_plan.is_Integer and int(at_plan) % int(tile) == 0:
                self._assumed.add((full, int(tile)))
                return True
        return False

    def extent_of(self, loop) -> sympy.Expr:
        full, tile = self.nominal(loop.full), self.nominal(loop.tile)
        return tile if self._divides(full, tile) else sympy.Min(tile, full - loop.index * tile)

    def enter(self, loop) -> tuple:
        """Bind the tile to its extent's symbol only where the last tile can be partial."""
        if not isinstance(loop.tile, sympy.Symbol) or self.extent_of(loop).is_Integer:
            return None
        return super().enter(loop)

    def tidy(self, e) -> sympy.Expr:
        """``Min(T, F − T·i) → T`` for a loop index ``i`` where ``T`` divides ``F`` (a slice of a divided axis)."""
        def full_tile(m):
            for t in (a for a in m.args if a.is_Integer):
                for b in m.args:
                    idx = b.free_symbols & self.indices
                    if b == t or len(idx) != 1:
                        continue
                    (i,) = idx
                    rest = sympy.expand(b + t * i)
                    if sympy.expand(b).coeff(i) == -t and not rest.has(i) and self._divides(rest, t):
                        return t
            return m
        return sympy.sympify(e).replace(lambda x: isinstance(x, sympy.Min), full_tile)

    def strides(self, var: str) -> dict:
        """Row-major strides at the variable's shape: axis → expression (runtime sizes kept as symbols)."""
        out, step = {}, sympy.Integer(1)
        for a, e in reversed(self.variables[var].shape):
            out[a] = step
            step = step * self.nominal(e)
        return out

    def blocks(self, launch) -> sympy.Expr:
        """Programs a launch runs: ``Π_a N(a, tiles along a)``, the one count (runtime sizes symbolic)."""
        return sympy.Mul(*[self.count(c) for c in launch.chains])

    def chain_order(self, launch) -> list:
        """The launch's chains of Grids (one per axis), the fastest-varying last: an axis fewer streamed inputs
        carry varies faster (consecutive programs then read the same streamed tiles, from L2)."""
        streamed = [self.variables[s.src.var] for loop in walk(launch.body) if isinstance(loop, StreamLoop)
                    for s in loop.body if isinstance(s, Load) and self.variables[s.src.var].level == 0]
        carried = {c: sum(c[0].axis in v.axes for v in streamed) for c in launch.chains}
        return sorted(launch.chains, key=lambda c: -carried[c])

    def radix(self, counts: list, block: str) -> list[str]:
        """The mixed radix of :meth:`CodePrinter.radix` with runtime counts (``//``, the products printed)."""
        out, div = [], None
        for k, n in enumerate(reversed(counts)):
            t = self.code(n)
            t = t if t.isidentifier() or t.isdigit() else f"({t})"
            q = block if div is None else f"{block} // {div}"
            out.append(q if k == len(counts) - 1 else f"({q}) % {t}")
            div = t if div is None else f"({div} * {t})"
        return list(reversed(out))

    # ------------------------------------------------------------------ tensors
    def key(self, var, axis) -> tuple:
        return axis, int(self.nominal(dict(self.variables[var].shape)[axis]))

    def block_axes(self, var) -> list:
        """The axes of ``var``'s block tensor: an on-chip axis of extent 1 is dropped."""
        v = self.variables[var]
        return list(v.axes) if v.level == 0 else [a for a in v.axes if self.key(var, a)[1] != 1]

    def fmt(self, var) -> str:
        """The format a tensor holds: a stream's state (an accumulator) is fp32, the rest their plan's."""
        v = self.variables[var]
        return "fp32" if v.level > 0 and v.role == "state" else v.dtype

    def arange(self, var, axis) -> str:
        a, n = self.key(var, axis)
        return f"r_{ident(a)}_{n}"

    def shape(self, var) -> list[int]:
        return [padded(self.key(var, a)[1]) for a in self.block_axes(var)]

    def bc(self, var, k) -> str:
        """The index vector of axis ``k`` of ``var``, broadcast to the variable's rank."""
        axes = self.block_axes(var)
        name = self.arange(var, axes[k])
        return name if len(axes) == 1 else name + "[" + ", ".join(":" if i == k else "None"
                                                                   for i in range(len(axes))) + "]"

    def mask(self, var, extents=None) -> str | None:
        """``var``'s mask in the current trip: each axis below its extent (None if nothing is masked)."""
        terms = []
        for k, a in enumerate(self.block_axes(var)):
            e = self.tidy(extents[a] if extents else self.current(dict(self.variables[var].shape)[a]))
            if not (e.is_Integer and int(e) == padded(self.key(var, a)[1])):
                terms.append(f"({self.bc(var, k)} < {self.code(e)})")
        return " & ".join(terms) or None

    def value(self, ref) -> str:
        """An on-chip variable as an fp32 expression."""
        if not ref.whole:
            raise CodegenError(f"the triton backend reads on-chip tensors whole; {self.ref(ref)} is a slice")
        if self.full_trip is not None and ref.var in self.full_trip.conditions:
            return "1.0"       # a full trip's mask: true on every pair of its block
        return ident(ref.var) if self.fmt(ref.var) == "fp32" else f"{ident(ref.var)}.to(tl.float32)"

    def assign(self, ref, expr, depth) -> list[str]:
        if not ref.whole:
            raise CodegenError(f"the triton backend writes on-chip tensors whole; {self.ref(ref)} is a slice "
                               "(a Grid inside a kernel writing part of a tile has no Triton form)")
        m = self.mask(ref.var)
        if m:
            expr = f"tl.where({m}, {expr}, 0.0)"
        dt = self.fmt(ref.var)
        if dt == "bool":       # a mask: true where the value is not 0
            expr = f"(({expr}) != 0.0)"
        elif dt != "fp32":
            expr = f"({expr}).to({self.dtypes[dt]})"
        return [self.line(depth, f"{ident(ref.var)} = {expr}")]

    def align(self, expr: str, have: list, want: list, *, full_var=None) -> str:
        """``expr`` over axes ``have`` as a tensor over ``want`` (permuted, new axes inserted; broadcast to
        ``full_var``'s padded shape if given)."""
        kept = [a for a in want if a in have]
        if any(a not in want for a in have):
            raise CodegenError(f"cannot align axes {have} to {want}")
        perm = [have.index(a) for a in kept]
        if perm != list(range(len(perm))):
            expr = f"tl.permute({expr}, ({', '.join(map(str, perm))}{',' if len(perm) == 1 else ''}))"
        if len(kept) < len(want) and kept:
            expr = f"{expr}[{', '.join(':' if a in have else 'None' for a in want)}]"
        if full_var is not None and len(kept) < len(want):
            expr = f"tl.broadcast_to({expr}, ({', '.join(map(str, self.shape(full_var)))},))"
        return expr

    def axes(self, ref) -> list:
        return self.block_axes(ref.var)

    def temp(self, what: str) -> str:
        self.temps += 1
        return f"t{self.temps}_{what}"

    # ------------------------------------------------------------------ transfers, fills, copies
    def _global(self, glob, tile):
        """``(offsets, mask)`` of the elements of the global ref ``glob`` on the grid of the tensor ``tile``."""
        names, extents = {}, {}
        st = self.strides(glob.var)
        kept = self.axes(tile)
        off = sympy.Integer(0)
        for a in self.variables[tile.var].axes:
            rng = glob.range(a)
            off += (self.nominal(rng.start) if rng is not None else 0) * st[a]
            if a in kept:
                extents[a] = self.ext(glob, a)
                names[a] = self.bc(tile.var, kept.index(a))
        for a in self.variables[glob.var].axes:      # one part of a split's partials: an axis the tile lacks
            rng = glob.range(a)
            if a not in self.variables[tile.var].axes and rng is not None and rng.tile == 1:
                off += self.nominal(rng.start) * st[a]
        terms = [self.code(off)] if off != 0 else []
        for a in kept:
            s = self.code(st[a])
            s = s if s.isidentifier() or s.isdigit() else f"({s})"
            terms.append(names[a] if st[a] == 1 else f"{names[a]} * {s}")
        return " + ".join(terms) or "0", self.mask(tile.var, extents)

    def _print_Load(self, s, depth):
        if self.variables[s.src.var].level > 0:
            return self.assign(s.dst, self.value(s.src), depth)
        off, m = self._global(s.src, s.dst)
        zero = "0" if self.variables[s.src.var].dtype in ("int32", "bool") else "0.0"
        load = f"tl.load({ident(s.src.var)} + {off}" + (f", mask={m}, other={zero})" if m else ")")
        if self.fmt(s.dst.var) != self.variables[s.src.var].dtype:
            load += f".to({self.dtypes[self.fmt(s.dst.var)]})"
        return [self.line(depth, f"# {self.ref(s.dst)} ← load {self.ref(s.src)}"),
                self.line(depth, f"{ident(s.dst.var)} = {load}")]

    def _print_Store(self, s, depth):
        if self.variables[s.dst.var].level > 0:
            return self.assign(s.dst, self.value(s.src), depth)
        off, m = self._global(s.dst, s.src)
        v = ident(s.src.var)
        if self.variables[s.dst.var].dtype != self.fmt(s.src.var):
            v += f".to({self.dtypes[self.variables[s.dst.var].dtype]})"
        return [self.line(depth, f"# {self.ref(s.dst)} ← store {self.ref(s.src)}"),
                self.line(depth, f"tl.store({ident(s.dst.var)} + {off}, {v}" + (f", mask={m})" if m else ")"))]

    def _print_Copy(self, s, depth):
        if self.variables[s.dst.var].level == 0:
            return self._print_Store(s, depth)
        return self.assign(s.dst, self.value(s.src), depth)

    def _print_Combine(self, s, depth):
        """``dst ← dst ⊕ src`` (a region's partial result folded into a stream's state)."""
        op = "+" if s.monoid == "sum" else s.monoid
        return [self.line(depth, f"# {self.ref(s.dst)} {op}= {self.ref(s.src)}")] + \
            self.assign(s.dst, self.combine(s.monoid, self.value(s.dst), self.value(s.src)), depth)

    def _print_Fill(self, s, depth):
        v = s.var
        return [self.line(depth, f"# {v} ← {s.value:g}")] + self.assign(
            Ref(v), f"tl.full([{', '.join(map(str, self.shape(v)))}], {self.number(s.value)}, tl.float32)", depth)

    # ------------------------------------------------------------------ launches
    def globals_(self) -> list:
        vs = [v for v in self.plan.variables if v.level == 0]
        order = {"input": 0, "output": 1}
        return sorted(vs, key=lambda v: order.get(v.role, 2))

    def kernel_launches(self) -> list:
        """The plan's launches that run a kernel (its views between kernels are the launcher's aliases), numbered
        consecutively (``nc_kernel0``, ``nc_kernel1``, … in launch order: a view between them takes no number)."""
        kernels = [launch for launch in launches(self.plan) if is_kernel_launch(launch)]
        return [replace(launch, index=k) for k, launch in enumerate(kernels)]

    def signature(self) -> dict:
        """Per kernel printed (ragged variants included): its parameters' Triton types."""
        types = [f"*{SIGNATURE[v.dtype]}" for v in self.globals_()] + ["*i8"] * len(self.block_tables) + \
            ["i32"] * len(self.runtime)
        out = {}
        for launch in self.kernel_launches():
            out[launch.name] = types
            if launch.name in self.assumed:
                out[launch.name + "_ragged"] = types
        return out

    def _print_Launch(self, launch, depth=0, name=None):
        if not is_kernel_launch(launch):     # views were aliased and anything else refused in __init__ (.views)
            raise CodegenError(f"launch {launch.name} runs no kernel: the launcher aliases views, it prints no kernel")
        params = ", ".join([ident(v.name) for v in self.globals_()] + [t.name for t in self.block_tables.values()] +
                           [ident(s.name) for s in self.runtime])
        lines = ["@triton.jit", f"def {name or launch.name}({params}):"]
        if launch.grids:
            lines.append(self.line(1, "nc_b = tl.program_id(0)"))
        for index, value in self.decode(launch, "nc_b"):
            lines.append(self.line(1, f"{index} = {value}"))
        saved = []
        for g in launch.grids:
            saved.append(self.extents.get(g.tile))
            bound = self.enter(g)
            if bound:
                lines.append(self.line(1, f"{ident(bound[0].name)} = {self.code(bound[1])}   # {self.loop_comment(g)}"))
        used = set()
        for s in walk(launch.body):
            used |= set(reads(s)) | set(writes(s))
        ranges = {}
        for v in self.plan.variables:
            if v.name in used and v.level > 0:
                for a in self.block_axes(v.name):
                    ranges[self.arange(v.name, a)] = padded(self.key(v.name, a)[1])
        lines += [self.line(1, f"{r} = tl.arange(0, {n})") for r, n in sorted(ranges.items())]
        lines += self._lines(launch.body, 1)
        for g, sv in zip(reversed(launch.grids), reversed(saved)):
            self.leave(g, sv)
        return lines

    def stream_load_bytes(self) -> int:
        """Padded bytes of the tiles loaded inside Stream loops (what each extra pipelining stage buffers)."""
        total = 0
        for loop in walk(self.plan.body):
            if isinstance(loop, StreamLoop):
                for s in loop.body:
                    if isinstance(s, Load) and self.variables[s.src.var].level == 0:
                        n = 1
                        for side in self.shape(s.dst.var):
                            n *= side
                        total += n * as_dtype(self.variables[s.dst.var].dtype).bytes
        return total

    def doprint_plan(self) -> str:
        """The kernels (each launch even, and ragged where the even one assumed a division), then the launcher."""
        parts = [PRELUDE]
        ls = self.kernel_launches()
        for launch in ls:
            self.even, self._assumed = True, set()
            parts.append("\n".join(self._print_Launch(launch)))
            if self._assumed:
                self.assumed[launch.name] = frozenset(self._assumed)
                self.even, self._assumed = False, set()
                parts.append("\n".join(self._print_Launch(launch, name=launch.name + "_ragged")))
        self.even = True
        parts.append("\n".join(host.host(self, ls)))
        return "\n\n\n".join(parts) + "\n"
