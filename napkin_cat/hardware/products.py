"""Where a matrix product runs on a GPU: on the tensor cores, its sides padded to the instruction's shape, or on the
CUDA cores (the threads' fused multiply-adds), whichever the time model predicts faster.

A tensor-core instruction computes an ``m₀ × n₀ × k₀`` block (Hopper's wgmma: ``m64nNk16`` on 16-bit operands); a
product with a smaller side (decoding: one query row against a tile of keys, ``m = 1``) still issues whole
instructions and pays for the padded sides.  On the CUDA cores it pays only its own FLOPs, at the threads' rate::

    T_tensor = F · pad / rate_tensor(operands)     pad = Π_{s ∈ (m, n, k)} ⌈s/s₀⌉ · s₀ / s
    T_cuda   = F / rate_general(output)            F = 2·m·n·k · trips, the product's FLOPs

A side along several axes of one operand (grouped-query decoding: the ``g`` query heads of a group, each one query
row, against the group's shared keys) is the product of their tiles, ``m = g_g · g_q``, and is padded as a whole:
the group's rows fill the instruction's side that one query row would leave empty, and K and V are read once per
group.  The printed kernels give ``tl.dot`` blocks of two axes (an axis of extent 1 dropped), so a side with more
than one of its axes cut above 1 is no tensor-core product there: it runs on the CUDA cores (``joint > 1``).

A product whose sides are multiples of the instruction's (``pad = 1``) runs on the tensor cores, as before: the
choice exists only where padding wastes work.  The time model (:mod:`napkin_cat.hardware.predict`) times each
kernel at every placement of its padded products and keeps the fastest; the prediction records the choice
(``KernelTime.products``), and its assumptions say what the padded work cost.

>>> import napkin_cat as nc
>>> from napkin_cat.hardware.model import load
>>> from napkin_cat.cost.iocost import cost
>>> d = nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")
>>> (qk, pv) = products_of(d, cost(d).ops, load("h100-sxm5"), {})
>>> qk.name, qk.pad.subs({nc.symbol("g_q"): 1, nc.symbol("s_x"): 64, nc.symbol("d"): 128})
('· (g_q×s_x·k d)', 64)
>>> gqa = nc.group(nc.group(nc.stream(nc.kernel(nc.library.grouped_query_attention()), "x", "s_x"), "q", "g_q"),
...                "g", "g_g")
>>> qk = products_of(gqa, cost(gqa).ops, load("h100-sxm5"), {})[0]
>>> qk.name, qk.pad.subs({nc.symbol("g_g"): 4, nc.symbol("g_q"): 1, nc.symbol("s_x"): 64, nc.symbol("d"): 128})
('· (g_g·g_q×s_x·k d)', 16)
>>> placement(64, 0), placement(64, 1), placement(1, 0)
('tensor cores, padded ×64', 'CUDA cores', 'tensor cores')
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from napkin_cat.hardware.divisors import matmul_use, tensor_shapes
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.model import GPU
from napkin_cat.syntax.axis import symbol

TENSOR, CUDA = "tensor cores", "CUDA cores"


@dataclass(frozen=True)
class Product:
    """One matrix product of a kernel as the time model sees it: its cost record ``op`` (pipeline ``tensor``), its
    sides ``m, n, k`` (tile names), its FLOPs ``F``, the padding factor ``pad``, the seconds of each placement and
    ``joint``: the most axes of one side cut above 1 (more than 1: no ``tl.dot`` in the printed kernels, the CUDA
    cores only) (expressions in the sizes and tiles); ``use``: its sides (the record's own product)."""

    name: str
    op: object
    flops: sympy.Expr
    pad: sympy.Expr
    tensor: sympy.Expr
    cuda: sympy.Expr
    joint: sympy.Expr = sympy.Integer(1)
    use: object = None       # its sides by tile names (:class:`~napkin_cat.hardware.divisors.MatmulUse`)
    least: sympy.Expr = sympy.Integer(16)   # its shortest side

    def printed_dot(self, least: float, joint: float) -> bool:
        """Whether the printed kernel computes it with ``tl.dot`` (given its ``least`` side and ``joint`` at the
        tiles): every side longer than 1 and one axis each (a side of 1 is dropped: a vector, not a block).  Its
        operands are then staged in shared memory, whichever pipeline the time model charges it to."""
        return least > 1 and joint <= 1


def _factor(name: str) -> sympy.Expr:
    return sympy.Integer(int(name)) if name.isdigit() else symbol(name)


def _lazy(extremum, args) -> sympy.Expr:
    """``extremum(*args)`` (sympy's ``Max`` or ``Min``), left unevaluated unless every argument is a number: its
    simplification compares symbolic arguments pairwise (a few ms each, hundreds per GPU derive), and the value is
    only ever read at concrete tiles (:mod:`napkin_cat.hardware.lambdas`), where both forms agree.

    >>> from napkin_cat.syntax.axis import symbol
    >>> g = symbol("g_q")
    >>> _lazy(sympy.Min, [g - 1, sympy.Integer(1)]).subs(g, 64), _lazy(sympy.Max, [sympy.Integer(0), sympy.Integer(2)])
    (1, 2)
    """
    if all(a.is_number for a in args):
        return extremum(*args)
    return extremum(*args, evaluate=False)


def side(mm, dim: str) -> sympy.Expr:
    """Side ``dim`` of matmul ``mm`` (a :class:`~napkin_cat.hardware.divisors.MatmulUse`): the product of its
    factors' tiles."""
    return sympy.Mul(*(_factor(f) for f in mm.factors(dim)))


def rate(gpu: GPU, ceilings: dict, pipeline: str, op) -> float:
    """The device-wide rate (FLOP/s) of ``op`` on ``pipeline``: the format its rate is set by (the operands' on the
    tensor cores, the output's elsewhere, as the model's ``rate_by`` says), a measured ceiling first."""
    p = gpu.pipeline(pipeline)
    dtype = op.operands[0] if p.rate_by == "operands" and op.operands else op.dtype
    key = f"{pipeline}:{dtype}"
    return float(ceilings[key]) if key in ceilings else float(gpu.peak(pipeline, dtype))


def products_of(box, ops, gpu: GPU, ceilings: dict) -> list:
    """The :class:`Product` of each tensor-pipeline cost record of ``box`` (its cost's ``ops``) that is a matrix
    product: read off the record's own arrays (``OpCost.arrays``, the product it counts, seen through the
    relabelling of the partition records around it: :func:`~napkin_cat.hardware.divisors.matmul_use`), so records
    of one label with different shapes are each their own product, in any order and number.  A record that is no
    matrix product stays on the tensor cores unpadded; one that carries no arrays is refused, naming it."""
    out = []
    for op in ops:
        if op.pipeline != "tensor":
            continue
        ins, outs = op.arrays
        if not ins or not outs:
            raise HardwareError(f"{box.name}: the tensor-pipeline record {op.label!r} does not carry its box's arrays "
                                "(OpCost.arrays): its matrix sides are unknown")
        mm = matmul_use(op.label, ins, outs)
        if mm is None:
            continue
        shape = tensor_shapes(mm, gpu)[0]
        pad = sympy.Integer(1)
        for dim in ("m", "n", "k"):
            s, s0 = side(mm, dim), getattr(shape, dim)
            pad *= sympy.ceiling(s / s0) * s0 / s
        # a factor f ≥ 1 is cut above 1 where min(f − 1, 1) = 1
        joint = _lazy(sympy.Max, [sum((_lazy(sympy.Min, [_factor(f) - 1, sympy.Integer(1)]) for f in mm.factors(dim)),
                                      sympy.Integer(0)) for dim in ("m", "n", "k")])
        flops = sympy.sympify(op.flops * op.trips)
        out.append(Product(f"{op.label} ({mm.m}×{mm.n}·k {mm.k})", op, flops, pad,
                           flops * pad / sympy.Float(rate(gpu, ceilings, "tensor", op)),
                           flops / sympy.Float(rate(gpu, ceilings, "general", op)), joint, mm,
                           _lazy(sympy.Min, [side(mm, dim) for dim in ("m", "n", "k")])))
    return out


def placement(pad: float, where: int) -> str:
    """The words for a product's placement: ``where`` 0 the tensor cores (``pad``: the factor its padding costs),
    1 the CUDA cores."""
    if where:
        return CUDA
    return TENSOR if pad == 1 else f"{TENSOR}, padded ×{pad:g}"


__all__ = ["Product", "products_of", "side", "placement", "rate", "TENSOR", "CUDA"]
