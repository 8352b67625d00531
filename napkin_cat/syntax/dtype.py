"""Number formats: bytes per value and their numpy meaning.

Floating-point formats (fp32, fp16, bf16, fp8) hold the values of the paper's arrays; the integer
formats hold what indexes them: positions, segment ids, gather indices and targets (``int32``), and
the outcome of a comparison (``bool``, a mask).  ``quantize`` is the format's numpy meaning::

    fmt.quantize(fmt.quantize(a)) == fmt.quantize(a)        (rounding to a format is idempotent)

>>> FP16.bytes, DTYPES["fp8"].bytes, INT32.bytes, BOOL.bytes
(2, 1, 4, 1)
>>> float(FP16.quantize(__import__("numpy").float64(1/3)))
0.333251953125
>>> INT32.quantize([2.0, -3.0]).tolist(), INT32.is_integer, FP32.is_integer
([2, -3], True, False)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from napkin_cat.errors import NapkinError


@dataclass(frozen=True)
class DType:
    """A number format: ``name``, ``bytes`` per value, mantissa bits, exponent bits."""

    name: str
    bytes: int
    mantissa: int
    exponent: int
    family: str = "float"    # "float", "int" (signed integers) or "bool" (a mask)

    @property
    def is_integer(self) -> bool:
        """Whether the format holds integers (an index, a position, a mask) rather than reals."""
        return self.family in ("int", "bool")

    def quantize(self, a):
        """Round ``a`` to the nearest value representable in this format.

        fp32 and fp16 use numpy's own types; bf16 and fp8 (e4m3) are emulated by
        rounding the mantissa (round-to-nearest) and saturating at the largest
        finite value.  The result is a float32 array holding representable values.
        """
        a = np.asarray(a)
        if self.family == "bool":
            return a.astype(bool)
        if self.family == "int":
            return (np.rint(a) if np.issubdtype(a.dtype, np.floating) else a).astype(np.int32)
        if self.name == "fp32":
            return a.astype(np.float32)
        if self.name == "fp16":
            return a.astype(np.float16)
        a32 = a.astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            m, e = np.frexp(a32)
            scale = 2.0 ** (self.mantissa + 1)
            m = np.round(m * scale) / scale
            out = np.ldexp(m, e)
            bias = 2 ** (self.exponent - 1) - 1
            emin = 1 - bias
            # subnormals: quantize on the fixed grid of the smallest exponent
            tiny = 2.0 ** emin
            sub = np.abs(a32) < tiny
            step = 2.0 ** (emin - self.mantissa)
            out = np.where(sub, np.round(a32 / step) * step, out)
            largest = self.largest
            out = np.where(np.isfinite(a32), np.clip(out, -largest, largest), a32)
        return out.astype(np.float32)

    @property
    def largest(self) -> float:
        if self.name == "fp8":  # e4m3fn: no infinities, max 448
            return 448.0
        if self.family == "int":
            return float(2 ** (8 * self.bytes - 1) - 1)
        if self.family == "bool":
            return 1.0
        bias = 2 ** (self.exponent - 1) - 1
        return float((2 - 2.0 ** (-self.mantissa)) * 2.0 ** (2 ** self.exponent - 2 - bias))


FP32 = DType("fp32", 4, 23, 8)
FP16 = DType("fp16", 2, 10, 5)
BF16 = DType("bf16", 2, 7, 8)
FP8 = DType("fp8", 1, 3, 4)
INT32 = DType("int32", 4, 31, 0, "int")
BOOL = DType("bool", 1, 0, 0, "bool")
DTYPES = {d.name: d for d in (FP32, FP16, BF16, FP8, INT32, BOOL)}


def as_dtype(d) -> DType:
    """A :class:`DType` given itself or by name, else a NapkinError listing the legal names.

    >>> as_dtype("fp16") is as_dtype(as_dtype("fp16"))
    True
    """
    if isinstance(d, DType):
        return d
    try:
        return DTYPES[d]
    except (KeyError, TypeError):
        raise NapkinError(f"unknown dtype {d!r}; legal dtypes are {sorted(DTYPES)}") from None
