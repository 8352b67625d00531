"""``cost.memory.memory_limit`` of a plain ``int``: the integer at once where it is legal (1 … 2⁶⁴), what the full
checks give for the same number as a sympy Integer (which takes them all), and refused alike elsewhere."""
import random

import pytest
import sympy

from napkin_cat.cost.memory import LARGEST_MEMORY, memory_limit
from napkin_cat.errors import MemoryLimitError


def outcome(memory):
    try:
        return memory_limit(memory)
    except MemoryLimitError:
        return MemoryLimitError


EDGES = [1, 2, 3, 2 ** 10, 2 ** 16, 2 ** 63, LARGEST_MEMORY - 1, LARGEST_MEMORY, LARGEST_MEMORY + 1,
         2 * LARGEST_MEMORY, 2 ** 70, 10 ** 30, 0, -1, -(2 ** 16)]


@pytest.mark.parametrize("m", EDGES + random.Random(35).sample(range(1, 2 ** 40), 20))
def test_an_int_is_what_the_full_checks_make_of_it(m):
    fast, full = outcome(m), outcome(sympy.Integer(m))
    assert fast == full, (m, fast, full)
    if fast is not MemoryLimitError:
        assert isinstance(fast, sympy.Integer) and int(fast) == m


def test_the_bounds_refuse():
    for m in (0, -1, 2 ** 70):
        with pytest.raises(MemoryLimitError):
            memory_limit(m)
    with pytest.raises(MemoryLimitError):
        memory_limit(True)          # a bool is no count of values
