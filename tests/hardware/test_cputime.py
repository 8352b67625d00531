"""The CPU time model (napkin_cat/hardware/cputime.py) and nc.derive(f, sizes=, hardware=<CPU model>): the
prediction follows its inputs (the runner's counts, the model's rates, the threads), the derived plan's C kernel
computes attention, the pick never gives a contraction a dimension of 1 where a larger tile is legal, and a bad
format-2 file gets a named error."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware import HardwareError, load_cpu, predict_cpu
from napkin_cat.hardware.cputime import kind_pipelines, product_dims
from napkin_cat.hardware.structures import structure_memories
from napkin_cat.hardware.predict import environment
from napkin_cat.hardware.toy import primitive_boxes
from napkin_cat.codegen.c.openmp import blas_available

DEV = "epyc-zen3-dev"
SIZES = {"q": 256, "x": 256, "d": 32}


def flash():
    return nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")


def attention_numpy(Q, K, V):
    S = Q @ K.T / np.sqrt(Q.shape[1])
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return (P / P.sum(axis=1, keepdims=True)) @ V


@pytest.mark.parametrize("g_q, s_x", [(64, 1), (64, 16), (256, 256)])
def test_the_prediction_is_the_runners_counts_over_the_models_rates(g_q, s_x):
    """Each term from a second route: the io term is the bytes the plan's run moves at level 1 over one core's
    bandwidth, the tensor term attention's two products (2·q·x·d FLOPs each) at the table's rate for
    min(g_q, s_x, d) plus the model's cost per call for each of the two cblas_sgemm calls of each of the
    (q / g_q)·(x / s_x) trips, divided by the blocks at work on 2 threads."""
    cpu = load_cpu(DEV)
    sizes = {**SIZES, "g_q": g_q, "s_x": s_x}
    p = nc.plan(flash(), sizes)
    rng = np.random.default_rng(0)
    _, counters = p.run(*(rng.standard_normal((256, 32), dtype=np.float32) for _ in range(3)))
    t = predict_cpu(p, cpu, threads=2)
    (k,) = t.kernels
    blocks = 256 // g_q
    at_once = blocks / math.ceil(blocks / 2)
    assert k.blocks == blocks
    assert k.terms["io"] == pytest.approx(counters.bytes[1] / cpu.l3_bandwidth / at_once, rel=1e-12)
    rate = cpu.contraction_rate(min(g_q, s_x, 32))
    calls = 2 * (256 // g_q) * (256 // s_x)
    assert cpu.contraction_call > 0
    assert k.terms["tensor"] == pytest.approx((2 * 2 * 256 * 256 * 32 / rate + calls * cpu.contraction_call)
                                              / at_once, rel=1e-12)
    assert t.time == pytest.approx(sum(k.terms.values()), rel=1e-12)


@pytest.mark.parametrize("g_h", [1, 2, 4])
def test_a_product_pays_its_call_cost_once_per_batch_index_and_trip(g_h):
    """Heads woven in and grouped by g_h: the C kernel calls cblas_sgemm once per head of a block on each trip, so
    the call cost is h·(q / g_q)·(x / s_x)·2 calls whatever g_h (counted by hand); doubling contraction_call adds
    exactly that many calls' cost again, and the FLOPs' part is the table's rate at min(g_q, s_x, d)."""
    cpu = load_cpu(DEV)
    f = nc.group(nc.group(nc.stream(nc.kernel(nc.weave(nc.library.attention(), "h", position=0)), "x", "s_x"),
                          "q", "g_q"), "h", "g_h")
    sizes = {**SIZES, "h": 4, "g_h": g_h, "g_q": 64, "s_x": 32}
    base = predict_cpu(f, cpu, sizes).kernels[0].terms["tensor"]
    twice = predict_cpu(f, dataclasses.replace(cpu, contraction_call=2 * cpu.contraction_call),
                        sizes).kernels[0].terms["tensor"]
    calls = 2 * 4 * (256 // 64) * (256 // 32)
    assert twice - base == pytest.approx(calls * cpu.contraction_call, rel=1e-9)
    flops = 2 * 2 * 4 * 256 * 256 * 32
    assert base == pytest.approx(flops / cpu.contraction_rate(32) + calls * cpu.contraction_call, rel=1e-12)


def test_the_prediction_moves_with_each_rate_and_the_threads():
    """Halving a rate (doubling the cost per call) doubles its term and nothing else; a second thread halves the
    time of two blocks."""
    cpu = load_cpu(DEV)
    sizes = {**SIZES, "g_q": 128, "s_x": 16}
    base = predict_cpu(flash(), cpu, sizes).kernels[0].terms
    slow = dataclasses.replace(cpu, contraction=tuple((s, r / 2) for s, r in cpu.contraction),
                               l3_bandwidth=cpu.l3_bandwidth / 2, special=cpu.special / 2, general=cpu.general / 2,
                               contraction_call=2 * cpu.contraction_call)
    halved = predict_cpu(flash(), slow, sizes).kernels[0].terms
    for term in ("io", "tensor", "special", "general"):
        assert halved[term] == pytest.approx(2 * base[term], rel=1e-12)
    one, two = (predict_cpu(flash(), cpu, sizes, threads=n).time for n in (1, 2))
    assert two == pytest.approx(one / 2, rel=1e-12)
    assert predict_cpu(flash(), cpu, sizes, threads=3).time == pytest.approx(two, rel=1e-12)   # 2 blocks only
    assert [cpu.contraction_rate(s) for s in (1, 2, 4, 8)] == sorted(cpu.contraction_rate(s) for s in (1, 2, 4, 8))


@pytest.mark.skipif(not blas_available(), reason="the C kernel's contractions need cblas.h (libopenblas-dev)")
@pytest.mark.parametrize("threads", [1, 2])
def test_derive_for_a_cpu_gives_a_plan_whose_c_kernel_computes_attention(threads):
    r = nc.derive(nc.library.attention(), sizes=SIZES, hardware=DEV, threads=threads)
    assert r.trace.replay(nc.library.attention()) == r.diagram
    p = nc.plan(r.diagram, {**SIZES, **r.optimum.exact_sizes})
    rng = np.random.default_rng(1)
    Q, K, V = (rng.standard_normal((256, 32), dtype=np.float32) for _ in range(3))
    out = nc.codegen.c(p)(Q, K, V, threads=threads)
    np.testing.assert_allclose(out, attention_numpy(Q, K, V), rtol=2e-4, atol=2e-5)
    assert r.prediction.time == pytest.approx(predict_cpu(p, DEV, threads=threads).time, rel=1e-9)
    assert r.prediction.time == min(t for _, _, t, _ in r.timings)


@pytest.mark.parametrize("f", [nc.library.attention(), nc.library.causal_attention(), nc.library.matmul()],
                         ids=["attention", "causal", "matmul"])
def test_the_cpu_pick_never_gives_a_contraction_a_dimension_of_one(f):
    """H alone picks s_x = 1 for attention (every s_x moves the same); the time model must not: at the chosen
    tiles every contraction's m, n and k exceed 1, while an assignment with a dimension 1 was timed and lost."""
    sizes = {"a": 256, "b": 256, "c": 256} if len(f.dom) == 2 else {"q": 512, "x": 512, "d": 32}
    r = nc.derive(f, sizes=sizes, hardware=DEV, threads=2)
    env = environment({**sizes, **r.optimum.exact_sizes})
    dims = [int(d.subs(env)) for b in primitive_boxes(r.diagram) if "tensor" in kind_pipelines(b)
            for d in product_dims(b)]
    assert dims and min(dims) > 1, (r.optimum.exact_sizes, dims)
    assert any(1 in tiles.values() for _, tiles, _, _ in r.timings)


FORMAT2 = """format = 2
name = "tiny"
[caches]
l1d = "16 KiB"
l2 = "64 KiB"
l3 = "1 MiB"
line = "64 B"
[bandwidth]
l3 = "10 GB/s"
dram = "5 GB/s"
[compute]
contraction = { "1" = "2 GFLOP/s", "16" = "20 GFLOP/s" }
special = "1 GFLOP/s"
general = "2 GFLOP/s"
"""


def test_a_format_two_file_loads_with_its_rates(tmp_path):
    f = tmp_path / "tiny.toml"
    f.write_text(FORMAT2)
    cpu = load_cpu(f)
    assert cpu.contraction_call == 0                       # optional: absent, no cost per call
    f.write_text(FORMAT2 + 'contraction_call = "2.5 us"\n')
    assert load_cpu(f).contraction_call == pytest.approx(2.5e-6, rel=1e-12)
    assert cpu.timed and cpu.contraction == ((1, 2e9), (16, 20e9)) and cpu.dram_bandwidth == 5e9
    assert cpu.contraction_rate(4) == pytest.approx(2e9 + 18e9 * math.log(4) / math.log(16))   # log-linear
    assert cpu.contraction_rate(64) == 20e9 and cpu.bandwidth(2 ** 20) == 10e9 and cpu.bandwidth(2 ** 20 + 1) == 5e9


def test_a_measured_dip_does_not_make_a_larger_product_slower(tmp_path):
    """A product whose smallest dimension is s can be cut into products of any smaller one: its rate is at least
    theirs.  A table with a dip (64 measured below 16, as a shared machine's noise made 64 … 256 below 32 in the
    development machine's file) reads as its running maximum: 16's rate held to 64, then log-linear to 256."""
    f = tmp_path / "dip.toml"
    f.write_text(FORMAT2.replace('"16" = "20 GFLOP/s"',
                                 '"16" = "20 GFLOP/s", "64" = "12 GFLOP/s", "256" = "30 GFLOP/s"'))
    cpu = load_cpu(f)
    assert cpu.contraction == ((1, 2e9), (16, 20e9), (64, 12e9), (256, 30e9))       # the file as measured
    assert cpu.contraction_rate(32) == cpu.contraction_rate(64) == 20e9
    assert cpu.contraction_rate(128) == pytest.approx(20e9 + 10e9 * math.log(2) / math.log(4))
    assert cpu.contraction_rate(4) == pytest.approx(2e9 + 18e9 * math.log(4) / math.log(16))
    rates = [cpu.contraction_rate(s) for s in range(1, 300)]
    assert rates == sorted(rates) and rates[-1] == 30e9


@pytest.mark.parametrize("change, message", [
    (('[compute]\n', '[compute_]\n'), r"unknown field\(s\) \['compute_'\]"),
    (('special = "1 GFLOP/s"\n', ''), r"\[compute\] needs special"),
    (('dram = "5 GB/s"\n', ''), r"\[bandwidth\] needs dram"),
    (('special = "1 GFLOP/s"', 'special = "1 GB/s"'), r"'GB/s' is a unit of bandwidth, but a throughput"),
    (('"16" = "20 GFLOP/s"', '"x16" = "20 GFLOP/s"'), r"contraction has the key 'x16'; its keys are smallest dim"),
    (('"16" = "20 GFLOP/s"', '"0" = "20 GFLOP/s"'), r"contraction has the key '0'"),
    (('contraction = { "1" = "2 GFLOP/s", "16" = "20 GFLOP/s" }', 'contraction = {}'),
     r"contraction must be a table of smallest dimension = FLOP/s"),
    (('format = 2', 'format = 1'), r"\[bandwidth\] and \[compute\] are fields of format 2"),
    (('l3 = "10 GB/s"', 'l3 = "-10 GB/s"'), r"is negative"),
    (('general = "2 GFLOP/s"', 'general = "2 GFLOP/s"\ncontraction_call = "3 GB/s"'),
     r"'GB/s' is a unit of bandwidth, but a time"),
    (('general = "2 GFLOP/s"', 'general = "2 GFLOP/s"\ncall = "3 us"'),
     r"unknown field\(s\) \['call'\]; its fields are \['contraction', 'contraction_call'"),
])
def test_bad_format_two_files_are_named(tmp_path, change, message):
    f = tmp_path / "bad.toml"
    f.write_text(FORMAT2.replace(*change))
    with pytest.raises(HardwareError, match=message):
        load_cpu(f)


def test_a_model_without_rates_is_refused_by_the_time_model():
    with pytest.raises(HardwareError, match=r"epyc-zen4: derive\(hardware=<a CPU model>\) needs a format-2 CPU "
                                            r"model .* Run benchmarks/calibrate_cpu.py"):
        nc.derive(nc.library.matmul(), sizes={"a": 64, "b": 64, "c": 64}, hardware="epyc-zen4")
    with pytest.raises(HardwareError, match="threads=0: the threads the C kernel runs on"):
        nc.derive(nc.library.matmul(), sizes={"a": 64, "b": 64, "c": 64}, hardware=DEV, threads=0)
    with pytest.raises(nc.NapkinError, match=r"got \['threads'\]: these options are the time model's"):
        nc.derive(nc.library.matmul(), 2 ** 12, sizes={"a": 64, "b": 64, "c": 64}, threads=2)


def test_the_structure_memories_stop_at_the_first_that_holds_every_input_and_output():
    """2·M, 4·M, … up to the first power-of-two multiple of M at least Q, K, V and O's values (numpy's sizes)."""
    whole = sum(np.empty(s).size for s in [(256, 32)] * 4)
    above = structure_memories(nc.library.attention(), environment(SIZES), 2 ** 10)
    assert above == [2 ** k for k in range(11, 16)] and above[-2] < whole <= above[-1]
    assert structure_memories(nc.library.attention(), environment(SIZES), whole) == []


def test_a_structure_transfers_favour_only_above_the_l2_is_timed_at_tiles_that_fit_it():
    """With an L2 of 1,024 values, FlashAttention's one kernel is transfer-optimal only at larger memories: the CPU
    derivation times it too (it is in r.timings), and each of its timed tilings holds at most the L2's values
    (the runner's peak at level 1, a second route) and computes attention (numpy's)."""
    cpu = dataclasses.replace(load_cpu(DEV), l2=4 * 2 ** 10)
    f = nc.library.attention()
    memory = cpu.l2 // 4
    below = {str(g.variant) for g in nc.derive(f, memory=[2 ** 10], sizes=SIZES).regimes}
    above = {str(g.variant): g for g in nc.derive(f, memory=structure_memories(f, environment(SIZES), memory),
                                                   sizes=SIZES).regimes}
    r = nc.derive(f, sizes=SIZES, hardware=cpu, threads=1)
    found = [(label, tiles) for label, tiles, _, _ in r.timings if label in set(above) - below]
    assert found, sorted({label for label, *_ in r.timings})
    assert r.prediction.time == min(t for _, _, t, _ in r.timings)
    rng = np.random.default_rng(2)
    Q, K, V = (rng.standard_normal((256, 32), dtype=np.float32) for _ in range(3))
    for label, tiles in found[:3]:
        p = nc.plan(above[label].diagram, {**SIZES, **{str(k): v for k, v in tiles.items()}})
        out, counters = p.run(Q, K, V)
        assert 0 < counters.peak[1] <= memory, (label, tiles, counters.peak)
        np.testing.assert_allclose(out, attention_numpy(Q, K, V), rtol=2e-4, atol=2e-5)
