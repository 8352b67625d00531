"""The symbolic cost of a masked stream charges the mask's maps only on the trips that make the mask: the trips it
runs, less those its mask allows whole (:func:`~napkin_cat.cost.trips.whole_trips`, read off the same
:meth:`~napkin_cat.algorithms.skipping.Skip.whole` the plan and the cost at sizes leave the maps out by)::

    flops(mask's maps) = (running trips − whole trips) · flops(one trip's mask)

Causal attention with ``s_x | g_q`` and ``s_x ≥ 2``: per q-tile ``i`` the ``i·g_q/s_x`` slices below the diagonal run
whole, the ``g_q/s_x`` diagonal ones make the mask, so the symbolic cost at the sizes is the cost at sizes and what the
runner counts, FLOPs by kind.  Where the closed form is not exact it charges more mask work, never less: at
``s_x = 1`` (the diagonal's own slice runs whole), for a band whose numeric offsets are not known to be multiples of a
symbolic slice (a window, a prefix: their whole trips not counted), for a union of bounds (prefix-LM, sinks).
The running trips themselves are :func:`~napkin_cat.cost.trips.running_trips`' estimate, unchanged (H unchanged): below
the cost at sizes where the slices do not line up with the tiles (``s_x ∤ g_q``), above where a band passes an end of
the axis that sympy cannot order (``x < q``, a window's first tiles, a union: every trip)."""
import sys
from pathlib import Path

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.syntax.adapter import Ty

sys.path.insert(0, str(Path(__file__).parent))
from test_masked_runner_agrees import MASKS, counts  # noqa: E402

STREAM = lambda a: nc.stream(a, "x", "s_x")  # noqa: E731
GROUP = lambda a: nc.group(nc.stream(a, "x", "s_x"), "q", "g_q")  # noqa: E731


def _at(c, sizes: dict) -> dict:
    """The symbolic FLOPs by kind at ``sizes`` (a density from data read as 1: every position the mask allows)."""
    sub = {nc.symbol(k): v for k, v in sizes.items()}
    out = {}
    for k, v in c.flops.items():
        e = sympy.sympify(v)
        e = e.subs({s: 1 for s in e.free_symbols if str(s).startswith("rho[")})
        out[k] = sympy.nsimplify(e.subs(sub))
    return out


TILINGS = [{"q": 8, "x": 8, "d": 3, "g_q": 2, "s_x": 2}, {"q": 8, "x": 8, "d": 3, "g_q": 4, "s_x": 2},
           {"q": 8, "x": 8, "d": 3, "g_q": 4, "s_x": 4}, {"q": 12, "x": 12, "d": 2, "g_q": 6, "s_x": 3},
           {"q": 16, "x": 16, "d": 2, "g_q": 8, "s_x": 4}, {"q": 16, "x": 16, "d": 2, "g_q": 16, "s_x": 8}]


def test_the_issue_case_charges_the_mask_on_the_diagonal_blocks_only():
    """Causal attention at q = x = 8, d = 3, g_q = 2, s_x = 2: symbolic 424 general FLOPs before (the mask's maps on
    all 10 running trips), 400 now: on the 4 diagonal blocks only, as the cost at sizes and the runner count."""
    sizes = TILINGS[0]
    alg = GROUP(nc.library.causal_attention())
    c, counted = counts(alg, sizes)
    assert _at(nc.cost(alg), sizes) == c.flops == counted.flops
    assert c.flops["general"] == 400


@pytest.mark.parametrize("partition", ["stream", "group"])
@pytest.mark.parametrize("mask", ["causal", "document"])
@pytest.mark.parametrize("sizes", TILINGS, ids=lambda s: "g{g_q}s{s_x}q{q}".format(**s))
def test_symbolic_at_sizes_is_the_cost_at_sizes_and_the_runners_count(mask, partition, sizes):
    """At tile-dividing sizes (``s_x | g_q | q``, ``s_x ≥ 2``) the symbolic FLOPs by kind are the cost at sizes' and
    the runner's (a document mask's density read as 1: at sizes, without the data's table, its positions decide)."""
    sizes = dict(sizes) if partition == "group" else {k: v for k, v in sizes.items() if k != "g_q"}
    alg = (GROUP if partition == "group" else STREAM)(MASKS[mask]())
    c, counted = counts(alg, sizes)
    assert c.flops == counted.flops
    assert _at(nc.cost(alg), sizes) == c.flops, sizes


