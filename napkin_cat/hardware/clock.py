"""Clock-cycle tables (§5.7, Table 3; Appendix "Lower Bound on Compute Time"), from an op breakdown.

Input: the per-op FLOPs of a streamed algorithm, as ``nc.cost(d).ops`` gives them (records with
``label, kind, pipeline, flops, trips, region, role, dtype`` and, for rates set by the operands,
``operands``; :class:`OpRecord` is the same protocol for breakdowns made by hand).  The columns are
the body ops of the streamed loop; per column and per stream trip::

    ops/thread = flops · (executions per trip) / rows          (rows: the group tile; "we ignore g_q")
    clk/thread = ops/thread / (ops per clock per SM of the pipeline, for its dtype)
    k_TC       = Σ_tensor clk/thread                           (the tensor-core lower bound)
    g_min      = f_K · H · N_SM / (k_TC · B)                   (errata D-04; H bytes moved per trip per block)
    ideal      = (tensor ops/thread) / k_TC · N_SM · f_K       (FLOP/s when tensor-bound)

A box whose FLOPs use several pipelines is one column on the pipeline where it takes longest; its
work on the others is reported as *secondary* clocks (the paper's "overhead", hatched regions).
Number-format conversions (``cast`` boxes) are not columns either: §5.7 classifies them as overhead
("type conversions are extremely slow"); they are listed in ``conversions`` with their clocks.

>>> from napkin_cat.hardware.model import load
>>> ops = [OpRecord("S = QKᵀ", "contract", "tensor", "2*d*g*s", 1, (("stream", "x"),), "body", "fp32",
...                 operands=("fp16", "fp16"), index=0),
...        OpRecord("exp", "exp", "special", "g*s", 1, (("stream", "x"),), "body", "fp16", index=1)]
>>> t = clock_table(ops, load("a100"), {"d": 64, "s": 32, "g": 128}, rows="g")
>>> [(c.label, c.ops, c.rate, c.clocks) for c in t.columns]
[('S = QKᵀ', Fraction(4096, 1), Fraction(2048, 1), Fraction(2, 1)),
 ('exp', Fraction(32, 1), Fraction(16, 1), Fraction(2, 1))]
>>> t.k_TC
Fraction(2, 1)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.model import load
from napkin_cat.hardware.tables import decimal, dumps, exact, number, text_table
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.primitive import converts
from napkin_cat.syntax.sizes import Sizes

BODY = "body"


@dataclass(frozen=True)
class OpRecord:
    """One op's FLOPs on one pipeline (the protocol of ``Cost.ops`` entries)."""

    label: str
    kind: str
    pipeline: str
    flops: object
    trips: object
    region: tuple
    role: str
    dtype: str
    operands: tuple = ()
    index: int | None = None


@dataclass(frozen=True)
class Column:
    """One column of Table 3."""

    label: str
    kind: str
    pipeline: str
    dtype: str
    ops: Fraction
    rate: Fraction
    clocks: Fraction
    secondary: dict = field(default_factory=dict)    # pipeline -> clk/thread of the same box elsewhere

    @property
    def secondary_fraction(self) -> Fraction:
        """The box's work on other pipelines, relative to its own: a lower bound on its overhead."""
        return sum(self.secondary.values(), Fraction(0)) / self.clocks if self.clocks else Fraction(0)


def _expr(v):
    e = sympy.sympify(v) if not isinstance(v, sympy.Basic) else v
    return e.subs({s: symbol(str(s)) for s in e.free_symbols})


def _number(expr, sizes, what) -> Fraction:
    v = _expr(expr).subs(sizes)
    if v.free_symbols:
        raise HardwareError(f"{what} = {expr} needs sizes for {sorted(str(s) for s in v.free_symbols)}")
    return exact(sympy.nsimplify(v))


def innermost_stream(op):
    """The axis of the innermost stream around ``op`` (its region's last ``stream``), or None."""
    streams = [axis for kind, axis in op.region if kind == "stream"]
    return streams[-1] if streams else None


def body_ops(ops, stream=None) -> tuple:
    """``(stream axis, body records)``: the records of the streamed loop's body (role ``body``)."""
    body = [op for op in ops if op.role == BODY and innermost_stream(op) is not None]
    axes = sorted({innermost_stream(op) for op in body})
    if stream is None:
        if len(axes) != 1:
            raise HardwareError(f"the op breakdown streams along {axes or 'no axis'}; name the stream axis "
                                "(stream='x') whose body makes Table 3's columns")
        stream = axes[0]
    if stream not in axes:
        raise HardwareError(f"no body op streams along {stream!r}; streamed axes: {axes}")
    return stream, [op for op in body if innermost_stream(op) == stream]


