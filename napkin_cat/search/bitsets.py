"""Sets of a graph's operations as bit masks: operation ``i`` is in the set ``m`` when bit ``i`` of ``m`` is set.

The law: ``sum(1 << i for i in bits(m)) == m``, the indices increasing.

>>> m = 0b101100
>>> bits(m), sum(1 << i for i in bits(m)) == m
([2, 3, 5], True)
"""
from __future__ import annotations


def bits(mask: int) -> list:
    """The indices of the set bits of ``mask``, increasing (lowest bit first: ``mask & -mask``, so the work is
    per set bit, not per bit position of a mask over a thousand operations).

    >>> bits(0b101100)
    [2, 3, 5]
    """
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


__all__ = ["bits"]
