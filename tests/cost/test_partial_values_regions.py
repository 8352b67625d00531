"""``cost.partials.partial_values`` of a region, kept on it, against the same region visited as a diagram.

A region (a Kernel, Grid or Stream box) is a Diagram too, so the remembered route is taken only where the
argument is tested as a Region: the cost functor asks every region of every candidate it walks, and before, each
ask re-visited everything inside.  Two routes compared on the search's candidates (split streams included, whose
partial buffers are not zero) of random programs and the library's kernels:

* the region's own answer (kept on it; zero at once where no split stream is inside, ``_splits``);
* the visit of ``Diagram.id(region.dom) >> region`` (the diagram route, never remembered), summed over every
  split stream inside by the law ``Σ_split P · Σ_state Π_axes whole(a)``.
"""
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.bubbles import Region
from napkin_cat.cost.partials import partial_values
from napkin_cat.search.variants import split_variants, variants
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, random_program


def regions(d):
    """Every region of ``d``, outermost first."""
    for box in d.boxes:
        if isinstance(box, Region):
            yield box
            yield from regions(box.arg)


def diagram_route(region):
    return sympy.expand(partial_values(Diagram.id(region.dom) >> region))


def candidates():
    functions = [f() for f in LIBRARY_FUNCTIONS.values()]
    functions += [random_program(seed, n_ops=2 + seed % 4).diagram for seed in range(10)]
    for f in functions:
        for v in [*variants(f), *split_variants(f)]:
            yield v


def test_a_region_remembers_what_its_diagram_visit_counts():
    split = 0
    for v in candidates():
        for d in (v.record, v.diagram):
            for r in regions(d):
                first = partial_values(r)
                assert sympy.expand(first - diagram_route(r)) == 0, (v.describe(), r.name)
                assert "_partial_values" in r.__dict__ and partial_values(r) is first   # kept on the region
                split += first != 0
    assert split     # split streams were met: their buffers are not zero


def test_a_split_stream_holds_its_parts_states():
    """The law on one case by hand: attention's stream over ``x`` in ``P`` parts, grouped over ``q``, holds per
    part the running output (``q × d``) and the two statistics (``q`` each) of every query."""
    d = nc.group(nc.stream(nc.library.attention(), "x", "s_x", parts="P"), "q", "g_q")
    (kernel,) = [b for b in d.boxes if isinstance(b, Region)]
    P, q, dd = sympy.symbols("P q d", positive=True)
    got = partial_values(kernel)
    assert sympy.expand(got - (P * q * dd + 2 * P * q).subs({s: nc.symbol(str(s)) for s in (P, q, dd)})) == 0
    assert partial_values(kernel) is got
