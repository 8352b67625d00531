"""A hardware derive with no legal tiling names the tile at fault, not only shared memory (issue 35, outside-35).

SwiGLU MLP at f = 432 = 2⁴·27 on the H100: a tile of f must be a multiple of 32 that divides 432, and none is
(32 does not divide 432, the arithmetic below).  Six of its seven structures have no legal tile; the seventh holds
no assignment within shared memory.  The refusal used to be a MemoryLimitError citing shared memory alone; it is a
HardwareError naming g_f, 432 and 32 (as matmul's refusal does), with the shared-memory finding after it.
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.hardware.errors import HardwareError


def test_no_legal_tile_of_f_is_named_as_the_cause():
    assert not [v for v in range(32, 433, 32) if 432 % v == 0]       # no multiple of 32 divides 432
    with pytest.raises(HardwareError, match=r"tile g_f of an axis of 432: it must be a multiple of 32") as e:
        nc.derive(nc.library.swiglu_mlp(), hardware="h100-sxm5", sizes={"n": 192, "e": 160, "f": 432, "o": 160})
    assert "shared memory" in str(e.value)        # what the other structures ran into, said after the cause
