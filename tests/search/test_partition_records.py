"""Partition records (issue 35, item 1): the search finds and costs a kernel's partitions without building them.

``variants`` draws each candidate as a record (``relabelled=False``: the partition functions' checks and bubbles,
the inside left as it was), which the cost functor reads through the relabelling it stands for.  Two routes are
compared on random programs (:func:`napkin_cat.testing.programs.random_program`) and on the library's kernels that
exercise every kind of candidate (a sweep, a 2-D loop, a masked stream, several groups):

* the record's cost equals the cost of the diagram built by the relabelling partitions, field by field (H and
  bytes per level, FLOPs, the memory columns as sets, the group and stream records, every op record);
* the candidates found through records are the ones found by building: each stream choice and each group that the
  relabelling partitions accept, enumerated here again with ``relabelled=True``.
"""
import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import NapkinError
from napkin_cat.search.curves import Curve
from napkin_cat.search.variants import (axis_names, carried_axes, reduced_axes, swept_axes, tile_name,
                                        variants)
from napkin_cat.testing.programs import LIBRARY_FUNCTIONS, random_program

LIBRARY = LIBRARY_FUNCTIONS
SEEDS = range(24)


def equal(a, b) -> bool:
    a, b = sympy.sympify(a), sympy.sympify(b)
    return a == b or sympy.cancel(a - b) == 0


def same_dict(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)


def assert_same_cost(rec, built, what):
    assert same_dict(rec.H, built.H), (what, rec.H, built.H)
    assert same_dict(rec.H_bytes, built.H_bytes), (what, rec.H_bytes, built.H_bytes)
    assert same_dict(rec.flops, built.flops), (what, rec.flops, built.flops)
    cols = {lvl: {sympy.expand(c) for c in cs} for lvl, cs in rec.columns.items()}
    assert cols == {lvl: {sympy.expand(c) for c in cs} for lvl, cs in built.columns.items()}, what
    assert len(rec.groups) == len(built.groups), what
    for g, h in zip(rec.groups, built.groups):
        assert (g.axes, g.tiles, g.fulls, g.level) == (h.axes, h.tiles, h.fulls, h.level), what
        assert equal(g.N_g, h.N_g) and same_dict(g.H_g, h.H_g), what
    assert [(tuple(s), s.level, s.masked) for s in rec.streams] == \
        [(tuple(s), s.level, s.masked) for s in built.streams], what
    assert len(rec.ops) == len(built.ops), what
    for o, p in zip(rec.ops, built.ops):
        assert (o.label, o.kind, o.pipeline, o.region, o.role, o.dtype, o.operands) == \
            (p.label, p.kind, p.pipeline, p.region, p.role, p.dtype, p.operands), what
        assert equal(o.flops, p.flops) and equal(o.trips, p.trips), (what, o, p)
    assert rec.estimated == built.estimated, what


def built_candidates(function) -> list:
    """The candidates as the relabelling partitions find them: ``(stream, sliced, inner, groups)``."""
    taken = set(axis_names(function))

    def names(prefix, axis):
        return tile_name(prefix, axis, taken)
    base = nc.kernel(function)

    def tried(k, axis, **kw):
        try:
            return nc.stream(k, axis, names("s", axis), **kw)
        except NapkinError:
            return None
    streamed = [(a, k, False, ()) for a in reduced_axes(function) if (k := tried(base, a)) is not None]
    swept = [(a, k, True, ()) for a in swept_axes(function) if (k := tried(base, a, sliced=True)) is not None]
    nested = [(a, k2, False, (b,)) for a, k, _, _ in streamed for b in reduced_axes(function)
              if b != a and (k2 := tried(k, b)) is not None]
    out = []
    for axis, k, sliced, inner in (streamed or [(None, base, False, ())]) + swept + nested:
        groups = []
        for a in carried_axes(function):
            if a == axis:
                continue
            try:
                k = nc.group(k, a, names("g", a))
            except NapkinError:
                continue
            groups.append(a)
        out.append((axis, sliced, inner, tuple(groups)))
    return out


def check(function, what):
    found = variants(function)
    assert [(v.stream, v.sliced, v.inner, v.groups) for v in found] == built_candidates(function), what
    for v in found:
        drawn = list(_partitions(v.record))
        assert len(drawn) == (v.stream is not None) + len(v.inner) + len(v.groups), (what, v.describe())
        assert not any(b.relabelled for b in drawn), (what, v.describe())
        assert_same_cost(nc.cost(v.record), nc.cost(v.diagram), (what, v.describe()))
    return found


def _partitions(d):
    for box in d.boxes:
        if isinstance(box, (nc.Grid, nc.Stream)):
            yield box
        if isinstance(box, nc.Region):
            yield from _partitions(box.arg)


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_library_records_cost_what_is_built(name):
    found = check(LIBRARY[name](), name)
    assert found


