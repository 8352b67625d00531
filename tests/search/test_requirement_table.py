"""Requirement.column (issue 35): the search reads a curve's H* under a requirement as one table per curve, which
must be, memory by memory, what ``at`` answers on a requirement that never built the table, and what a search at
each memory alone finds."""
from __future__ import annotations

import napkin_cat as nc
from napkin_cat.search.curves import Curve
from napkin_cat.search.parallelism import Requirement
from napkin_cat.search.variants import split_variants, variants

SIZES = {"q": 1024, "x": 1024, "d": 64}
MEMORIES = [2 ** 8, 2 ** 11, 2 ** 14]     # H* falls with the memory; the least holds no tiling


def test_column_is_at_memory_by_memory():
    f = nc.library.attention()
    table, single = Requirement(16, SIZES, MEMORIES), Requirement(16, SIZES, MEMORIES)
    curves = [Curve(v) for v in variants(f) + split_variants(f)]
    columns = [table.column(c) for c in curves]          # every table built before any is read back
    seen = set()
    for c, col in zip(curves, columns):
        assert col == [single.at(c, k)[0] for k in range(len(MEMORIES))]
        assert table.column(c) is col                    # built once per curve
        seen.update(col)
    assert None in seen and len(seen - {None}) > 2       # some memories hold no tiling; H* differs by memory


def test_a_sweep_under_a_requirement_answers_as_each_memory_alone():
    """Second route: the sweep reads its tables at every memory; a search at one memory reads a one-row table."""
    f = nc.library.attention()
    sweep = nc.derive(f, memory=MEMORIES, sizes=SIZES, min_blocks=16)
    for m in MEMORIES:
        alone = nc.derive(f, memory=m, sizes=SIZES, min_blocks=16)
        assert sweep.at(m).H == alone.H and str(sweep.at(m).variant) == str(alone.variant)
