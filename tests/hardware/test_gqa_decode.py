"""Grouped-query decoding derived for a GPU model: the ``g`` query heads of a group are one product's rows
(``m = g_g·g_q``, padded as a whole to the tensor-core instruction), so the derived kernel reads the group's shared K
and V once, not once per query head.  Second routes: the runner's counted transfers of the plan at the derived tiles
(and at ``g_g = 1``, where K and V are read ``g`` times: the difference is ``(g − 1)·h·2·x·d``, from the sizes); the
Triton kernel printed for it under the interpreter against numpy's GQA; the padding factor against the instruction's
side computed here."""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.errors import DivisorError
from napkin_cat.hardware import constraints, uses_of
from napkin_cat.hardware.predict import KernelForm, kernels_of

GPU = nc.hardware.load("h100-sxm5")
BF16 = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}
#: the GPU benchmark's grouped-query decoding row: 8 key/value heads, 4 query heads each, one query row
DECODE = {"q": 1, "x": 32768, "d": 128, "h": 8, "g": 4}
#: sizes the runner and the interpreter run the derived structure at (its tiles kept)
SMALL = {"q": 1, "x": 512, "d": 16, "h": 2, "g": 4}
HAVE_TRITON = all(importlib.util.find_spec(m) for m in ("torch", "triton"))


@pytest.fixture(scope="module")
def decode():
    return nc.derive(nc.library.grouped_query_attention(formats=BF16), sizes=DECODE, hardware=GPU)


def _tiles(r) -> dict:
    return {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}


def _gqa(Q, K, V):
    """numpy's grouped-query attention: query head (h, g) attends to key/value head h."""
    d = Q.shape[-1]
    s = np.einsum("hgqd,hxd->hgqx", Q.astype(np.float64), K.astype(np.float64)) / math.sqrt(d)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("hgqx,hxd->hgqd", p / p.sum(axis=-1, keepdims=True), V.astype(np.float64))


def _inputs(sizes, seed=0):
    rng = np.random.default_rng(seed)
    h, g, q, x, d = (sizes[k] for k in "hgqxd")
    return [rng.standard_normal(s).astype(np.float32) for s in ((h, g, q, d), (h, x, d), (h, x, d))]


def test_the_group_is_one_products_rows():
    """The product's m side is the group's heads times the queries: the instruction divides their product."""
    d = nc.group(nc.group(nc.stream(nc.kernel(nc.library.grouped_query_attention(formats=BF16)), "x", "s_x"),
                          "q", "g_q"), "g", "g_g")
    _, matmuls = uses_of(d, GPU.hierarchy)
    assert [(m.m, m.n, m.k) for m in matmuls] == [("g_g·g_q", "s_x", "d"), ("g_g·g_q", "d", "s_x")]
    c = constraints(GPU, matmuls=matmuls)
    m = GPU.shapes_for("bf16")[0].m
    c.check({"g_g": 4, "g_q": m // 4, "s_x": 64, "d": 128})          # 4 heads × m/4 rows: one instruction's m
    with pytest.raises(DivisorError, match="g_g·g_q = 4"):
        c.check({"g_g": 4, "g_q": 1, "s_x": 64, "d": 128})


def test_decoding_reads_k_and_v_once_per_group(decode):
    t = _tiles(decode)
    assert t["g_g"] == DECODE["g"] and t["g_q"] == 1
    h, g, x, d = (DECODE[k] for k in "hgxd")
    kv = 2 * h * x * d                                  # K and V once
    assert kv <= decode.H < kv + kv // 100              # Q, O and the split's partial states: under 1 %
    # the padded products: m = g_g·g_q rows against the instruction's m, on the tensor cores or the CUDA cores
    (box,) = kernels_of(decode.diagram)
    env = {nc.symbol(k): v for k, v in decode.optimum.sizes.items()}
    form = KernelForm(box, GPU, overlap="sequential", ceilings={}, level=1, sample=env)
    m = GPU.shapes_for("bf16")[0].m
    assert [p["pad"] for p in form.values(env)["products"]] == [m / g, m / g]
    # the g_g = 1 assignment of the same structure is timed and loses
    ones = [s for label, tiles, s, _ in decode.timings
            if label == str(decode.variant) and int(tiles[nc.symbol("g_g")]) == 1]
    assert ones and min(ones) > decode.prediction.time


def _plan_at(decode, sizes, **tiles):
    return nc.plan(decode.diagram, {**sizes, **_tiles(decode), **tiles})


def test_the_runner_counts_k_and_v_once_per_group(decode):
    """At the derived tiles the counted transfers are the cost functor's H; at g_g = 1 the runner counts K and V
    g times: (g − 1)·h·2·x·d more values (the sizes' arithmetic), the rest equal."""
    Q, K, V = _inputs(SMALL)
    shared, counted = _plan_at(decode, SMALL).run(Q, K, V)
    apart, counted_1 = _plan_at(decode, SMALL, g_g=1).run(Q, K, V)
    sizes = {**SMALL, **_tiles(decode)}
    assert counted.transfers == nc.cost(decode.diagram, sizes=sizes).H
    h, g, x, d = (SMALL[k] for k in "hgxd")
    assert counted_1.transfers[1] - counted.transfers[1] == (g - 1) * h * 2 * x * d
    for O in (shared, apart):
        assert np.allclose(O, _gqa(Q, K, V), atol=3e-2)


@pytest.mark.skipif(not HAVE_TRITON, reason="needs torch and triton (pip install '.[kernels]')")
def test_the_group_kernel_in_triton_equals_numpy(decode, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    k = nc.codegen.triton(_plan_at(decode, SMALL))
    assert "tl.dot(" in k.source
    Q, K, V = _inputs(SMALL, 1)
    assert np.allclose(np.asarray(k(Q, K, V), dtype=np.float64), _gqa(Q, K, V), atol=3e-2)


def test_a_side_cut_along_two_axes_runs_on_the_cuda_cores(decode):
    """The printed kernels give tl.dot two-axis blocks: g_g and g_q both above 1 make a three-axis block, a
    broadcast product summed (the CUDA cores), and the model charges it there."""
    (box,) = kernels_of(decode.diagram)
    env = {nc.symbol(k): v for k, v in {**SMALL, **_tiles(decode), "q": 64, "g_q": 16}.items()}
    kt = KernelForm(box, GPU, overlap="sequential", ceilings={"tensor:bf16": 1e25}, level=1, sample=env).at(env)
    assert set(kt.products.values()) == {"CUDA cores"}
    one = {**env, nc.symbol("g_g"): 1, nc.symbol("g_q"): 64}
    form = KernelForm(box, GPU, overlap="sequential", ceilings={"tensor:bf16": 1e25}, level=1, sample=one)
    assert set(form.at(one).products.values()) == {"tensor cores"}