def test_random_records_cost_what_is_built():
    kinds = set()
    for seed in SEEDS:
        p = random_program(seed, n_ops=2 + seed % 5)
        for v in check(p.diagram, p.call):
            kinds.add((v.stream is not None, v.sliced, bool(v.inner), len(v.groups)))
    streams, sweeps, grouped = ({k for k in kinds if k[0] and not k[1]}, {k for k in kinds if k[1]},
                                {k for k in kinds if k[3]})
    assert streams and sweeps and grouped and any(k[3] >= 2 for k in grouped), kinds   # the kinds were met


def test_curve_builds_the_diagram_only_when_asked():
    v = next(v for v in variants(nc.library.attention()) if v.groups)
    c = Curve(v)
    assert "diagram" not in v.__dict__                   # costed from the record
    assert c.at({"q": 256, "x": 256, "d": 64}, 2 ** 14) == Curve(v.diagram).at({"q": 256, "x": 256, "d": 64}, 2 ** 14)
    assert c.diagram is v.diagram and all(b.relabelled for b in _partitions(c.diagram))


def two_levels():
    """A level-1 kernel around a level-2 one grouped along ``a``: inside, ``a`` has its full size and the tile."""
    return nc.kernel(nc.group(nc.kernel(nc.library.matmul(), level=2), "a", "t_a"), level=1)


def one_kernel(make):
    return lambda: nc.kernel(make())


SEQUENCES = {   # partitions drawn one after the other: a record inside a record along the same axis too
    "stream, sub-loop": (one_kernel(nc.library.matmul), [("stream", "b", "s_b"), ("stream", "b", "u_b"),
                                                          ("group", "a", "g_a")]),
    "groups of groups": (one_kernel(nc.library.matmul), [("group", "a", "g_a"), ("group", "c", "g_c"),
                                                          ("group", "a", "h_a")]),
    "sweep": (one_kernel(nc.library.attention), [("sweep", "q", "s_q")]),
    "2-D loop": (one_kernel(nc.library.linear_cross_entropy), [("stream", "v", "s_v"), ("stream", "e", "s_e"),
                                                                ("group", "n", "g_n")]),
    "two levels": (two_levels, [("group", "a", "g_a")]),   # a group relabels only where the axis is whole
}


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_records_in_records_cost_what_is_built(name):
    make, steps = SEQUENCES[name]
    built = record = make()
    drawn = len(list(_partitions(built)))
    for kind, axis, tile in steps:
        if kind == "group":
            built, record = nc.group(built, axis, tile), nc.group(record, axis, tile, relabelled=False)
        else:
            sliced = kind == "sweep"
            built = nc.stream(built, axis, tile, sliced=sliced)
            record = nc.stream(record, axis, tile, sliced=sliced, relabelled=False)
    records = [b for b in _partitions(record) if not b.relabelled]
    assert len(records) == len(steps) and len(list(_partitions(record))) == drawn + len(steps)
    assert_same_cost(nc.cost(record), nc.cost(built), name)


#: the function a sequence partitions, and the sizes of the axes and tiles at which its record is planned
PLANNED = {"stream, sub-loop": (nc.library.matmul, {"a": 8, "b": 8, "c": 6, "s_b": 4, "u_b": 2, "g_a": 4}),
           "groups of groups": (nc.library.matmul, {"a": 8, "b": 5, "c": 6, "g_a": 4, "g_c": 3, "h_a": 2}),
           "sweep": (nc.library.attention, {"q": 8, "x": 6, "d": 3, "s_q": 2}),
           "two levels": (nc.library.matmul, {"a": 8, "b": 5, "c": 6, "t_a": 2, "g_a": 4})}


@pytest.mark.parametrize("name", sorted(PLANNED))
def test_a_record_is_planned_as_the_partition_it_stands_for(name):
    """``nc.plan(record)`` plans the partition the record stands for: its counts are the built partition's (a plan of
    its own, run on the same inputs) and the record's cost at those sizes; its outputs are the function's."""
    make, steps = SEQUENCES[name]
    built = record = f = make()
    for kind, axis, tile in steps:
        if kind == "group":
            built, record = nc.group(built, axis, tile), nc.group(record, axis, tile, relabelled=False)
        else:
            built = nc.stream(built, axis, tile, sliced=kind == "sweep")
            record = nc.stream(record, axis, tile, sliced=kind == "sweep", relabelled=False)
    function, sizes = PLANNED[name]
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(tuple(sizes[a] for a in arr.names)) for arr in f.dom.inside]
    p, q = nc.plan(record, sizes), nc.plan(built, sizes)
    assert any(not b.relabelled for b in _partitions(record)) and all(b.relabelled for b in _partitions(p.diagram))
    (out_p, counted_p), (out_q, counted_q) = p.run(*xs), q.run(*xs)
    assert counted_p.transfers == counted_q.transfers
    assert counted_p.transfers[1] == nc.cost(record, sizes=sizes).H[1]
    np.testing.assert_allclose(out_p, nc.evaluate(function(), *xs), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out_q, out_p, rtol=1e-12, atol=1e-12)
