"""``nc.optimal`` of a cost whose every axis is a number, at a number for the memory: whole tiles within their axes.

Found from outside (issue 31, checked again): ``napkin cost attention --derived --memory 1 --sizes q=64,x=64,d=8``
printed ``H* = 1311744 with {g_q: 1/20}`` (a twentieth of a row per group), and at ``--memory 1000000``
``g_q = 50000`` for ``q = 64`` with ``H = 1024 + 65536/50000``: fewer values than reading Q, K, V and writing O
once (2,048).  The CLI substitutes the sizes into the diagram, so ``nc.optimal`` saw numbers for every axis but
no ``sizes=`` and took the continuous relaxation (tiles unbounded by their axes).  Now such a cost is searched as
with ``sizes={}``: the exact integer search, refusing a memory no tile of 1 fits.
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.cli import main

Q, X, D = 64, 64, 8
FLASH = nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")
NUMERIC = nc.substitute(FLASH, q=Q, x=X, d=D)


def flash_h(g: int) -> int:
    """FlashAttention's transfers with groups of ``g`` rows (paper §4): Q and O once, K and V once per group."""
    return 2 * D * Q + 2 * D * X * -(-Q // g)


def test_at_a_large_memory_the_tile_is_the_axis_and_h_reads_each_input_once():
    o = nc.optimal(nc.cost(NUMERIC), memory=10**6)
    assert dict(o.sizes) == {"g_q": Q, "s_x": 1}
    assert o.H == flash_h(Q) == 4 * Q * D          # Q, K, V read and O written once: the least any algorithm moves


def test_at_a_small_memory_the_tile_is_the_largest_that_fits_and_agrees_with_sizes():
    c = nc.cost(NUMERIC)
    o = nc.optimal(c, memory=100)
    g = int(o.sizes["g_q"])
    fits = [t for t in range(1, Q + 1)
            if nc.cost(FLASH, sizes={"q": Q, "x": X, "d": D, "g_q": t, "s_x": 1}).M[1] <= 100]
    assert g == max(fits) and o.H == flash_h(g)
    given = nc.optimal(nc.cost(FLASH), memory=100, sizes={"q": Q, "x": X, "d": D})
    assert given.H == o.H and given.sizes["g_q"] == g


def test_a_memory_no_tile_fits_is_refused_and_symbolic_sizes_keep_the_closed_form():
    with pytest.raises(nc.MemoryLimitError, match=r"memory 1: even tiles of 1 need \d+ values"):
        nc.optimal(nc.cost(NUMERIC), memory=1)
    symbolic = nc.optimal(nc.cost(FLASH), memory=100, exact=False)   # the paper's relaxation: g_q = M/(2d)
    assert str(symbolic.sizes[nc.symbol("g_q")]) == "50/d"


def test_the_cli_reports_whole_tiles(capsys):
    assert main(["cost", "attention", "--derived", "--memory", "1000000", "--sizes", f"q={Q},x={X},d={D}"]) == 0
    assert f"H* = {4 * Q * D}  with {{'g_q': {Q}, 's_x': 1}}" in capsys.readouterr().out
