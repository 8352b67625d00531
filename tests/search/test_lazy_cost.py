"""A derive's winner's cost is made when read, not in the call (issue 35), and is then the cost functor's.

``nc.derive`` held each regime's full symbolic cost record (``nc.cost`` of its algorithm: 1.1 of 10.7 CPU s for 32
transformer blocks) though it needs only the densities the costs assume.  Now a regime holds a
:class:`~napkin_cat.search.results.Later`; read, ``r.cost`` is checked against the cost functor run on the
algorithm (the second route).  The densities are read off the costs only where a stream of the algorithm skips by a
mask from data (:func:`~napkin_cat.search.derivation.masked_by_data`), checked against the cost functor's own
``assumptions`` on dense, causal and document attention and a random program with a mask from data.
"""
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.numeric import densities
from napkin_cat.search.context import KernelCache
from napkin_cat.search.derivation import masked_by_data
from napkin_cat.search.results import Later, held
from napkin_cat.testing.programs import random_program

SIZES = {"q": 64, "x": 128, "d": 16}


def test_cost_unmade_until_read_then_the_functors():
    r = nc.derive(nc.library.attention(), memory=[2 ** 10, 2 ** 13], sizes=SIZES, cache=KernelCache())
    assert all(isinstance(held(g, "cost"), Later) for g in r.regimes) and isinstance(held(r, "cost"), Later)
    for g in r.regimes:
        assert g.cost == nc.cost(g.diagram)
        assert r.at(g.memory).cost == g.cost
    assert r.cost == nc.cost(r.diagram) and r.assumptions == ()


def _cases():
    out = {"attention": nc.library.attention(), "causal": nc.library.causal_attention(),
           "document": nc.library.document_attention()}
    for seed in (1,):
        p = random_program(seed, concrete=True)
        assert "data mask" in p.shapes
        out[f"random_program({seed})"] = (p.diagram, {str(k): int(v) for k, v in p.sizes.items()})
    return out


@pytest.mark.parametrize("name", list(_cases()))
def test_costs_read_where_and_only_where_they_assume_a_density(name):
    case = _cases()[name]
    diagram, sizes = case if isinstance(case, tuple) else (case, SIZES)
    r = nc.derive(diagram, memory=[2 ** 10, 2 ** 14], sizes=sizes, density=0.25, cache=KernelCache())
    for g in r.regimes:
        assumed = nc.cost(g.diagram).assumptions
        assert masked_by_data(g.diagram) == bool(assumed), name
    eager = {a.symbol: None for g in r.regimes for a in nc.cost(g.diagram).assumptions}
    eager.update((s, None) for s in densities(r.diagram))
    assert [a.symbol for a in r.assumptions] == list(eager)
    assert all(a.value == sympy.Rational(1, 4) for a in r.assumptions)
    assert bool(r.assumptions) == (name == "document")     # its fused stream skips by document ids
