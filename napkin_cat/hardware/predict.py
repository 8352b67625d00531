"""Predicted time of an algorithm on a GPU model: bytes, FLOPs by pipeline, thread blocks in waves (§5.7).

The cost functor says what an algorithm moves and computes; a GPU model says how fast each of those
goes.  Per kernel ``k`` (a top-level box of the algorithm: Grids around a Kernel), at concrete sizes
(the cost functor's counts, ceil-aware), on ``N`` SMs at clock ``f``::

    T_hbm    = compulsory bytes / hbm              each global input read once, each output written once
    T_l2     = H_bytes / l2_to_smem                every GMEM ↔ SMEM transfer passes L2; re-reads hit it
    T_p      = Σ_ops FLOPs / (N · f · rate_p(dtype))          p ∈ tensor, special, general
    T_comp   = Σ_p T_p     overlap="sequential": a warpgroup issues its ops in program order (the
                           FlashAttention-2 schedule of §5.7, what kernels without warp specialisation do)
             = max_p T_p   overlap="pipelines": every pipeline busy at once (FlashAttention-3's aim)
    r        = max(1, min(⌊smem_per_sm / M⌋, ⌊regs_per_sm / 2R⌋))   blocks resident per SM, where
               M = the plan's level-1 bytes, a stream's loads twice (double-buffered) ≤ smem_per_block
               R = bytes of its block tensors other than loaded tiles (state in fp32): they live in the
                   registers of the threads that issue the tensor-core products (one scaling unit of the
                   GPU's hierarchy per instruction's m rows: a warpgroup per 64 on Hopper, a warp per 16
                   on Ampere; at least one, at most 256 threads) and take at most half of each
                   thread's (else the assignment is refused)
             = max(1, ⌊regs_per_sm / 2R'⌋)  where no product is printed as tl.dot: nothing is staged in
               shared memory (Triton stages only what feeds a tl.dot), R' = every tile and tensor of the block
               (loads once) in the registers of one warp per 2,048 values of its largest tensor, 4 to 8 warps
    waves    = ⌈B / (N · r)⌉,  u = B / (waves · N · r)          B thread blocks: the tail of the last wave
    T(k)     = max(T_hbm, T_l2, T_comp) / u + waves · λ + launch     memory overlapped with compute; λ = WAVE,
               the seconds a wave of blocks waits before its work overlaps (its first loads, its last stores)
    T        = Σ_k T(k)

``B`` is the one count of thread blocks, :func:`napkin_cat.algorithms.launches.narrowest` (the groups of the
Grids around the kernel times the parts of a split stream that is the whole kernel).

A matrix product whose side is shorter than the tensor-core instruction's (one query row when decoding) is
charged on the tensor cores at its padded FLOPs or on the CUDA cores at the general pipeline's rate, whichever
makes the kernel faster (:mod:`napkin_cat.hardware.products`; ``KernelTime.products`` says which).  A kernel
whose split stream is its whole work (FlashDecoding, :mod:`napkin_cat.algorithms.splits`) is two launches::

    parts:    B = groups · P blocks;  u = groups · T/⌈T/P⌉ / (waves · N · r)   T slices, the busiest part ⌈T/P⌉
    combine:  rows blocks (one per row of the groups: :attr:`~napkin_cat.algorithms.launches.KernelLaunch.rows`);
              T_l2 = (P · groups · |state| bytes + outputs) / l2_to_smem, T_hbm = outputs / hbm,
              T_comp = the merges, finishes and tail;  T = … / u + launch       (``KernelTime.combine``)

the parts' launch keeps the rest (its inputs, the partial states written, the trips).

A stream skipped by a mask read from data (:mod:`napkin_cat.algorithms.skipping`) runs the trips its block mask
allows, as the cost functor counts them: ``density=`` (``ρ``, a number for every such mask or ``{rho[…] or its
name: number}``; default 1, dense) scales those trips' transfers and FLOPs (``nc.cost(d, sizes, density=ρ)``), or
``block_mask=`` (the data's, :func:`napkin_cat.block_mask`) counts them exactly (the trips where no pair is allowed
skipped; ``nc.cost(d, sizes, block_mask=bm)``).  The terms are then those counts through the same rates, and the
assumptions state the density (or the block mask's measured density at the kernel's tiles).

Every rate is the model's (its TOML file, ``nc.hardware.load``) unless ``ceilings`` overrides it with a
measured one (``{"hbm": B/s, "l2": B/s, "tensor:bf16": FLOP/s, ...}``): a benchmark measures the copy
bandwidth and the matrix-product rate once and predicts every kernel from them.  The result lists the
assumptions it made (:attr:`Prediction.assumptions`), so a measurement that refutes one says which.  The records
(:class:`~napkin_cat.hardware.prediction.Prediction`, :class:`~napkin_cat.hardware.prediction.KernelTime`) are
:mod:`napkin_cat.hardware.prediction`'s and the sentences on masks :mod:`napkin_cat.hardware.masks`'s, both
importable from here too.

>>> import napkin_cat as nc
>>> from rewrites import tiled_matmul
>>> mm = tiled_matmul(nc.library.matmul()).diagram
>>> t = predict(mm, "h100-sxm5", {"a": 4096, "b": 4096, "c": 4096, "g_a": 128, "g_c": 128, "s_b": 32})
>>> t.blocks, t.bound
(1024, 'l2')
>>> round(t.terms["tensor"] * 1e3, 3)     # ms: 2·4096³ FLOPs at the TF32 rate
0.278
>>> round(t.terms["l2"] * 1e3, 3)         # ms: 2·4096³/128 values of 4 B at 12 TB/s
0.364
"""
from __future__ import annotations

