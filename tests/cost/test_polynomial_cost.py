"""The cost fold in polynomials of Python numbers (issue 35, items 1-2) computes sympy's cost.

The search costs each candidate (a partition record, :mod:`napkin_cat.search.variants`) with the cost fold in the
arithmetic :data:`~napkin_cat.cost.polynomial.POLYNOMIAL`, and evaluates it at numeric sizes without sympy.  Two
routes are compared on random programs (:func:`napkin_cat.testing.programs.random_program`) and on the library's
kernels that exercise every kind of candidate (a sweep, a 2-D loop, a masked stream, several groups), at random
sizes and tiles:

* ``nc.cost``'s sympy record, every value substituted by sympy (``xreplace``, then sympy's own number), and
* the polynomial record, every value evaluated term by term in Python numbers:

H, bytes and every memory column per level (in order), FLOPs per pipeline, each group's trips and transfers, each
op record's FLOPs and trips.  And a curve's exact optimum at sizes (``Curve.at_all``, which reads the polynomial
record) is the optimum over the sympy record (``optima``) at every memory tried.
"""
import random
from fractions import Fraction

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.cost.iocost import cost
from napkin_cat.cost.optimum import optima
from napkin_cat.cost.polynomial import POLYNOMIAL, Poly
from napkin_cat.errors import NotPolynomialError
from napkin_cat.search.curves import Curve
from napkin_cat.search.variants import variants
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, random_program

LIBRARY = LIBRARY_FUNCTIONS
SEEDS = range(32)


def by_sympy(expr, env) -> Fraction:
    """``expr`` at ``env`` by sympy's substitution (the reference route)."""
    v = sympy.sympify(sympy.sympify(expr).xreplace(env))
    assert v.is_Rational, (expr, v)
    return Fraction(int(v.p), int(v.q))


def values(c) -> dict:
    """Every value of a cost record, by name (the order of columns and ops kept)."""
    out = {}
    for name in ("H", "H_bytes", "flops"):
        out.update({(name, k): v for k, v in getattr(c, name).items()})
    for lvl, cols in c.columns.items():
        out.update({("column", lvl, j): v for j, v in enumerate(cols)})
    for j, g in enumerate(c.groups):
        out[("N_g", j)] = g.N_g
        out.update({("H_g", j, lvl): v for lvl, v in g.H_g.items()})
    for j, o in enumerate(c.ops):
        out[("op flops", j)], out[("op trips", j)] = o.flops, o.trips
    return out


def assert_same_values(diagram, what, rng):
    """The sympy and the polynomial records of ``diagram`` agree at random sizes and tiles; False where the
    polynomial arithmetic refuses (a value that is no Laurent polynomial)."""
    symbolic = cost(diagram)
    try:
        poly = cost(diagram, arithmetic=POLYNOMIAL)
    except NotPolynomialError:
        return False
    want, got = values(symbolic), values(poly)
    assert want.keys() == got.keys(), (what, sorted(set(want) ^ set(got), key=str))
    assert all(isinstance(v, Poly) for v in got.values()), what      # no sympy value in the polynomial record
    symbols = set().union(*(sympy.sympify(v).free_symbols for v in want.values()))
    for _ in range(2):
        env = {s: rng.randint(1, 9) for s in symbols}
        for k, v in want.items():
            assert Fraction(value(got[k], env)) == by_sympy(v, env), (what, k, v, got[k], env)
    # without the per-box records (the search's record): every other value the same, none of them
    bare = cost(diagram, arithmetic=POLYNOMIAL, ops=False)
    assert bare.ops == [] and values(bare) == {k: v for k, v in got.items() if not k[0].startswith("op ")}, what
    assert [tuple(s) for s in poly.streams] == [tuple(s) for s in symbolic.streams], what
    assert [(g.axes, g.tiles, g.fulls, g.level) for g in poly.groups] == \
        [(g.axes, g.tiles, g.fulls, g.level) for g in symbolic.groups], what
    return True


def assert_same_optima(v, sizes, what):
    """``Curve.at_all`` (the polynomial record) is ``optima`` of the sympy record at each memory."""
    curve = Curve(v)
    if not curve.grouped:
        return
    least = int(curve.smallest(sizes))
    memories = [least, 2 * least + 1, 8 * least, 64 * least]
    want = [None if o is None else (int(o.H), {str(t): int(g) for t, g in o.sizes.items()})
            for o in optima(curve.cost, memories, 1, sizes=sizes)]
    got = [None if h is None else (h, {str(t): int(g) for t, g in tiles.items()})
           for h, tiles in curve.at_all(sizes, memories)]
    assert got == want, (what, v.describe(), memories)


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_library_candidates_cost_the_same_in_polynomials(name):
    rng = random.Random(name)
    function = LIBRARY[name]()
    found = variants(function)
    assert found
    held = [assert_same_values(v.record, (name, v.describe()), rng) for v in found]
    if name != "causal attention":            # a mask's running trips may leave the polynomials; nothing else does
        assert all(held), name
    sizes = {str(a.size): rng.choice([8, 16, 32, 48]) for arr in (*function.dom.inside, *function.cod.inside)
             for a in arr.axes if not isinstance(a.size, int)}
    for v in found:
        assert_same_optima(v, sizes, name)


def test_random_candidates_cost_the_same_in_polynomials():
    rng = random.Random(20251130)
    costed = 0
    for seed in SEEDS:
        p = random_program(seed, n_ops=2 + seed % 5)
        for v in variants(p.diagram):
            costed += assert_same_values(v.record, (p.call, v.describe()), rng)
            assert_same_optima(v, p.sizes, p.call)
    assert costed >= len(SEEDS)       # the programs were costed, not refused


def test_the_search_reads_the_polynomial_record():
    v = next(v for v in variants(nc.library.attention()) if v.groups)
    curve = Curve(v)
    assert isinstance(curve.search_cost.H[1], Poly) and not isinstance(curve.cost.H[1], Poly)
    M = nc.symbol("M")
    assert curve.symbolic(M) == Curve(v.diagram).symbolic(M)      # the large-M form reads the sympy record


def test_a_value_outside_the_polynomials_is_refused():
    q, g = nc.symbol("q"), nc.symbol("g_q")
    with pytest.raises(NotPolynomialError, match=r"ceiling\(q/g_q\) is not a Laurent polynomial"):
        POLYNOMIAL.of(sympy.ceiling(q / g))
    with pytest.raises(NotPolynomialError, match="is not a Laurent polynomial"):
        POLYNOMIAL.of(q + g) ** -1
