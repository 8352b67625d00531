"""Typed errors of the hardware layer; each names the file, field, variable or axis at fault.

>>> issubclass(DivisorError, HardwareError) and issubclass(HardwareError, NapkinError)
True
>>> issubclass(CapacityError, MemoryLimitError)
True
>>> issubclass(ConfigurationError, HardwareError) and issubclass(ConfigurationError, LoweringError)
True
"""
from __future__ import annotations

from napkin_cat.errors import MemoryLimitError, NapkinError
from napkin_cat.plan.lowering.state import LoweringError


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
