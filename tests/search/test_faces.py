"""A kernel's tiling program solved on the faces of its tile box (:mod:`napkin_cat.search.faces`), against a brute
force over the box (the second route: no KKT point, no face enumeration)."""

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.tiling import TilingProgram
from napkin_cat.search.faces import face_form, pinned

d, e, h, n, M = (nc.symbol(s) for s in ("d", "e", "h", "n", "M"))
gh, gm, gn = (nc.symbol(s) for s in ("g_h", "g_m", "g_n"))
#: projected attention's QKᵀ kernel: its top-degree program ``g_h·g_m·g_n = M`` has no KKT point (g_m unbounded)
QK = TilingProgram(d * h * n ** 2 / gn + d * e * h * n ** 2 / (gm * gn) + e * h * n ** 2 / (gh * gm),
                   (gh * gm * (d + gn),), (gh, gm, gn), ("h", "m", "n"), (h, n, n))
REF = {d: 12, e: 24, h: 2, n: 10}


def brute(m: float, steps: int = 200) -> float:
    """The least ``H`` over a grid of ``g_h`` and ``g_n`` in their boxes (each axis's ends and ``steps`` points
    between), ``g_m`` the largest its box and the exact column ``g_h·g_m·(d + g_n) ≤ m`` allow (``H`` falls as
    ``g_m`` grows)."""
    H = sympy.lambdify((gh, gm, gn), QK.H.subs(REF))
    a_h, a_m, a_n = (float(a.subs(REF)) for a in QK.fulls)
    out = float("inf")
    for x in (1 + (a_h - 1) * k / steps for k in range(steps + 1)):
        for z in (1 + (a_n - 1) * k / steps for k in range(steps + 1)):
            y = min(a_m, m / (x * (REF[d] + z)))
            if y >= 1:
                out = min(out, H(x, y, z))
    return out


@pytest.mark.parametrize("m", [26, 40, 64, 100, 200])
def test_face_form_is_the_box_optimum(m):
    """At each memory the face's ``H`` (here ``g_h = 1``, ``g_n`` whole, ``g_m = M/(d + n)``: the exact column, no
    lower-order terms left out) is the brute force's (its tiles at the box's corners, on the grid); its tiles lie in
    the box and its column fits."""
    H, tiles, end, K = face_form(QK, M, REF, 26.0)
    at = {M: m - K.subs(REF)}
    value = float(sympy.sympify(H).subs(REF).subs(at))
    best = brute(m)
    assert abs(value - best) <= 1e-9 * best, (value, best)
    tv = {t: float(sympy.sympify(v).subs(REF).subs(at)) for t, v in tiles.items()}
    assert all(1 - 1e-9 <= tv[t] <= float(a.subs(REF)) * (1 + 1e-9) for t, a in zip(QK.tiles, QK.fulls))
    assert float(QK.columns[0].subs(REF).subs(tv)) <= m * (1 + 1e-9)


def test_pinned_names_a_tile_that_is_not_there():
    with pytest.raises(nc.NapkinError, match="g_x.*its tiles are"):
        pinned(QK, ["g_x"])