def test_the_whole_trips_closed_form_is_the_diagonal_blocks():
    """Causal, per q-tile ``i``: ``i·g_q/s_x`` slices below the diagonal run whole, averaged over the q/g_q tiles
    ``(q − g_q)/(2·s_x)``; a numpy count of the slices the mask allows on every pair agrees at sizes."""
    alg = GROUP(nc.library.causal_attention())
    c = nc.cost(alg)
    q, g, s = nc.symbol("q"), nc.symbol("g_q"), nc.symbol("s_x")
    (rec,) = [r for r in c.ops if r.kind == "le"]                # the mask's map: on the diagonal blocks alone
    assert sympy.simplify(rec.trips - q / s) == 0                   # q/g_q tiles, g_q/s_x blocks each
    for sizes in TILINGS:
        n, gg, ss = sizes["q"], sizes["g_q"], sizes["s_x"]
        whole = sum(bool((np.arange(j, j + ss)[None, :] <= np.arange(i, i + gg)[:, None]).all())
                    for i in range(0, n, gg) for j in range(0, n, ss))
        assert sympy.sympify((q - g) / (2 * s) * q / g).subs({q: n, g: gg, s: ss}) == whole


@pytest.mark.parametrize("sizes", [{"q": 8, "x": 8, "d": 3, "g_q": 2, "s_x": 1},
                                   {"q": 8, "x": 8, "d": 3, "g_q": 4, "s_x": 1}])
def test_at_slices_of_one_the_mask_work_is_an_upper_bound(sizes):
    """At ``s_x = 1`` the diagonal's own slice runs whole too (x = the tile's first q), which the closed form (exact for
    ``s_x ≥ 2``) does not count: the mask's maps charged on one more trip per q-tile, the other kinds exact."""
    alg = GROUP(nc.library.causal_attention())
    c, counted = counts(alg, sizes)
    sym = _at(nc.cost(alg), sizes)
    assert sym["tensor"] == c.flops["tensor"] and sym["special"] == c.flops["special"]
    assert sym["general"] > c.flops["general"] == counted.flops["general"]


@pytest.mark.parametrize("mask", ["prefix-lm", "sinks+window", "window"])
@pytest.mark.parametrize("sizes", [TILINGS[2], TILINGS[4], TILINGS[5]], ids=lambda s: "g{g_q}s{s_x}q{q}".format(**s))
def test_where_not_exact_the_mask_work_is_never_below(mask, sizes):
    """A union of bounds (prefix-LM, sinks) has no whole trips counted, a window's numeric offsets are not known to be
    multiples of a symbolic slice: each charges the mask's maps on every trip it counts, never fewer than the cost at
    sizes leaves them on, so where its running trips are the cost at sizes' (tensor FLOPs equal) its general FLOPs are
    not below; and no mask's whole trips are counted beyond the trips it runs (the maps' trips never negative)."""
    alg = GROUP(MASKS[mask]())
    c, counted = counts(alg, sizes)
    sym = _at(nc.cost(alg), sizes)
    assert c.flops == counted.flops
    if sym["tensor"] == c.flops["tensor"]:
        assert sym["general"] >= c.flops["general"], sizes
    for r in nc.cost(alg).ops:
        assert sympy.nsimplify(sympy.sympify(r.trips).subs({nc.symbol(k): v for k, v in sizes.items()})) >= 0


