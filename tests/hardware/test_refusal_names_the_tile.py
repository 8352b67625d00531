"""A hardware derive with no legal tiling names the tile at fault, not only shared memory (issue 35, outside-35).

SwiGLU MLP at f = 432 = 2⁴·27 on the H100: a tile of f must be a multiple of 32 that divides 432, and none is
(32 does not divide 432, the arithmetic below).  Six of its seven structures have no legal tile; the seventh holds
no assignment within shared memory.  The refusal used to cite shared memory alone; it names g_f, 432 and 32 first
(as matmul's HardwareError does), then the shared-memory finding.  It stays a MemoryLimitError: where the structures
with legal tiles all exceed the block (a 1 MiB softmax row, tests/hardware/test_on_chip_filter.py), memory is what
decides, and callers catch that type.
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.hardware.errors import HardwareError


def test_no_legal_tile_of_f_is_named_as_the_cause():
    assert not [v for v in range(32, 433, 32) if 432 % v == 0]       # no multiple of 32 divides 432
    with pytest.raises(nc.MemoryLimitError, match=r"6 of the 7 structures derived have no legal tile \(no legal "
                       r"value for tile g_f of an axis of 432: it must be a multiple of 32") as e:
        nc.derive(nc.library.swiglu_mlp(), hardware="h100-sxm5", sizes={"n": 192, "e": 160, "f": 432, "o": 160})
    assert "shared memory" in str(e.value)        # what the other structure ran into, said after the cause
    assert isinstance(e.value.__cause__, HardwareError)
