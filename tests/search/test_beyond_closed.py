"""A symbolic derive says where its envelope is an upper bound: a kernel whose interior KKT point is past the closed
forms solved (:func:`napkin_cat.search.top_columns.beyond_closed_forms`; causal attention's fused kernel, whose
stationarity is the cubic ``2g_q³ + q·g_q² − q·M = 0``) enters the envelope on a face of its tile box only, so the
envelope can state more than the optimum.  Checked by a second route: the numeric search at the reference sizes
moves less than the envelope states there, and a brute-force minimum of the kernel's own program lies below the
face form the candidate carries."""
import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.tiling import TilingProgram
from napkin_cat.search.envelope import reference_sizes
from napkin_cat.search.top_columns import beyond_closed_forms, top_form

M = nc.symbol("M")


def _envelope_and_search(f, memories):
    """``(derivation, [(m, envelope H at m, numeric search H at m)])`` at the reference sizes."""
    r = nc.derive(f, memory="M")
    ref = reference_sizes(f)
    env = {nc.symbol(k): v for k, v in ref.items()}
    rows = []
    for m in memories:
        e = complex(r.H.xreplace(env).subs(M, m))
        assert abs(e.imag) <= 1e-6 * abs(e.real)
        rows.append((m, e.real, nc.derive(f, memory=m, sizes=ref).H))
    return r, rows


def _piece_at(r, env, m):
    """The regime of ``r`` holding the memory ``m`` at the reference sizes ``env``."""
    for g in r.regimes:
        lo, hi = (complex(sympy.sympify(b).xreplace(env)).real for b in (g.lower, g.upper))
        if lo <= m < hi:
            return g
    raise AssertionError(f"no piece holds M = {m}")


@pytest.mark.parametrize("build", [nc.library.causal_attention, nc.library.attention,
                                   lambda: nc.library.prefix_lm_attention(64)], ids=["causal", "dense", "prefix-lm"])
def test_an_envelope_above_the_search_says_so(build):
    """Wherever the envelope states more than the numeric search moves at the reference sizes, a note says why: the
    derivation's (a kernel whose optimum it could not solve; causal: 1.12-1.24x at 2^12 … 2^15, in a piece that said
    nothing before) or the piece's own (a masked stream's estimated trips; prefix-LM's union of masks).  Dense
    attention's envelope stays below the search (a relaxation) and carries no such note."""
    f = build()
    r, rows = _envelope_and_search(f, [2 ** 12, 2 ** 14, 2 ** 15])
    env = {nc.symbol(k): v for k, v in reference_sizes(f).items()}
    above = [(m, e, h) for m, e, h in rows if e > h * (1 + 1e-9)]
    for m, _, _ in above:
        said = r.notes or any("estimate" in n for n in _piece_at(r, env, m).optimum.notes)
        assert said, f"the envelope at M = {m} is above the search and no note says so"
    if build is nc.library.attention:
        assert not above and r.notes == ()
    if build is nc.library.causal_attention:
        assert above, rows      # (the case the note is for: it would pass vacuously once the cubic is solved)
        assert len(r.notes) == 1 and "g_d*g_q = M" in r.notes[0] and "upper bound" in r.notes[0]
        assert not any("estimate" in n for n in _piece_at(r, env, 2 ** 14).optimum.notes)   # (before: silent)
        assert any(any("upper bound" in n for n in g.optimum.notes) for g in r.regimes), \
            "the piece whose candidate holds the kernel says so too"


def test_the_face_form_is_above_the_kernels_own_minimum():
    """Second route for the note's claim: the causal kernel's program minimised by brute force (``g_d = M/g_q`` on a
    fine grid, numpy) is below what :func:`top_form` can state for it (None: no interior point) and below its
    cheapest face (a tile at 1 or whole), at ``q = 1024, d = 1088, M = 2^16``."""
    d, q, gd, gq = (nc.symbol(s) for s in ("d", "q", "g_d", "g_q"))
    H = d * q ** 2 / (2 * gq) + d * q * gq / (2 * gd) + d * q ** 2 / (2 * gd)
    prog = TilingProgram(H, (gd * gq,), (gd, gq), ("d", "q"), (d, q))
    sizes, m = {d: 1088, q: 1024}, 2 ** 16
    assert beyond_closed_forms(prog, M)
    assert top_form(prog, M, 0, sizes, float(m)) is None
    h = sympy.lambdify((gd, gq), H.xreplace(sizes), "numpy")
    g = np.exp(np.linspace(0.0, np.log(1024), 200001))
    inside = (m / g >= 1) & (m / g <= 1088)
    interior = h(m / g[inside], g[inside]).min()
    faces = min(h(1088, m / 1088), h(m / 1024, 1024))   # g_d or g_q whole (at 1, the other is past its axis)
    assert interior < 0.6 * faces      # (4518·d against the best face's 9694·d: the note's upper bound is real)
