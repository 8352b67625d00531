"""The precision an evaluation computes in, and the tolerance two evaluations of one function may differ by.

The numpy functor computes in float64 (:func:`~napkin_cat.semantics.equivalent.equivalent` draws float64 inputs);
a conversion box (a kind whose record says ``conversion``: a cast) rounds its operand to its output's number
format, and whatever is computed from the rounded value carries that error.  An evaluation's unit roundoff ``u`` is
that of the narrowest floating-point format a conversion in it rounds to (or its outputs' numpy type, when
narrower), else float64's::

    u(format) = 2^-(mantissa bits + 1)        float64 2^-53, fp32 2^-24, fp16 2^-11, bf16 2^-8, fp8 2^-4

Two evaluations of one function (the same sums in other orders: tiles, streams, rewrites) agree, by default, when
every finite output entry satisfies::

    |a − b| ≤ rtol·|b| + atol,     rtol = min(C·n·u, √u),   atol = rtol·max|b|,   C = SAFETY = 4

with ``n`` the sum of the lengths of the axes the diagrams' inputs and outputs carry at the trial's sizes.  Why:

* a sum of ``n`` terms, added in any order, is within ``γ_n·Σ|xᵢ|`` of its exact value, ``γ_n = n·u/(1 − n·u)``
  (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §4.2); a chain of sums along several
  axes (attention's scores over ``d``, then its weighted sum over ``x``) is, to first order, within ``γ`` of the sum
  of their lengths; two evaluations differ by at most the sum of their errors, ``2·γ_n``; ``C = 4`` doubles that for
  the few roundings per term outside the sums (an exponential, a division, a cast);
* that error is relative to the terms' magnitudes, not to an entry that cancelled to nearly nothing, hence ``atol``:
  the output's scale (its largest finite magnitude) times ``rtol``;
* the worst case grows past any use where ``n·u`` nears 1 (fp16, bf16 and fp8 at a few hundred terms), while
  rounding errors of independent signs grow like ``√n·u`` (ibid., §2.8); so no more than half the format's digits
  are given up: ``√u`` (float64 1.5e-8, fp32 2.4e-4, fp16 2.2e-2, bf16 6.3e-2).  In fp32 a whole output off by
  1e-3 is therefore always rejected, at any sizes (its largest entry: ``1e-3 > 2·√u``).  In bf16 and fp8 the cap
  is loose (``2·√u`` is 12.5% and 50% of the output's scale; attention with P and V cast to bf16 is 0.15% off its
  function at q = 32, x = 48, d = 16, and one 10% off still passes): there, pass ``rtol=`` to ask for more.

Measured on the library's own checks (tests/semantics, rewriting, search, library, algorithms, testing, syntax, io:
11,470 comparisons in float64 that agree): the largest ``|a − b| / ((|b| + max|b|)·n·u)`` is 0.64, against the
``C = 4`` allowed; the wrong algorithms those tests reject are 2.4e12 and more.  So a comparison made in float64
tolerates about 1e-14 at small sizes (the 1e-6 it had before let a 1e-7 error through), one with a cast to fp32
about 1e-5 (non-causal ALiBi at q = 61, x = 139, d = 20: 5e-6 off, rtol 5.2e-5).

>>> import napkin_cat as nc
>>> p = precision_of(nc.library.alibi_attention(0.3, causal=False))
>>> p.format, p.unit_roundoff == 2.0 ** -24
('fp32', True)
>>> precision_of(nc.library.attention()).format
'float64'
>>> f"{default_rtol(precision_of(nc.library.attention()), 220):.2e}"
'9.77e-14'
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from napkin_cat.syntax.adapter import Bubble, Diagram
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.primitive import converts

#: ``C`` of the default tolerance ``min(C·n·u, √u)`` (module docstring): two evaluations' errors, doubled for the
#: roundings per term outside the sums
SAFETY = 4
#: the format the numpy functor computes in when nothing rounds: float64, 52 mantissa bits
EVALUATION_FORMAT, EVALUATION_MANTISSA = "float64", 52


@dataclass(frozen=True)
class Precision:
    """The format an evaluation's results are rounded to (its narrowest) and where the rounding is.

    ``format``: the format's name (``"float64"`` when nothing rounds); ``mantissa``: its mantissa bits;
    ``where``: what rounds to it (a box's name and the diagram, ``"first"`` or ``"second"``), empty for float64."""

    format: str = EVALUATION_FORMAT
    mantissa: int = EVALUATION_MANTISSA
    where: str = ""

    @property
    def unit_roundoff(self) -> float:
        """``u = 2^-(mantissa + 1)``: the largest relative error of rounding to nearest in the format."""
        return 2.0 ** -(self.mantissa + 1)

    def narrowest(self, other: "Precision") -> "Precision":
        """The less precise of the two (self on a tie)."""
        return other if other.mantissa < self.mantissa else self

    def __str__(self):
        return self.format + (f" ({self.where})" if self.where else "")


def precision_of(diagram: Diagram, who: str = "") -> Precision:
    """The narrowest floating-point format a conversion box anywhere in ``diagram`` (inside its regions too)
    rounds to; float64, the numpy functor's own, when none does.  Remembered on the diagram (it is immutable).

    >>> import napkin_cat as nc
    >>> str(precision_of(nc.library.alibi_attention(0.3), "first"))
    'fp32 (cast in the first diagram)'
    """
    memo = diagram.__dict__
    got = memo.get("_precision")
    if got is None:
        got = memo["_precision"] = _narrowest_conversion(diagram)
    return Precision(got.format, got.mantissa, f"{got.where} in the {who} diagram" if who and got.where else
                     got.where)


def _narrowest_conversion(diagram: Diagram) -> Precision:
    best = Precision()
    for _, box in layers(diagram):
        if isinstance(box, Bubble):
            for inside in box.size_parts()[1]:
                best = best.narrowest(_narrowest_conversion(inside))
        elif converts(getattr(getattr(box, "data", None), "kind", None)):
            for arr in box.cod.inside:
                if arr.dtype.family == "float":
                    best = best.narrowest(Precision(arr.dtype.name, arr.dtype.mantissa, box.name))
    return best


def precision_of_values(values, who: str = "") -> Precision:
    """The narrowest numpy floating type among ``values`` (arrays), as a :class:`Precision`; float64 when none is
    narrower (integer and boolean values round nothing).

    >>> import numpy as np
    >>> precision_of_values([np.zeros(2), np.zeros(2, np.float32)], "first").format
    'float32'
    """
    best = Precision()
    for y in values:
        dtype = np.asarray(y).dtype
        if np.issubdtype(dtype, np.floating):
            bits = np.finfo(dtype).nmant
            best = best.narrowest(Precision(dtype.name, bits, f"its outputs, in the {who} diagram" if who else
                                            "its outputs"))
    return best


def default_rtol(precision: Precision, n: int) -> float:
    """``min(C·n·u, √u)``: the relative tolerance of a comparison made in ``precision`` whose axes add up to ``n``
    (module docstring); ``atol`` is it times the output's largest magnitude.

    >>> default_rtol(Precision("fp32", 23), 220) == 4 * 220 * 2.0 ** -24
    True
    >>> default_rtol(Precision("fp32", 23), 10**6) == 2.0 ** -12, default_rtol(Precision("bf16", 7), 9) == 2.0 ** -4
    (True, True)
    """
    u = precision.unit_roundoff
    return min(SAFETY * max(int(n), 1) * u, u ** 0.5)
