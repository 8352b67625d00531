"""``nc.codegen.c(plan, profile=True)``: every leaf statement timed in the launch it runs in, the outputs the plain
kernel's bit for bit, the plain source untouched, and the seconds read back (and reset) as the threads' sum."""
from __future__ import annotations

import re
import shutil
import time
from collections import Counter

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.codegen.errors import CodegenError
from napkin_cat.plan.ir import Combine, Compute, Copy, Fill, Load, Store, walk

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")

LEAVES = (Load, Store, Copy, Fill, Combine, Compute)


def causal_backward_plan(n=128):
    """The causal attention's backward from the saved forward, two kernels, tiles that split every axis."""
    f = nc.weave(nc.library.causal_attention(lse=True, d=16), "h", position=0)
    g = nc.grad(f, [0, 1, 2], saved=True, aux=1)
    sizes = {"q": n, "x": n, "h": 2}
    r = nc.derive(g, memory=2 ** 12, sizes=sizes)
    return nc.plan(r.diagram, {**sizes, **{str(k): int(v) for k, v in r.optimum.exact_sizes.items()}})


@pytest.fixture(scope="module")
def plan():
    return causal_backward_plan()


def inputs(plan, seed=0):
    """Standard normal float32 arrays of the plan's input shapes."""
    rng = np.random.default_rng(seed)
    ins, _ = nc.codegen.c(plan, blas=False).shapes()
    return [rng.standard_normal(s).astype(np.float32) for s in ins]


@pytest.mark.parametrize("options", [{"blas": False}, {}, {"real": "double"}])
def test_the_profiled_kernel_computes_what_the_plain_one_does(plan, options):
    plain, profiled = nc.codegen.c(plan, **options), nc.codegen.c(plan, profile=True, **options)
    assert "nc_prof" not in plain.source and "omp_get_wtime" not in plain.source
    xs = inputs(plan)
    if options.get("real") == "double":
        xs = [x.astype(np.float64) for x in xs]
    for a, b in zip(plain(*xs, threads=2), profiled(*xs, threads=2)):
        assert np.array_equal(a, b)


def test_every_leaf_statement_is_timed_inside_its_own_launch(plan):
    k = nc.codegen.c(plan, blas=False, profile=True)
    src = k.source
    entries = k.printer.profiled
    calls = [int(m) for m in re.findall(r"nc_profiled\((\d+), nc_p0\);", src)]
    assert calls == list(range(len(entries)))            # one call per entry, numbered in print order
    leaves = [s for s in walk(k.printer.plan.body) if isinstance(s, LEAVES)]
    timed = {id(s) for _, s, _ in entries}
    assert {id(s) for s in leaves} <= timed              # every leaf of the printed plan (trip variants: twice)
    assert all(isinstance(s, LEAVES) for _, s, _ in entries)
    # each call lies in the body of the launch its entry names
    bodies = {m.group(1): m.start() for m in re.finditer(r"^static void (nc_kernel\d+)\(", src, flags=re.M)}
    order = sorted(bodies.items(), key=lambda kv: kv[1]) + [("end", len(src))]
    for k_, (label, _, launch) in enumerate(entries):
        at = src.index(f"nc_profiled({k_}, nc_p0);")
        inside = next(name for (name, start), (_, end) in zip(order, order[1:]) if start <= at < end)
        assert inside == launch, (label, launch, inside)
        assert label and "nc_p0" not in label


def test_the_seconds_are_the_threads_sum_and_a_read_resets_them():
    plan = causal_backward_plan(512)
    k = nc.codegen.c(plan, blas=False, profile=True)
    xs = inputs(plan)
    k(*xs, threads=1)
    k.statement_times()
    for threads in (1, 2):
        t = time.perf_counter()
        k(*xs, threads=threads)
        wall = time.perf_counter() - t
        times = k.statement_times()
        total = sum(x.seconds for x in times)
        assert 0 < total <= threads * wall * 1.05 + 1e-3
        assert any(x.seconds > 0 for x in times if x.kind == "Compute")
        assert sum(x.seconds for x in k.statement_times()) == 0.0     # read: reset
    assert {x.launch for x in times} == set(re.findall(r"^static void (nc_kernel\d+)\(", k.source, flags=re.M))


def test_a_compute_names_its_boxes_own_first_then_the_maps_fused_into_it(plan):
    k = nc.codegen.c(plan, blas=False, profile=True)
    k(*inputs(plan))
    computes = [t for t in k.statement_times() if t.kind == "Compute"]
    fused = [t for t in computes if len(t.boxes) > 1]
    assert fused, [t.label for t in computes]                 # the backward's exp(scale(·) − L) is one loop
    def nested(s):          # the kinds of the maps fused into s, at any depth
        return [k for _, r in s.inlined for k in [r.kind, *nested(r)]]
    for t in fused:
        assert t.boxes[0] == t.statement.kind
        assert Counter(t.boxes[1:]) == Counter(nested(t.statement))
    assert all(t.boxes == () for t in k.statement_times() if t.kind != "Compute")


def test_a_plain_kernel_says_how_to_time_its_statements(plan):
    k = nc.codegen.c(plan, blas=False)
    with pytest.raises(CodegenError, match=r"profile=True"):
        k.statement_times()
