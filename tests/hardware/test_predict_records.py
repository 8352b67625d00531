"""The time models read a partition record as the partition it stands for (:mod:`napkin_cat.algorithms.records`).

A partition record (``nc.group`` / ``nc.stream`` with ``relabelled=False``, a search variant's ``record``) is the
bubble around its inside as it was; the cost functor reads it through its relabelling, and a plan needs the partition
built.  ``predict`` (GPU) read a kernel's bytes on chip off its plan and raised PlanError on a record; ``predict_cpu``
answered, and ``uses_of`` / ``tile_values`` read a record's loads and products at the full axes (no tile
constraint), ``configure`` raised PlanError.  Each now reads ``built(record)``:

* ``built(record)`` is the diagram the partition functions build (``relabelled=True``), on every diagram of
  tests/cost/test_record_at_sizes.py (groups, streams, sweeps, sub-loops, split streams, two levels, masks);
* ``predict`` on ``h100-sxm5`` and ``predict_cpu`` on a CPU model answer for the record what they answer for the
  built partition, field by field, on each of those diagrams at each of its sizes (or raise the same typed error
  where the built partition has no prediction: a concrete tile that does not divide its axis has no plan); and,
  by a second route that builds nothing, the bytes and FLOPs the GPU prediction charges sum to the cost functor's
  counts of the record at the sizes (``nc.cost(record, sizes=)``);
* the same on random partitions of the library's functions at random sizes (a property), on the search's own
  records (``variants(f)``: ``v.record`` against ``v.diagram``) at realistic sizes, and for the divisors read off
  an algorithm (``tile_values``) and ``configure``.

Mutations caught: ``built`` mapping a nested partition's size through the outer relabelling (the sub-loop's ``u_b``
read as ``s_b``: the sub-loop cases); ``KernelForm`` not building its kernel (a split stream's combine then reads the
record's partial state at the full group: the split-stream cases by their numbers, every GPU case by its kernels'
names); ``chip_forms`` not building (PlanError: the chip forms test; ``predict`` builds before it); ``uses_of`` not
building (the tile values and search-record tests); ``configure`` not building (PlanError: the configure test);
``CPUKernelForm`` not building (the CPU cases by their kernels' names only: the cost at sizes, which the CPU model
reads, already counts a record as its partition).
"""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.algorithms.records import built, built_region, has_records
from napkin_cat.errors import NapkinError
from napkin_cat.hardware import configure, load, predict, predict_cpu
from napkin_cat.hardware.on_chip import chip_forms
from napkin_cat.hardware.timed import tile_values
from napkin_cat.search.variants import variants
from napkin_cat.syntax.sizes import symbols_of
from tests.cost.test_record_at_sizes import CASES, FUNCTIONS, PAIRS, STEPS, drawn
from typed_attention import VARIANTS, typed_attention

GPU, CPU = "h100-sxm5", "epyc-zen3-dev"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_built_record_is_the_partition_the_functions_build(name):
    f, steps, _ = CASES[name]
    rec, want = drawn(f, steps, False), drawn(f, steps, True)
    assert has_records(rec) and not has_records(want)
    got = built(rec)
    assert got == want and not has_records(got)
    assert built(want) is want


def _answer(fn, d, hardware, sizes):
    """The prediction, or the error's type and message."""
    try:
        return fn(d, hardware, sizes)
    except NapkinError as e:
        return type(e), str(e)


def _numbers(p) -> tuple:
    """What a prediction charges, each launch without its name."""
    return p.time, tuple(replace(k, label="", combine=k.combine and replace(k.combine, label="")) for k in p.kernels)


@pytest.mark.parametrize("name,k", PAIRS)
@pytest.mark.parametrize("hardware", [GPU, CPU])
def test_predict_on_a_record_is_its_built_partition(name, k, hardware):
    f, steps, all_sizes = CASES[name]
    sizes = all_sizes[k]
    fn = predict if hardware == GPU else predict_cpu
    rec, want = drawn(f, steps, False), drawn(f, steps, True)
    a, b = _answer(fn, rec, hardware, sizes), _answer(fn, want, hardware, sizes)
    if isinstance(b, tuple):            # the built partition has no prediction: the record the same typed error
        assert a == b and hardware == GPU and "does not divide" in b[1], b
        return
    assert _numbers(a) == _numbers(b)   # time, each launch's terms, bytes, FLOPs, blocks, placements
    assert a == b                       # and its name (the built partition's)
    if hardware == GPU:                 # a second route, no building: the cost functor's counts of the record
        c = nc.cost(rec, sizes=sizes)
        launches = [x for kt in a.kernels for x in (kt, kt.combine) if x is not None]
        assert sum(x.bytes["moved"] for x in launches) == c.H_bytes[1]
        flops = {p: sum(x.flops.get(p, 0) for x in launches) for p in ("tensor", "special", "general")}
        assert sum(flops.values()) == pytest.approx(sum(c.flops.values()), rel=1e-12)


