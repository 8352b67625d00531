"""Number formats: bytes per value and their numpy meaning.

>>> FP16.bytes, DTYPES["fp8"].bytes
(2, 1)
>>> float(FP16.quantize(__import__("numpy").float64(1/3)))
0.333251953125
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

    def quantize(self, a):
        """Round ``a`` to the nearest value representable in this format.

        fp32 and fp16 use numpy's own types; bf16 and fp8 (e4m3) are emulated by
        rounding the mantissa (round-to-nearest) and saturating at the largest
        finite value.  The result is a float32 array holding representable values.
        """
        a = np.asarray(a)
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
        bias = 2 ** (self.exponent - 1) - 1
        return float((2 - 2.0 ** (-self.mantissa)) * 2.0 ** (2 ** self.exponent - 2 - bias))


FP32 = DType("fp32", 4, 23, 8)
FP16 = DType("fp16", 2, 10, 5)
BF16 = DType("bf16", 2, 7, 8)
FP8 = DType("fp8", 1, 3, 4)
DTYPES = {d.name: d for d in (FP32, FP16, BF16, FP8)}


def as_dtype(d) -> DType:
    if isinstance(d, DType):
        return d
    try:
        return DTYPES[d]
    except (KeyError, TypeError):
        raise NapkinError(f"unknown dtype {d!r}; legal dtypes are {sorted(DTYPES)}") from None