import itertools
import math
from dataclasses import replace

import sympy

from napkin_cat.algorithms.bubbles import Region
from napkin_cat.algorithms.records import built_region
from napkin_cat.algorithms.launches import kernel_launches, narrowest
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.algorithms.splits import partial_moves
from napkin_cat.cost.iocost import cost, numel
from napkin_cat.cost.numeric import at, data_axes, densities, folded
from napkin_cat.errors import ArgumentError, ShapeError
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.model import GPU, load
from napkin_cat.hardware.on_chip import ChipForms, chip_forms
from napkin_cat.hardware.products import TENSOR, placement, products_of, rate, side
from napkin_cat.hardware.issuing import (ISSUING_THREADS, ROWS_PER_WARPGROUP, VALUES_PER_WARP, issuing_threads,
                                         register_warps, scaling_unit)
from napkin_cat.hardware.lambdas import Lambdas
# the records and the sentences of masks, public here where they were before (cputime, timed and tests read them)
from napkin_cat.hardware.masks import bound_densities, density_assumptions
from napkin_cat.hardware.prediction import KernelTime, Prediction
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.primitive import is_view
from napkin_cat.syntax.sizes import Sizes, as_sizes

#: lambdify's modules for a kernel's forms (``ceiling`` as ``math.ceil``: an int, as the cost functor counts)
_MODULES = [{"ceiling": math.ceil}, "math"]

PIPELINES = ("tensor", "special", "general")
OVERLAPS = ("sequential", "pipelines")
#: seconds from one kernel's launch to the next's on the same stream (a measured order of magnitude on
#: Hopper with PyTorch/Triton launchers: 3-6 µs); an assumption, listed in every prediction
LAUNCH = 4e-6
#: seconds each wave of thread blocks waits before its work overlaps (its blocks start together: their first loads
#: wait the memory's latency, their last stores drain); fitted to run 6's decoding sweep on an H200 (2026-12-04:
#: one-trip blocks, 1.75 µs a wave) and measured by ``benchmarks/gpu/probes.py`` beside it (ceiling ``"wave"``)
WAVE = 1.75e-6


def kernels_of(algorithm: Diagram) -> list:
    """The top-level regions of an algorithm (its kernels); anything else that computes is refused."""
    out = []
    for _, box in layers(algorithm):
        if isinstance(box, Region):
            out.append(box)
        elif getattr(box, "data", None) is not None and box.data.kind not in ("copy", "discard", "swap") \
                and not is_view(box):
            raise HardwareError(f"predict times kernels: {box.name!r} computes in global memory, outside any "
                                "kernel; wrap the algorithm in nc.kernel (one fused kernel) or nc.unfused "
                                "(one kernel per operation)")
    if not out:
        raise HardwareError("predict times kernels: the algorithm has none (nc.kernel / nc.unfused / nc.derive "
                            "make them)")
    return out


