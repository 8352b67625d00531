"""Typed errors of napkin-cat.

Every error names the offending axis, box, position, level or size and says
what would be legal, so that a user can fix the input without reading the
source.

>>> issubclass(CompositionError, NapkinError) and issubclass(CompositionError, TypeError)
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


class IndexingError(NapkinError, ValueError):
    """Positions, masks or gathers used wrongly: an index that is not an integer array or carries the wrong
    axes, a mask over an axis the diagram lacks, a window of negative width."""


class ShapeError(NapkinError, ValueError):
    """An array of the wrong rank or shape was given to ``evaluate``."""


class SerialisationError(NapkinError, ValueError):
    """Malformed or unsupported JSON given to ``loads``."""


class RewriteError(NapkinError, ValueError):
    """A rewrite (group, stream, a rule) whose side condition fails."""


class LevelError(NapkinError, ValueError):
    """A memory level that is missing from the hierarchy or used inconsistently."""


class MemoryLimitError(NapkinError, ValueError):
    """No tile size satisfies the memory limit of a level."""
