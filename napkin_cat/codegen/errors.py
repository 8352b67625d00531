"""Typed errors of code generation; each names the kind, backend, structure, tool or limit at fault.

They are defined in :mod:`napkin_cat.errors` with every other error (``nc.CodegenError`` and so on); this
module keeps the layer's import path.

Limits of a target (shared memory per thread block, registers per thread) raise the hardware layer's
:class:`~napkin_cat.hardware.errors.CapacityError` (a :class:`~napkin_cat.errors.MemoryLimitError`).

>>> issubclass(UnknownKindError, CodegenError) and issubclass(CodegenError, NapkinError)
True
>>> print(UnknownKindError("gelu2", "cuda", "kind 'gelu2' has no CUDA form: declare it with forms={'cuda': …}"))
the cuda backend has no printed form for primitive kind 'gelu2': kind 'gelu2' has no CUDA form: declare it with ...
"""
from __future__ import annotations

from napkin_cat.errors import (CodegenError, MissingPartError, NapkinError, ToolNotFoundError, UnknownKindError,
                               UnknownPrimitiveError)



class BlasMissingWarning(UserWarning):
    """The C kernel's contractions fall back to loops because ``cblas.h`` (OpenBLAS) is not installed."""


__all__ = ["CodegenError", "UnknownKindError", "MissingPartError", "ToolNotFoundError", "NapkinError",
           "UnknownPrimitiveError", "BlasMissingWarning"]
