"""The loop nest shared by the CUDA C++ and C/OpenMP kernels: what running the C kernel checks of the CUDA one.

Shared, printed by this module for both languages (so a C run executes the CUDA kernel's logic):

* the **loop nest**: Stream loops (head, sequential trips, tail) and Grid loops inside a block;
* **extents and masks**: ``e = min(tile, full − i·tile)`` for every ragged tile; every element loop runs
  to the current extent, so a partial edge tile is never read or written past its end;
* **addresses**: the offset of every element of every ref (row-major at the variable's full shape, plus
  the slice's start for a slice of a global array);
* the **arena**: on-chip variables at the byte offsets of :mod:`napkin_cat.codegen.layout` (the same
  bytes in the C kernel's per-thread buffer and the CUDA kernel's ``__shared__`` array);
* **staging**: a statement whose output takes bytes it still reads computes into per-thread staging
  storage (a heap buffer in C, a local array in CUDA: registers) and writes after it (and after a
  barrier on the GPU), in the same element order;
* the **element formula** of every primitive kind: its record's C form (a template, its ``{max}``/``{min}``
  helpers filled by the dialect), or the structure it names (:mod:`napkin_cat.codegen.c.structures`).

Different, in the subclasses: how an element loop is spread (C: nested loops the compiler vectorises;
CUDA: one flat loop strided by ``threadIdx.x``), the launch (``#pragma omp parallel for`` over the Grid
indices vs one thread block per index, ``blockIdx.x``), memory qualifiers, barriers, the prelude
(``nc_exp`` is a vectorisable polynomial in C, ``expf`` in CUDA) and contractions by BLAS in C.
"""
from __future__ import annotations

import math

import sympy

from napkin_cat.codegen.c.structures import KindsMixin
from napkin_cat.codegen.fusion import inlined, value_of
from napkin_cat.codegen.printer import CodePrinter, ident
from napkin_cat.codegen.trips import WHAT, TripLoopsMixin, full_of
from napkin_cat.codegen.errors import CodegenError
from napkin_cat.plan.ir import Compute, Ref, StreamLoop, reads, walk, writes
from napkin_cat.syntax.primitive import kind_of


