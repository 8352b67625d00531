"""Predicted time on a CPU model, and tiles and variant by it: ``nc.derive(f, sizes=..., hardware=cpu)``.

The C kernel (``nc.codegen.c``) runs each Grid block of a kernel on one thread: it copies the block's tiles into
an arena in the core's L2, then computes on them, contractions by one ``cblas_sgemm`` per matrix product (per
batch index) and the rest by vectorised loops.  Transfers ``H`` cannot see that a product of a ``g_q × d`` tile
by a ``d × 1`` slice runs at a tenth of the rate of one by a ``d × 64`` slice; this model can.  Per kernel ``K``
at concrete sizes (the cost functor's counts, ceil-aware), on ``T`` threads of a CPU model (format 2,
:mod:`~napkin_cat.hardware.cpu`: one core's measured rates)::

    B        = blocks of K                     (the narrowest Grid count, :mod:`napkin_cat.algorithms.launches`)
    p        = B / ⌈B / T⌉                     blocks at work at once, on average (the last round's idle threads)
    T_io     = H_bytes(level 1) / (p · bw)     bw = the model's l3 bandwidth when K's inputs and outputs fit L3,
                                               else its dram bandwidth
    T_c      = Σ_c F_c / rate(s_c) + C_c · t_call
                                               c: each contraction box; F_c its FLOPs; s_c = min(m, n, k) at the
                                               tiles (m, n: the output's axes one operand alone carries; k: the
                                               contracted axes; batch axes aside), c's own (read off the arrays
                                               its cost record carries, not off its name: two products "·" of
                                               one kernel keep their shapes); rate: the model's table;
                                               C_c = F_c / (2 m n k) its cblas_sgemm calls (one per batch index
                                               and trip); t_call: the model's contraction_call
    T_s, T_g = F_special / special,  F_general / general
    T(K)     = T_io + (T_c + T_s + T_g) / p    a core copies its tiles, then computes (no overlap)
    T        = Σ_K T(K)

:func:`derive_for_cpu_time` (``nc.derive(f, sizes=..., hardware=<CPU model>)``): the variants the search finds
at memories ``2^10 …`` the L2's values (and, on ``T > 1`` threads, those derived to launch ``T`` blocks), and at
the memories above it up to one that holds every input and output of ``f``
(:func:`~napkin_cat.hardware.structures.structure_memories`: they only propose structures), each at every tile
assignment of powers of two (and the whole axis) that divide their axes and whose level-1 columns fit the L2, timed
by this model; the fastest wins (ties: fewer transfers, then larger tiles).  A kernel split transfers favour only
above the L2 may have tilings that fit it and, where arithmetic rather than traffic bounds a CPU, compute faster
than the split's.  The winner keeps its structure's trace, so ``r.trace.replay(f) == r.diagram``; ``r.prediction``
is its time, ``r.timings`` every assignment timed, fastest first.

>>> import napkin_cat as nc
>>> r = derive_for_cpu_time(nc.library.attention(), "epyc-zen3-dev", {"q": 1024, "x": 1024, "d": 64})
>>> tiles = {str(k): v for k, v in r.optimum.exact_sizes.items()}
>>> tiles["s_x"] > 1, r.prediction.hardware
(True, 'epyc-zen3-dev')
>>> t = predict_cpu(r.diagram, "epyc-zen3-dev", {**r.sizes, **tiles})
>>> abs(t.time - r.prediction.time) < 1e-12
True
"""
from __future__ import annotations

import dataclasses
import itertools
import math

import sympy

from napkin_cat.algorithms.records import built_region
from napkin_cat.algorithms.launches import blocks as launched, narrowest
from napkin_cat.cost.at_sizes import counts_kept
from napkin_cat.cost.iocost import box_cost, cost
from napkin_cat.cost.numeric import at, folded
from napkin_cat.errors import MemoryLimitError
from napkin_cat.hardware.cpu import CPU, load_cpu
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.predict import (PIPELINES, KernelTime, Prediction, bound_densities, density_assumptions,
                                         environment, kernels_of)
