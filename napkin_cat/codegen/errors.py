"""Typed errors of code generation; each names the kind, backend, structure, tool or limit at fault.

Limits of a target (shared memory per thread block, registers per thread) raise the hardware layer's
:class:`~napkin_cat.hardware.errors.CapacityError` (a :class:`~napkin_cat.errors.MemoryLimitError`).

>>> issubclass(UnknownKindError, CodegenError) and issubclass(CodegenError, NapkinError)
True
>>> print(UnknownKindError("gelu2", "cuda", "CudaPrinter", ["exp", "add"]))
the cuda backend has no printed form for primitive kind 'gelu2'; give one in CudaPrinter.elementwise ...
"""
from __future__ import annotations

from napkin_cat.errors import NapkinError, UnknownPrimitiveError


class CodegenError(NapkinError, ValueError):
    """A plan a backend cannot print: a structure, dtype or accumulator it has no form for."""


class UnknownKindError(CodegenError, UnknownPrimitiveError):
    """A primitive kind with no printed form in a backend's tables."""

    def __init__(self, kind: str, backend: str, printer: str = "the printer", known=()):
        self.kind, self.backend = kind, backend
        super().__init__(f"the {backend} backend has no printed form for primitive kind {kind!r}; give one in "
                         f"{printer}.elementwise (a template) or {printer}.structured (a method); it prints "
                         f"{', '.join(sorted(known)) or 'nothing yet'}")


class ToolNotFoundError(CodegenError, FileNotFoundError):
    """A compiler or package a kernel needs (cc, nvcc, triton, torch) is not on this machine."""


class BlasMissingWarning(UserWarning):
    """The C kernel's contractions fall back to loops because ``cblas.h`` (OpenBLAS) is not installed."""
