"""A parallelism requirement read off partition records (issue 35): a kernel's launches and its split parts are
read off its curve's bubbles (:attr:`~napkin_cat.search.curves.Curve.bubbles`, the variant's record), so the search
under ``min_blocks`` builds no candidate to ask how many blocks it launches.

Checked against the built partitions, on the library's functions and random programs, every variant and split
variant: the record's kernels launch the blocks (and parts) the built diagram's do, the split parts found on the
record are the built stream's; a requirement answers on a record's curve what it answers on the built diagram's
curve, without building the record's diagram; and by a third route, the tiles it chooses launch at least the
blocks asked, counted on the built algorithm by :func:`napkin_cat.algorithms.launches.blocks`.
"""
from __future__ import annotations

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.launches import blocks, kernel_launches
from napkin_cat.search.curves import Curve
from napkin_cat.search.parallelism import Requirement, parts_of
from napkin_cat.search.variants import split_variants, variants
from napkin_cat.testing.programs import random_program

FUNCTIONS = {
    "matmul": nc.library.matmul,
    "attention": nc.library.attention,
    "linear cross-entropy": nc.library.linear_cross_entropy,
    "softmax": lambda: nc.softmax("q x", over="x"),
    **{f"program {s}": (lambda s=s: random_program(s, n_ops=2 + s % 3).diagram) for s in range(6)},
}


def launched(d) -> list:
    return [(sympy.sympify(k.blocks), k.parts) for k in kernel_launches(d)]


def built_parts(d):
    """The split stream's ``(parts, axis size)`` of a built kernel, found by walking its boxes."""
    for box in d.boxes:
        if isinstance(box, nc.Stream) and box.params.get("parts") is not None:
            return box.params["parts"], box.full_size()
        if isinstance(box, nc.Region):
            got = built_parts(box.arg)
            if got is not None:
                return got
    return None


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_records_launch_what_is_built(name):
    f = FUNCTIONS[name]()
    found = variants(f) + split_variants(f)
    assert found
    for v in found:
        c = Curve(v)
        assert launched(c.bubbles) == launched(v.diagram), (name, v.describe())
        assert parts_of(c) == built_parts(v.diagram), (name, v.describe())
    assert any(v.parts for v in found) or not split_variants(f)


SIZES = {"q": 64, "x": 256, "d": 16}


def test_a_requirement_reads_records_without_building_them():
    f = nc.library.attention()
    memories = [2 ** 10, 2 ** 12, 2 ** 14]
    req, again = Requirement(64, SIZES, memories), Requirement(64, SIZES, memories)
    met = 0
    for v in variants(f) + split_variants(f):
        rec, built = Curve(v), Curve(v.diagram) if v.function is None else None
        got = req.all(rec)
        if v.function is not None:
            assert "diagram" not in v.__dict__, v.describe()     # not built to ask its launches
            built = Curve(v.diagram)
        assert got == again.all(built), v.describe()
        for h, tiles in got:
            if h is None:
                continue
            at = {**SIZES, **{str(k): int(t) for k, t in tiles.items()}}
            for s in rec.streams:
                at.setdefault(str(s), 1)
            assert blocks(v.diagram, at) >= 64, (v.describe(), tiles)
            met += 1
    assert met                       # some partition meets the requirement at some memory
