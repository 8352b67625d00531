"""Derive's H is what its algorithm moves where the log-sum-exp is read off the SoftMax's state (μ + log z).

The rule reads the running maximum μ again, which before only a discard read; left on a branch of a copy, that
discard made kernel formation store μ to global memory and never read it: one q-sized write per head more than the
search counted (attention with L woven over h and b at q = 6, x = 10: derive said 1,284, the algorithm moved 1,320).
The second route is the cost functor at the derived tiles, and the plan's count of stores."""
import pytest

import napkin_cat as nc


def attention(heads: bool):
    f = nc.library.attention(lse=True, d=4)
    return nc.weave(nc.weave(f, "h", position=0), "b", position=0) if heads else f


@pytest.mark.parametrize("heads, sizes, memory", [
    (True, {"b": 2, "h": 3, "q": 6, "x": 10}, 64),
    (True, {"b": 1, "h": 2, "q": 5, "x": 7}, 64),
    (False, {"q": 6, "x": 10}, 64),
    (False, {"q": 12, "x": 9}, 256),
])
def test_derived_h_is_what_the_algorithm_moves(heads, sizes, memory):
    r = nc.derive(attention(heads), memory=memory, sizes=sizes)
    assert "log ; add" in str(r.variant)                        # the log-sum-exp read off the state
    assert int(nc.cost(r.diagram, sizes=r.optimum.sizes).H[r.level]) == int(r.H)
    stored = [line for line in str(nc.plan(r.diagram, r.optimum.sizes)).splitlines() if "← store" in line]
    assert len(stored) == 2, stored                             # O and L, nothing the outputs do not read
