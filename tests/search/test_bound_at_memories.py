"""A lower bound at many memories (``Bound.at_memories``, what ``derive`` reports each regime's gap against): the
sizes substituted once, then each memory, equal to the bound at each memory alone and to the theorem's formula."""
import math
import random
from fractions import Fraction

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.search.bounds import lower_bound

M = nc.symbol("M")


def attention_bound(q, x, d, m):
    """max(2dq + 2dx, d²qx/M for M ≥ d², else dqx/√M): attention's forward bound, written out here."""
    theorem = Fraction(d * d * q * x, m) if m >= d * d else d * q * x / math.sqrt(m)
    return max(2 * d * q + 2 * d * x, theorem)


@pytest.mark.parametrize("seed", range(4))
def test_attentions_bound_at_many_memories_is_the_formula(seed):
    rng = random.Random(seed)
    q, x, d = (2 ** rng.randint(2, 12) for _ in range(3))
    memories = sorted({4 ** rng.randint(1, 10) for _ in range(6)})       # powers of 4: √M an integer
    got = lower_bound(nc.library.attention(), M).at_memories({"q": q, "x": x, "d": d}, M, memories)
    assert [Fraction(int(v.p), int(v.q)) for v in got] == [Fraction(attention_bound(q, x, d, m)) for m in memories]


@pytest.mark.parametrize("make", [lambda: nc.grad(nc.library.attention(), saved=True), nc.library.matmul,
                                  nc.library.attention])
def test_the_bound_at_many_memories_is_the_bound_at_each(make):
    f = make()
    b = lower_bound(f, M)
    rng = random.Random(7)
    names = sorted({a.name for arr in (*f.dom.inside, *f.cod.inside) for a in arr.axes})
    env = {n: 2 ** rng.randint(3, 11) for n in names}
    memories = [2 ** k for k in range(4, 22, 3)]
    alone = [b.at({**env, M: m}) for m in memories]
    assert b.at_memories(env, M, memories) == alone
    assert all(isinstance(v, sympy.Basic) and v.is_number for v in alone)
