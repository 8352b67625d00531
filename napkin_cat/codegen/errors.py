"""Typed errors of code generation; each names the kind, backend, structure, tool or limit at fault.

They are defined in :mod:`napkin_cat.errors` with every other error (``nc.CodegenError`` and so on); this
module keeps the layer's import path.

Limits of a target (shared memory per thread block, registers per thread) raise the hardware layer's
:class:`~napkin_cat.hardware.errors.CapacityError` (a :class:`~napkin_cat.errors.MemoryLimitError`).

>>> issubclass(UnknownKindError, CodegenError) and issubclass(CodegenError, NapkinError)
True
>>> print(UnknownKindError("gelu2", "cuda", "CudaPrinter", ["exp", "add"]))
the cuda backend has no printed form for primitive kind 'gelu2'; give one in CudaPrinter.elementwise ...
"""
from __future__ import annotations

from napkin_cat.errors import CodegenError, NapkinError, ToolNotFoundError, UnknownKindError, UnknownPrimitiveError



class BlasMissingWarning(UserWarning):
    """The C kernel's contractions fall back to loops because ``cblas.h`` (OpenBLAS) is not installed."""


__all__ = ["CodegenError", "UnknownKindError", "ToolNotFoundError", "NapkinError", "UnknownPrimitiveError",
           "BlasMissingWarning"]