class CFamilyPrinter(TripLoopsMixin, KindsMixin, CodePrinter):
    """Statements of a block in C syntax; subclasses say how element loops spread and what a launch is."""

    min_template = "NC_MIN({0}, {1})"
    max_template = "NC_MAX({0}, {1})"
    threads = 1        # threads that share one element loop (a thread block's, on a GPU)
    #: bytes per value of the formats a dialect holds wider than their own (its ``dtypes`` spell them)
    held_width: dict = {}

    def __init__(self, plan, **options):
        # fp32 arrays held, laid out and computed in the real type (the class's, or the one a subclass chose; set
        # before the layout is made); the kinds' forms are respelled in it by its record (``fill``)
        self.dtypes = {**self.dtypes, "fp32": self.real.ctype}
        self.width = {**self.held_width, "fp32": self.real.bytes}
        super().__init__(plan, **options)
        self.stage_values = 0    # the most staged values one thread holds (per launch)
        self._staged: dict = {}
        self._staged_at: dict = {}
        #: the maps fused into their reader (:mod:`napkin_cat.codegen.fusion`), by the variable they no longer write
        self.fused_maps = {t.outs[0].var: t for s in walk(self.plan.body) for t in inlined(s)}
        self._printing = None     # the statement with fused operands being printed (its access: what it reads)
        self._values = 0          # fused values printed (their locals' names)

    # ------------------------------------------------------------------ backend hooks
    def loop(self, space, body, depth) -> list[str]:
        """``body`` (lines) for every element of ``space`` (``[(symbol, extent), …]``)."""
        raise NotImplementedError

    def sync(self, depth) -> list[str]:
        """A barrier between statements (nothing on a CPU thread)."""
        return []

    def number(self, value) -> str:
        s = super().number(value)
        return s if "INFINITY" in s or s == "NAN" else s + self.real.suffix

    # ------------------------------------------------------------------ elements
    def index(self, axes) -> dict:
        """Element index symbols ``j_<axis>`` for ``axes``."""
        return {a: sympy.Symbol(f"j_{ident(a)}", integer=True, nonnegative=True) for a in axes}

    def space(self, ref, axes=None) -> list:
        """``[(symbol, extent, axis, bound)]`` over ``axes`` of ``ref`` (all by default) in the variable's order;
        ``extent`` is the current one (masked), ``bound`` its largest value (the full tile)."""
        v = self.variables[ref.var]
        axes = v.axes if axes is None else [a for a in v.axes if a in axes]
        idx = self.index(axes)
        out = []
        for a in axes:
            rng = ref.range(a)
            bound = int(self.nominal(rng.tile if rng is not None else dict(v.shape)[a]))
            out.append((idx[a], self.ext(ref, a), a, bound))
        return out

    def reduction_space(self, s) -> tuple:
        """``(x, rows, idx, core, full)`` of a statement reducing its first input ``x`` into its first output: the
        output's space (the rows) and its index, the space of ``x``'s other axes (the core, reduced), and the index
        over both (an element of ``x``)."""
        x = s.ins[0]
        rows = self.space(s.outs[0])
        idx = {a: sym for sym, _, a, _ in rows}
        core = [e for e in self.space(x) if e[2] not in idx]
        return x, rows, idx, core, {**idx, **{a: sym for sym, _, a, _ in core}}

    def elem(self, ref, idx) -> str:
        return f"{ident(ref.var)}[{self.code(self.offset(ref, idx))}]"

    #: a trip's state in its block table: skipped where none, the mask left out where full (:meth:`trip_variants`)
    skip_trip = "if ({state} == 0) continue;"
    if_full = "if ({state} == 2) {{   {comment} every pair allowed: the mask is not made, read as true"
    otherwise = "}} else {{"
    end_if = "}"

    def block_state(self, table, state: str, depth) -> list[str]:
        """The trip's state: its block table's entry (a kernel argument; NULL: no block mask, every trip partial)."""
        return [self.line(depth, f"const int {state} = {table.name} ? (int){table.name}[{self.code(table.offset())}] "
                                 f": 1;   {self.comment} the block mask here: 0 none, 1 partial, 2 full")]

    def read(self, ref, idx) -> str:
        var = value_of(ref)
        if self.full_trip is not None and var in self.full_trip.conditions:
            return self.number(1)      # a full trip's mask: true on every pair of its block
        fused = ref if isinstance(ref, Compute) else self.fused_maps.get(var)
        if fused is not None:
            return self.fused_value(fused, idx)
        t = self.ctype(ref.var)
        return self.elem(ref, idx) if t == self.real.ctype else f"({self.real.ctype}){self.elem(ref, idx)}"

    # ------------------------------------------------------------------ fused maps, masks a full trip drops
    def passes(self, s) -> int | None:
        """The operand an elementwise statement's value is on the full trip being printed, where its kind's constant
        rule says so with the trip's conditions true (``where(true, a) = a``, ``select(true, a, b) = a``), else None:
        the rule is given True for each condition and, for every other operand, a value it knows nothing of; the
        output is that operand when the rule returns it."""
        if self.full_trip is None:
            return None
        conditions = self.full_trip.conditions
        known = [True if value_of(r) in conditions else _Unknown(k) for k, r in enumerate(s.ins)]
        rule = kind_of(s.kind).part("constant", default=None)
        if rule is None or all(isinstance(c, _Unknown) for c in known):
            return None
        try:
            out = rule(s.box, known)
        except (TypeError, ValueError, ArithmeticError):
            return None
        return out.position if isinstance(out, _Unknown) and known[out.position] is out else None

    def element(self, s, idx) -> tuple[list, str]:
        """The value of an elementwise statement at element ``idx``, in the real type, as its output holds it: its
        form on its operands read into locals first (:meth:`bound`), or on a full trip the operand it passes
        (:meth:`passes`); ``(lines, value)``."""
        k = self.passes(s)
        if k is not None:
            return [], self.read(s.ins[k], idx)
        lines, args = self.bound([self.read(r, idx) for r in s.ins])
        return lines, self.apply(s, args)

    def fused_value(self, t, idx) -> str:
        """A map fused into its reader (:mod:`napkin_cat.codegen.fusion`), computed where it is read: one C
        expression whose value is what the map's output would hold, the conversion to its format and back included
        (``(float)(int)(…)`` for an ``int`` output).  A form that chooses (``c ? a : b``) has its operands read into
        locals first, as :meth:`bound` reads them (a statement expression ``({ … })``), so that no read is
        conditional; any other form is printed on the reads themselves."""
        k = self.passes(t)
        if k is not None:
            value = self.read(t.ins[k], idx)
        elif "?" in self.form(t).text:
            n, self._values = self._values, self._values + 1
            names = [f"nc_v{n}_{j}" for j in range(len(t.ins))]
            binds = " ".join(f"const {self.real.ctype} {m} = {self.read(r, idx)};" for m, r in zip(names, t.ins))
            value = f"({{ {binds} {self.apply(t, names)}; }})"
        else:
            value = f"({self.apply(t, [self.read(r, idx) for r in t.ins])})"
        held = self.ctype(t.outs[0].var)
        return value if held == self.real.ctype else f"(({self.real.ctype})({held}){value})"

    def _print_Compute(self, s, depth):
        """A statement with maps fused into it: printed as the statement reading their outputs (each read
        computes the map, :meth:`read`), its access (what its layout stages) the fused statement's."""
        if not s.inlined:
            return super()._print_Compute(s, depth)
        reading = Compute(s.box, s.outs, tuple(r.outs[0] if isinstance(r, Compute) else r for r in s.ins),
                          s.accumulate, s.origin, s.at)
        saved, self._printing = self._printing, (reading, s)
        try:
            return super()._print_Compute(reading, depth)
        finally:
            self._printing = saved

    def accessed(self, s):
        """The statement whose reads and writes ``s`` makes: the fused one where ``s`` is its reading form."""
        return self._printing[1] if self._printing is not None and self._printing[0] is s else s

    def aliased(self, s) -> set:
        """The outputs of ``s`` written over bytes it still reads (:meth:`~napkin_cat.codegen.layout.Layout.aliased`,
        of what it reads with its fused maps)."""
        return self.layout.aliased(self.accessed(s))

    def store(self, ref, idx, value) -> str:
        t = self.ctype(ref.var)
        return f"{self.elem(ref, idx)} = {value if t == self.real.ctype else f'({t})({value})'};"

    def put(self, ref, idx, value) -> str:
        """The line that gives an output element its value (into staging storage if the output is staged;
        nothing if no statement reads the output)."""
        if ref.var in self.layout.dead:
            return f"{self.comment} {ref.var}: never read"
        if ref.var in self._staged:
            self._staged_at[ref.var] = idx     # the write-back stores where this element belongs
            counter, base = self._staged[ref.var]
            return f"nc_stage[{base} + {counter}++] = {value};" if base else f"nc_stage[{counter}++] = {value};"
        return self.store(ref, idx, value)

    def extent_code(self, e) -> str:
        return self.code(e)

    def for_lines(self, sym, extent, body, depth, pragma=None) -> list[str]:
        """A sequential ``for`` over one axis (inside an element, or a row's core axes)."""
        head = [self.line(depth, pragma)] if pragma else []
        j = ident(sym.name)
        return head + [self.line(depth, f"for (int {j} = 0; {j} < {self.extent_code(extent)}; ++{j}) {{")] + \
            [self.indent + b for b in body] + [self.line(depth, "}")]

    def nested(self, space, body) -> list[str]:
        """``body`` inside sequential loops over ``space`` (relative indentation)."""
        for sym, extent, *_ in reversed(space):
            body = self.for_lines(sym, extent, body, 0)
        return body

    # ------------------------------------------------------------------ one statement, staged or not
    def statement(self, s, depth, space, body_fn, outs) -> list[str]:
        """A simple statement: ``body_fn()`` runs per element of ``space`` and writes ``outs`` through :meth:`put`.

        Outputs that take bytes the statement still reads are staged: computed in this thread's order
        into ``nc_stage``, then (after a barrier) written back in the same order.
        """
        return self.statement_parts(s, depth, [(space, body_fn, outs)])

    def statement_parts(self, s, depth, parts) -> list[str]:
        """One statement printed as several element loops ``parts`` (``[(space, body_fn, outs)]``: a split's
        parts, a join's pieces): every part computes before any staged output is written back, since the
        layout lets an output take the bytes of any input of the statement, which a later part still reads."""
        staged = self.aliased(s)
        base, plans, passes, where = 0, [], [], []
        for space, body_fn, outs in parts:
            rows = {a for _, _, a, _ in space}
            per_thread = -(-math.prod(b for *_, b in space) // self.threads)
            self._staged, self._staged_at = {}, {}
            for r in outs:
                if r.var in staged and r.var not in self._staged and r.var not in self.layout.dead:
                    inner = math.prod(b for _, _, a, b in self.space(r) if a not in rows)
                    self._staged[r.var] = (f"nc_k{sum(len(p) for _, p in plans) + len(self._staged)}", base)
                    base += per_thread * inner
            passes.append(body_fn())
            plans.append((space, self._staged))
            where.append(self._staged_at)
        self._staged = {}
        self.stage_values = max(self.stage_values, base)
        counters = [k for _, st in plans for k, _ in st.values()]
        if not counters:
            return [line for (space, _), body in zip(plans, passes)
                    for line in self.loop(space, body, depth) + self.sync(depth)]
        back = []
        for (space, st), (_, _, outs), at in zip(plans, parts, where):
            rows = {a for _, _, a, _ in space}
            lines = []
            for r in outs:
                if r.var in st:
                    counter, b = st[r.var]
                    full = self.space(r)
                    idx = {**{a: sym for sym, _, a, _ in full}, **at.get(r.var, {})}
                    lines += self.nested([x for x in full if x[2] not in rows],
                                         [self.store(r, idx, f"nc_stage[{b} + {counter}++]" if b else
                                                     f"nc_stage[{counter}++]")])
            if lines:
                back += self.loop(space, lines, depth + 1)
        names = sorted({v for _, st in plans for v in st})
        return ([self.line(depth, f"{{   {self.comment} staged: {', '.join(names)} take bytes this statement reads")] +
                [self.line(depth + 1, f"int {k} = 0;") for k in counters] +
                [line for (space, _), body in zip(plans, passes)
                 for line in self.loop(space, body, depth + 1) + self.sync(depth + 1)] +
                [self.line(depth + 1, f"{k} = 0;") for k in counters] +
                back + [self.line(depth, "}")] + self.sync(depth))

    # ------------------------------------------------------------------ transfers, fills, copies
    def _move(self, s, depth, what):
        sp = self.space(s.dst)
        idx = {a: sym for sym, _, a, _ in sp}
        src_idx = dict(idx)
        head = [self.line(depth, f"{self.comment} {self.ref(s.dst)} ← {what}{self.ref(s.src)}")]
        return head + self.statement(s, depth, sp, lambda: [self.put(s.dst, idx, self.read(s.src, src_idx))],
                                     [s.dst])

    def _print_Load(self, s, depth):
        return self._move(s, depth, "load ")

    def _print_Store(self, s, depth):
        return self._move(s, depth, "store ")

    def _print_Copy(self, s, depth):
        return self._move(s, depth, "")

    def _print_Combine(self, s, depth):
        """``dst ← dst ⊕ src``: a region's partial result folded into a stream's state."""
        sp = self.space(s.dst)
        idx = {a: sym for sym, _, a, _ in sp}
        head = [self.line(depth, f"{self.comment} {self.ref(s.dst)} {'+' if s.monoid == 'sum' else s.monoid}= "
                                 f"{self.ref(s.src)}")]
        return head + self.statement(s, depth, sp, lambda: [self.put(s.dst, idx, self.combine(
            s.monoid, self.read(s.dst, idx), self.read(s.src, idx)))], [s.dst])

    def _print_Fill(self, s, depth):
        ref = Ref(s.var)
        sp = self.space(ref)
        idx = {a: sym for sym, _, a, _ in sp}
        head = [self.line(depth, f"{self.comment} {s.var} ← {s.value:g}")]
        return head + self.loop(sp, [self.store(ref, idx, self.number(s.value))], depth) + self.sync(depth)

    # ------------------------------------------------------------------ loops inside a block
    def _print_StreamLoop(self, s, depth):
        """The stream's trips as loops over ranges of its index (:meth:`~napkin_cat.codegen.trips.TripLoopsMixin.
        stream_loops`: the trips its skip test reaches, the whole ones apart where the dialect runs them so), their
        bounds in a block of their own; a trip tests the skip condition only where it is not ranges (the same test in
        every thread of a block: no barrier is split)."""
        out = []
        if s.head:
            out += [self.line(depth, f"{self.comment} head")] + self._lines(s.head, depth)
        i = ident(s.index.name)
        notes, loops, tested = self.stream_loops(s)
        out += [self.line(depth, f"{self.comment} {note}") for note in notes]
        inner = depth + 1 if loops.defs else depth
        if loops.defs:
            out.append(self.line(depth, f"{{   {self.comment} the trips of {i}: bounds of ranges"))
            out += [self.line(inner, f"const int {name} = {value};") for name, value in loops.defs]
        reach = ", the trips the mask reaches" if getattr(s, "skips", False) and not tested else ""
        for lo, hi, kind in loops.loops:
            out.append(self.line(inner, f"for (int {i} = {lo}; {i} < {hi}; ++{i}) {{   "
                                        f"{self.comment} {self.loop_comment(s)}{reach}{WHAT[kind]}"))
            if tested:
                out.append(self.line(inner + 1, f"if (!{self.code(s.when)}) continue;   {self.comment} the mask is "
                                                f"never true on this trip"))
            out += self._trip(s, inner + 1, full=full_of(kind, s))
            out.append(self.line(inner, "}"))
        if loops.defs:
            out.append(self.line(depth, "}"))
        if s.tail:
            out += [self.line(depth, f"{self.comment} tail")] + self._lines(s.tail, depth)
        return out

    def _trip(self, s, depth, full=None):
        """A trip of loop ``s``: its extent bound; ``full``: the :class:`~napkin_cat.plan.skips.FullTrips` of a loop
        over whole trips (the body without the mask), False for one over partial trips (as written), None: by the
        trip's state (:meth:`trip_variants`)."""
        saved = self.extents.get(s.tile)
        bound = self.enter(s)
        lines = []
        if bound is not None:
            lines.append(self.line(depth, f"const int {ident(bound[0].name)} = {self.code(bound[1])};"))
        if full is not None:
            self.full_trip = full or None
            try:
                lines += self._lines(s.body, depth)
            finally:
                self.full_trip = None
        elif isinstance(s, StreamLoop):
            lines += self.trip_variants(s, depth, lambda at: self._lines(s.body, at))
        else:
            lines += self._lines(s.body, depth)
        self.leave(s, saved)
        return lines

    def _print_GridLoop(self, s, depth):
        """A Grid loop inside a block (not one of its launch's): its groups run one after another."""
        i = ident(s.index.name)
        return [self.line(depth, f"for (int {i} = 0; {i} < {self.code(self.trips(s))}; ++{i}) {{   "
                                 f"{self.comment} {self.loop_comment(s)}, in order")] + \
            self._trip(s, depth + 1) + [self.line(depth, "}")]

    # ------------------------------------------------------------------ a launch
    def globals_(self) -> list:
        """The global (level-0) variables every launch takes: inputs, outputs, then workspace."""
        vs = [v for v in self.plan.variables if v.level == 0]
        order = {"input": 0, "output": 1}
        return sorted(vs, key=lambda v: order.get(v.role, 2))

    def parameters(self, qualifier="", *, user: bool = False) -> str:
        """The C parameter list of the global variables (``user``: the caller's inputs and outputs only)."""
        out = []
        for v in self.globals_():
            if user and v.role not in ("input", "output"):
                continue
            const = "const " if v.role == "input" else ""
            out.append(f"{const}{self.ctype(v.name)} *{qualifier}{ident(v.name)}")
        out += [f"const signed char *{qualifier}{t.name}" for t in self.block_tables.values()]
        return ", ".join(out)

    def arguments(self) -> str:
        return ", ".join([ident(v.name) for v in self.globals_()] + [t.name for t in self.block_tables.values()])

    def on_chip(self, launch) -> list:
        """The on-chip variables a launch uses, in the plan's order."""
        used = set()
        for s in walk(launch.body):
            used |= set(reads(s)) | set(writes(s))
        out = [v for v in self.plan.variables if v.name in used and v.level > 0 and v.name not in self.layout.dead]
        deep = [v.name for v in out if v.level > 1]
        if deep and not self.deep_levels:
            raise CodegenError(f"the {self.backend} backend keeps level-1 variables on chip and has no form for "
                               f"variables at deeper levels: {deep}")
        return out

    deep_levels = True

    def block_body(self, launch, depth) -> list[str]:
        """The statements one block runs: its Grid indices, their extents, its arena pointers, its statements."""
        lines = []
        saved = []
        for g in launch.grids:
            saved.append(self.extents.get(g.tile))
            bound = self.enter(g)
            if bound is not None:
                lines.append(self.line(depth, f"const int {ident(bound[0].name)} = {self.code(bound[1])};   "
                                              f"{self.comment} {self.loop_comment(g)}"))
        for v in self.on_chip(launch):
            lines.append(self.line(depth, self.declare(v)))
        lines += self._lines(launch.body, depth)
        for g, s in zip(reversed(launch.grids), reversed(saved)):
            self.leave(g, s)
        return lines

    def declare(self, v) -> str:
        """The declaration of an on-chip variable: a pointer to its bytes in its level's arena."""
        t = self.ctype(v.name)
        return (f"{t} *const {ident(v.name)} = ({t} *)({self.arena_name(v.level)} + {self.layout.offsets[v.name]});   "
                f"{self.comment} {'×'.join(str(self.nominal(e)) for _, e in v.shape) or '1'}")

    def arena_bytes(self, launch, level: int = 1) -> int:
        """Bytes of the launch's arena at ``level`` (its variables at their offsets)."""
        return self.layout.of([v.name for v in self.on_chip(launch) if v.level == level], level)

    def levels(self, launch) -> list[int]:
        """The on-chip levels a launch keeps variables at."""
        return sorted({v.level for v in self.on_chip(launch)} | {1})

    @staticmethod
    def arena_name(level: int) -> str:
        return "nc_arena" if level == 1 else f"nc_arena{level}"

    def loop_is_stream(self, s) -> bool:
        return isinstance(s, StreamLoop)


class _Unknown:
    """An operand a constant rule knows nothing of (:meth:`CFamilyPrinter.passes`): the ``position``-th."""

    __slots__ = ("position",)

    def __init__(self, position: int):
        self.position = position
