"""``kkt_points(…, tidied=False)`` (kkt-35b): the points as the elimination leaves them, for a caller that reads them
as numbers only (:func:`~napkin_cat.search.top_columns.top_form`'s scan on points solved with the sizes put in).
Checked against the tidied points by value at several memories (a second route: sympy's numbers), and counted: no
:func:`~napkin_cat.cost.lagrange.tidy` is made for them."""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.cost import lagrange
from napkin_cat.cost.lagrange import kkt_points

M, d, e, h, n = (nc.symbol(s) for s in ("M", "d", "e", "h", "n"))
ge, gn, gh, g = (nc.symbol(s) for s in ("g_e", "g_n", "g_h", "g_q"))
SIZES = {d: 48, e: 68, h: 4, n: 64}


def programs():
    """``(H, column, free)``: two tiles under a column with a cross term (two roots), the block's attention kernel's
    column of two tiles, and one tile under a linear column (the direct point)."""
    return [(d * e * h * n / gn + d * e * h * n ** 2 / (ge * gn) + e * n + e * h * n ** 2 / ge,
             d * ge + d * gn + ge * gn, [ge, gn]),
            (3 * d * e * h * n / gn + 3 * d * h * n + e * h * n / gh, 2 * e * gh + e * gn + gh * gn, [gn, gh]),
            (2 * d / g + n / g, 2 * d * g + d + 3 * g, [g])]


def _value(x, m):
    return complex(sympy.sympify(x).xreplace({**{k: sympy.Integer(v) for k, v in SIZES.items()},
                                              M: sympy.Integer(m)}).evalf(30))


def _counted(monkeypatch):
    made = []
    real = lagrange.tidy

    def counting(expr):
        made.append(expr)
        return real(expr)
    monkeypatch.setattr(lagrange, "tidy", counting)
    return made


def test_untidied_points_take_the_tidied_points_values(monkeypatch):
    for H, C, free in programs():
        env = {k: sympy.Integer(v) for k, v in SIZES.items()}
        Hn, Cn = H.xreplace(env), C.xreplace(env)       # the sizes put in, as the scan solves them
        tidied = kkt_points(Hn, [Cn], free, M)
        made = _counted(monkeypatch)
        raw = kkt_points(Hn, [Cn], free, M, tidied=False)
        assert made == []                               # the work saved: no tidy for the points read as numbers
        monkeypatch.undo()
        assert tidied and len(raw) == len(tidied)
        for p, q in zip(tidied, raw):
            for t in free:
                for m in (4096, 10 ** 6, 2 ** 40):
                    a, b = _value(p[str(t)], m), _value(q[str(t)], m)
                    assert abs(a - b) <= 1e-12 * abs(a)


def test_the_tidied_points_are_tidied(monkeypatch):
    """The default (every caller that states a form) still tidies: the counted route is the one the flag skips."""
    H, C, free = programs()[1]
    made = _counted(monkeypatch)
    kkt_points(H * 7, [C], free, M)                     # (7: a program no call before it solved and kept)
    assert made
