"""The forms :func:`~napkin_cat.search.top_columns.options` states: ``H`` at a point is a sum of powers of ``M``
where it is one, else the tidied expansion (symspeed-35: where a term's coefficient holds ``M`` that is read off
the expanded terms before ``power_terms`` would expand again and raise).  Checked against sympy by a second route:
``H`` substituted with the point's tiles and compared numerically, and the power-sum form rebuilt by
``power_terms``."""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.cost.lagrange import tidy
from napkin_cat.cost.optimum_record import power_terms
from napkin_cat.cost.tiling import TilingProgram
from napkin_cat.errors import NapkinError
from napkin_cat.search.top_columns import options, top_columns

M = nc.symbol("M")
f, n, e, d, h = (nc.symbol(s) for s in ("f", "n", "e", "d", "h"))
g, gn, ge = nc.symbol("g_f"), nc.symbol("g_n"), nc.symbol("g_e")
SIZES = {f: 72, n: 64, e: 68, d: 48, h: 4}


def swiglu():
    return TilingProgram(2 * e * f * n / gn + e * f * n / g + f * n,
                         (g * gn, 2 * g * gn + 2 * g + gn), (g, gn), ("f", "n"), (f, n))


def cross():
    """Two tiles under one column with a cross term and ``H`` with ``1/(g_e·g_n)``: the point holds
    ``sqrt(M + d·n)``, so its ``H`` is no sum of powers of ``M`` (the block's largest point)."""
    return TilingProgram(d * e * h * n / gn + d * e * h * n ** 2 / (ge * gn) + e * n + e * h * n ** 2 / ge,
                         (d * ge + d * gn + ge * gn,), (ge, gn), ("e", "n"), (e, n))


def _at(expr, m):
    return complex(sympy.sympify(expr).xreplace({**{k: sympy.Integer(v) for k, v in SIZES.items()},
                                                 M: sympy.Integer(m)}).evalf())


def _check(prog):
    H, _, free, _ = top_columns(prog)
    found = options(prog, M)
    assert found
    forms = []
    for _, Hform, tiles in found:
        direct = sympy.expand(H.subs({t: tiles[t] for t in free}))
        for m in (4096, 10 ** 6):
            a, b = _at(Hform, m), _at(direct, m)
            assert abs(a - b) <= 1e-9 * abs(b)
        try:
            expected = sympy.Add(*[a * M ** (-b) for a, b in power_terms(direct, M)])
            forms.append("powers")
        except NapkinError:
            expected = tidy(direct)
            forms.append("tidy")
        assert Hform == expected
    return forms


def test_a_point_whose_H_is_a_sum_of_powers_keeps_that_form():
    assert _check(swiglu()) == ["powers"]


def test_a_point_with_a_radical_in_M_is_tidied():
    forms = _check(cross())
    assert forms and set(forms) == {"tidy"}
