"""Floor division and remainder: the integer arithmetic of positions (block-causal masks, dilated windows, 2-D
neighbourhoods), each a kind declared once with every part of its record (:mod:`napkin_cat.syntax.primitive`).

=================  ====================  ==========================================  ==============================
kind               item signature        meaning (numpy's, Python's)                 interval image on a tile
=================  ====================  ==========================================  ==============================
``floordiv``       R ⊗ R → R             ``a // b = ⌊a/b⌋``                          corners, ``b`` on one side of 0
``mod``            R ⊗ R → R             ``a % b = a − b·⌊a/b⌋`` (``b``'s sign)       residues of ``b``'s largest
``floordiv_by``    R → R, parameter c    ``a // c``                                  ``[⌊lo/c⌋, ⌊hi/c⌋]`` (monotone)
``mod_by``         R → R, parameter c    ``a % c``                                   ``[0, c − 1]``, exact in a period
=================  ====================  ==========================================  ==============================

The meaning is Python's floor division, on negative operands too (``-7 // 2 = -4``, ``-7 % 2 = 1``,
``7 % -2 = -1``); C's ``/`` and ``%`` truncate toward 0 (``-7 / 2 = -3``, ``-7 % 2 = -1``), so the C, CUDA
and Triton forms compute ``⌊a/b⌋`` with ``floor`` on the quotient of the operands as reals (the kernels read
every operand as a real), exact for integers below 2²⁴ in float.  The laws (checked in
``tests/syntax/test_division.py``)::

    b·(a // b) + a % b == a          0 ≤ a % b < b  (b > 0)          b < a % b ≤ 0  (b < 0)

>>> import numpy as np, napkin_cat as nc
>>> a = np.array([-7, -1, 0, 6, 7])
>>> nc.evaluate(nc.elementwise("floordiv_by", "n", const=2, dtype="int32"), a).tolist()
[-4, -1, 0, 3, 3]
>>> nc.evaluate(nc.elementwise("mod", "n", dtype="int32"), a, np.array([2, 2, 3, -4, -2])).tolist()
[1, 1, 0, -2, -1]
>>> from napkin_cat.syntax import interval as iv
>>> iv.remainder(iv.Interval(8, 11), 4, integer=True), iv.remainder(iv.Interval(6, 9), 4, integer=True)
(Interval(lo=0, hi=3), Interval(lo=0, hi=3))
>>> iv.remainder(iv.Interval(9, 10), 4, integer=True), iv.floor_divided(iv.Interval(-5, 9), 4)
(Interval(lo=1, hi=2), Interval(lo=-2, hi=2))
"""
from __future__ import annotations

import math

import numpy as np

from napkin_cat.errors import IndexingError
from napkin_cat.syntax import interval as iv
from napkin_cat.syntax.maps import elementwise_check, require
from napkin_cat.syntax.primitive import Core, declare
from napkin_cat.syntax.printed import printed
from napkin_cat.syntax.vjp import linear, no_cotangent, on, partials


def _nonzero(kind, divisor):
    """Refuse a divisor array holding 0 (numpy's integer ``//`` would give 0 and a warning, C a trap or NaN)."""
    divisor = np.asarray(divisor)
    if np.any(divisor == 0):
        raise IndexingError(f"{kind}: the divisor (second input) holds 0 at index "
                            f"{tuple(int(i) for i in np.argwhere(divisor == 0)[0])}; a floor division or remainder "
                            f"needs a nonzero divisor everywhere")
    return divisor


def _constant_of(core_or_box):
    """The box's constant divisor c, an int where it is one (so that integers divided stay integers)."""
    c = core_or_box.value(core_or_box.params.get("c", 1)) if isinstance(core_or_box, Core) \
        else core_or_box.data.param("c", 1)
    return int(c) if float(c).is_integer() else float(c)


def _check(name, arity):
    items = elementwise_check(name, arity, example="a signature such as 'x, q -> q x'")

    def check(core: Core):
        items(core)
        if arity == 1:
            c = core.params.get("c")
            require(isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) and c != 0, name,
                    f"divides by the constant c, which must be a finite nonzero number; got c={c!r}")
    return check


def _integer(box) -> bool:
    """Whether the box's output holds integers (its residues are then ``0 … c − 1``; reals' fill ``[0, c)``)."""
    return box.cod.inside[0].dtype.is_integer


def _floordiv_constant(box, c):
    if c[0] is None or c[1] is None or c[1] == 0 or (math.isinf(c[0]) and math.isinf(c[1])):
        return None
    return c[0] / c[1] if math.isinf(c[0]) or math.isinf(c[1]) else float(c[0] // c[1])


def _mod_constant(box, c):
    if c[0] is None or c[1] is None or c[1] == 0 or math.isinf(c[0]) or math.isinf(c[1]):
        return None
    return float(c[0] % c[1])


def _mod_divisor_partial(ctx, y, a, b):
    """∂(a mod b)/∂b = −⌊a/b⌋ (almost everywhere)."""
    return ctx.ew("neg", on(ctx, "mul", y, y, on(ctx, "floordiv", y, a, b)))


#: name: (numpy meaning, arity, FLOPs (a division and a floor; a remainder's multiply and subtract too), printed
#: forms (C: CUDA's too; Triton), VJP, interval image, constant rule)
DIVISION = {
    "floordiv": (lambda xs, core: [np.floor_divide(xs[0], _nonzero("floordiv", xs[1]))], 2, 2,
                 printed("floorf({0} / {1})", "tl.floor({0} / {1})"), no_cotangent,
                 lambda ins, box, tile_of: iv.floor_divided_by(*ins), _floordiv_constant),
    "mod": (lambda xs, core: [np.mod(xs[0], _nonzero("mod", xs[1]))], 2, 4,
            printed("({0} - {1} * floorf({0} / {1}))", "({0} - {1} * tl.floor({0} / {1}))"),
            partials(lambda ctx, y, a, b: y, _mod_divisor_partial),
            lambda ins, box, tile_of: iv.remainder_by(*ins, integer=_integer(box)), _mod_constant),
    "floordiv_by": (lambda xs, core: [np.floor_divide(xs[0], _constant_of(core))], 1, 2,
                    printed("floorf({0} / {c})", "tl.floor({0} / {c})"), no_cotangent,
                    lambda ins, box, tile_of: iv.floor_divided(ins[0], _constant_of(box)),
                    lambda box, c: _floordiv_constant(box, [c[0], _constant_of(box)])),
    "mod_by": (lambda xs, core: [np.mod(xs[0], _constant_of(core))], 1, 4,
               printed("({0} - {c} * floorf({0} / {c}))", "({0} - {c} * tl.floor({0} / {c}))"),
               linear(lambda ctx, box, yb, xi: yb),
               lambda ins, box, tile_of: iv.remainder(ins[0], _constant_of(box), integer=_integer(box)),
               lambda box, c: _mod_constant(box, [c[0], _constant_of(box)])),
}

for _name, (_impl, _arity, _flops, _forms, _vjp, _interval, _constant) in DIVISION.items():
    declare(_name, _impl, flops=lambda core, n=_flops: {"general": n}, check=_check(_name, _arity), label=_name,
            shape="circle", arity=_arity, in_place=True, requires=("c",) if _arity == 1 else (),
            symbol="%" if _name.startswith("mod") else "//", forms=_forms, vjp=_vjp, interval=_interval,
            constant=_constant, doc=f"Python's floor {'division' if 'div' in _name else 'remainder'} "
                                    f"({'by the constant c' if _arity == 1 else 'of two items'}).")

__all__ = ["DIVISION"]