from napkin_cat.hardware.structures import derived_at, structure_memories
from napkin_cat.hardware.timed import fastest, split_parts, tile_fulls
from napkin_cat.search.forms import Preparation
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.sizes import Sizes, as_sizes

#: the most parts a split stream is cut into when timed on a CPU
LARGEST_PARTS = 64
#: the smallest memory (values) the variants are derived at
SMALLEST_MEMORY = 2 ** 10


def product_dims(box) -> tuple:
    """The matrix-product dimensions of a contraction box: for each operand, the product of the output's axes that
    operand alone carries (``m``, ``n``), then the product of the contracted axes (``k``); axes the output shares
    with several operands are a batch, left aside (:func:`matrix_dims` of its arrays).

    >>> import napkin_cat as nc
    >>> from napkin_cat.hardware.toy import primitive_boxes
    >>> (box,) = list(primitive_boxes(nc.einsum("q d, x d -> q x")))
    >>> product_dims(box)
    (q, x, d)
    """
    return matrix_dims(box.dom.inside, box.cod.inside)


def matrix_dims(ins, outs) -> tuple:
    """:func:`product_dims` of a contraction read off its input and output arrays (``ins``, ``outs``: one output),
    as a cost record carries them (``OpCost.arrays``, at the sizes its FLOPs count): each operand's ``m``/``n``,
    then ``k``.

    >>> import napkin_cat as nc
    >>> from napkin_cat.cost.iocost import cost
    >>> d = nc.group(nc.library.matmul(), "a", "g_a")
    >>> (op,) = [o for o in cost(d).ops if o.pipeline == "tensor"]
    >>> matrix_dims(*op.arrays)
    (g_a, c, b)
    """
    if len(outs) != 1:
        raise HardwareError(f"a contraction has one output, this one has {len(outs)}: {list(outs)}")
    out = outs[0]
    dims = []
    for i, a in enumerate(ins):
        others = {n for j, b in enumerate(ins) if j != i for n in b.names}
        dims.append(sympy.Mul(*(sympy.sympify(ax.size) for ax in out.axes if ax.name in a.names
                                and ax.name not in others)))
    contracted = {ax.name: sympy.sympify(ax.size) for a in ins for ax in a.axes if ax.name not in out.names}
    dims.append(sympy.Mul(*contracted.values()))
    return tuple(dims)


def boundary_bytes(ty) -> sympy.Expr:
    """Bytes of the arrays of a type (a kernel's inputs or outputs)."""
    return sum((sympy.Mul(*(sympy.sympify(ax) for ax in a.shape)) * as_dtype(a.dtype).bytes for a in ty.inside),
               sympy.Integer(0))