def _boxes(records):
    """Records grouped by box: by ``index`` when given, else consecutive records of one label/kind/region."""
    groups, last = [], None
    for op in records:
        key = ("index", op.index) if getattr(op, "index", None) is not None else \
            ("run", op.label, op.kind, tuple(op.region), op.role)
        if key[0] == "index":
            for g in groups:
                if g[0] == key:
                    g[1].append(op)
                    break
            else:
                groups.append((key, [op]))
        elif last == key:
            groups[-1][1].append(op)
        else:
            groups.append((key, [op]))
        last = key
    return [g[1] for g in groups]


def rate_key(op, gpu) -> str:
    """The dtype whose rate applies: the widest operand for operand-rated pipelines, else the output."""
    p = gpu.pipeline(op.pipeline)
    if p.rate_by == "operands":
        operands = tuple(getattr(op, "operands", ()) or ())
        if not operands:
            raise HardwareError(f"op {op.label!r} runs on the {op.pipeline} pipeline, whose rate depends on the "
                                "operand format, but its record gives no operand dtypes (operands=...)")
        return max(operands, key=lambda d: as_dtype(d).bytes)
    return op.dtype


@dataclass
class ClockTable:
    """A clock-cycle table of one kernel on ``gpu``: its rows over the columns, the tensor-core clock ``k_TC`` and the
    tensor ops it counts, the values moved where known, and notes.
    """

    gpu: object
    stream: str
    rows: str
    sizes: dict
    columns: list
    k_TC: Fraction
    tensor_ops: Fraction
    moved: Fraction | None = None
    notes: list = field(default_factory=list)
    conversions: list = field(default_factory=list)   # cast boxes: overhead, not columns (§5.7)

    @property
    def min_rows(self) -> Fraction | None:
        """``g ≥ f_K · H · N_SM / (k_TC · B)`` (errata D-04): fewer rows per block leave the loop bandwidth-bound."""
        if self.moved is None or not self.k_TC:
            return None
        return self.gpu.f_K * self.moved * self.gpu.sm_count / (self.k_TC * self.gpu.hbm)

    @property
    def ideal(self) -> Fraction | None:
        """Tensor-bound throughput in FLOP/s: ``tensor ops/thread / k_TC · N_SM · f_K``."""
        if not self.k_TC:
            return None
        return self.tensor_ops / self.k_TC * self.gpu.sm_count * self.gpu.f_K

    def column(self, label) -> Column:
        for c in self.columns:
            if c.label == label:
                return c
        raise HardwareError(f"no column {label!r}; columns are {[c.label for c in self.columns]}")

    def to_dict(self) -> dict:
        return {"hardware": self.gpu.name, "stream": self.stream, "rows_per_block": self.rows, "sizes": self.sizes,
                "f_K_Hz": number(self.gpu.f_K),
                "columns": [{"operation": c.label, "kind": c.kind, "pipeline": c.pipeline, "dtype": c.dtype,
                             "ops_per_thread": number(c.ops), "ops_per_clock": number(c.rate),
                             "clocks_per_thread": number(c.clocks),
                             "secondary_clocks": {p: number(v) for p, v in c.secondary.items()}}
                            for c in self.columns],
                "conversions": [{"operation": c.label, "pipeline": c.pipeline, "dtype": c.dtype,
                                 "clocks_per_thread": number(c.clocks)} for c in self.conversions],
                "k_TC": number(self.k_TC), "tensor_ops_per_thread": number(self.tensor_ops),
                "bytes_per_trip_per_block": number(self.moved), "min_rows": number(self.min_rows),
                "ideal_flops_per_s": number(self.ideal), "notes": list(self.notes)}

    def to_json(self) -> str:
        return dumps(self.to_dict())

    def to_text(self) -> str:
        headers = ["Operation"] + [c.label for c in self.columns]
        rows = [["Pipeline"] + [c.pipeline for c in self.columns],
                ["Dtype"] + [c.dtype for c in self.columns],
                ["Ops/Th"] + [decimal(c.ops) for c in self.columns],
                ["Ops/Clk"] + [decimal(c.rate) for c in self.columns],
                ["Clk/Th"] + [decimal(c.clocks) for c in self.columns]]
        if any(c.secondary for c in self.columns):
            rows.append(["other pipes"] + [", ".join(f"{p} {decimal(v)}" for p, v in c.secondary.items())
                                           for c in self.columns])
        lines = [text_table(headers, rows, title=f"Table 3: clock cycles per thread per {self.stream} trip on "
                                                 f"{self.gpu.name}, sizes {self.sizes}")]
        lines.append(f"tensor-core lower bound k_TC = {decimal(self.k_TC)} clk/thread")
        for c in self.conversions:
            lines.append(f"conversion {c.label} ({c.dtype}, {c.pipeline}): {decimal(c.clocks)} clk/thread, counted "
                         "as overhead (§5.7: type conversions are overhead, not a column)")
        if self.min_rows is not None:
            lines.append(f"not bandwidth-bound when {self.rows} ≥ f_K·H·N_SM/(k_TC·B) = {decimal(self.min_rows)} "
                         f"(H = {decimal(self.moved)} B per trip per block, f_K = {decimal(self.gpu.f_K / 10**9)} GHz, "
                         f"B = {decimal(self.gpu.hbm / 10**9)} GB/s; errata D-04)")
        if self.ideal is not None:
            lines.append(f"ideal tensor-bound throughput = {decimal(self.ideal / 10**15, 3)} PFLOP/s")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def clock_table(ops, gpu, sizes: dict, *, rows, iterations=None, moved=None, stream=None) -> ClockTable:
    """Table 3 from an op breakdown (module docstring).

    ``rows``: the rows one thread block's group holds (the group tile, a name or expression);
    ``iterations``: stream iterations over all blocks (to count executions per trip from ``trips``;
    default: each body op runs once per trip); ``moved``: bytes moved per trip per block (for ``g_min``).
    """
    gpu = load(gpu)
    env = Sizes(sizes).env
    stream, body = body_ops(ops, stream)
    rows_n = _number(rows, env, "rows")
    iters = None if iterations is None else _expr(iterations)
    columns, conversions = [], []
    for records in _boxes(body):
        clocks = {}
        for op in records:
            flops = _expr(op.flops)
            if iters is not None:
                flops = flops * _expr(op.trips) / iters
            per_thread = _number(flops, env, f"FLOPs of {op.label!r}") / rows_n
            if per_thread == 0:
                continue
            key = rate_key(op, gpu)
            rate = exact(gpu.rate(op.pipeline, key))
            if op.pipeline in clocks:   # two records of one box on one pipeline add up
                first = clocks[op.pipeline]
                per_thread += first[2]
                op, key = first[0], first[1]
            clocks[op.pipeline] = (op, key, per_thread, rate, per_thread / rate)
        if not clocks:
            continue
        main = max(clocks, key=lambda p: clocks[p][4])
        op, key, per_thread, rate, clk = clocks[main]
        secondary = {p: v[4] for p, v in clocks.items() if p != main}
        key = gpu.pipeline(main).computes_in or gpu.pipeline(main).widen.get(key, key)
        column = Column(op.label, op.kind, main, key, per_thread, rate, clk, secondary)
        (conversions if all(converts(r.kind) for r in records) else columns).append(column)
    k_TC = sum((c.clocks for c in columns if c.pipeline == "tensor"), Fraction(0))
    tensor_ops = sum((c.ops for c in columns if c.pipeline == "tensor"), Fraction(0))
    moved_n = None if moved is None else _number(moved, env, "bytes per trip")
    return ClockTable(gpu, stream, str(rows), dict(sizes), columns, k_TC, tensor_ops, moved_n,
                      conversions=conversions)