class KernelForm:
    """One kernel's terms as expressions in its sizes and tiles, read off the cost functor once; ``at(env)``
    evaluates them (the search times many tile assignments of one structure this way).  ``sample``: sizes
    at which the kernel's plan is made once, for the variables live together (its memory columns: ``chip``,
    :func:`~napkin_cat.hardware.on_chip.chip_forms`, where read already).

    Its matrix products are :class:`~napkin_cat.hardware.products.Product` s (each timed on the tensor cores,
    padded, or on the CUDA cores where padding wastes work); a kernel whose split stream is its whole work
    (:mod:`napkin_cat.algorithms.splits`) is two launches: the parts (``groups · P`` blocks) and the combine
    (one block per row of the groups: it reads the ``P`` partial states back, merges them, finishes and writes the
    outputs)."""

    def __init__(self, box, gpu: GPU, *, overlap: str, ceilings: dict, level: int, sample: dict, density=None,
                 chip: ChipForms | None = None):
        box = built_region(box)       # a partition record is timed as the partition it stands for (its plan, state)
        self.box, self.gpu, self.overlap, self.ceilings, self.level = box, gpu, overlap, ceilings, level
        #: each density of a mask from data of this kernel → the value its trips are counted at (1: dense)
        self.density = {s: (density or {}).get(s, 1) for s in densities(box)}
        c = cost(box).at_density(self.density)
        self.estimated = c.estimated          # a masked stream's trips that run: counted at each env instead
        #: the kernel's transfers at ``level`` (values, an expression in its sizes and tiles)
        self.transfers = sympy.sympify(c.H.get(level, 0))
        self.products = products_of(box, c.ops, gpu, ceilings)
        placed = {id(p.op) for p in self.products}
        launches = kernel_launches(box)
        split = launches[0] if len(launches) == 1 and launches[0].split is not None else None
        merged = {op.region for op in c.ops if op.role == "combine"}
        combine = [op for op in c.ops if split is not None and op.role in ("combine", "tail") and op.region in merged
                   and id(op) not in placed]
        named = {"moved": sympy.sympify(c.H_bytes.get(level, 0)),
                 "compulsory": _bytes_expr(box.dom) + _bytes_expr(box.cod), "blocks": narrowest(box)}
        for op in c.ops:
            n = sympy.sympify(op.flops * op.trips)
            named.setdefault(f"flops:{op.pipeline}", sympy.Integer(0))
            named.setdefault(f"seconds:{op.pipeline}", sympy.Integer(0))
            if id(op) in placed:                    # a product's time is its placement's (timed in at)
                continue
            named[f"flops:{op.pipeline}"] += n
            named[f"seconds:{op.pipeline}"] += n / sympy.Float(rate(gpu, ceilings, op.pipeline, op))
        for i, p in enumerate(self.products):
            named.update({f"product:{i}:flops": p.flops, f"product:{i}:pad": p.pad,
                          f"product:{i}:tensor": p.tensor, f"product:{i}:cuda": p.cuda,
                          f"product:{i}:joint": p.joint, f"product:{i}:least": p.least})
        self.split = split is not None
        if split is not None:
            state = sum((numel(b.cod.inside[0]) * as_dtype(b.cod.inside[0].dtype).bytes
                         for b in partial_moves(schedule_of(split.split))
                         if b.data.kind == "load" and b.cod.inside[0].level == level), sympy.Integer(0))
            trips = sympy.ceiling(sympy.sympify(split.split.full_size()) / sympy.sympify(split.split.size))
            # part p runs ⌈(p+1)T/P⌉ − ⌈pT/P⌉ of the T slices: the launch lasts as long as the busiest, ⌈T/P⌉
            named["busy"] = split.groups * trips / sympy.ceiling(trips / split.parts)
            named.update({"combine:moved": split.parts * split.groups * state + _bytes_expr(box.cod),
                          "combine:compulsory": _bytes_expr(box.cod), "combine:blocks": split.rows})
            for op in combine:
                n = sympy.sympify(op.flops * op.trips)
                named[f"combine:flops:{op.pipeline}"] = named.get(f"combine:flops:{op.pipeline}", 0) + n
                named[f"combine:seconds:{op.pipeline}"] = (named.get(f"combine:seconds:{op.pipeline}", 0)
                                                           + n / sympy.Float(rate(gpu, ceilings, op.pipeline, op)))
        chip = chip_forms(box, level, sample) if chip is None else chip
        for i, (col, regs) in enumerate(zip(chip.columns, chip.registers)):
            named[f"column:{i}"], named[f"registers:{i}"] = col, regs
        for i, held in enumerate(chip.in_registers):
            named[f"in_registers:{i}"] = held
        named["largest"] = chip.largest
        rows = {side(p.use, "m") for p in self.products}      # each product's rows, as its record counts them
        named["rows"] = sympy.Max(*rows) if rows else sympy.Integer(0)
        self.names = list(named)
        exprs = [sympy.sympify(e) for e in named.values()]
        self._forms = Lambdas(exprs, _MODULES)     # each distinct form compiled once (lambdify's values)
        self.symbols = self._forms.symbols

    def values(self, env: dict) -> dict:
        """The forms at ``env`` (every symbol they use must be there): bytes moved and compulsory, blocks, rows,
        FLOPs and seconds by pipeline (the products' apart: ``products``), bytes on chip and in registers, and a
        split kernel's ``combine`` launch (its bytes, blocks, FLOPs and seconds)."""
        missing = [s for s in self.symbols if s not in env]
        if missing:
            raise HardwareError(f"{self.box.name}: sizes {sorted(map(str, missing))} are missing")
        v = dict(zip(self.names, map(float, self._forms.values(env))))

        def by_pipeline(prefix):
            return {k.split(":")[-1]: x for k, x in v.items() if k.startswith(prefix)}
        out = {"moved": v["moved"], "compulsory": v["compulsory"], "blocks": int(round(v["blocks"])),
               "rows": int(v["rows"]), "flops": by_pipeline("flops:"), "seconds": by_pipeline("seconds:"),
               "on_chip": int(max((x for k, x in v.items() if k.startswith("column:")), default=0)),
               "registers": int(max((x for k, x in v.items() if k.startswith("registers:")), default=0)),
               "in_registers": int(max((x for k, x in v.items() if k.startswith("in_registers:")), default=0)),
               "largest": int(v["largest"]),
               "products": [{"flops": v[f"product:{i}:flops"], "pad": v[f"product:{i}:pad"],
                             "tensor": v[f"product:{i}:tensor"], "cuda": v[f"product:{i}:cuda"],
                             "joint": int(round(v[f"product:{i}:joint"])),
                             "least": int(round(v[f"product:{i}:least"]))}
                            for i in range(len(self.products))]}
        out["busy"] = v.get("busy", out["blocks"])
        if self.split:
            out["combine"] = {"moved": v["combine:moved"], "compulsory": v["combine:compulsory"],
                              "blocks": int(round(v["combine:blocks"])), "flops": by_pipeline("combine:flops:"),
                              "seconds": by_pipeline("combine:seconds:")}
        return out

    def at(self, env: dict, *, exact=None, launch: float = LAUNCH) -> KernelTime:
        """The kernel's :class:`KernelTime` at ``env`` (symbols → ints); ``exact``: the cost functor's
        ceil-aware counts at ``env`` (ragged tiles), else the forms (exact where the tiles divide and no mask skips
        trips: a masked kernel's are counted at ``env``).  Its padded products are placed where the kernel runs
        fastest (ties, where memory bounds the kernel: the placement of less compute time, then the tensor cores);
        a split kernel's combine is a second launch."""
        v = self.values(env)
        if exact is None and self.estimated:
            exact = folded(self.box, env, density=self.density)
        flops, seconds, moved, products = v["flops"], v["seconds"], v["moved"], v["products"]
        if exact is not None:
            moved = float(exact.H_bytes.get(self.level, 0))
            for p in list(flops):
                n = flops[p] + (sum(x["flops"] for x in products) if p == "tensor" else 0)
                if n and exact.flops.get(p, 0) != n:
                    ratio = float(exact.flops.get(p, 0)) / float(n)   # (counts at a density: exact, sympy's)
                    seconds[p], flops[p] = seconds[p] * ratio, flops[p] * ratio
                    for x in products if p == "tensor" else ():
                        x.update(flops=x["flops"] * ratio, tensor=x["tensor"] * ratio, cuda=x["cuda"] * ratio)
        B = v["blocks"]
        staged = any(p.printed_dot(x["least"], x["joint"]) for p, x in zip(self.products, products))
        try:
            r, on_chip = self.residency(v, staged=staged)
        except HardwareError:           # tiles over the registers: timed as staged (a kernel that spills)
            if staged:
                raise
            r, on_chip = self.residency(v, staged=True)
        combine = v.get("combine")
        if combine is not None:     # the combine's work leaves the parts' launch
            moved -= combine["moved"]
            for p, s in combine["seconds"].items():
                seconds[p], flops[p] = seconds[p] - s, flops[p] - combine["flops"][p]
        best = None
        for where in itertools.product(*([1] if x["joint"] > 1 else [0] if x["pad"] == 1 else [0, 1]
                                         for x in products)):
            secs, fl = dict(seconds), dict(flops)
            for x, w in zip(products, where):
                pipe = "general" if w else "tensor"
                secs[pipe] = secs.get(pipe, 0.0) + x["cuda" if w else "tensor"]
                fl[pipe] = fl.get(pipe, 0.0) + x["flops"]
            kt = self._launch(self.box.name, moved, v["compulsory"] - (combine or {}).get("compulsory", 0.0), secs,
                              fl, B, r, launch, on_chip, busy=v["busy"])
            key = (kt.time, sum(secs.get(p, 0.0) for p in PIPELINES))   # ties (memory-bound): less compute
            if best is None or key < best[0]:
                best = (key, kt, where)
        _, kt, where = best
        products = {p.name: placement(x["pad"], w) for p, x, w in zip(self.products, products, where)}
        if combine is None:
            return replace(kt, products=products)
        c = self._launch(f"{self.box.name} (combine)", combine["moved"], combine["compulsory"], combine["seconds"],
                         combine["flops"], combine["blocks"], r, launch, on_chip, waits=False)
        return replace(kt, time=kt.time + c.time, products=products, combine=c)

    def residency(self, v: dict, *, staged: bool) -> tuple:
        """``(r, on_chip)``: blocks resident per SM and what each holds, for the forms' values ``v``.  ``staged``
        (some product printed as ``tl.dot``: :meth:`~napkin_cat.hardware.products.Product.printed_dot`): the
        stream's loads staged in shared memory (the plan's level-1 bytes
        ``M``, a stream's loads twice) and the block's other tensors in the registers of the threads issuing the
        products (``R``); else every tile in registers (``in_registers``, loads once: Triton stages no load that
        feeds no ``tl.dot``), spread over :func:`~napkin_cat.hardware.issuing.register_warps` warps (:meth:`at`
        times a kernel whose tiles do not fit there as staged).  A HardwareError where the tiles do not fit::

            staged:  r = max(1, min(⌊smem_per_sm / M⌋, ⌊regs_per_sm / 2R⌋))      M ≤ smem_per_block
            else:    r = max(1, ⌊regs_per_sm / 2R'⌋),  R' = in_registers           R' per thread ≤ half a thread's
        """
        gpu = self.gpu
        if staged:
            M, R = v["on_chip"], v["registers"]
            if M > gpu.smem_per_block:
                raise HardwareError(f"{self.box.name}: {M} B on chip per thread block, over the {gpu.name}'s "
                                    f"{gpu.smem_per_block} B (memory.smem_per_block): choose smaller tiles")
            threads = issuing_threads(gpu, v["rows"])
        else:
            M, R = 0, v["in_registers"]
            threads = register_warps(v["largest"]) * gpu.threads("warp")
        per_thread = R / (threads * gpu.register_bytes)
        if per_thread > -(-gpu.registers_per_thread // 2):
            raise HardwareError(f"{self.box.name}: {R} B of block tensors in registers over {threads} threads is "
                                f"{per_thread:.0f} registers per thread, over half the {gpu.name}'s "
                                f"{gpu.registers_per_thread} (the rest holds addresses and temporaries): choose "
                                "smaller tiles")
        r = max(1, min(gpu.smem_per_sm // max(M, 1), gpu.registers_per_sm * gpu.register_bytes // max(2 * R, 1)))
        return r, {"on_chip_per_block": M, "registers_per_block": R, "threads": threads}

    def _launch(self, label, moved, compulsory, seconds, flops, B, r, launch, on_chip, busy=None,
                waits=True) -> KernelTime:
        """One launch of ``B`` blocks, ``r`` resident per SM: ``max(T_hbm, T_l2, T_comp) / u + waves · λ + launch``,
        ``u`` the share of the waves' slots the work fills: ``busy`` blocks' worth (a split's parts: ``groups ·
        T/⌈T/P⌉``, its work spread over the parts that hold slices, the busiest setting the time; else ``B``).
        ``waits=False`` (a split's combine: one small block per row, its residency not modelled) charges no λ."""
        gpu = self.gpu
        hbm = float(self.ceilings.get("hbm", gpu.hbm))
        l2 = float(self.ceilings.get("l2", gpu.l2_to_smem or gpu.hbm))
        terms = {"hbm": float(compulsory) / hbm, "l2": float(moved) / l2}
        terms.update({p: float(seconds.get(p, 0.0)) for p in PIPELINES})   # (plain floats: the record is JSON)
        pipes = [terms[p] for p in PIPELINES]
        comp = sum(pipes) if self.overlap == "sequential" else max(pipes)
        waves = math.ceil(B / (gpu.sm_count * r))
        u = (B if busy is None else busy) / (waves * gpu.sm_count * r)
        bound = max(("hbm", "l2", "compute"), key=lambda k: comp if k == "compute" else terms[k])
        if bound == "compute":
            bound = max(PIPELINES, key=lambda p: terms[p])
        terms["launch"] = launch
        terms["wave"] = waves * float(self.ceilings.get("wave", WAVE)) if waits else 0.0
        return KernelTime(label, max(terms["hbm"], terms["l2"], comp) / u + terms["wave"] + launch, terms, bound, B,
                          r, waves, u,
                          {"compulsory": int(compulsory), "moved": int(moved), **on_chip},
                          {p: float(n) for p, n in flops.items()})


def register_cap(gpu: GPU) -> int:
    """The most bytes a thread block without tensor-core products holds in registers: half of each thread's, over
    the most warps :func:`~napkin_cat.hardware.issuing.register_warps` gives (8).

    >>> register_cap(load("h100-sxm5"))
    131072
    """
    return register_warps(2 ** 62) * gpu.threads("warp") * -(-gpu.registers_per_thread // 2) * gpu.register_bytes


def _bytes_expr(ty) -> sympy.Expr:
    total = sympy.Integer(0)
    for a in ty.inside:
        n = sympy.Integer(1)
        for ax in a.shape:
            n = n * sympy.sympify(ax)
        total += n * as_dtype(a.dtype).bytes
    return total


def environment(sizes) -> dict:
    """Sizes (names or symbols → positive ints, checked: :class:`~napkin_cat.syntax.sizes.Sizes`) as the
    symbols the cost functor uses."""
    return as_sizes(sizes).env


def check_ceilings(ceilings) -> dict:
    """``ceilings`` as a dict checked by key: ``"hbm"``, ``"l2"`` (bytes/s) or ``"<pipeline>:<dtype>"`` (FLOP/s); a
    HardwareError naming the unknown ones.

    >>> check_ceilings({"hbm": 3e12})
    {'hbm': 3000000000000.0}
    """
    ceilings = dict(ceilings or {})
    unknown = [k for k in ceilings if k not in ("hbm", "l2", "wave") and k.split(":")[0] not in PIPELINES]
    if unknown:
        raise HardwareError(f"unknown ceilings {unknown}: give 'hbm', 'l2' (bytes/s), 'wave' (seconds a wave of "
                            f"blocks waits, WAVE) or '<pipeline>:<dtype>' (FLOP/s) with pipeline in {PIPELINES}")
    return ceilings


def assumptions(gpu: GPU, ceilings: dict, overlap: str, launch: float, kernels: tuple = ()) -> tuple:
    """What every prediction assumes (each a sentence a measurement can refute); ``kernels``: the
    :class:`KernelTime` s predicted, whose padded products and combine launches are said too."""
    placed = [f"{name}: {where}" for k in kernels for name, where in k.products.items() if where != TENSOR]
    split = any(k.combine is not None for k in kernels)
    return (
        f"rates are the {gpu.name} model's" + (f", except the measured {sorted(ceilings)}" if ceilings else ""),
        "re-read tiles hit L2 (T_l2 at l2_to_smem); only compulsory bytes reach HBM",
        "memory transfers overlap compute (asynchronous copies, pipelined stages)",
        f"pipelines: {overlap} (§5.7)",
        "every pipeline runs at its peak rate while it has work (no latency or issue limits)",
        "on chip per block: the plan's level-1 bytes, a stream's loads twice (double-buffered), fit "
        "smem_per_block; block tensors other than loaded tiles (state in fp32) live in the registers of the "
        f"threads that issue the tensor-core products ({scaling_unit(gpu.hierarchy)}s of the {gpu.name}, one "
        f"per {gpu.tensor_shapes[0].m if gpu.tensor_shapes else ROWS_PER_WARPGROUP} rows, at most "
        f"{ISSUING_THREADS} threads) and take at most half of each thread's",
        "a kernel with no product printed as tl.dot (each side longer than 1, one axis each) stages nothing in "
        "shared memory: its tiles (loaded once) and "
        f"tensors live in the registers of one warp per {VALUES_PER_WARP} values of its largest tensor (4 to 8 warps) "
        "and take at most half of each thread's",
        "blocks resident per SM: the fewest that shared memory and the register file allow",
        f"each wave of blocks waits {float(ceilings.get('wave', WAVE)) * 1e6:g} µs before its work overlaps",
        f"{launch * 1e6:g} µs per kernel launch",
    ) + (("matrix products with a side shorter than the tensor-core instruction's run padded to it on the tensor "
          "cores (charged the padded FLOPs) or on the CUDA cores (the general pipeline's rate, on the output's "
          "format), whichever is predicted faster: " + "; ".join(placed),) if placed else ()) + (
        ("a split stream's combine is its own launch of one block per row of the groups after the parts' launch, "
         "at the parts' residency: it reads the P partial states back through L2 (T_l2), merges them and writes the "
         "outputs (T_hbm); its blocks are not charged the wave's wait",) if split else ())


def predict(algorithm, hardware, sizes: dict | None = None, *, overlap: str = "sequential",
            ceilings: dict | None = None, launch: float = LAUNCH, density=None, block_mask=None) -> Prediction:
    """The predicted time of ``algorithm`` (a plan, or an algorithm diagram with ``sizes``: axes and tiles)
    on ``hardware`` (a GPU model or its name); ``density`` / ``block_mask``: what its masks read from data let run
    (:func:`bound_densities`; default dense); see the module docstring.  A partition record (``relabelled=False``)
    is timed as the partition it stands for (:func:`~napkin_cat.algorithms.records.built`: each kernel's plan and
    state are the built partition's), so ``predict(record) == predict(built(record))``."""
    gpu = hardware if isinstance(hardware, GPU) else load(hardware)
    if overlap not in OVERLAPS:
        raise HardwareError(f"overlap {overlap!r}: one of {OVERLAPS} (§5.7)")
    if hasattr(algorithm, "variable_map"):           # a plan: its diagram at its sizes
        sizes = Sizes(algorithm.sizes) | as_sizes(sizes)
        algorithm = algorithm.diagram
    if not isinstance(algorithm, Diagram):
        raise HardwareError(f"predict takes a plan or an algorithm diagram, got {type(algorithm).__name__}")
    if sizes is None:
        raise HardwareError("predict needs sizes= for every axis and tile of the algorithm (or a plan)")
    ceilings = check_ceilings(ceilings)
    sizes = as_sizes(sizes).of(algorithm)
    env = sizes.env
    if block_mask is not None and density is not None:
        raise ArgumentError("a block mask decides every trip exactly: give block_mask= or density=, not both")
    if block_mask is not None and not data_axes(algorithm):
        raise ShapeError("a block mask was given, but no stream of this algorithm skips by a mask read from data")
    rho = bound_densities(algorithm, density)

    def counted(b):         # the cost functor's counts of kernel b: at the density, or given the block mask
        if block_mask is not None and data_axes(b):
            return at(b, sizes.restrict(b), block_mask=block_mask)
        return at(b, sizes.restrict(b), density={s: v for s, v in rho.items() if s in densities(b)})
    ks = tuple(KernelForm(b, gpu, overlap=overlap, ceilings=ceilings, level=1, sample=env, density=rho).at(
        env, exact=counted(b), launch=launch) for b in kernels_of(algorithm))
    return Prediction(sum(k.time for k in ks), ks, gpu.name, dict(sizes), overlap,
                      assumptions(gpu, ceilings, overlap, launch, ks)
                      + density_assumptions(algorithm, env, rho, block_mask))
