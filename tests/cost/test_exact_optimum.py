"""The exact optimum honours every column of the memory model (Soundness item 6, errata D-12).

``H*(a, M) = min_g H(g)  s.t.  every column of c.M ≤ M``: the tiles the library calls exact must
fit all columns, including the one that binds only for small tiles (attention with ``g_q < d``).
The second route is independent of the library's solver: with one tile and every column
increasing in it, the optimum is the largest tile that every column admits, found here by
solving each column for the tile in exact rational arithmetic.
"""
import re
from fractions import Fraction

import pytest
import sympy
from hypothesis import given, settings, strategies as st

import napkin_cat as nc

S = nc.symbol
q, x, d, M, g_q, s_x = (S(n) for n in ("q", "x", "d", "M", "g_q", "s_x"))


def flash():
    return nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")


COST = nc.cost(flash())
OPT = nc.optimal(COST, memory="M")
COLUMNS = [col.subs(s_x, 1) for col in COST.columns[1]]     # the paper's stream size s_x = 1


def largest_tile(values) -> Fraction:
    """The largest g_q that every column admits: each column is a g_q + b with a, b ≥ 0."""
    best = None
    for col in COLUMNS:
        poly = sympy.Poly(col.subs(values), g_q)
        assert poly.degree() == 1, f"the reference assumes columns linear in g_q, got {col}"
        a, b = (Fraction(int(k.p), int(k.q)) for k in poly.all_coeffs())
        root = (Fraction(values[M]) - b) / a
        best = root if best is None else min(best, root)
    return best


def test_attention_exact_optimum_fits_every_column_when_g_q_is_below_d():
    """d = 32, M = 2000 (the issue's case): g_q < d, where a column other than the large-M one binds."""
    values = {d: 32, M: 2000}
    g = OPT.exact_sizes[g_q].subs(values)
    peaks = {str(col): col.subs(g_q, g).subs(values) for col in COLUMNS}
    assert all(v <= 2000 for v in peaks.values()), f"exact tile g_q = {g} overflows memory: {peaks}"
    assert g == largest_tile(values) and g < 32


@settings(max_examples=60)
@given(d=st.integers(1, 256), slack=st.floats(1.001, 1e4), q_=st.integers(1, 10 ** 6), x_=st.integers(1, 10 ** 6))
def test_attention_exact_optimum_is_feasible_and_optimal(d, slack, q_, x_):
    """Over random d and M above the smallest legal memory: feasible in every column, and H* minimal."""
    smallest = max(int(col.subs({g_q: 1, S("d"): d})) for col in COLUMNS)
    m = int(smallest * slack) + 1
    values = {S("d"): d, M: m, q: q_, x: x_}
    g = OPT.exact_sizes[g_q].subs(values)
    for col in COLUMNS:
        assert col.subs(g_q, g).subs(values) <= m, f"column {col} overflows at d={d}, M={m}"
    reference = largest_tile(values)
    assert sympy.Rational(reference.numerator, reference.denominator) == g
    H_ref = COST.H[1].subs({g_q: sympy.Rational(reference.numerator, reference.denominator)}).subs(values)
    assert sympy.simplify(OPT.exact_H.subs(values) - H_ref) == 0
    # never below the paper's printed large-M bound (errata D-12)
    assert OPT.exact_H.subs(values) >= OPT.H.subs(values)


def test_a_closed_form_that_overflows_a_column_is_never_returned(monkeypatch):
    """The check inside ``optimal``: main's old attention form (only 2d·g_q + d + 3g_q binds) is refused."""
    from napkin_cat.cost import exact as exact_module
    from napkin_cat.cost.tiling import program
    old = (M - d) / (2 * d + 3)
    assert any(col.subs(g_q, old).subs({d: 32, M: 2000}) > 2000 for col in COLUMNS)   # it does overflow
    monkeypatch.setattr(exact_module, "piecewise_optimum", lambda H, cols, free, M_: (H.subs(g_q, old), {g_q: old}, []))
    prog = program(COST, 1)
    e = exact_module.exact_optimum(prog, M)
    assert e.H is None and e.sizes is None
    assert re.search(r"failed its check \(column [^)]*g_q[^)]* holds [\d.]+ > \d+ at ", e.notes[0]), e.notes
    # the optimum is still there, implicitly: its KKT system and its value at numbers
    H, tiles = e.at(q=4096, x=4096, d=32, M=2000)
    assert abs(tiles[g_q] - float(largest_tile({d: 32, M: 2000}))) < 1e-6


def test_a_feasible_but_suboptimal_closed_form_is_never_returned(monkeypatch):
    from napkin_cat.cost import exact as exact_module
    from napkin_cat.cost.tiling import program
    half = OPT.exact_sizes[g_q] / 2      # fits every column, but half the best tile
    monkeypatch.setattr(exact_module, "piecewise_optimum",
                        lambda H, cols, free, M_: (H.subs(g_q, half), {g_q: half}, []))
    prog = program(COST, 1)
    e = exact_module.exact_optimum(prog, M)
    assert e.H is None and re.search(r"failed its check \(H\* = [\d.e+]+ but the numeric optimum is", e.notes[0])


def test_kkt_system_and_solution_set_name_every_binding_column():
    """The implicit form: every column that can bind alone has a multiplier; the closed form solves the system."""
    e = OPT.exact
    undominated = [C for C in COLUMNS if not any(D != C and all(t.is_nonnegative for t in
                                                                sympy.Add.make_args(sympy.expand(D - C)))
                                                 for D in COLUMNS)]
    assert set(e.columns) == set(undominated) and len(e.columns) >= 2
    lams = e.multipliers
    assert all(sympy.Eq(lam * (C - M), 0) in e.system.args for lam, C in zip(lams, e.columns))
    assert e.solution_set.sym == sympy.Tuple(g_q, *lams)
    # at d = 32, M = 2000 the closed form satisfies the system, the binding column's multiplier positive
    at = {d: 32, M: 2000, q: 64, x: 64}
    g = e.sizes[g_q].subs(at)
    binding = [C for C in e.columns if C.subs(g_q, g).subs(at) == 2000]
    assert len(binding) == 1
    lam = (-sympy.diff(e.objective, g_q) / sympy.diff(binding[0], g_q)).subs(at).subs(g_q, g)
    values = {lm: (lam if C == binding[0] else 0) for lm, C in zip(lams, e.columns)}
    assert lam > 0 and e.system.subs(at).subs({g_q: g, **values}) is sympy.true


def test_exact_at_names_what_is_missing_or_too_small():
    with pytest.raises(nc.NapkinError, match=r"give a number for \['d', 'x'\]"):
        OPT.exact.at(q=64, M=2000)
    smallest = max(col.subs({g_q: 1, d: 32}) for col in COLUMNS)
    with pytest.raises(nc.MemoryLimitError, match=f"the smallest legal memory is {smallest}$"):
        OPT.exact.at(q=64, x=64, d=32, M=smallest - 1)
