"""The structures both time models time (issue 36; ``napkin_cat/hardware/structures.py``): the transfer search runs
on above the memory their tiles must fit, up to the first memory that holds every input and output of ``f``, and
where some memories hold no algorithm it keeps those that do.

Second routes: the values of the inputs and outputs counted from numpy's arrays of the same shapes; which memories
hold an algorithm asked of the transfer search one memory at a time.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.errors import MemoryLimitError
from napkin_cat.hardware.predict import environment
from napkin_cat.hardware.structures import derived_at, structure_memories

MM = {"a": 64, "b": 64, "c": 64}
ATT = {"q": 1024, "x": 1024, "d": 32}


def holds(f, memory, sizes, **options) -> bool:
    """Whether the transfer search finds an algorithm of ``f`` at this one memory."""
    try:
        nc.derive(f, memory=[memory], sizes=sizes, **options)
        return True
    except MemoryLimitError:
        return False


@pytest.mark.parametrize("min_blocks", [None, 16])
def test_the_searches_keep_exactly_the_memories_that_hold_an_algorithm(min_blocks):
    """1 and 2 values hold no tiling of a 64³ matmul (with a requirement of blocks the search's error names no
    smallest memory: found by bisection); the memories kept are those each search alone answers."""
    f, memories = nc.library.matmul(), [1, 2, 2 ** 9, 2 ** 12]
    kept = [m for m in memories if holds(f, m, MM, min_blocks=min_blocks)]
    assert kept and kept != memories
    (d,) = derived_at(f, memories, min_blocks=min_blocks, sizes=MM)
    assert d.memory == kept and {g.memory for g in d.regimes} == set(kept)
    assert derived_at(f, [1, 2], min_blocks=min_blocks, sizes=MM) == []
    with pytest.raises(MemoryLimitError):
        derived_at(f, [1, 2], min_blocks=min_blocks, required=True, sizes=MM)


def test_the_gpu_time_model_searches_up_to_the_memory_that_holds_the_inputs_and_outputs():
    """h100-sxm5's block holds 2^16 values (half its 227 KiB, as bf16): the derivation's regimes reach from 2^10 to
    the first power of two at least Q, K, V and O's values (numpy's sizes), each memory once."""
    r = nc.derive(nc.library.attention(), sizes=ATT, hardware="h100-sxm5")
    whole = sum(np.empty(s).size for s in [(1024, 32)] * 4)
    top = max(16, int(np.ceil(np.log2(whole))))
    assert sorted({g.memory for g in r.regimes}) == [2 ** k for k in range(10, top + 1)]
    assert structure_memories(nc.library.attention(), environment(ATT), 2 ** 16) == [2 ** k for k in
                                                                                     range(17, top + 1)]
    assert r.prediction.time == min(t for _, _, t, _ in r.timings)
