"""Divisor constraints (§5, step 4): tile sizes the hardware can use, as data, a checker and candidates.

Three families, each read off the hardware model and the toy hierarchy, never per algorithm:

* **coalescing**: an array moved between GMEM and SMEM has its lowermost (contiguous) axis divisible by
  ``transaction / bytes per value`` (128 B: 64 FP16 or 128 FP8 values);
* **tensor-core shapes**: a matmul ``(m × k)·(k × n)`` on the tensor pipeline needs ``m``, ``n``, ``k``
  multiples of one instruction shape for its operand format (wgmma ``m64nNk16`` FP16, ``k32`` FP8;
  wmma ``m16n16k16`` ... on A100); any listed shape will do;
* **partition multiples**: the warpgroup tile is a multiple of the threads of a warpgroup (``w_q^(128)``),
  the block tile a multiple of the warpgroup tile, and ``w = threads · t``.

Several divisors on one tile impose their least common multiple::

    legal(tile) = { v : lcm(divisors of tile) | v }

>>> from napkin_cat.hardware.model import load
>>> c = constraints(load("h100-sxm5"), arrays=[ArrayUse("K", ("s_x", "d"), "fp8", moved=True)],
...                 matmuls=[MatmulUse("QK", m="w_q", n="s_x", k="d", dtype="fp8")])
>>> c.divisor("d"), c.candidates("d", upper=512)
(128, [128, 256, 384, 512])
>>> c.check({"s_x": 64, "d": 96, "w_q": 128})
Traceback (most recent call last):
...
napkin_cat.errors.DivisorError: tile d = 96 of K violates coalesced GMEM↔SMEM access of K (fp8: 128 B / 1 B
per value): it needs a multiple of 128; legal values near 96: 128
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import sympy

from napkin_cat.algorithms.records import built
from napkin_cat.hardware.errors import DivisorError, HardwareError
from napkin_cat.hardware.toy import TRANSFERS, primitive_boxes, load_hierarchy, pipelines_of
from napkin_cat.syntax.dtype import as_dtype


@dataclass(frozen=True)
class ArrayUse:
    """An array of a configuration: tile names of its axes (lowermost last), dtype, level, and whether it
    is moved between GMEM and SMEM (the transfers that must be coalesced)."""

    name: str
    axes: tuple
    dtype: str
    level: str = "SMEM"
    moved: bool = False


@dataclass(frozen=True)
class MatmulUse:
    """A tensor-pipeline matmul ``(m × k)·(k × n)`` by tile names, with its operand dtype.  A side along several
    axes of one operand (grouped-query attention's rows: the group's heads and the queries, ``g_g·g_q``) is the
    product of their tiles, its name theirs joined by ``·`` (:data:`JOIN`): the instruction's side divides the
    product, not each tile.

    >>> MatmulUse("QK", m="g_g·g_q", n="s_x", k="d", dtype="bf16").factors("m")
    ('g_g', 'g_q')
    >>> MatmulUse("QK", m="g_g·g_q", n="s_x", k="d", dtype="bf16").side("m", {"g_g": 4, "g_q": 1})
    4
    """

    name: str
    m: str
    n: str
    k: str
    dtype: str

    def factors(self, dim: str) -> tuple:
        """The tile names whose product is side ``dim`` (``"m"``, ``"n"`` or ``"k"``)."""
        return tuple(getattr(self, dim).split(JOIN))

    def side(self, dim: str, config: dict):
        """Side ``dim``'s length at ``config`` (tile name → int; a factor written as a number is that number):
        the product of its factors, None where one is not in ``config``."""
        out = 1
        for f in self.factors(dim):
            v = int(f) if f.isdigit() else config.get(f)
            if v is None:
                return None
            out *= v
        return out


#: how a side of several axes is named: its tiles' names joined (``g_g·g_q``)
JOIN = "·"


@dataclass(frozen=True)
class Divisor:
    """``tile`` must be a multiple of ``divisor`` (an int, or another tile's name) because of ``reason``."""

    tile: str
    divisor: object
    reason: str
    variable: str


def _near(value: int, divisor: int) -> str:
    below, above = (value // divisor) * divisor, -(-value // divisor) * divisor
    return ", ".join(str(v) for v in sorted({below, above}) if v > 0)


@dataclass
class Constraints:
    """The divisors on each tile, and the tensor-core shape alternatives of each matmul."""

    fixed: list = field(default_factory=list)
    matmuls: list = field(default_factory=list)     # (MatmulUse, [TensorShape, ...])

    def divisor(self, tile: str, *, shape: int = 0, products: bool = True) -> int:
        """The lcm of the integer divisors on ``tile``, with the matmuls' ``shape``-th listed instruction
        (``products=False``: without them, the divisors padding cannot meet: coalescing, partition multiples)."""
        ds = [d.divisor for d in self.fixed if d.tile == tile and isinstance(d.divisor, int)]
        for mm, shapes in self.matmuls if products else ():
            s = shapes[min(shape, len(shapes) - 1)]
            ds += [getattr(s, dim) for dim in ("m", "n", "k") if getattr(mm, dim) == tile]
        return math.lcm(*ds) if ds else 1

    def candidates(self, tile: str, *, upper: int, full: int | None = None, shape: int = 0) -> list:
        """Legal values of ``tile`` up to ``upper`` (dividing ``full`` when given): the integer search's domain."""
        step = self.divisor(tile, shape=shape)
        return [v for v in range(step, upper + 1, step) if full is None or full % v == 0]

    def check(self, config: dict) -> list:
        """Raise :class:`DivisorError` for the first violated constraint; return the constraints checked."""
        for d in self.fixed:
            if d.tile not in config:
                continue
            value = config[d.tile]
            divisor = config.get(d.divisor) if isinstance(d.divisor, str) else d.divisor
            if divisor is None:
                continue
            if value % divisor:
                raise DivisorError(f"tile {d.tile} = {value} of {d.variable} violates {d.reason}: it needs a multiple "
                                   f"of {divisor}; legal values near {value}: {_near(value, divisor)}")
        for mm, shapes in self.matmuls:
            dims = {dim: mm.side(dim, config) for dim in ("m", "n", "k")}
            if any(v is None for v in dims.values()):
                continue
            if not any(all(dims[dim] % getattr(s, dim) == 0 for dim in dims) for s in shapes):
                tried = "; ".join(f"{s.instruction} m{s.m}n{s.n}k{s.k}" for s in shapes)
                s = shapes[0]
                bad = [dim for dim in dims if dims[dim] % getattr(s, dim)]
                dim = bad[0]
                tile = getattr(mm, dim)
                raise DivisorError(f"tile {tile} = {dims[dim]} of matmul {mm.name} ({mm.dtype}) is the {dim} of a "
                                   f"tensor-core instruction and fits no shape ({tried}); with {s.instruction} "
                                   f"it needs a multiple of {getattr(s, dim)}; legal values near {dims[dim]}: "
                                   f"{_near(dims[dim], getattr(s, dim))}")
        self._check_threads(config)
        return list(self.fixed)

    def _check_threads(self, config):
        for d in self.fixed:
            if d.reason.startswith("thread tile") and d.tile in config and d.variable in config:
                rows, threads = config[d.tile], d.divisor
                if config[d.variable] * threads != rows:
                    raise DivisorError(f"tile {d.tile} = {rows} rows over {threads} threads gives "
                                       f"{d.variable} = {sympy.Rational(rows, threads)}, but {d.variable} = "
                                       f"{config[d.variable]}; set {d.variable} = {sympy.Rational(rows, threads)} "
                                       f"or {d.tile} = {config[d.variable] * threads}")


def coalescing(array: ArrayUse, gpu) -> list:
    """The lowermost axis of an array moved between GMEM and SMEM is divisible by 128 B / bytes per value."""
    if not array.moved or not array.axes:
        return []
    q = as_dtype(array.dtype).bytes
    if gpu.transaction % q:
        raise HardwareError(f"{array.name}: a {gpu.transaction} B transaction does not hold whole {array.dtype} values")
    reason = (f"coalesced GMEM↔SMEM access of {array.name} ({array.dtype}: {gpu.transaction} B / {q} B per value)")
    return [Divisor(array.axes[-1], gpu.transaction // q, reason, array.name)]


def tensor_shapes(mm: MatmulUse, gpu) -> list:
    """The tensor-core instruction shapes of ``gpu`` for the operands of the matmul ``mm`` (a HardwareError naming the
    operand types its tensor cores take where none fits).
    """
    shapes = list(gpu.shapes_for(mm.dtype))
    if not shapes:
        have = sorted({d for s in gpu.tensor_shapes for d in s.dtypes})
        raise HardwareError(f"{gpu.name} has no tensor-core instruction for {mm.dtype} operands (matmul {mm.name}); "
                            f"its tensor cores take {have}")
    return shapes


def partition_multiples(partition: dict, gpu, hierarchy) -> list:
    """``w`` a multiple of the scaling unit's threads, ``g`` a multiple of ``w``, and ``w = threads · t``."""
    h = load_hierarchy(hierarchy)
    unit = h.scaling_unit
    out = []
    w, g, t = partition.get(unit), partition.get("block"), partition.get("thread")
    threads = gpu.threads(unit)
    if w is not None and t is not None:     # one thread per t rows: a unit's rows are a multiple of its threads
        out.append(Divisor(w, threads, f"{unit} multiple ({threads} threads per {unit})", w))
    if g is not None and w is not None:
        out.append(Divisor(g, w, f"whole {unit}s per thread block", g))
    if w is not None and t is not None:
        out.append(Divisor(w, threads, f"thread tile {t}: {w} = {threads} · {t}", t))
    return out


def constraints(gpu, *, arrays=(), matmuls=(), partition: dict | None = None, hierarchy=None) -> Constraints:
    """All divisor constraints of a configuration on ``gpu`` (see module docstring)."""
    c = Constraints()
    for a in arrays:
        c.fixed += coalescing(a, gpu)
    for mm in matmuls:
        c.matmuls.append((mm, tensor_shapes(mm, gpu)))
    if partition:
        c.fixed += partition_multiples(partition, gpu, hierarchy or gpu.hierarchy)
    return c


def _tile(size) -> str | None:
    if isinstance(size, sympy.Symbol):
        return str(size)
    return None


def uses_of(diagram, hierarchy) -> tuple:
    """``(arrays, matmuls)`` read off a diagram: the arrays its transfers move between GMEM and the coalesced
    level, and its two-operand contractions on the tensor pipeline (m, n: the output's axes that one operand
    carries, k: contracted; axes all three carry are a batch of matrix products).  Where one operand carries
    several of the output's axes the other lacks (grouped-query attention's ``Q``: the group's heads ``g`` and the
    queries ``q`` against ``K``'s keys), that side is their product (``m = "g_g·g_q"``): the group's rows share
    the other operand as one product's rows do."""
    h = load_hierarchy(hierarchy)
    arrays, matmuls = [], []
    for box in primitive_boxes(built(diagram)):      # a partition record's boxes as the partition holds them
        if box.data.kind in TRANSFERS:
            src, dst = box.dom.inside[0], box.cod.inside[0]
            levels = {h.level(src.level), h.level(dst.level)}
            if any(lv.coalesced_with and h.level(lv.coalesced_with) in levels for lv in levels):
                names = tuple(_tile(a.size) or str(a.size) for a in src.axes)
                arrays.append(ArrayUse(f"{box.data.kind} of {src}", names, src.dtype.name, moved=True))
        elif "tensor" in pipelines_of(box):
            mm = matmul_use(box.name, box.dom.inside, box.cod.inside)
            if mm is not None:
                matmuls.append(mm)
    return arrays, matmuls


def matmul_use(name: str, ins, outs) -> MatmulUse | None:
    """The :class:`MatmulUse` of a contraction ``name`` of the arrays ``ins`` into ``outs``, or None where it is no
    two-operand matrix product (one contracted axis, rows and columns each carried by one operand; axes all three
    carry are a batch).  ``ins``, ``outs``: a box's, or a cost record's own (``OpCost.arrays``, seen through the
    relabelling of the partition records around it: its sides are the tiles the record's FLOPs multiply).

    >>> import napkin_cat as nc
    >>> from napkin_cat.cost.iocost import cost
    >>> d = nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x", relabelled=False), "q", "g_q",
    ...              relabelled=False)
    >>> [matmul_use(o.label, *o.arrays).n for o in cost(d).ops if o.pipeline == "tensor"]
    ['s_x', 'd']
    """
    if len(ins) != 2 or len(outs) != 1:
        return None
    out, (x, y) = outs[0], ins
    contracted = [a for a in x.axes if a.name not in out.names]
    rows = [a for a in out.axes if a.name in x.names and a.name not in y.names]
    cols = [a for a in out.axes if a.name in y.names and a.name not in x.names]
    if not (rows and cols and len(contracted) == 1):
        return None
    m, n = (JOIN.join(_tile(a.size) or str(a.size) for a in side) for side in (rows, cols))
    k = _tile(contracted[0].size) or str(contracted[0].size)
    wide = max((a.dtype for a in ins), key=lambda d: d.bytes)
    return MatmulUse(name, m, n, k, wide.name)
