"""The exact optimum honours every column of the memory model (Soundness item 6, errata D-12).

``H*(a, M) = min_g H(g)  s.t.  every column of c.M ≤ M``: the tiles the library calls exact must
fit all columns, including the one that binds only for small tiles (attention with ``g_q < d``).
The second route is independent of the library's solver: with one tile and every column
increasing in it, the optimum is the largest tile that every column admits, found here by
solving each column for the tile in exact rational arithmetic.
"""
from fractions import Fraction

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
    """d = 32, M = 2000: the column 2d·g_q + 2d·s_x + 2g_q binds (g_q < d), not 2d·g_q + d + 3g_q."""
    values = {d: 32, M: 2000}
    g = OPT.exact_sizes[g_q].subs(values)
    peaks = {str(col): col.subs(g_q, g).subs(values) for col in COLUMNS}
    assert all(v <= 2000 for v in peaks.values()), f"exact tile g_q = {g} overflows memory: {peaks}"
    assert g == largest_tile(values) == Fraction(1936, 66)


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
