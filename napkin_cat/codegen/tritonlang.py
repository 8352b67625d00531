"""Triton: one program per Grid index, on-chip variables as block tensors, a ``for`` loop per Stream.

The same printer over the same IR (:class:`~napkin_cat.codegen.printer.CodePrinter`), in Triton's terms:

=================  ===========================================================================
plan               Triton
=================  ===========================================================================
Grid loops         ``tl.program_id(0)``, decoded into the loop indices (innermost fastest)
Stream loop        ``for i in range(trips)``; the stream's state is the loop-carried tensors
on-chip variable   a block tensor, each axis padded to a power of two (at least 16, ``tl.dot``'s
                   smallest side); its current extents make its mask
Load / Store       ``tl.load`` / ``tl.store`` with the ragged edge masked (``other=0``)
contraction        ``tl.dot`` (``input_precision="ieee"``: fp32 products) for a matrix product,
                   else a broadcast product summed over the contracted axes
SoftMax family     ``tl.max`` / ``tl.exp`` / ``tl.sum`` per row, masked scores at −∞, the −∞-safe δ
=================  ===========================================================================

Every value computed is set to 0 outside its mask, so padding never reaches a sum; a reduction
masks its input with its identity.  Split and join have no form here (a tensor cannot be cut at a
runtime offset): they raise :class:`~napkin_cat.codegen.errors.UnknownKindError`.

>>> import napkin_cat as nc
>>> p = nc.plan(nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a"),
...             {"a": 5, "b": 6, "c": 4, "s_b": 3, "g_a": 2})
>>> src = TritonPrinter(p).doprint_plan()
>>> "tl.dot(" in src and "for i_b in range(0, 2):" in src
True
"""
from __future__ import annotations

from napkin_cat.codegen.errors import CodegenError
from napkin_cat.codegen.printer import CodePrinter, ident, launches
from napkin_cat.codegen.tritonkinds import TritonKindsMixin
from napkin_cat.plan.ir import Ref, walk, reads, writes

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


def padded(n: int) -> int:
    """A block side: the next power of two, at least 16."""
    p = 16
    while p < n:
        p *= 2
    return p


