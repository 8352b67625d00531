"""Typed errors of napkin-cat: every one of them, in one place (``nc.<Error>`` is each of these).

Every error names the offending axis, box, position, level or size and says
what would be legal, so that a user can fix the input without reading the
source.  The layers raise them from here (the hardware, codegen, plan, rewriting,
autodiff and CLI modules re-export their own for the old import paths).

>>> issubclass(CompositionError, NapkinError) and issubclass(CompositionError, TypeError)
True
>>> issubclass(CapacityError, MemoryLimitError) and issubclass(ConfigurationError, LoweringError)
True
>>> issubclass(UnknownKindError, MissingPartError) and not issubclass(UnknownKindError, KeyError)
True
"""
from __future__ import annotations


class NapkinError(Exception):
    """Base class of every error raised by napkin-cat."""


class CompositionError(NapkinError, TypeError):
    """Two diagrams whose boundary types differ were composed with ``>>``."""


class AxisError(NapkinError, ValueError):
    """An axis is malformed, duplicated, or its size is not a positive integer."""


class WeaveError(NapkinError, ValueError):
    """A weave names an axis already present, an input that does not exist, or a bad position."""


class SignatureError(NapkinError, ValueError):
    """An einops-style signature string does not parse or is inconsistent."""


class UnknownPrimitiveError(NapkinError, KeyError):
    """An elementwise map, reduction or primitive kind that is not registered."""

    def __str__(self):  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ArgumentError(NapkinError, TypeError):
    """An argument of the wrong kind (a name where a diagram is needed, a word where a list is): the message
    names what was expected."""


class IndexingError(NapkinError, ValueError):
    """Positions, masks or gathers used wrongly: an index that is not an integer array or carries the wrong
    axes, a mask over an axis the diagram lacks, a window of negative width."""


class ShapeError(NapkinError, ValueError):
    """An array of the wrong rank or shape was given to ``evaluate`` (or a tensor to a compiled torch op)."""


class BlockMaskError(ShapeError):
    """A block mask a kernel cannot read as it is: not the data's block mask of the mask its stream drops on a
    full trip (positions included), or given to a plan that skips by no mask from data."""


class TensorError(NapkinError, TypeError):
    """A torch tensor a compiled op (``nc.torch.compile``) cannot take: its dtype or its device (a rank or a size
    is a :class:`ShapeError`); the message names the input and what it would take."""


class SerialisationError(NapkinError, ValueError):
    """Malformed or unsupported JSON given to ``loads``."""


class RewriteError(NapkinError, ValueError):
    """A rewrite (group, stream, a rule) whose side condition fails."""


class ConstructionError(RewriteError):
    """The rule book could not make the algorithm the search chose (a rule gave no legal match, or its rewrite
    failed, where the search counted on it): a disagreement between the search and the book, never a refusal of
    the input; the message names the block, the rule and the step."""


class LevelError(NapkinError, ValueError):
    """A memory level that is missing from the hierarchy or used inconsistently."""


class MemoryLimitError(NapkinError, ValueError):
    """No tile size satisfies the memory limit of a level."""


class NotPolynomialError(NapkinError, ValueError):
    """A cost value that is no Laurent polynomial in the sizes (a ceiling of a tile, a ``Min``, a root): the
    polynomial arithmetic of the cost fold (:mod:`napkin_cat.cost.polynomial`) cannot hold it; sympy's can."""


class ObligationError(RewriteError):
    """A rule's proof obligation failed; ``counterexample`` holds sizes, max error, seed, match."""

    def __init__(self, message: str, counterexample: dict | None = None):
        super().__init__(message)
        self.counterexample = counterexample or {}


class DeviceError(NapkinError, ValueError):
    """A device region (``nc.shard``) or a collective used wrongly: more devices than values along the sharded axis,
    a collective run outside a device region, replicated outputs that differ between devices; named with the axis,
    the devices and the box."""


class GradError(NapkinError, ValueError):
    """A diagram cannot be differentiated as asked: an input it lacks, a box without a VJP."""


class MissingPartError(NapkinError, ValueError):
    """A primitive kind declared without a part a layer needs (its VJP, its interval image, a backend's printed
    form): raised by the layer at the call that needs the part, naming the kind, the part and the keyword of
    ``nc.declare`` that supplies it."""


class NoVJPError(MissingPartError):
    """A box of a kind with no vector-Jacobian product was differentiated."""


class PlanError(NapkinError, ValueError):
    """A plan cannot be made or run: sizes it cannot mask, a missing size, a malformed plan."""


class LoweringError(PlanError):
    """A plan that cannot be lowered onto a hierarchy: a missing tile size, a scaling axis not grouped around
    the kernel, a value written on two levels, a kernel that is not at the block level."""


class CodegenError(NapkinError, ValueError):
    """A plan a backend cannot print: a structure, dtype or accumulator it has no form for."""


class UnknownKindError(CodegenError, MissingPartError):
    """A primitive kind printed by a backend whose form its record lacks (``forms={'c': …}`` of ``nc.declare``):
    ``why`` is the record's refusal (:meth:`~napkin_cat.syntax.primitive.Kind.part`)."""

    def __init__(self, kind: str, backend: str, why: str = ""):
        self.kind, self.backend = kind, backend
        super().__init__(f"the {backend} backend has no printed form for primitive kind {kind!r}"
                         + (f": {why}" if why else ""))


class ToolNotFoundError(CodegenError, FileNotFoundError):
    """A compiler or package a kernel needs (cc, nvcc, triton, torch) is not on this machine."""


class HardwareError(NapkinError, ValueError):
    """A hardware model (a file or its fields) that is missing, malformed, negative or unknown."""


class DivisorError(HardwareError):
    """A tile size that violates a divisor constraint (coalescing, tensor-core shape, warpgroup multiple)."""


class CapacityError(HardwareError, MemoryLimitError):
    """A configuration whose variables exceed a memory pool (SMEM per thread block, registers)."""


class ScheduleError(HardwareError):
    """An overlap schedule that cannot run: an unknown op, a dependency cycle, a barrier that never opens."""


class ConfigurationError(HardwareError, LoweringError):
    """A plan that cannot be lowered onto a toy hierarchy (:mod:`napkin_cat.plan.lowering`): a missing unit or
    split tile, a scaling axis not grouped around the kernel, a value written on two levels."""


class UnsupportedOperationError(NapkinError, NotImplementedError):
    """An operation of a traced model (``nc.from_torch``) that napkin-cat has no box for, or uses in a way its
    boxes cannot follow: the message names the ATen operation, where it is in the model (the module path and the
    source line torch.export recorded) and what would be legal."""


class PathError(NapkinError, FileNotFoundError):
    """A file asked to be written into a folder that does not exist (a drawing, a strip): named with the folder."""


class CLIError(NapkinError):
    """A malformed command-line input (printed as one line; exit status 2)."""


class CheckFailed(NapkinError, AssertionError):
    """A check of :mod:`napkin_cat.testing` that failed on a program (an ``AssertionError``, so that pytest
    reports it as a failed assertion), with ``lines``: the code that reproduces it after the program's source."""

    def __init__(self, message: str, lines: str = ""):
        super().__init__(message)
        self.lines = lines


#: every error, for ``nc`` and ``from napkin_cat.errors import *``
__all__ = sorted(name for name, value in list(globals().items())
                 if isinstance(value, type) and issubclass(value, NapkinError))
