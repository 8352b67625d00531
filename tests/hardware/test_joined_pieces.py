"""A device's zigzag pieces timed as one program (issue 37; hardware/local_programs.py ``at_positions`` with pieces,
cost/trips.py's mean over a floor): its positions ``start₀ + i + ⌊i/n⌋·k``, one affine range per piece.

Second routes: the program's transfers at sizes against numpy's count over the mask's blocks (a block of queries
runs each key slice whose first key is at or before its last query's position, the device's rows being its
pieces joined), at tiles that divide the pieces and tiles that straddle them; the symbolic estimate against that
count where the tiles divide the pieces; the mean over a floor against the sum taken term by term.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.orders import ORDERS
from napkin_cat.cost.trips import mean_over
from napkin_cat.hardware.local_programs import local_parts

D = 4


def device_rows(n: int, P: int, p: int) -> np.ndarray:
    """Device p's query rows under the zigzag order: its pieces (np.array_split's chunks) joined."""
    o = ORDERS["zigzag"]
    chunks = np.array_split(np.arange(n), o.chunks(P))
    return np.concatenate([chunks[c] for c in o.pieces(p, P)])


def blocks_transfers(rows: np.ndarray, n: int, g: int, s: int) -> int:
    """Q and O once, and K and V's slice of every (query tile, key slice) block the causal mask runs, by numpy."""
    total = 2 * len(rows) * D
    for a in range(0, len(rows), g):
        last = rows[a:a + g].max()
        starts = np.arange(0, n, s)
        total += int(sum(2 * min(s, n - j) * D for j in starts if j <= last))
    return total


def one_program(n: int, P: int, p: int):
    """Device p's program of causal attention's zigzag ring (one, not one per piece), its rows, and FlashAttention of
    it; its outputs checked against causal attention over those rows by numpy."""
    d = nc.ring(nc.shard(nc.library.causal_attention(), "q", devices=P, order="zigzag"), "x")
    env = nc.Sizes({"q": n, "x": n, "d": D}).env
    (prog,) = [q for q, ringed in local_parts(d, env, device=p) if ringed]
    rows = device_rows(n, P, p)
    assert prog.dom.inside[0].axis("q").size == len(rows)
    rng = np.random.default_rng(p)
    Q, K, V = rng.normal(size=(n, D)), rng.normal(size=(n, D)), rng.normal(size=(n, D))
    S = np.where(np.arange(n)[None, :] <= rows[:, None], Q[rows] @ K.T / np.sqrt(D), -np.inf)
    E = np.exp(S - S.max(1, keepdims=True))
    assert np.allclose(nc.evaluate(prog, Q[rows], K, V), (E / E.sum(1, keepdims=True)) @ V)
    return rows, nc.group(nc.stream(nc.kernel(prog), "x", "s_x"), "q", "g_q")


@pytest.mark.parametrize("n, P", [(64, 4), (96, 4), (60, 3)])
def test_each_device_runs_its_pieces_as_one_program_counted_by_numpy(n, P):
    c = n // (2 * P)                                       # each piece's size
    for p in range(P):
        rows, flash = one_program(n, P, p)
        estimate = nc.cost(flash).H[1]
        for g, s in [(c, c), (c // 2, 4), (3, 5), (2 * c, 8)]:          # the last two straddle the pieces
            tiles = {"g_q": g, "s_x": s}
            assert nc.cost(flash, sizes=tiles).H[1] == blocks_transfers(rows, n, g, s), (p, tiles)
            if c % g == 0 and n % s == 0 and g % s == 0:          # the symbolic count's own assumptions
                at = sympy.sympify(estimate).subs({nc.symbol(k): v for k, v in tiles.items()})
                assert at == blocks_transfers(rows, n, g, s), (p, tiles)


@pytest.mark.parametrize("c, k, pieces", [(8, 24, 2), (12, 5, 3), (6, 0, 2)])
def test_the_mean_over_a_floor_is_the_sum_term_by_term(c, k, pieces):
    """The count per query tile of the last query's position, pieces of c rows k apart, averaged over the tiles."""
    i, g = sympy.Symbol("i", integer=True, nonnegative=True), nc.symbol("g")
    count = g * i + g + k * sympy.floor((g * i + g - 1) / c)
    mean = mean_over(count, i, pieces * c / g)
    assert not mean.has(sympy.Sum) and not mean.has(sympy.floor)
    for tile in (t for t in range(1, c + 1) if c % t == 0):
        trips = pieces * c // tile
        by_terms = sympy.Rational(sum(int(count.subs({g: tile, i: j})) for j in range(trips)), trips)
        assert mean.subs(g, tile) == by_terms, tile


@pytest.mark.parametrize("n, P", [(66, 4), (61, 3), (21, 2)])
def test_ragged_pieces_are_one_program_counted_by_numpy(n, P):
    """An axis 2P does not divide: a device's two chunks differ by one value (np.array_split's longer first), and it
    runs them as one program still (main: one program per piece, each derived and timed apart)."""
    sizes = [len(c) for c in np.array_split(np.arange(n), 2 * P)]
    assert len(set(sizes)) == 2                             # ragged: two chunk sizes
    for p in range(P):
        rows, flash = one_program(n, P, p)
        for g, s in [(sizes[-1], sizes[-1]), (3, 5), (4, 8)]:
            tiles = {"g_q": g, "s_x": s}
            assert nc.cost(flash, sizes=tiles).H[1] == blocks_transfers(rows, n, g, s), (p, tiles)


@pytest.mark.parametrize("c, k, full, last", [(8, 24, 1, 4), (12, 5, 2, 6), (6, 3, 1, 5)])
def test_the_mean_over_a_floor_with_a_shorter_last_piece_is_the_sum_term_by_term(c, k, full, last):
    """Pieces of c rows k apart, the last of ``last < c`` rows (a ragged chunk), averaged over the tiles that divide
    both (main: sympy's summation, seconds, where the pieces over the tile are no integer)."""
    i, g = sympy.Symbol("i", integer=True, nonnegative=True), nc.symbol("g")
    count = g * i + g + k * sympy.floor((g * i + g - 1) / c)
    mean = mean_over(count, i, (full * c + last) / g)
    assert not mean.has(sympy.Sum) and not mean.has(sympy.floor)
    for tile in (t for t in range(1, last + 1) if c % t == 0 and last % t == 0):
        trips = (full * c + last) // tile
        by_terms = sympy.Rational(sum(int(count.subs({g: tile, i: j})) for j in range(trips)), trips)
        assert mean.subs(g, tile) == by_terms, tile