class TritonPrinter(TritonKindsMixin, CodePrinter):
    """Triton (Python); ``precision``: ``tl.dot``'s input precision (``"ieee"``: exact fp32 products)."""

    backend = "triton"
    dtypes = {"fp32": "tl.float32", "fp16": "tl.float16", "bf16": "tl.bfloat16", "fp8": "tl.float8e4nv"}
    torch_dtypes = {"fp32": "torch.float32", "fp16": "torch.float16", "bf16": "torch.bfloat16"}
    elementwise = {
        "id": "{0}", "cast": "{0}", "exp": "tl.exp({0})", "neg": "(-{0})", "relu": "tl.maximum({0}, 0.0)",
        "gelu": "nc_gelu({0})", "silu": "({0} * tl.sigmoid({0}))", "sigmoid": "tl.sigmoid({0})",
        "tanh": "nc_tanh({0})", "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})", "recip": "(1.0 / {0})",
        "square": "({0} * {0})", "scale": "({c} * {0})", "shift": "({0} + {c})",
        "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})",
        "max": "tl.maximum({0}, {1})", "min": "tl.minimum({0}, {1})", "fma": "tl.fma({0}, {1}, {2})",
    }
    structured = {"contract": "_print_contract", "softmax": "_print_softmax", "softmax_unscaled": "_print_online",
                  "softmax_aux": "_print_online", "reduce_sum": "_print_reduce", "reduce_max": "_print_reduce",
                  "reduce_min": "_print_reduce", "reduce_mean": "_print_reduce", "rename": "_print_rename"}
    accumulators = {"sum": "{0} + {1}", "max": "tl.maximum({0}, {1})", "min": "tl.minimum({0}, {1})"}
    #: reduction kind → (identity, Triton reduction)
    reductions = {"reduce_sum": ("0.0", "tl.sum"), "reduce_mean": ("0.0", "tl.sum"),
                  "reduce_max": ('float("-inf")', "tl.max"), "reduce_min": ('float("inf")', "tl.min")}
    min_template = "tl.minimum({0}, {1})"
    max_template = "tl.maximum({0}, {1})"
    div_template = "{0} // {1}"
    comment = "#"

    def __init__(self, plan, *, precision: str = "ieee"):
        super().__init__(plan, precision=precision)
        self.precision = precision
        self.temps = 0

    def number(self, value) -> str:
        v = float(value)
        return f'float("{v}")' if v in (float("inf"), float("-inf")) else repr(v)

    # ------------------------------------------------------------------ tensors
    def key(self, var, axis) -> tuple:
        return axis, int(self.nominal(dict(self.variables[var].shape)[axis]))

    def arange(self, var, axis) -> str:
        a, n = self.key(var, axis)
        return f"r_{ident(a)}_{n}"

    def shape(self, var) -> list[int]:
        return [padded(self.key(var, a)[1]) for a in self.variables[var].axes]

    def bc(self, var, k) -> str:
        """The index vector of axis ``k`` of ``var``, broadcast to the variable's rank."""
        n = len(self.variables[var].axes)
        name = self.arange(var, self.variables[var].axes[k])
        return name if n == 1 else name + "[" + ", ".join(":" if i == k else "None" for i in range(n)) + "]"

    def mask(self, var, extents=None) -> str | None:
        """``var``'s mask in the current trip: each axis below its extent (None if nothing is masked)."""
        terms = []
        for k, a in enumerate(self.variables[var].axes):
            e = extents[a] if extents else self.current(dict(self.variables[var].shape)[a])
            if not (e.is_Integer and int(e) == padded(self.key(var, a)[1])):
                terms.append(f"({self.bc(var, k)} < {self.code(e)})")
        return " & ".join(terms) or None

    def value(self, ref) -> str:
        """An on-chip variable as an fp32 expression."""
        if not ref.whole:
            raise CodegenError(f"the triton backend reads on-chip tensors whole; {self.ref(ref)} is a slice")
        dt = self.variables[ref.var].dtype
        return ident(ref.var) if dt == "fp32" else f"{ident(ref.var)}.to(tl.float32)"

    def assign(self, ref, expr, depth) -> list[str]:
        if not ref.whole:
            raise CodegenError(f"the triton backend writes on-chip tensors whole; {self.ref(ref)} is a slice "
                               "(a Grid inside a kernel writing part of a tile has no Triton form)")
        m = self.mask(ref.var)
        if m:
            expr = f"tl.where({m}, {expr}, 0.0)"
        dt = self.variables[ref.var].dtype
        if dt != "fp32":
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
        return list(self.variables[ref.var].axes)

    def temp(self, what: str) -> str:
        self.temps += 1
        return f"t{self.temps}_{what}"

    # ------------------------------------------------------------------ transfers, fills, copies
    def _global(self, glob, tile):
        """``(offsets, mask)`` of the elements of the global ref ``glob`` on the grid of the tensor ``tile``."""
        names, extents = {}, {}
        st = self.strides(glob.var)
        off = 0
        for k, a in enumerate(self.axes(tile)):
            rng = glob.range(a)
            start = self.nominal(rng.start) if rng is not None else 0
            extents[a] = self.ext(glob, a)
            off += start * st[a]
            names[a] = self.bc(tile.var, k)
        idx = " + ".join([self.code(off)] * (off != 0) + [f"{names[a]} * {st[a]}" if st[a] != 1 else names[a]
                                                        for a in self.axes(tile)])
        return idx or "0", self.mask(tile.var, extents)

    def _print_Load(self, s, depth):
        if self.variables[s.src.var].level > 0:
            return self.assign(s.dst, self.value(s.src), depth)
        off, m = self._global(s.src, s.dst)
        load = f"tl.load({ident(s.src.var)} + {off}" + (f", mask={m}, other=0.0)" if m else ")")
        return [self.line(depth, f"# {self.ref(s.dst)} ← load {self.ref(s.src)}"),
                self.line(depth, f"{ident(s.dst.var)} = {load}")]

    def _print_Store(self, s, depth):
        if self.variables[s.dst.var].level > 0:
            return self.assign(s.dst, self.value(s.src), depth)
        off, m = self._global(s.dst, s.src)
        v = ident(s.src.var)
        if self.variables[s.dst.var].dtype != self.variables[s.src.var].dtype:
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

    # ------------------------------------------------------------------ loops
    def _print_StreamLoop(self, s, depth):
        out = []
        if s.head:
            out += [self.line(depth, "# head")] + self._lines(s.head, depth)
        out.append(self.line(depth, f"for {ident(s.index.name)} in range(0, {self.code(self.trips(s))}):   "
                                    f"# {self.loop_comment(s)}"))
        out += self._trip(s, depth + 1)
        if s.tail:
            out += [self.line(depth, "# tail")] + self._lines(s.tail, depth)
        return out

    def _print_GridLoop(self, s, depth):
        return [self.line(depth, f"for {ident(s.index.name)} in range(0, {self.code(self.trips(s))}):   "
                                 f"# {self.loop_comment(s)}, in order")] + self._trip(s, depth + 1)

    def _trip(self, s, depth):
        saved = self.extents.get(s.tile)
        bound = self.enter(s)
        lines = [self.line(depth, f"{ident(bound[0].name)} = {self.code(bound[1])}")] if bound else []
        body = self._lines(s.body, depth)
        self.leave(s, saved)
        return lines + (body or [self.line(depth, "pass")])

    # ------------------------------------------------------------------ launches
    def globals_(self) -> list:
        vs = [v for v in self.plan.variables if v.level == 0]
        order = {"input": 0, "output": 1}
        return sorted(vs, key=lambda v: order.get(v.role, 2))

    def _print_Launch(self, launch, depth=0):
        if not any(s for s in launch.body if type(s).__name__ == "Kernel"):
            raise CodegenError("the triton backend runs kernels: the plan has statements outside any kernel ("
                               f"{', '.join(type(s).__name__ for s in launch.body)}); wrap the diagram in nc.kernel")
        params = ", ".join(ident(v.name) for v in self.globals_())
        lines = ["@triton.jit", f"def {launch.name}({params}):"]
        if launch.grids:
            lines.append(self.line(1, "nc_b = tl.program_id(0)"))
        for name, value in self.decode(launch, "nc_b"):
            lines.append(self.line(1, f"{name} = {value}"))
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
                for a in v.axes:
                    ranges[self.arange(v.name, a)] = padded(self.key(v.name, a)[1])
        lines += [self.line(1, f"{r} = tl.arange(0, {n})") for r, n in sorted(ranges.items())]
        lines += self._lines(launch.body, 1)
        for g, sv in zip(reversed(launch.grids), reversed(saved)):
            self.leave(g, sv)
        return lines

    def stream_load_bytes(self) -> int:
        """Padded bytes of the tiles loaded inside Stream loops (what each extra pipelining stage buffers)."""
        from napkin_cat.plan.ir import Load, StreamLoop
        from napkin_cat.syntax.dtype import as_dtype
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
        parts = [PRELUDE]
        ls = launches(self.plan)
        for launch in ls:
            parts.append("\n".join(self._print_Launch(launch)))
        parts.append("\n".join(self.host(ls)))
        return "\n\n\n".join(parts) + "\n"

    def host(self, ls) -> list[str]:
        """``nc_run(*inputs)``: allocate outputs and workspace like the first input, launch each kernel."""
        ins = [ident(n) for n in self.plan.inputs]
        lines = [f"def nc_run({', '.join(ins)}):", self.line(1, '"""The launcher: torch tensors in, outputs out."""')]
        device = f"{ins[0]}.device" if ins else '"cpu"'
        for v in self.globals_():
            if v.role == "input":
                continue
            shape = ", ".join(str(int(self.nominal(e))) for _, e in v.shape)
            if v.dtype not in self.torch_dtypes:
                raise CodegenError(f"the triton launcher allocates no {v.dtype!r} global arrays ({v.name})")
            lines.append(self.line(1, f"{ident(v.name)} = torch.empty(({shape}{',' if len(v.shape) == 1 else ''}), "
                                      f"dtype={self.torch_dtypes[v.dtype]}, device={device})"))
        args = ", ".join(ident(v.name) for v in self.globals_())
        for launch in ls:
            lines.append(self.line(1, f"{launch.name}[({launch.blocks},)]({args})"))
        outs = [ident(n) for n in self.plan.outputs]
        lines.append(self.line(1, f"return {', '.join(outs)}{',' if len(outs) == 1 else ''}"))
        return lines
