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
from napkin_cat.search import top_columns as top_columns_module
from napkin_cat.search.top_columns import options, top_columns, top_form

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
            expected = tidy(direct)      # (kkt-35e: or the point as put in where that is shorter)
            put_in = H.xreplace({t: tiles[t] for t in free})
            if sympy.count_ops(put_in) < sympy.count_ops(expected):
                expected = put_in
            forms.append("tidy")
        assert Hform == expected
    return forms


def one_tile():
    """The block's MLP kernel in ``g_f``: ``H*`` has coefficients that are sums (each factored by ``power_terms``)."""
    return TilingProgram(e * f + e * f * n / g + 2 * e * f / g + f * n + f + 2 * f * n / g, (g * n,), (g,), ("f",),
                         (f,))


def test_a_point_whose_H_is_a_sum_of_powers_keeps_that_form():
    assert _check(swiglu()) == ["powers"]
    assert _check(one_tile()) == ["powers"]
    (_, H, _), = options(one_tile(), M)
    assert H != tidy(sympy.expand(H))           # the power-sum form is not what tidying would give


def test_a_point_with_a_radical_in_M_is_tidied():
    forms = _check(cross())
    assert forms and set(forms) == {"tidy"}


def four_columns():
    """The block's attention kernel with four binding columns in two tiles (the tiles of each column's point hold
    radicals in ``M``; the point of ``3e·g_h + e·g_n`` binds below ``M ≈ 1.2e6`` at the reference sizes, that of
    ``e·g_n + 3·g_h·g_n`` above)."""
    gh = nc.symbol("g_h")
    return TilingProgram(3 * d * e * h * n / gn + 3 * d * h * n + e * h * n / gh,
                         (3 * e * gh + e * gn, 2 * e * gh + e * gn + gh * gn, e * gh + e * gn + 2 * gh * gn,
                          e * gn + 3 * gh * gn), (gn, gh), ("n", "h"), (n, h))


BLOCK = {n: 512, e: 256, h: 4, d: 64}


def _reference(prog, mp):
    """The cheapest point of every single column's (solved in the sizes) that satisfies every column at ``M = mp``
    at the sizes :data:`BLOCK`: the choice the scan makes, by brute force over all the symbolic points."""
    _, tops, free, _ = top_columns(prog)
    env = {k: sympy.Integer(v) for k, v in BLOCK.items()}
    best = None
    for _, Hform, tiles in options(prog, M):
        tv = [complex(sympy.sympify(tiles[t]).xreplace(env).subs(M, mp).evalf()) for t in free]
        if any(abs(x.imag) > 1e-9 * abs(x) or not x.real > 0 for x in tv):
            continue
        at = dict(zip(free, [x.real for x in tv]))
        if any(float(sympy.sympify(T).xreplace(env).subs(at)) > mp * (1 + 1e-9) for T in tops):
            continue
        v = float(sympy.sympify(Hform).xreplace(env).subs(M, mp))
        if best is None or v < best[0] * (1 - 1e-12):
            best = (v, Hform)
    return best[1]


def test_the_scan_on_points_solved_at_the_sizes_chooses_as_on_all_symbolic_points():
    """symspeed-35: a program of several columns and tiles is scanned on points solved at the reference sizes and
    only the chosen sets are solved in the sizes; the form it states is the brute-force choice over every single
    column's symbolic point, below and above the memories where the binding column changes."""
    prog = four_columns()
    seen = []
    for at in (2.0 ** 12, 2.0 ** 24, 2.0 ** 32):
        H, _, end = top_form(prog, M, 0, dict(BLOCK), at)
        assert H == _reference(prog, at * (1 + 1e-6))
        seen.append((H, end))
    (first, end), (second, _), (third, _) = seen
    assert end is not None and 2.0 ** 12 < end.at < 2.0 ** 24        # where no single column's point fits any more
    assert first != second and second == third


def _counting_lambdify(monkeypatch):
    """``top_columns.float_functions`` counted (lamb-35: what replaced ``sympy.lambdify`` there): the float
    functions the scan of :func:`top_form` is made of."""
    made = []
    real = top_columns_module.float_functions

    def counted(*args, **kwargs):
        made.append(args[0])
        return real(*args, **kwargs)
    monkeypatch.setattr(top_columns_module, "float_functions", counted)
    return made


def _brute(prog, sizes, mp):
    """The cheapest of every point of :func:`options` that satisfies every column at ``M = mp`` at ``sizes``
    (sympy's numbers, no float functions): the choice the scan makes, by a second route."""
    _, tops, free, _ = top_columns(prog)
    env = {k: sympy.Integer(v) for k, v in sizes.items()}
    best = None
    for _, Hform, tiles in options(prog, M):
        tv = [complex(sympy.sympify(tiles[t]).xreplace(env).subs(M, mp).evalf()) for t in free]
        if any(abs(x.imag) > 1e-9 * abs(x) or not x.real > 0 for x in tv):
            continue
        at = dict(zip(free, [x.real for x in tv]))
        if any(float(sympy.sympify(T).xreplace(env).subs(at)) > mp * (1 + 1e-9) for T in tops):
            continue
        v = float(sympy.sympify(Hform).xreplace(env).subs(M, mp))
        if best is None or v < best[0] * (1 - 1e-12):
            best = (v, Hform)
    return best[1]


def test_one_column_with_one_point_is_taken_unscanned(monkeypatch):
    """kkt-35b: a program of one column whose set has one point states that point, ending nowhere, without the
    scan's float functions (none made); the brute-force choice at sympy's numbers agrees, below and above."""
    sizes = {f: 71, n: 63, e: 67, d: 47, h: 3}       # (sizes of its own: no call before it kept the choice)
    for prog in (swiglu(), one_tile()):
        made = _counting_lambdify(monkeypatch)
        for at in (2.0 ** 12 + 0.25, 2.0 ** 20 + 0.25, 2.0 ** 30 + 0.25):
            H, tiles, end = top_form(prog, M, 0, dict(sizes), at)
            assert end is None
            assert H == _brute(prog, sizes, at * (1 + 1e-6))
            assert [tiles[t] for t in top_columns(prog)[2]] == [options(prog, M)[0][2][t] for t in top_columns(prog)[2]]
        assert made == []                             # no scan: the work the shortcut saves
        monkeypatch.undo()


def test_one_column_with_two_points_is_still_scanned(monkeypatch):
    """The shortcut is for one point only: a column whose set has two (``cross``: a quadratic's two roots) is
    scanned (float functions made) and states the brute-force choice."""
    prog = cross()
    assert len(options(prog, M)) == 2
    sizes = {f: 73, n: 65, e: 69, d: 49, h: 5}
    made = _counting_lambdify(monkeypatch)
    for at in (2.0 ** 12 + 0.25, 2.0 ** 24 + 0.25):
        H, _, end = top_form(prog, M, 0, dict(sizes), at)
        assert H == _brute(prog, sizes, at * (1 + 1e-6))
    assert made                                       # the scan ran
