"""Discharge ``sibling_fusion`` (``rewrites/siblings.py``): two independent kernels that read one value become one.

The obligation (random kernels some two of which are independent and read one value, compared on random sizes
and values; H and FLOPs unchanged by the join, and H dropping by exactly the extra reads once the joined kernel
shares its loads), the plan runner counting the transfers the cost functor gives on the joined and shared kernel
(``x ↦ (x·A, x·B)`` read from numpy), and the refusals by name: kernels that read nothing in common, kernels
at two levels, and a kernel feeding the other (that is ``kernel_fusion``'s case, not an independent pair).
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import ObligationError
from napkin_cat.rewriting import Rule, rewrite
from rewrites import kernel_formation, shared_load, sibling_fusion
from rewrites.kernels import strip
from rewrites.siblings import two_products

proves = pytest.mark.proves
n, e, f, g = (nc.symbol(a) for a in "nefg")


def kernels(function, level: int = 1):
    return rewrite(function, [kernel_formation.using(level=level)]).diagram


def count(diagram):
    return sum(isinstance(b, nc.Kernel) for b in diagram.boxes)


@proves("sibling_fusion")
def test_sibling_fusion_is_sound():
    proof = sibling_fusion.obligation.discharge(sibling_fusion, trials=30)
    assert proof.rewrites >= 30 and proof.cost_checked and proof.max_error < 1e-9


@proves("sibling_fusion")
def test_two_products_of_one_input_load_it_once():
    """``(X·A, X·B)``: the join moves as much; shared, X is loaded once (n·e values less), nothing else changes."""
    lhs = kernels(two_products())
    (m,) = sibling_fusion.matches(lhs)
    joined = sibling_fusion.apply(lhs, m)
    once = shared_load.apply(joined)
    assert (count(lhs), count(joined), count(once)) == (2, 1, 1)
    h = [nc.cost(d).H[1] for d in (lhs, joined, once)]
    assert sympy.expand(h[0] - h[1]) == 0
    assert sympy.expand(h[1] - h[2] - n * e) == 0
    assert sympy.expand(h[2] - (n * e + e * f + e * g + n * f + n * g)) == 0   # X, A, B in, both results out
    assert nc.cost(lhs).flops == nc.cost(once).flops
    assert nc.equivalent(lhs, once)


@proves("sibling_fusion")
def test_the_joined_plan_computes_both_and_counts_what_the_cost_says():
    """Grouped over n and streamed over e, the joined kernel's plan gives X·A and X·B (numpy) and moves what the
    cost functor says: X once, A and B once per group of rows, both results once."""
    once = shared_load.apply(sibling_fusion.apply(kernels(two_products())))
    algorithm = nc.group(nc.stream(once, "e", "s_e"), "n", "g_n")
    sizes = {"n": 9, "e": 4, "f": 5, "g": 3, "s_e": 2, "g_n": 3}
    rng = np.random.default_rng(1)
    X, A, B = rng.normal(size=(9, 4)), rng.normal(size=(4, 5)), rng.normal(size=(4, 3))
    (y, z), counters = nc.plan(algorithm, sizes).run(X, A, B)
    np.testing.assert_allclose(y, X @ A, rtol=1e-12)
    np.testing.assert_allclose(z, X @ B, rtol=1e-12)
    assert counters.transfers[1] == 9 * 4 + 3 * (4 * 5 + 4 * 3) + 9 * 5 + 9 * 3 == nc.cost(algorithm, sizes=sizes).H[1]


@proves("sibling_fusion")
def test_kernels_reading_nothing_in_common_are_refused_by_name():
    b = nc.Builder(nc.types("n e, e f, n e, e f"))
    X, A, Y, B = b.inputs
    apart = b.build(b(nc.einsum("n e, e f -> n f"), X, A), b(nc.einsum("n e, e f -> n f"), Y, B))
    with pytest.raises(nc.RewriteError, match=r"condition 'shared_value' fails: .*no value is read by both"):
        sibling_fusion.apply(kernels(apart))


@proves("sibling_fusion")
def test_kernels_at_two_levels_are_refused_by_name():
    one = kernel_formation.using(level=1).apply(two_products())          # the first product at level 1
    two = rewrite(one, [kernel_formation.using(level=2)]).diagram          # the other at level 2
    with pytest.raises(nc.RewriteError, match=r"condition 'same_level' fails: .*levels [12] and [12]"):
        sibling_fusion.apply(two)


@proves("sibling_fusion")
def test_a_kernel_that_feeds_the_other_is_not_a_sibling():
    """``exp(X) + X``: the add kernel reads the exp kernel's output, so they are no independent pair (fusion's)."""
    b = nc.Builder(nc.types("a b"))
    (X,) = b.inputs
    chain = b.build(b(nc.elementwise("add", "a b"), b(nc.elementwise("exp", "a b"), X), X))
    assert sibling_fusion.candidates(kernels(chain)) == []


@proves("sibling_fusion")
def test_the_obligation_catches_a_join_that_moves_the_kernel_a_level_down():
    """A right-hand side of the right type that runs the joined kernel at level 2 fails the cost claim."""
    def deeper(m):
        (box,) = [b for b in sibling_fusion.rhs(m).boxes if isinstance(b, nc.Kernel)]
        return nc.kernel(strip(box), 2)
    bad = Rule("bad_join", sibling_fusion.pattern, deeper, sibling_fusion.conditions, sibling_fusion.obligation)
    with pytest.raises(ObligationError, match="cost claim fails"):
        for seed in range(6):
            bad.obligation.check_instance(bad, seed)