class CPUKernelForm:
    """One kernel's terms as expressions in its sizes and tiles, read off the cost functor once; :meth:`at`
    evaluates them at concrete sizes (the search times many tile assignments of one structure this way)."""

    def __init__(self, box, cpu: CPU, *, level: int = 1):
        box = built_region(box)       # a partition record: the partition it stands for, as KernelForm reads it
        self.box, self.cpu, self.level = box, cpu.require_rates(), level
        c = cost(box).at_density(1)        # a mask read from data counted dense (the prediction says so)
        self.estimated = c.estimated       # a masked stream's trips that run: counted at each env instead
        self.pipes = {p: sympy.Integer(0) for p in PIPELINES}
        flops, shapes = [], []             # each contraction record's FLOPs, and its own box's (m, n, k)
        for op in c.ops:
            if op.pipeline not in PIPELINES:
                raise HardwareError(f"{op.label}: pipeline {op.pipeline!r} has no rate in a CPU model (it has "
                                    f"{PIPELINES})")
            n = sympy.sympify(op.flops * op.trips)
            self.pipes[op.pipeline] += n
            if op.pipeline == "tensor":
                ins, outs = op.arrays
                if not ins or not outs:
                    raise HardwareError(f"{op.label}: a tensor-pipeline record that does not carry its box's arrays "
                                        "(OpCost.arrays): its matrix dimensions are unknown")
                flops.append(n)
                shapes.append(matrix_dims(ins, outs))
        columns = [sympy.sympify(col) for col in c.columns.get(level, [])] or [sympy.Integer(0)]
        self._columns = len(columns)
        exprs = [sympy.sympify(c.H_bytes.get(level, 0)), boundary_bytes(box.dom) + boundary_bytes(box.cod),
                 narrowest(box), sympy.sympify(c.H.get(level, 0)), *columns, *(self.pipes[p] for p in PIPELINES),
                 *flops]
        self._head = len(exprs)
        # each record's own box: its dimensions and the FLOPs of one call 2·m·n·k, as positions of the values (equal
        # expressions evaluated once).  Its smallest dimension is taken at each env, not as a sympy Min (whose
        # building compares its arguments symbolically: issue 35)
        position: dict = {}

        def place(e):
            if e not in position:
                position[e] = len(exprs)
                exprs.append(e)
            return position[e]
        self._products = [(tuple(place(d) for d in dims), place(2 * sympy.Mul(*dims))) for dims in shapes]
        self.expressions = tuple(exprs)    # what :meth:`values` evaluates (the minima then taken per record)
        self.symbols = sorted(set().union(*(sympy.sympify(e).free_symbols for e in exprs)), key=str)
        self._values = sympy.lambdify(self.symbols, exprs, modules=[{"ceiling": math.ceil}, "math"],
                                      docstring_limit=0)   # (no docstring: printing it took a third of the time)

    def values(self, env: dict) -> list:
        """The forms at ``env``: bytes moved, compulsory bytes, blocks, values moved, the level-1 columns, then
        FLOPs per pipeline and (FLOPs, smallest dimension, FLOPs per call) per contraction record, each of its own
        box."""
        missing = [s for s in self.symbols if s not in env]
        if missing:
            raise HardwareError(f"{self.box.name}: sizes {sorted(map(str, missing))} are missing")
        v = self._values(*(env[s] for s in self.symbols))
        first = self._head - len(self._products)
        return [*v[:first], *(e for n, (dims, call) in zip(v[first:self._head], self._products)
                              for e in (n, min(v[d] for d in dims), v[call]))]

    def fits(self, values: list, memory: int) -> bool:
        """Whether the kernel's level-1 columns at these :meth:`values` hold at most ``memory`` values."""
        return max(values[4:4 + self._columns]) <= memory

    def at(self, env: dict, *, threads: int = 1, exact=None, values: list | None = None) -> KernelTime:
        """The kernel's :class:`~napkin_cat.hardware.prediction.KernelTime` at ``env`` (symbols → ints) on ``threads``;
        ``exact``: the cost functor's counts at ``env`` (ragged tiles, masked trips), else the forms; ``values``:
        :meth:`values` at ``env``, where already read."""
        v = self.values(env) if values is None else values
        moved, compulsory, B = float(v[0]), float(v[1]), int(round(v[2]))
        first = 4 + self._columns
        flops = {p: float(f) for p, f in zip(PIPELINES, v[first:first + len(PIPELINES)])}
        rest = v[first + len(PIPELINES):]
        products = [(float(rest[i]), float(rest[i + 1]), float(rest[i + 2])) for i in range(0, len(rest), 3)]
        if exact is None and self.estimated:
            exact = folded(self.box, env)
        if exact is not None:
            moved = float(exact.H_bytes.get(self.level, 0))
            if flops["tensor"]:
                scale = float(exact.flops.get("tensor", 0)) / flops["tensor"]
                products = [(f * scale, s, c) for f, s, c in products]
            flops = {p: float(exact.flops.get(p, 0)) for p in PIPELINES}
        cpu = self.cpu
        rounds = -(-B // threads)
        p = B / rounds
        terms = {"io": moved / (p * cpu.bandwidth(int(compulsory))),
                 "tensor": sum(f / cpu.contraction_rate(s) + f / c * cpu.contraction_call
                               for f, s, c in products) / p,
                 "special": flops["special"] / cpu.special / p, "general": flops["general"] / cpu.general / p}
        H = int(round(v[3])) if exact is None else int(exact.H.get(self.level, 0))
        return KernelTime(self.box.name, sum(terms.values()), terms, max(terms, key=terms.get), B, 1, rounds,
                          p / threads, {"compulsory": int(compulsory), "moved": int(moved), "values_moved": H}, flops)


def kind_pipelines(box) -> set:
    """The pipelines a primitive box computes on (its record's FLOPs per item)."""
    return set(box_cost(box).flops)


#: what a prediction of an algorithm with a mask that skips trips assumes besides (:func:`assumptions`)
MASK_APPLIED_ON_WHOLE_TRIPS = ("a mask's maps are charged only on the trips that run and that it does not allow whole "
                               "(counted at the kernel's tiles, as the C kernel runs them); on the trips it allows "
                               "whole the select that applies it and the loads only it reads (a document's ids) are "
                               "still charged, which the C kernel leaves out")


def assumptions(cpu: CPU, threads: int, masked: bool = False) -> tuple:
    """What every CPU prediction assumes (each a sentence a measurement can refute); ``masked``: the algorithm has a
    stream whose trips a mask skips (:data:`MASK_APPLIED_ON_WHOLE_TRIPS` too)."""
    return (f"rates are the {cpu.name} model's, one core each ({cpu.sources.get('rates', 'no source given')})",
            f"{threads} thread(s), one Grid block at a time each; blocks beyond a multiple of the threads run in a "
            "last round with idle threads",
            "a contraction runs at the rate measured for its smallest dimension (min of m, n, k at the tiles), "
            "interpolated in its logarithm, plus the model's cost per call "
            f"({cpu.contraction_call * 1e6:.3g} us) once per cblas_sgemm call (per batch index and trip)",
            "level-1 transfers at one core's copy bandwidth from L3 when the kernel's inputs and outputs fit L3, "
            "else from DRAM, per core (no shared limit)",
            "a core copies its tiles, then computes: transfers and arithmetic add up") + \
        ((MASK_APPLIED_ON_WHOLE_TRIPS,) if masked else ())


def predict_cpu(algorithm, hardware, sizes: dict | None = None, *, threads: int = 1) -> Prediction:
    """The predicted time of ``algorithm`` (a plan, or an algorithm diagram with ``sizes``: axes and tiles) on a CPU
    model (format 2, or its name) on ``threads`` threads; see the module docstring.  A partition record
    (``relabelled=False``) is timed as the partition it stands for, as :func:`~napkin_cat.hardware.predict.predict`
    times it."""
    cpu = load_cpu(hardware).require_rates()
    threads = _threads(threads)
    if hasattr(algorithm, "variable_map"):           # a plan: its diagram at its sizes
        sizes = Sizes(algorithm.sizes) | as_sizes(sizes)
        algorithm = algorithm.diagram
    if not isinstance(algorithm, Diagram):
        raise HardwareError(f"predict_cpu takes a plan or an algorithm diagram, got {type(algorithm).__name__}")
    if sizes is None:
        raise HardwareError("predict_cpu needs sizes= for every axis and tile of the algorithm (or a plan)")
    sizes = as_sizes(sizes).of(algorithm)
    env = sizes.env
    forms = [(CPUKernelForm(b, cpu), b) for b in kernels_of(algorithm)]
    ks = tuple(f.at(env, threads=threads, exact=at(b, sizes.restrict(b))) for f, b in forms)
    return Prediction(sum(k.time for k in ks), ks, cpu.name, dict(sizes), "none (copy, then compute)",
                      assumptions(cpu, threads, any(f.estimated for f, _ in forms))
                      + density_assumptions(algorithm, env, bound_densities(algorithm), printer="c"))


def _threads(threads) -> int:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise HardwareError(f"threads={threads!r}: the threads the C kernel runs on, a whole number ≥ 1")
    return threads


def tile_values(diagram, env: dict) -> dict:
    """Each tile symbol → the values timed: the powers of two that divide its axis, and the whole axis; a split
    stream's parts: powers of two up to :data:`LARGEST_PARTS` and its axis."""
    out = {}
    for tile, full in tile_fulls(diagram).items():
        n = full.subs(env)
        if not n.is_Integer:
            raise HardwareError(f"tile {tile} cuts an axis of size {full}: give every size "
                                f"({sorted(map(str, full.free_symbols))})")
        n = int(n)
        out[tile] = sorted({2 ** k for k in range(n.bit_length()) if n % 2 ** k == 0} | {n})
    for parts, full in split_parts(diagram):
        n = int(sympy.sympify(full).subs(env))
        out[parts] = [2 ** k for k in range(min(n, LARGEST_PARTS).bit_length())]
    return out


def independent(boxes) -> list:
    """The kernels of an algorithm in groups that share no tile symbol (each kernel's tiles are its own, as the
    search names them: a group is then one kernel), as lists of positions."""
    tiles = [set(tile_fulls(b)) for b in boxes]
    groups: list = []
    for k, own in enumerate(tiles):
        joined = [g for g in groups if any(tiles[i] & own for i in g)]
        merged = sorted({k, *(i for g in joined for i in g)})
        groups = [g for g in groups if g not in joined] + [merged]
    return sorted(groups)


def _timed_group(forms, boxes, cpu, env, *, memory, threads, min_blocks):
    """Every assignment of the tiles of some kernels that fits, timed: ``[(time, H, tiles, {position: time})]``."""
    values = {}
    for b in boxes.values():
        values.update(tile_values(b, env))
    tiles = list(values)
    out = []
    for combo in itertools.product(*(values[t] for t in tiles)):
        at_ = {**env, **dict(zip(tiles, combo))}
        read = {k: f.values(at_) for k, f in forms.items()}
        if not all(forms[k].fits(v, memory) for k, v in read.items()):
            continue
        kts = {k: f.at(at_, threads=threads, values=read[k]) for k, f in forms.items()}
        if min_blocks is not None and min(kt.blocks for kt in kts.values()) < min_blocks:
            continue
        out.append((sum(kt.time for kt in kts.values()), sum(kt.bytes["values_moved"] for kt in kts.values()),
                    dict(zip(tiles, combo)), kts))
    return sorted(out, key=lambda e: (e[0], e[1], tuple(-v for v in e[2].values())))


def _timed(structure, cpu: CPU, env: dict, *, memory: int, threads: int, level: int, min_blocks=None,
           kept: dict | None = None):
    """The tile assignments of one structure whose kernels fit ``memory`` values at ``level``, timed:
    ``[(time, H, tiles, kernel times)]``.  Kernels run one after another, each on its own tiles, so each group of
    kernels that share no tile with the others (:func:`independent`) is timed over its own assignments alone
    (their product is not enumerated): the rows are each group's assignments with the other groups at their
    fastest, the first row the fastest of all.

    ``kept``: a dict the caller owns for one call (one CPU, sizes, memory, threads, level and requirement), where
    each group's rows are kept under its kernels (boxes compare by their whole content: bubbles, tile names,
    insides), so a group two structures share (the backward's dQ kernel) is timed once per call."""
    boxes = kernels_of(structure.diagram)
    parts = []
    for group in independent(boxes):
        key = tuple(boxes[k] for k in group)
        rows = None if kept is None else kept.get(key)
        if rows is None:
            forms = {i: CPUKernelForm(b, cpu, level=level) for i, b in enumerate(key)}
            rows = _timed_group(forms, dict(enumerate(key)), cpu, env, memory=memory, threads=threads,
                                min_blocks=min_blocks)
            if kept is not None:
                kept[key] = rows
        if not rows:
            return []                    # a kernel no assignment fits: the structure has none
        parts.append([(t, h, tiles, {group[i]: kt for i, kt in kts.items()}) for t, h, tiles, kts in rows])
    best = [rows[0] for rows in parts]
    out = []
    for i, rows in enumerate(parts):
        for row in rows[1 if i else 0:]:
            chosen = best[:i] + [row] + best[i + 1:]
            kts = {k: kt for c in chosen for k, kt in c[3].items()}
            out.append((sum(c[0] for c in chosen), sum(c[1] for c in chosen),
                        {t: v for c in chosen for t, v in c[2].items()}, [kts[k] for k in sorted(kts)]))
    return out


@counts_kept()     # one call's running counts of masked streams, whichever entry it came by
def derive_for_cpu_time(diagram, hardware, sizes: dict, *, threads: int = 1, value_bytes: int = 4, level: int = 1,
                        book=None, min_blocks: int | None = None, cache=None, depth: int = 2,
                        ranking: str = "estimate"):
    """The algorithm of least predicted time on a CPU model (see the module docstring); a
    :class:`~napkin_cat.search.Derivation` with ``prediction`` and ``timings``.

    ``threads``: the threads the C kernel runs on (``k(..., threads=)``); ``value_bytes``: the bytes of one of its
    real values in the L2 (4: float; 8: the double kernel, ``nc.codegen.c(p, real="double")``: half as many fit);
    ``min_blocks``: only the structures derived
    under that requirement, at the assignments whose every kernel launches that many blocks; ``depth``: the
    ``prepare`` rewrites the search chains (``nc.derive``'s); ``ranking``: how the transfer searches rank the
    tilings of a kernel whose transfers are an estimate (a masked stream; ``derive(..., ranking=)``): by the
    estimate (default: every tiling of the structures found is timed here, its transfers counted), or
    ``"counted"``."""
    cpu = load_cpu(hardware).require_rates("derive(hardware=<a CPU model>)")
    threads = _threads(threads)
    if isinstance(value_bytes, bool) or value_bytes not in (1, 2, 4, 8):
        raise HardwareError(f"value_bytes={value_bytes!r}: the bytes of one real value of the kernel, 1, 2, 4 or 8")
    memory = cpu.l2 // value_bytes
    env = environment(sizes)
    memories = sorted({2 ** k for k in range(SMALLEST_MEMORY.bit_length() - 1, memory.bit_length())
                       if 2 ** k <= memory} | {memory})
    memories += structure_memories(diagram, env, memory)     # structures only: their tiles must fit the L2 below
    options = dict(sizes=sizes, level=level, book=book, cache=cache, depth=depth, ranking=ranking,
                   prepared=Preparation())      # the forms both searches read, prepared once
    found = [] if min_blocks is not None else derived_at(diagram, memories, min_blocks=None, required=True, **options)
    if min_blocks is not None or threads > 1:
        found += derived_at(diagram, memories, min_blocks=threads if min_blocks is None else min_blocks,
                            required=min_blocks is not None, **options)
    structures, timings, kept = {}, [], {}     # kept: this call's timed groups of kernels (:func:`_timed`)
    for regime in (g for d in found for g in d.regimes):
        structures.setdefault(str(regime.variant), regime)
    for label, regime in structures.items():
        for t, H, tiles, kts in _timed(regime, cpu, env, memory=memory, threads=threads, level=level,
                                        min_blocks=min_blocks, kept=kept):
            timings.append((t, H, tuple(-v for v in tiles.values()), label, regime, tiles, kts))
    if not timings:
        raise MemoryLimitError(f"no tile assignment of any derived algorithm fits the {cpu.name}'s L2 ({memory} "
                               f"values of {value_bytes} B at level {level}) at sizes {sizes}")
    t, H, regime, tiles, kts, chosen, opt = fastest(
        timings, sizes, f"least predicted time on the {cpu.name} ({threads} thread(s)) over {len(timings)} tile "
                        f"assignments of {len(structures)} structures")
    pred = Prediction(t, tuple(kts), cpu.name, dict(chosen), "none (copy, then compute)",
                      assumptions(cpu, threads, regime.cost.estimated)
                      + density_assumptions(regime.diagram, environment(chosen), bound_densities(regime.diagram),
                                           printer="c"))
    return dataclasses.replace(
        found[0], diagram=regime.diagram, trace=regime.trace, H=H, cost=regime.cost, optimum=opt,
        variant=regime.variant, prediction=pred, blocks=launched(regime.diagram, chosen),
        timings=tuple((label, tiles_, time, h) for time, h, _, label, _, tiles_, _ in timings))
