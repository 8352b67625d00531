"""A curve's points between two memories it answered alike are read off them, not searched (probe-35).

The symbolic mode probes the reference search between its grid memories (:mod:`napkin_cat.search.probes`), and each
probe asks every kernel's curve at memories between ones it has answered.  The integer search answers at ``m`` the
least tiling by a key that does not read ``m`` among those within ``m``, a set that grows with ``m``: between two
memories answered by the same tiling the answer is that tiling, and below a memory with no tiling there is none
(:meth:`napkin_cat.search.curves.Curve._between`).  The second route is a fresh curve, which knows no point and
searches each memory alone.
"""
from __future__ import annotations

import napkin_cat as nc
import napkin_cat.search.curves as curves
from napkin_cat.search.curves import Curve

SIZES = {"a": 48, "b": 60, "c": 72}


def matmul_curve():
    mm = nc.group(nc.group(nc.stream(nc.kernel(nc.library.matmul()), "b", "s_b"), "a", "g_a"), "c", "g_c")
    return Curve(mm)


def searched(monkeypatch) -> list:
    """The memories each integer search of the curves module is asked for, appended as they are asked."""
    asked = []
    real = curves.Curve._values      # (every integer search of a curve goes through it)

    def counting(self, sizes, skey, memories, *args, **kwargs):
        asked.extend(memories)
        return real(self, sizes, skey, memories, *args, **kwargs)
    monkeypatch.setattr(curves.Curve, "_values", counting)
    return asked


def test_points_between_alike_answers_are_the_searched_ones(monkeypatch):
    grid = [2 ** k for k in range(2, 17)]       # every tile whole fits from 48·72 + 48 + 72 = 3,576 < 2^12
    between = sorted({round(2 ** (2 + k / 23)) for k in range(14 * 23)} - set(grid))
    c = matmul_curve()
    asked = searched(monkeypatch)
    c.at_all(SIZES, grid)
    assert sorted(asked) == [m for m in grid if m >= c.least(SIZES)]
    asked.clear()
    got = c.at_all(SIZES, between)
    n_asked = len(asked)
    # the second route: a fresh curve at each memory alone (no point known, every memory searched)
    fresh = matmul_curve()
    assert got == [fresh.at(SIZES, m) for m in between]
    del asked[n_asked:]
    # the work saved: each memory is searched or read between two searched alike, and most are read
    assert len(asked) + c.between == len([m for m in between if m >= c.least(SIZES)])
    assert c.between >= 23 * 4 - 4       # at least every memory between 2^12 and 2^16 (all whole at both)


def test_no_tiling_below_a_memory_with_none():
    c = matmul_curve()
    least = c.smallest(SIZES)
    c.at_all(SIZES, [int(least) - 1, 2 ** 12])
    assert c.at_all(SIZES, [int(least) - 2])[0] == (None, {})
    assert c.at_all(SIZES, [int(least)])[0] == matmul_curve().at(SIZES, int(least))


def test_a_memory_between_two_different_answers_is_searched(monkeypatch):
    c = matmul_curve()
    c.at_all(SIZES, [2 ** 8, 2 ** 12])
    m = 2 ** 10 + 3
    alone = matmul_curve().at(SIZES, m)
    asked = searched(monkeypatch)
    assert c.at_all(SIZES, [m]) == [alone]
    assert asked == [m] and c.between == 0
