"""Quantities with units, as the hardware files write them: ``"1.83 GHz"``, ``"227 KiB"``, ``"3352 GB/s"``.

Every number in a hardware file carries its unit, and a field accepts only units of
its dimension.  The value is converted to the dimension's base unit (Hz, bytes,
bytes per second, operations per clock per SM, seconds, counts)::

    parse("1.83 GHz", "frequency") == 1.83e9 Hz
    parse("227 KiB", "bytes")      == 227 · 1024 B        (KiB, MiB: powers of 1024; KB, MB: powers of 1000)
    parse("400 Gb/s", "bandwidth") == 400 · 10⁹ / 8 B/s   (Gb/s: gigabits, as networks are rated; GB/s: gigabytes)
    parse("3.4 us", "time")        == 3.4 · 10⁻⁶ s        (a link's latency per message)

>>> parse("1.83 GHz", "frequency"), parse("227 KiB", "bytes"), parse("12 TB/s", "bandwidth")
(Fraction(1830000000, 1), Fraction(232448, 1), Fraction(12000000000000, 1))
>>> parse("16 ops/clk", "rate"), parse("400 Gb/s", "bandwidth"), parse("3.4 us", "time")
(Fraction(16, 1), Fraction(50000000000, 1), Fraction(17, 5000000))
>>> parse("3 GHz", "bytes")
Traceback (most recent call last):
...
napkin_cat.errors.HardwareError: 'GHz' is a unit of frequency, but a bytes is expected (one of B, ...)
"""
from __future__ import annotations

import re
from fractions import Fraction

from napkin_cat.hardware.errors import HardwareError