def test_a_window_at_a_numeric_slice_counts_its_whole_trips():
    """With the slice a number the offsets round exactly: a window of 8 in slices of 4, q-tiles of 8, runs
    ``(2w − g_q)/s_x = 2`` slices per tile whole (the band's inside), so fewer mask FLOPs than every running trip's."""
    f = nc.library.sliding_window_attention(8)
    alg = nc.group(nc.stream(f, "x", 4), "q", "g_q")
    sym = nc.cost(alg)
    (rec,) = [r for r in sym.ops if r.kind == "and"]
    run = [r for r in sym.ops if r.kind == "contract"][0]
    sizes = {"q": 64, "x": 64, "d": 2, "g_q": 8}
    sub = {nc.symbol(k): v for k, v in sizes.items()}
    assert sympy.sympify(run.trips - rec.trips).subs(sub) == 2 * 64 // 8         # 2 whole slices on each of 8 tiles
    c, counted = counts(alg, sizes)
    symbolic_slice = nc.cost(nc.group(nc.stream(f, "x", "s_x"), "q", "g_q"))      # its offsets not known on the grid
    assert _at(sym, sizes)["general"] - c.flops["general"] < _at(symbolic_slice, {**sizes, "s_x": 4})["general"] \
        - c.flops["general"]


def test_a_band_narrower_than_a_tile_runs_no_trip_whole():
    """A window of 2 on q-tiles of ``g_q``: the slices on which every pair of a tile is in the band start at
    ``X ≥ i·g_q + g_q − 3`` and at ``X ≤ i·g_q − s_x + 3``: read on the grid, ``−g_q/s_x`` of them, none (bounds that
    cross), so the mask's maps run on every running trip (never on more), its general FLOPs exact at the sizes where
    the running trips are (here q-tiles of 4 and 8, slices of 4)."""
    alg = GROUP(nc.library.sliding_window_attention(2))
    sym = nc.cost(alg)
    (mask,) = [r for r in sym.ops if r.kind == "and"]
    run = [r for r in sym.ops if r.kind == "contract"][0]
    assert sympy.simplify(mask.trips - run.trips) == 0
    for sizes in ({"q": 8, "x": 8, "d": 2, "g_q": 4, "s_x": 4}, {"q": 16, "x": 16, "d": 2, "g_q": 8, "s_x": 4}):
        c, counted = counts(alg, sizes)
        assert _at(sym, sizes) == c.flops == counted.flops


def _ahead_mask(k: int):
    """``x ≥ q + k``: a query sees the keys at least ``k`` positions after its own."""
    b = nc.Builder(Ty())
    qi, xi = b(nc.position("q")), b(nc.position("x"))
    lo = b(nc.elementwise("shift", "q", const=k, dtype=nc.INT32), qi)
    return b.build(b(nc.compare("le", "q, x -> q x"), lo, xi))


@pytest.mark.parametrize("s_x", [1, 3])
def test_an_offset_above_one_position_is_rounded_toward_fewer_whole_trips(s_x):
    """``x ≥ q + 3``: a slice runs whole from ``X ≥ i·g_q + g_q + 2``; ``⌈2/s_x⌉`` is 2 at ``s_x = 1`` and 1 above,
    which a polynomial in a symbolic ``s_x`` cannot be both: read as 2 (never more slices than lie there), so
    the mask's maps never on fewer trips than the cost at sizes runs them on (exact at ``s_x = 1``; at ``s_x = 3`` one
    whole slice per q-tile charged the mask).  The running trips start at ``i·g_q + 3``, on the grid: exact."""
    alg = GROUP(nc.library.masked_attention(_ahead_mask(3)))
    sizes = {"q": 9, "x": 15, "d": 2, "g_q": 3, "s_x": s_x}
    c, counted = counts(alg, sizes)
    sym = _at(nc.cost(alg), sizes)
    assert c.flops == counted.flops
    assert sym["tensor"] == c.flops["tensor"]
    assert sym["general"] >= c.flops["general"]
    assert (sym["general"] == c.flops["general"]) == (s_x == 1)
