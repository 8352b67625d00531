"""The FLOPs a tie between algorithms is broken by, numerically (``space.flops_at``): equal, float for float, to
sympy's substitution, on the FLOPs of the partitions the search costs and on random size expressions."""
import random

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.search.curves import Curve
from napkin_cat.search.space import flops_at
from napkin_cat.search.variants import variants

PROGRAMS = {"attention": nc.library.attention, "swiglu": nc.library.swiglu,
            "linear cross-entropy": nc.library.linear_cross_entropy, "causal": nc.library.causal_attention}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_flops_of_every_partition_at_random_tiles_are_sympys(name):
    rng = random.Random(name)
    checked = 0
    for v in variants(PROGRAMS[name]()):
        c = Curve(v.diagram)
        for f in c.cost.flops.values():
            f = sympy.sympify(f)
            at = {s: rng.choice([1, 2, 3, 5, 8, 12, 64]) for s in f.free_symbols}
            assert flops_at(f, at) == float(f.subs(at))
            checked += 1
    assert checked >= 2


@pytest.mark.parametrize("seed", range(6))
def test_random_size_expressions_are_sympys(seed):
    rng = random.Random(seed)
    syms = [nc.symbol(n) for n in ("q", "x", "d", "g_q", "s_x")]

    def term():
        t = sympy.Rational(rng.randint(1, 9), rng.choice([1, 2, 3, 7]))
        for s in rng.sample(syms, rng.randint(1, 3)):
            t *= s ** rng.choice([-1, 1, 2])
        return sympy.ceiling(t) if rng.random() < 0.3 else t
    expr = sympy.Add(*(term() for _ in range(rng.randint(2, 5))))
    at = {s: rng.randint(1, 4096) for s in syms}
    assert flops_at(expr, at) == float(expr.subs(at))
    root = expr + sympy.sqrt(syms[0])                    # not rational: substituted by sympy, as before
    assert flops_at(root, at) == float(root.subs(at))