#: dimension → {unit: factor to the base unit}
UNITS = {
    "frequency": {"Hz": 1, "kHz": 10 ** 3, "MHz": 10 ** 6, "GHz": 10 ** 9},
    "bytes": {"B": 1, "KB": 10 ** 3, "KiB": 2 ** 10, "MB": 10 ** 6, "MiB": 2 ** 20, "GB": 10 ** 9, "GiB": 2 ** 30},
    "bandwidth": {"B/s": 1, "KB/s": 10 ** 3, "MB/s": 10 ** 6, "GB/s": 10 ** 9, "TB/s": 10 ** 12,
                  "Gb/s": 10 ** 9 // 8, "B/clk": None},
    # operations (FLOPs; a fused multiply-add counts 2) per clock cycle per SM
    "rate": {"ops/clk": 1, "FLOP/clk": 1},
    # operations per second (a CPU core's measured rates: napkin_cat/hardware/cpu.py)
    "throughput": {"FLOP/s": 1, "MFLOP/s": 10 ** 6, "GFLOP/s": 10 ** 9, "TFLOP/s": 10 ** 12},
    "count": {"": 1, "SMs": 1, "threads": 1, "registers": 1, "warps": 1},
    # a link's latency per message (napkin_cat/hardware/link.py)
    "time": {"s": 1, "ms": Fraction(1, 10 ** 3), "us": Fraction(1, 10 ** 6), "ns": Fraction(1, 10 ** 9)},
}

#: the largest value of each dimension in its base unit (``B/clk``: bytes per clock per SM): past it a number is a
#: typo, not a device.  Against the shipped models: 1 THz is five hundred times their fastest clock (1.98 GHz);
#: 2^64 bytes a 64-bit address space; 1 EB/s over eighty thousand times their fastest bandwidth (12 TB/s, L2 to
#: SMEM); 2^24 operations per clock per SM two thousand times their fastest rate (8192, FP8 tensor cores); 2^32
#: SMs, threads or registers; 2^20 bytes per clock per SM eight thousand times shared memory's (128); 10^18 FLOP/s
#: (an exascale machine's) as one CPU core's throughput; 1 s per message seventy thousand times the slowest link's
#: latency (14 µs, a network's)
LARGEST = {"frequency": 10 ** 12, "bytes": 2 ** 64, "bandwidth": 10 ** 18, "rate": 2 ** 24, "count": 2 ** 32,
           "throughput": 10 ** 18, "time": 1}
LARGEST_PER_CLOCK = 2 ** 20
#: the largest power of ten a quantity may be written with ("1.5e9 Hz"): converting "1e999999999" exactly would
#: take minutes, and no field needs more than its unit and a few digits
MAX_EXPONENT = 24

_QUANTITY = re.compile(r"^\s*([0-9]{1,30}(?:\.[0-9]{1,30})?)(?:[eE]([+-]?[0-9]{1,6}))?\s*([A-Za-z/]*)\s*$")


def _dimension_of(unit: str):
    return next((dim for dim, table in UNITS.items() if unit in table), None)


def parse(text, dimension: str, *, where: str = "") -> Fraction:
    """The value of ``text`` (a number and a unit of ``dimension``) in the base unit, exactly.

    ``B/clk`` (bytes per clock per SM) is kept as is: it is a bandwidth that needs a clock.
    A bare number is accepted for counts only, and only a whole one (a TOML integer).  Every quantity is positive
    and at most :data:`LARGEST` of its dimension, written with an exponent of at most :data:`MAX_EXPONENT`.

    >>> parse("1e400 KiB", "bytes")
    Traceback (most recent call last):
    ...
    napkin_cat.errors.HardwareError: '1e400 KiB' is written with the exponent 400; a hardware quantity is written ...
    >>> parse("0 GB/s", "bandwidth")
    Traceback (most recent call last):
    ...
    napkin_cat.errors.HardwareError: '0 GB/s' is not positive: a hardware quantity is a positive number
    """
    at = f"{where}: " if where else ""
    legal = ", ".join(u for u in UNITS[dimension] if u)
    if isinstance(text, bool):
        raise HardwareError(f"{at}expected a quantity in {dimension} ({legal}), got {text!r}")
    if isinstance(text, float) and dimension == "count":
        raise HardwareError(f"{at}a count is a whole number (a TOML integer such as 132), got {text!r}")
    if isinstance(text, float):
        raise HardwareError(f"{at}the number {text!r} has no unit; write it with a unit of {dimension} ({legal}), "
                            f"e.g. \"{text} {next(u for u in UNITS[dimension] if u)}\"")
    if isinstance(text, int):
        if dimension != "count":
            raise HardwareError(f"{at}the number {text!r} has no unit; write it with a unit of {dimension} "
                                f"({legal}), e.g. \"{text} {next(u for u in UNITS[dimension] if u)}\"")
        text = str(text)
    if not isinstance(text, str):
        raise HardwareError(f"{at}expected a quantity in {dimension} ({legal}), got {text!r}")
    if text.strip().startswith("-"):
        raise HardwareError(f"{at}{text!r} is negative; a hardware quantity is a positive number")
    m = _QUANTITY.match(text)
    if not m:
        raise HardwareError(f"{at}cannot read {text[:40]!r} as a number and a unit of {dimension} ({legal}): write "
                            f"digits, an optional exponent and a unit, such as \"1.83 GHz\"")
    number, exponent, unit = m.groups()
    if exponent is not None and abs(int(exponent)) > MAX_EXPONENT:
        raise HardwareError(f"{at}{text!r} is written with the exponent {int(exponent)}; a hardware quantity is "
                            f"written with an exponent of at most ±{MAX_EXPONENT}")
    table = UNITS[dimension]
    if unit not in table:
        other = _dimension_of(unit)
        if other is not None:
            raise HardwareError(f"{at}{unit!r} is a unit of {other}, but a {dimension} is expected (one of {legal})")
        raise HardwareError(f"{at}unknown unit {unit!r} for a {dimension}; legal units are {legal}")
    value = Fraction(number) * Fraction(10) ** int(exponent or 0)
    factor = table[unit]
    value = value if factor is None else value * factor
    if value <= 0:
        raise HardwareError(f"{at}{text!r} is not positive: a hardware quantity is a positive number")
    largest = LARGEST_PER_CLOCK if factor is None else LARGEST[dimension]
    if value > largest:
        base = "B/clk" if factor is None else next(u for u, f in table.items() if f == 1)
        raise HardwareError(f"{at}{text!r} is more than any device has: a {dimension} is at most {largest}"
                            f"{' ' + base if base else ''}")
    return value


def unit_of(text: str) -> str:
    """The unit written after the number (``"128 B/clk"`` → ``"B/clk"``).

    >>> unit_of("128 B/clk"), unit_of("1.5e9 Hz"), unit_of("3")
    ('B/clk', 'Hz', '')
    """
    m = _QUANTITY.match(str(text))
    return m.group(3) if m else ""
