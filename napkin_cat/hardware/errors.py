"""Typed errors of the hardware layer; each names the file, field, variable or axis at fault.

They are defined in :mod:`napkin_cat.errors` with every other error (``nc.HardwareError`` and so on); this
module keeps the layer's import path.

>>> issubclass(DivisorError, HardwareError) and issubclass(HardwareError, NapkinError)
True
>>> issubclass(CapacityError, MemoryLimitError)
True
>>> issubclass(ConfigurationError, HardwareError) and issubclass(ConfigurationError, LoweringError)
True
"""
from __future__ import annotations

from napkin_cat.errors import (CapacityError, ConfigurationError, DivisorError, HardwareError, LoweringError,
                               MemoryLimitError, NapkinError, ScheduleError)

__all__ = ["HardwareError", "DivisorError", "CapacityError", "ScheduleError", "ConfigurationError", "LoweringError",
           "MemoryLimitError", "NapkinError"]
