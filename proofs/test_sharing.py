"""Discharge ``shared_load`` (``rewrites/sharing.py``): a kernel that reads one value in several ports loads it once.

The obligation (random fused kernels that read a value twice or more, compared on random sizes and
values, H dropping by exactly the discarded reads at each level the loads pass), the plan runner counting
the same transfers as the cost functor on the rewritten kernel, and the refusal by name.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.rewriting import rewrite
from rewrites import kernel_formation, kernel_fusion, shared_load
from rewrites.sharing import swiglu_up, shared_ports

proves = pytest.mark.proves
n, e, f = (nc.symbol(a) for a in "nef")


def fused(function, level: int = 1):
    return rewrite(function, [kernel_formation.using(level=level), kernel_fusion]).diagram


@proves("shared_load")
def test_shared_load_is_sound():
    proof = shared_load.obligation.discharge(shared_load, trials=30)
    assert proof.rewrites >= 30 and proof.cost_checked and proof.max_error < 1e-9


@proves("shared_load")
def test_swiglu_loads_x_once():
    """The fused SwiGLU up-projection reads X in two ports: one load of n·e values less, nothing else."""
    lhs = fused(swiglu_up())
    (m,) = shared_load.matches(lhs)
    assert shared_ports(m.net, m.nodes["k"]) == [(0, (2,))]
    rhs = shared_load.apply(lhs, m)
    before, after = nc.cost(lhs), nc.cost(rhs)
    assert sympy.expand(before.H[1] - after.H[1] - n * e) == 0
    assert sympy.expand(after.H[1] - (n * e + 2 * e * f + n * f)) == 0      # X, W₁, W₃ in, the result out
    assert before.flops == after.flops
    assert nc.equivalent(lhs, rhs)
    assert not shared_load.matches(rhs)                                     # nothing is read twice any more


@proves("shared_load")
def test_the_plan_loads_it_once_and_counts_what_the_cost_says():
    sizes = {"n": 8, "e": 4, "f": 6}
    once = shared_load.apply(fused(swiglu_up()))
    algorithm = nc.group(nc.stream(once, "e", "s_e"), "n", "g_n")
    at = {**sizes, "s_e": 2, "g_n": 4}
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=s) for s in ((8, 4), (4, 6), (4, 6))]
    out, counters = nc.plan(algorithm, at).run(*xs)
    z = xs[0] @ xs[1]
    assert np.allclose(out, z / (1 + np.exp(-z)) * (xs[0] @ xs[2]))
    assert counters.transfers[1] == 8 * 4 + 2 * (8 // 4) * 4 * 6 + 8 * 6 == nc.cost(algorithm, sizes=at).H[1]


@proves("shared_load")
def test_a_level_two_kernel_saves_the_load_at_both_levels():
    lhs = fused(swiglu_up(), level=2)
    rhs = shared_load.apply(lhs)
    before, after = nc.cost(lhs), nc.cost(rhs)
    assert all(sympy.expand(before.H[lv] - after.H[lv] - n * e) == 0 for lv in (1, 2))


@proves("shared_load")
def test_a_kernel_reading_distinct_values_is_refused_by_name():
    with pytest.raises(nc.RewriteError, match=r"condition 'shared_value' fails: .*each of its 2 inputs reads a "
                                              r"different value"):
        shared_load.apply(fused(nc.library.matmul()))


@proves("shared_load")
def test_the_obligation_catches_a_claim_that_the_load_stays():
    """Claiming that H is unchanged is false: the cost claim must fail on it."""
    lhs = fused(swiglu_up())
    m = shared_load.matches(lhs)[0]
    rhs = shared_load.apply(lhs, m)
    assert nc.cost(lhs).H[1] != nc.cost(rhs).H[1]
    shared_load.obligation.cost(lhs, rhs, m)
    with pytest.raises(AssertionError, match=r"H\[1\] drops by"):
        shared_load.obligation.cost(lhs, lhs, m)
