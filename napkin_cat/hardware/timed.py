"""Tiles and variant by predicted time: ``nc.derive(f, sizes=..., hardware=gpu)`` (§5.4 divisors, §5.7 time).

``nc.derive`` with a memory finds, per memory size, the algorithm of fewest transfers ``H``.  Transfers
do not see what else a GPU charges: a stream's slice ``s`` leaves ``H`` unchanged but sets how many
trips pay the per-trip rescaling and how many tensor-core instructions a trip issues; larger groups cut
``H`` but launch fewer blocks.  On a hardware model the search goes on from there:

1. the structures (variants) ``derive`` finds at memories ``2^10 … smem_per_block / 2`` values (from the
   smallest that holds an algorithm, where the smaller hold none: a layer norm keeps whole rows) and at the memories
   above, up to one that holds every input and output of ``f``
   (:func:`~napkin_cat.hardware.structures.structure_memories`: they only propose structures, each timed at the
   tiles that fit the block as below; attention's backward with dK and dV in one kernel is transfer-optimal only
   there), each with and without the SM count as a requirement (``min_blocks``), and each of them
   with every kernel that has no legal tiles partitioned as the fastest of its block's partitions that has
   (:func:`legal_partitions`: transfers do not tell apart a contraction over ``h·d`` streamed along ``h`` or along
   ``d``; the least legal tiles do), a masked stream's tilings ranked there by the symbolic estimate
   (``ranking``: step 3 counts them);
2. per structure, every tile assignment the hardware allows: each tile a multiple of its tensor-core and
   coalescing divisors (:mod:`~napkin_cat.hardware.divisors`), a power of two (block tensors) no larger
   than ``largest`` and dividing its axis, at least 16 (a block tensor's side is padded to 16) or, on no
   matrix product, 1 (one head per block); a product's side along an axis shorter than the tensor-core
   instruction's (one query row when decoding) is the whole axis, and the product runs padded on the tensor
   cores or on the CUDA cores, as the time model predicts faster (:mod:`~napkin_cat.hardware.products`); a
   tile that is one factor of a side along several axes (grouped-query attention's ``g_g·g_q``) is also 1 or
   its whole axis: the side is their product (the group's heads filling the rows one query row leaves empty);
3. each timed by :mod:`~napkin_cat.hardware.predict`'s model from each kernel's cost, read off once (its terms
   compiled once, its transfers evaluated in exact arithmetic: no sympy substitution per assignment); an
   assignment whose live bytes exceed ``smem_per_block`` is dropped (a structure with a kernel that holds more
   than that at its least tiles, before its kernels' costs are read: :mod:`~napkin_cat.hardware.on_chip`).  A
   kernel's time depends on its own tiles only, so the kernels that share no tile are timed apart: each connected
   component of the kernel–tile graph at its own assignments, not the product of all
   (:mod:`~napkin_cat.hardware.separable`, where the law that this finds the same winner as the whole product is
   proved);
4. the fastest wins (ties: fewer transfers, then larger tiles; the time compared is the exact sum of the
   kernels' times) among the assignments the printers can print: every array of the plan within their 32-bit
   indices (:func:`admissible`; and within ``global_memory`` where given).

The winner keeps its structure's trace (made by the rules), so ``r.trace.replay(f)`` still gives
``r.diagram``; ``r.optimum.sizes`` are the sizes with the chosen tiles (``r.optimum.exact_sizes`` the tiles
alone), ``r.prediction`` the model's time at them and ``r.timings`` the assignments timed, fastest first: per structure,
each component's assignments with the other components at their best (the first the structure's best; for one
kernel, or kernels that all share tiles, every assignment), as ``(variant, tiles, seconds, H)``.

The objective is chosen in :mod:`~napkin_cat.hardware.objective` (``nc.derive``), not registered with the search:
the search's derive (transfers), this module's :func:`derive_for_time` for a GPU model, or
:func:`~napkin_cat.hardware.cputime.derive_for_cpu_time` for a CPU model; this layer imports the search, and the
search knows nothing of hardware.

>>> import napkin_cat as nc
>>> mm = nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="fp32")
>>> r = derive_for_time(mm, "h100-sxm5", {"a": 2048, "b": 2048, "c": 2048})
>>> r.optimum.sizes, r.prediction.bound
(Sizes({'a': 2048, 'b': 2048, 'c': 2048, 'g_c': 256, 'g_a': 128, 's_b': 64}), 'l2')
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import re
from fractions import Fraction

import sympy

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.algorithms.launches import blocks
from napkin_cat.cost.at_sizes import counts_kept
from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.cost.numeric import at, folded
from napkin_cat.cost.optimum import Optimum
from napkin_cat.errors import LoweringError, MemoryLimitError
from napkin_cat.hardware.divisors import constraints, uses_of
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.model import GPU, load
from napkin_cat.hardware.on_chip import ChipForms, chip_forms, least_on_chip
from napkin_cat.hardware.separable import assembled, components
from napkin_cat.hardware.structures import derived_at, structure_memories
from napkin_cat.plan import plan
from napkin_cat.plan.program import LARGEST_INDEX
from napkin_cat.cost.record import Density
from napkin_cat.hardware.predict import (LAUNCH, OVERLAPS, KernelForm, Prediction, assumptions, bound_densities,
                                         check_ceilings, density_assumptions, environment, kernels_of, register_cap)
from napkin_cat.search.alternatives import partition_of
from napkin_cat.search.forms import Preparation
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.sizes import Sizes

#: the largest block side tried (a Triton block tensor's side; 256 fp32 rows of a tile fill a warpgroup's registers)
LARGEST = 256


def tile_fulls(diagram) -> dict:
    """Each tile symbol of an algorithm → the size of the axis it cuts (an expression)."""
    out = {}
    for _, b in layers(diagram):
        if isinstance(b, (Grid, Stream)):
            out[sympy.sympify(b.size)] = sympy.sympify(b.full_size())
        if isinstance(b, Region):
            out.update(tile_fulls(b.arg))
    return out


def tile_values(gpu: GPU, diagram, env: dict, *, largest: int = LARGEST) -> dict:
    """Each tile symbol → the values the hardware allows (see the module docstring, step 2)."""
    arrays, matmuls = uses_of(diagram, gpu.hierarchy)
    c = constraints(gpu, arrays=arrays, matmuls=matmuls)
    sides = {getattr(mm, dim) for mm in matmuls for dim in ("m", "n", "k")}
    on_products = {f for mm in matmuls for dim in ("m", "n", "k") for f in mm.factors(dim)}
    out = {}
    for tile, full in tile_fulls(diagram).items():
        n = full.subs(env)
        if not n.is_Integer:
            raise HardwareError(f"tile {tile} cuts an axis of size {full}: give every size "
                                f"({sorted(map(str, full.free_symbols))})")
        n, step = int(n), c.divisor(str(tile))
        values = [v for v in (2 ** k for k in range(0, int(math.log2(largest)) + 1)) if v % step == 0 and n % v == 0]
        if str(tile) in on_products and str(tile) not in sides:     # one factor of a side of several axes
            values = [v for v in values if v == 1 or v >= 16 or v == n]
        elif str(tile) in on_products:
            values = [v for v in values if v >= 16] or ([n] if n % step == 0 and n <= largest else [])
            if not values and n < step and n % c.divisor(str(tile), products=False) == 0:
                values = [n]        # an axis shorter than the instruction: one tile, its products padded or not
        else:
            values = [v for v in values if v == 1 or v >= 16]
        if not values:
            raise HardwareError(f"no legal value for tile {tile} of an axis of {n}: it must be a multiple of {step} "
                                f"(tensor-core shapes and coalescing on the {gpu.name}) that divides {n}")
        out[tile] = values
    for parts in split_parts(diagram):      # a split stream's parts: powers of two up to its axis
        n = int(sympy.sympify(parts[1]).subs(env))
        out[parts[0]] = [2 ** k for k in range(0, int(math.log2(min(n, largest_parts))) + 1)]
    return out


#: the most parts a split stream is cut into when timed
largest_parts = 1024


def split_parts(diagram) -> list:
    """``(parts symbol, streamed axis's size)`` of each split stream with symbolic parts in an algorithm."""
    out = []
    for _, b in layers(diagram):
        if isinstance(b, Stream) and isinstance(sympy.sympify(b.params.get("parts", 1)), sympy.Symbol):
            out.append((sympy.sympify(b.params["parts"]), sympy.sympify(b.full_size())))
        if isinstance(b, Region):
            out += split_parts(b.arg)
    return out


def kernel_reads(box, form: KernelForm) -> set:
    """The symbols kernel ``box`` reads when timed: its tiles and split parts, its terms' and its transfers'
    symbols (two kernels that share one are timed together: :mod:`~napkin_cat.hardware.separable`)."""
    return (set(tile_fulls(box)) | {p for p, _ in split_parts(box)} | set(form.symbols)
            | form.transfers.free_symbols)


def timed_kernels(forms: dict, tiles: list, values: dict, env: dict, *, level: int, launch: float,
                  min_blocks=None, refusals: dict | None = None) -> list:
    """Every legal assignment of ``tiles`` (their ``values``) to the kernels ``forms`` (position →
    :class:`~napkin_cat.hardware.predict.KernelForm`) that read them, timed: ``[(T, H, −tiles, tiles, {position:
    kernel time})]``, least first (:mod:`~napkin_cat.hardware.separable`'s ``key``).  ``T`` is the exact sum of the
    kernels' times (a Fraction), ``H`` their transfers at ``level``: each kernel's expression at the tiles in exact
    arithmetic, or, where a mask read from data skips trips, counted at them as a run counts them."""
    rows = []
    for combo in itertools.product(*(values[t] for t in tiles)):
        at = {**env, **dict(zip(tiles, combo))}
        kts, moved = {}, 0
        try:
            for k, f in forms.items():
                exact = folded(f.box, at, density=f.density) if f.estimated else None
                kts[k] = f.at(at, exact=exact, launch=launch)
                moved += int(exact.H.get(level, 0)) if f.estimated else value(f.transfers, at)
        except HardwareError as e:     # over the thread block's shared memory or registers
            if refusals is not None:   # why, one message per kind (the message with its numbers left out)
                refusals.setdefault(re.sub(r"[\d.]+", "#", str(e)), str(e))
            continue
        if min_blocks is not None and any(kt.blocks < min_blocks for kt in kts.values()):
            continue                   # the tiles the requirement was derived under are not the only ones timed
        rows.append((sum((Fraction(kt.time) for kt in kts.values()), Fraction(0)), moved,
                     tuple(-v for v in combo), dict(zip(tiles, combo)), kts))
    return sorted(rows, key=lambda e: e[:3])


def structure_timings(algorithm, gpu, env, *, overlap, ceilings, level, largest, launch, min_blocks=None,
                      density=1, refusals: dict | None = None, forms: dict | None = None) -> list:
    """One structure (an ``algorithm`` a regime of derive found) timed at its legal tile assignments:
    ``[(T, H, tiles, kernel times)]``, the fastest first (``T`` exact, a Fraction; ties: fewer transfers, then
    larger tiles).  The kernels that share no tile are timed apart (:mod:`~napkin_cat.hardware.separable`: each
    component's own assignments, not their product); the rows are each component's assignments with the others at
    their best, the first the best of all (the structure's least over every assignment, by the law there).  With
    ``min_blocks``, only assignments whose every kernel launches that many blocks; ``density``: what its masks read
    from data let run (:func:`~napkin_cat.hardware.masks.bound_densities`); ``refusals``: filled with one message
    per kind of refused assignment (shared memory, registers, ...); ``forms``: the kernels' forms read so far in
    this call (:func:`kernel_forms`), filled.  A structure with a kernel whose least bytes on chip
    (:func:`~napkin_cat.hardware.on_chip.least_on_chip`, at the least legal tiles) exceed the block's shared memory
    has no legal assignment: ``[]``, its forms never built."""
    values = tile_values(gpu, algorithm, env, largest=largest)
    tiles = list(values)
    first = {**env, **{t: min(v) for t, v in values.items()}}
    rho = bound_densities(algorithm, density)
    boxes = kernels_of(algorithm)
    memo = {} if forms is None else forms
    over = over_block(boxes, gpu, memo, level=level, sample=first)
    if over is not None:                 # every tiling refused: no cost read, no terms compiled
        if refusals is not None:
            e = HardwareError(f"{over[0].name}: at least {over[1]} B on chip per thread block at its least tiles, "
                              f"over the {gpu.name}'s {gpu.smem_per_block} B (memory.smem_per_block) staged and "
                              f"its {register_cap(gpu)} B of a block's registers held in them")
            refusals.setdefault(re.sub(r"[\d.]+", "#", str(e)), str(e))
        return []
    forms = kernel_forms(boxes, gpu, memo, overlap=overlap, ceilings=ceilings, level=level, sample=first,
                         density=rho)
    parts = []
    for kernels, own in components([kernel_reads(b, f) for b, f in zip(boxes, forms)], tiles):
        rows = timed_kernels({k: forms[k] for k in kernels}, list(own), values, env, level=level, launch=launch,
                             min_blocks=min_blocks, refusals=refusals)
        parts.append([(t, h, tiles_, kts) for t, h, _, tiles_, kts in rows])
    return assembled(tiles, parts)


def kernel_forms(boxes, gpu, memo: dict, *, overlap, ceilings, level, sample: dict, density: dict) -> list:
    """The :class:`~napkin_cat.hardware.predict.KernelForm` of each kernel of ``boxes``, read once per kernel in
    ``memo`` (one call's: its GPU, overlap, ceilings and level are the call's).  A form is a function of its kernel
    (equal regions: equal parameters, inside, inputs and outputs), the sample sizes its plan is made at (those the
    kernel reads, ``Sizes(sample).restrict(kernel)``, as the form reads them) and the densities of its masks from
    data, all in the key: so the structures of one derive that share a kernel, and a kernel timed alone
    (:func:`legal_partitions`), read one form (8 of 47 forms in the saved attention backward on h100-sxm5).

    >>> import napkin_cat as nc
    >>> from napkin_cat.hardware.predict import kernels_of
    >>> mm = nc.einsum("a b, b c -> a c", dtype="bf16", out_dtype="fp32")
    >>> def tiled():
    ...     return nc.group(nc.group(nc.stream(nc.kernel(mm), "b", "s_b"), "a", "g_a"), "c", "g_c")
    >>> (k1,), (k2,) = kernels_of(tiled()), kernels_of(tiled())
    >>> sample = {nc.symbol(n): v for n, v in {"a": 256, "b": 256, "c": 256, "g_a": 64, "g_c": 64, "s_b": 64}.items()}
    >>> memo = {}
    >>> a, b = kernel_forms([k1, k2], load("h100-sxm5"), memo, overlap="sequential", ceilings={}, level=1,
    ...                     sample=sample, density={})
    >>> k1 is k2, a is b, len([f for f in memo.values() if isinstance(f, KernelForm)])
    (False, True, 1)
    """
    out = []
    for b, chip in zip(boxes, kernel_chips(boxes, memo, level=level, sample=sample)):
        key = (b, Sizes(sample).restrict(b), tuple(sorted(((str(k), v) for k, v in density.items()), key=str)))
        if key not in memo:
            memo[key] = KernelForm(b, gpu, overlap=overlap, ceilings=ceilings, level=level, sample=sample,
                                   density=density, chip=chip)
        out.append(memo[key])
    return out


def over_block(boxes, gpu, memo: dict, *, level: int, sample: dict):
    """``(kernel, least bytes)`` of the first kernel of ``boxes`` whose least bytes on chip at ``sample`` (its tiles
    each the least the hardware allows: :func:`~napkin_cat.hardware.on_chip.least_on_chip`) exceed ``gpu``'s shared
    memory per block, staged, and its register file, held in registers (:func:`~napkin_cat.hardware.predict.
    register_cap`), or None: where one does, the model refuses every tiling of the structure."""
    for box in boxes:                   # one by one: the kernels after the first over it are not read
        (chip,) = kernel_chips([box], memo, level=level, sample=sample)
        least = least_on_chip(chip.columns, sample)
        if least > gpu.smem_per_block and least_on_chip(chip.in_registers, sample) > register_cap(gpu):
            return box, least
    return None


def kernel_chips(boxes, memo: dict, *, level: int, sample: dict) -> list:
    """The :class:`~napkin_cat.hardware.on_chip.ChipForms` of each kernel of ``boxes``, read once per kernel and
    sample (the sizes it reads) in ``memo`` (:func:`kernel_forms`' memo: its forms read them from there)."""
    out = []
    for b in boxes:
        key = (ChipForms, b, Sizes(sample).restrict(b))
        if key not in memo:
            memo[key] = chip_forms(b, level, sample)
        out.append(memo[key])
    return out


def fastest(timings: list, sizes: dict, why: str) -> tuple:
    """The timing with the least predicted time (ties: fewer transfers, then larger tiles), sorted in place, and the
    optimum it stands for: ``(t, H, regime, tiles, kernel times, chosen sizes, Optimum)``; ``timings`` holds
    ``(t, H, −tiles, label, regime, tiles, kernel times)`` for every structure and tile assignment timed."""
    timings.sort(key=lambda e: e[:3])
    t, H, _, _, regime, tiles, kts = timings[0]
    chosen = Sizes(sizes) | tiles
    opt = Optimum(sympy.Integer(H), chosen, [(sympy.Integer(H), sympy.Integer(0))], sympy.Integer(0),
                  sympy.Integer(H), dict(tiles), None, None, [why])
    return t, H, regime, tiles, kts, chosen, opt


def admissible(timings: list, sizes: dict, limit: int | None = None) -> tuple:
    """The fastest of ``timings`` (as :func:`fastest` orders them) that the printers can print: every array of its
    plan holds at most :data:`~napkin_cat.plan.program.LARGEST_INDEX` elements (their 32-bit indices; the plan's
    arrays are one list per structure, their sizes read at each assignment's tiles); and, given ``limit``, whose
    structure holds at most ``limit`` values at level 0 at its tiles (``nc.cost``'s ``M[0]``: global memory), each
    structure's memory counted once per tiles.  MemoryLimitError naming the limit broken (level 0, or the index
    range and the array) and the fastest's need where none is admissible."""
    timings.sort(key=lambda e: e[:3])
    arrays, widest, held = {}, {}, {}
    for entry in timings:
        label, regime, tiles = entry[3], entry[4], entry[5]
        key = (label, tuple(sorted((str(k), v) for k, v in tiles.items())))
        if label not in arrays:              # the same variables at every tiling of a structure: one plan
            arrays[label] = plan(regime.diagram, Sizes(sizes) | tiles)
        if key not in widest:
            widest[key] = arrays[label].widest_at(Sizes(sizes) | tiles)
        if widest[key][1] > LARGEST_INDEX:
            continue
        if limit is not None:
            if key not in held:
                held[key] = int(at(regime.diagram, Sizes(sizes) | tiles).M.get(0, 0))
            if held[key] > limit:
                continue
        return entry
    first = (timings[0][3], tuple(sorted((str(k), v) for k, v in timings[0][5].items())))
    name, n = widest[first]
    if n > LARGEST_INDEX and (limit is None or all(w[1] > LARGEST_INDEX for w in widest.values())):
        raise MemoryLimitError(f"no algorithm of the {len(arrays)} structures timed can be printed at sizes {sizes}: "
                               f"each has an array of more than {LARGEST_INDEX} elements, the printers' 32-bit "
                               f"indices (the fastest's {name!r} has {n}); give smaller sizes")
    need = held.get(first)
    raise MemoryLimitError(f"no algorithm of the {len(arrays)} structures timed holds at most {limit} values at "
                           f"level 0 (global memory) at sizes {sizes} and can be printed"
                           + (f": the fastest holds {need}" if need is not None else "")
                           + (f"; least over them {min(held.values())}" if held else ""))


def legal_partitions(regime, seconds, memo: dict):
    """The structure ``regime`` with each kernel whose partition has no legal tiles on the hardware partitioned as
    the fastest of its block's partitions that has (:class:`~napkin_cat.search.alternatives.Alternatives`: the kernel
    split stays the transfer search's), made by the rules; None where every kernel's own partition has legal tiles,
    or the regime offers no others.  ``seconds(kernel)``: a partitioned kernel's least predicted time alone, None
    where no tiles are legal; ``memo`` keeps it per kernel and partition (equal kernels of every structure timed
    once).  A kernel's time depends on its own tiles alone (:mod:`~napkin_cat.hardware.separable`), so the kernels are
    chosen one by one.  (A kernel whose own partition is legal keeps it: another partition the model predicts faster
    is left to the structures the transfer search gives.)"""
    alt = getattr(regime, "alternatives", None)
    if alt is None:
        return None
    chosen = {}

    def timed(k, v):
        key = (alt.key(k), partition_of(v))
        if key not in memo:
            memo[key] = seconds(v.diagram)
        return memo[key]
    for k in range(len(alt)):
        options = alt.options(k)
        if len(options) < 2 or timed(k, options[0]) is not None:
            continue
        legal = [(timed(k, v), i) for i, v in enumerate(options[1:], 1) if timed(k, v) is not None]
        if legal:
            chosen[k] = options[min(legal)[1]]
    return alt.made(chosen) if chosen else None


@counts_kept()     # one call's running counts of masked streams, whichever entry it came by
def derive_for_time(diagram, hardware, sizes: dict, *, level: int = 1, overlap: str = "sequential",
                    ceilings: dict | None = None, book=None, largest: int = LARGEST, launch: float = LAUNCH,
                    min_blocks: int | None = None, cache=None, depth: int = 2, density=None,
                    ranking: str = "estimate", global_memory: int | None = None):
    """The algorithm of least predicted time on ``hardware`` (see the module docstring); a
    :class:`~napkin_cat.search.Derivation` with ``prediction`` and ``timings``.

    ``min_blocks`` (a parallelism requirement, :mod:`napkin_cat.search.parallelism`): the structures timed are
    those derived under it, at the tile assignments whose every kernel launches at least ``min_blocks`` blocks
    (:mod:`napkin_cat.algorithms.launches`).  By default the structures derived under the GPU's SM count join
    those derived without a requirement, and the predicted time decides between them (where the SM count cannot be
    met at these sizes, or a structure has no legal tiles on this GPU, it is left out).  A structure with a split
    stream is timed at its parts ``P`` = 1, 2, 4, … (its kernel launches ``P`` blocks per group; the combine's
    transfers and merges are in its cost).  ``cache``: the search's kernel cache
    (:class:`~napkin_cat.search.context.KernelCache`, default the process's); ``depth``: the ``prepare`` rewrites
    the search chains (``nc.derive``'s).  ``density``: the fraction of a stream's trips (those its positions allow)
    that a mask read from data lets run (a number 0 … 1, as ``nc.derive``'s; default 1, dense): the structures are
    derived and every assignment timed at it (:func:`~napkin_cat.hardware.predict.predict`'s ``density``), and the
    result's ``assumptions`` (and its prediction's) state it.  ``ranking``: how the transfer searches rank the
    tilings of a kernel whose transfers are an estimate (a masked stream; ``derive(..., ranking=)``): by the
    estimate (default: each structure found is timed below at every legal tiling with its transfers counted
    there, so the search need not fold every candidate too), or ``"counted"``.  ``global_memory``: the most values
    the algorithm may hold in global memory (level 0: its inputs, outputs and what its kernels write between them,
    ``nc.cost(...).M[0]`` at its tiles), a device's capacity: the fastest assignment whose structure holds at most
    that (the fastest of all may write what the device cannot hold: attention's scores); MemoryLimitError naming
    level 0 and the limit where none of the structures timed does.  Always: the fastest assignment whose every array
    the printers can index (:func:`admissible`: at most ``LARGEST_INDEX`` elements, their 32-bit indices), so that
    what derive returns for a GPU is what ``nc.codegen.triton`` prints (the attention backward at d = 64, N = 4,096,
    128 heads on the H200: the fastest writes a dS of 2^31 elements; the pick recomputes it)."""
    gpu = hardware if isinstance(hardware, GPU) else load(hardware)
    if overlap not in OVERLAPS:
        raise HardwareError(f"overlap {overlap!r}: one of {OVERLAPS} (§5.7)")
    ceilings = check_ceilings(ceilings)
    env = environment(sizes)
    density = 1 if density is None else density
    top = max(10, int(math.log2(gpu.smem_per_block // 2)))
    memories = [2 ** k for k in range(10, top + 1)]
    memories += structure_memories(diagram, env, memories[-1])   # structures only: tiles must fit the block below
    options = dict(sizes=sizes, level=level, book=book, cache=cache, depth=depth, density=density, ranking=ranking,
                   prepared=Preparation())      # the forms both searches read, prepared once
    found = [] if min_blocks is not None else derived_at(diagram, memories, min_blocks=None, required=True, **options)
    found += derived_at(diagram, memories, min_blocks=gpu.sm_count if min_blocks is None else min_blocks,
                        required=min_blocks is not None, **options)
    r = found[0]
    structures, timings, refused, n_refused, refusals = {}, [], None, 0, {}
    for regime in (g for d in found for g in d.regimes):
        structures.setdefault(str(regime.variant), regime)

    forms = {}     # the kernels' forms, read once per kernel in this call (kernel_forms)

    def seconds(kernel):
        try:
            rows = structure_timings(kernel, gpu, env, overlap=overlap, ceilings=ceilings, level=level,
                                     largest=largest, launch=launch, min_blocks=min_blocks, density=density,
                                     forms=forms)
        except (HardwareError, LoweringError):
            return None
        return rows[0][0] if rows else None
    memo = {}
    for regime in list(structures.values()):     # a kernel with no legal tiles partitioned as its block allows
        legal = legal_partitions(regime, seconds, memo)
        if legal is not None:
            structures.setdefault(str(legal.variant), legal)
    for label, regime in structures.items():
        try:
            timed = structure_timings(regime.diagram, gpu, env, overlap=overlap, ceilings=ceilings, level=level,
                                      largest=largest, launch=launch, min_blocks=min_blocks, density=density,
                                      refusals=refusals, forms=forms)
        except (HardwareError, LoweringError) as e:     # a split whose tail reads its head is not planned
            if len(structures) == 1:
                raise
            refused, n_refused = refused or e, n_refused + 1
            continue                  # no legal tiles for this structure on this GPU: the others are timed
        for t, H, tiles, kts in timed:
            timings.append((t, H, tuple(-v for v in tiles.values()), label, regime, tiles, kts))
    if not timings and refused is not None and n_refused == len(structures):
        raise refused            # no structure has legal tiles on this GPU: say why, not that none fits
    if not timings and isinstance(refused, HardwareError):   # some structures have no legal tile at these sizes:
        why = "; ".join(list(refusals.values())[:3]) if refusals else "no structure had legal tiles"   # that first
        raise MemoryLimitError(f"no tile assignment of any derived algorithm fits the {gpu.name} at sizes {sizes}: "
                               f"{n_refused} of the {len(structures)} structures derived have no legal tile "
                               f"({refused}); the others exceed its {gpu.smem_per_block} B of shared memory per "
                               f"thread block or its registers, for example: {why}") from refused
    if not timings:
        why = "; ".join(list(refusals.values())[:3]) if refusals else "no structure had legal tiles"
        raise MemoryLimitError(f"no tile assignment of any derived algorithm fits the {gpu.name} at sizes {sizes} "
                               f"(its {gpu.smem_per_block} B of shared memory per thread block, its registers); "
                               f"for example: {why}")
    why = (f"least predicted time on the {gpu.name} over {len(timings)} tile assignments of {len(structures)} "
           "structures (each group of kernels sharing tiles timed on its own)")
    why += (", every array within the printers' 32-bit indices"
            + (f", holding at most {global_memory} values at level 0" if global_memory is not None else ""))
    t, H, regime, tiles, kts, chosen, opt = fastest([admissible(timings, sizes, global_memory)], sizes, why)
    t = float(t)                 # the exact sum of the kernels' times, rounded once
    rho = bound_densities(regime.diagram, density)
    pred = Prediction(t, tuple(kts), gpu.name, dict(chosen), overlap,
                      assumptions(gpu, ceilings, overlap, launch, tuple(kts))
                      + density_assumptions(regime.diagram, environment(chosen), rho))
    return dataclasses.replace(
        r, diagram=regime.diagram, trace=regime.trace, H=H, cost=regime.cost, optimum=opt, variant=regime.variant,
        prediction=pred, blocks=blocks(regime.diagram, chosen),
        assumptions=tuple(Density(s, v) for s, v in rho.items()),
        timings=tuple((label, tiles_, float(time), h) for time, h, _, label, _, tiles_, _ in timings))