def clock_table_of(cost, gpu, sizes: dict, *, ops=None, level: int = 1, stream=None) -> ClockTable:
    """Table 3 of an algorithm from its cost: ``cost.ops`` (or ``ops``), its first group partition's tiles as
    the rows, and the bytes per trip per block ``H = lim_{b→∞} H_bytes[level] / iterations`` (the streamed
    inputs' tiles: "no caching, and x̄ large enough that Q loads and O stores are negligible")."""
    ops = cost.ops if ops is None else ops
    stream, _ = body_ops(ops, stream)
    if not cost.groups:
        raise HardwareError("the algorithm has no group partition: Table 3 normalises by the rows of a group")
    group = cost.groups[0]
    rows = sympy.Mul(*group.tiles)
    found = [s for s in cost.streams if str(s[0]) == stream]
    if not found:
        raise HardwareError(f"the cost has no stream along {stream!r}; streams: {[s[0] for s in cost.streams]}")
    _, size, full = found[0]
    iterations = group.N_g * sympy.sympify(full) / sympy.sympify(size)
    moved = None
    if level in cost.H_bytes:
        per = sympy.cancel(cost.H_bytes[level] / iterations)   # (simplify: the same here, 1 s more)
        moved = sympy.limit(per, sympy.sympify(full), sympy.oo) if not isinstance(full, int) else per
    return clock_table(ops, gpu, sizes, rows=rows, iterations=iterations, moved=moved, stream=stream)