def test_the_issue_a_group_record_is_predicted():
    """``predict`` on a group record raised PlanError (its bytes on chip read off a plan of the record)."""
    steps = [lambda d, r: nc.stream(d, "b", "s_b", relabelled=r), lambda d, r: nc.group(d, "a", "g_a", relabelled=r)]
    rec, want = drawn(nc.library.matmul, steps, False), drawn(nc.library.matmul, steps, True)
    sizes = {"a": 4096, "b": 4096, "c": 128, "g_a": 128, "s_b": 32}
    p = predict(rec, GPU, sizes)
    (k,) = p.kernels
    assert p == predict(want, GPU, sizes) and k.blocks == 32
    # A's tile and B's slice double-buffered, C's rows: 4 B · ((128·32 + 32·128) · 2 + 128·128)
    assert k.bytes["on_chip_per_block"] == 4 * ((128 * 32 + 32 * 128) * 2 + 128 * 128)


@pytest.mark.parametrize("function,sizes", [
    (nc.library.attention, {"q": 4096, "x": 4096, "d": 128}),
    (nc.library.matmul, {"a": 2048, "b": 2048, "c": 2048}),
    (nc.library.causal_attention, {"q": 2048, "x": 2048, "d": 64}),
])
def test_the_searchs_own_records_predict_as_their_diagrams(function, sizes):
    """Each partition the search costs as a record (:attr:`Variant.record`) at legal tiles of the GPU."""
    gpu = load(GPU)
    env = {nc.symbol(k): v for k, v in sizes.items()}
    for v in variants(function()):
        rec, want = v.record, v.diagram
        assert has_records(rec) and built(rec) == want
        values = tile_values(gpu, rec, env)
        assert values == tile_values(gpu, want, env)
        tiles = {str(t): (64 if 64 in vs else vs[-1]) for t, vs in values.items()}
        a, b = (_answer(predict, d, GPU, {**sizes, **tiles}) for d in (rec, want))
        assert a == b


def test_tile_values_of_a_record_are_its_built_partitions():
    """The divisors read off an algorithm (tensor-core shapes, coalescing) bind a record's tiles as the built
    partition's: before, a record's loads and products were read at the full axes, and no tile was constrained."""
    f = lambda rel: nc.group(nc.stream(nc.library.attention(), "x", "s_x", relabelled=rel), "q", "g_q",   # noqa
                             relabelled=rel)
    env = {nc.symbol(k): v for k, v in {"q": 4096, "x": 4096, "d": 128}.items()}
    got, want = tile_values(load(GPU), f(False), env), tile_values(load(GPU), f(True), env)
    assert got == want and 1 not in want[nc.symbol("g_q")]


def test_configure_reads_a_record_as_its_built_partition():
    f = lambda rel: nc.group(nc.stream(nc.kernel(typed_attention(*VARIANTS["paper"])), "x", "s_x",  # noqa
                                       relabelled=rel), "q", "g_q", relabelled=rel)
    sizes = {"w_q": 128, "t_q": 1, "s_x": 64, "d": 128, "g_q": 3 * 128}
    a, b = (configure(f(rel), "hopper", sizes, axis="q") for rel in (False, True))
    assert a.plan.diagram == b.plan.diagram and str(a) == str(b)
    assert a.table(load(GPU), strict=False).to_text() == b.table(load(GPU), strict=False).to_text()


@pytest.mark.parametrize("name", ["matmul stream, group", "attention split stream", "matmul sub-loop"])
def test_chip_forms_of_a_record_kernel_are_its_built_partitions(name):
    """The bytes on chip the search reads off a kernel (``chip_forms``, called on the kernels of a structure): a
    record's are its built partition's (its plan's)."""
    f, steps, all_sizes = CASES[name]
    env = {nc.symbol(k): v for k, v in all_sizes[0].items()}
    (rec,), (want,) = drawn(f, steps, False).boxes, drawn(f, steps, True).boxes
    assert chip_forms(rec, 1, env) == chip_forms(want, 1, env)


def test_built_region_of_a_record_and_of_a_kernel_without_one():
    rec = drawn(nc.library.attention, [lambda d, r: nc.stream(d, "x", "s_x", relabelled=r),
                                        lambda d, r: nc.group(d, "q", "g_q", relabelled=r)], False)
    (box,) = rec.boxes
    (want,) = built(rec).boxes
    assert built_region(box) == want and built_region(want) is want


# ---------------------------------------------------------------------------------------------- a property
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_random_record_predicts_as_its_built_partition(name, data):
    """A random partition of the function drawn as a record, at random sizes (tiles ragged where a draw says): its
    built form is the partition built, and both time models answer for it what they answer for that partition."""
    f = FUNCTIONS[name]
    steps = data.draw(st.sampled_from(STEPS[name]), label="partition")
    rec, want = drawn(f, steps, False), drawn(f, steps, True)
    assert built(rec) == want
    names = sorted(str(s) for s in symbols_of(want))
    sizes = {n: data.draw(st.integers(2, 9), label=n) for n in names if not n.startswith(("s_", "g_"))}
    for n in names:
        if n.startswith(("s_", "g_")):
            sizes[n] = data.draw(st.integers(1, sizes[n[2:]]), label=n)
    for fn, hardware in ((predict, GPU), (predict_cpu, CPU)):
        assert _answer(fn, rec, hardware, sizes) == _answer(fn, want, hardware, sizes)
