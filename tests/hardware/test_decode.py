"""Decoding (one query row) derived for a GPU model: the products whose query side is shorter than the tensor-core
instruction run padded on the tensor cores or on the CUDA cores, as the time model predicts faster; the split
stream (FlashDecoding) is timed as two launches, its parts and its combine; its partial states count in global
memory.  Every number checked here is computed in the test from the model's rates and the sizes."""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware.errors import HardwareError
from napkin_cat.hardware.predict import LAUNCH, WAVE, KernelForm, kernels_of

GPU = nc.hardware.load("h100-sxm5")
BF16 = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}
SIZES = {"q": 1, "x": 4096, "d": 16}
HAVE_TRITON = all(importlib.util.find_spec(m) for m in ("torch", "triton"))


@pytest.fixture(scope="module")
def decode():
    return nc.derive(nc.library.attention(), sizes=SIZES, hardware=GPU)


def _attention(Q, K, V):
    s = Q.astype(np.float64) @ K.T.astype(np.float64) / math.sqrt(Q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ V.astype(np.float64)


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, SIZES["d"])).astype(np.float32) for n in (SIZES["q"], SIZES["x"], SIZES["x"])]


def test_one_query_row_derives_a_split_that_computes_attention(decode):
    (kernel,) = decode.variant.kernels
    assert kernel.parts is not None and decode.optimum.exact_sizes[nc.symbol("g_q")] == 1
    P = decode.optimum.exact_sizes[nc.symbol(str(kernel.parts))]
    assert P > 1 and decode.blocks == P
    p = nc.plan(decode.diagram, decode.optimum.sizes)
    Q, K, V = _inputs()
    O, counted = p.run(Q, K, V)
    assert np.allclose(O, _attention(Q, K, V), atol=1e-5)
    assert counted.transfers == nc.cost(decode.diagram, sizes=decode.optimum.sizes).H
    # where the products ran is recorded, and the padding is said in the assumptions
    (k,) = decode.prediction.kernels
    assert set(k.products.values()) <= {"CUDA cores", "tensor cores, padded ×64"} and len(k.products) == 2
    said = [a for a in decode.prediction.assumptions if "shorter than the tensor-core" in a]
    assert said and all(name in said[0] for name in k.products)


@pytest.mark.skipif(not HAVE_TRITON, reason="needs torch and triton (pip install '.[kernels]')")
def test_the_split_decoding_kernel_in_triton_equals_numpy(decode, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    k = nc.codegen.triton(nc.plan(decode.diagram, decode.optimum.sizes))
    Q, K, V = _inputs(1)
    assert np.allclose(np.asarray(k(Q, K, V)), _attention(Q, K, V), atol=1e-4)


def test_bf16_decoding_splits_too():
    """The merge of two parts' states rescales a bf16 output state by an fp32 factor: in fp32."""
    r = nc.derive(nc.library.attention(formats=BF16), sizes=SIZES, hardware=GPU)
    (kernel,) = r.variant.kernels
    assert kernel.parts is not None
    Q, K, V = _inputs(2)
    O = nc.plan(r.diagram, r.optimum.sizes)(Q, K, V)
    assert np.allclose(O, _attention(Q, K, V), atol=3e-2)


def _form(decode, **options):
    (box,) = kernels_of(decode.diagram)
    env = {nc.symbol(k): v for k, v in decode.optimum.sizes.items()}
    return KernelForm(box, GPU, overlap="sequential", ceilings=options.get("ceilings", {}), level=1, sample=env), env


def test_a_padded_product_is_charged_its_padded_flops_on_the_tensor_cores(decode):
    form, env = _form(decode)
    v = form.values(env)
    x, d = SIZES["x"], SIZES["d"]
    flops = 2 * 1 * x * d                         # each of QKᵀ and PV at one query row
    assert [p["flops"] for p in v["products"]] == [flops, flops]
    assert [p["pad"] for p in v["products"]] == [64, 64]          # m: 1 row padded to wgmma's 64
    tf32, threads = float(GPU.peak("tensor", "fp32")), float(GPU.peak("general", "fp32"))
    for p in v["products"]:
        assert p["tensor"] == pytest.approx(flops * 64 / tf32) and p["cuda"] == pytest.approx(flops / threads)
    # the model picks the faster: the CUDA cores here; tensor cores 10¹⁰× faster make the padded product win
    (k,) = decode.prediction.kernels
    assert set(k.products.values()) == {"CUDA cores"}
    fast, env = _form(decode, ceilings={"tensor:fp32": 1e25})
    assert set(fast.at(env).products.values()) == {"tensor cores, padded ×64"}


def test_the_combine_is_its_own_launch(decode):
    form, env = _form(decode)
    k = form.at(env)
    S = {str(a): int(v) for a, v in decode.optimum.sizes.items()}
    P, g, q, d, s = S["p_x"], S["g_q"], S["q"], S["d"], S["s_x"]
    groups, T = -(-q // g), -(-S["x"] // s)
    c = k.combine
    partials = P * groups * (g * d + 2 * g) * 4                   # μ, z, o of every part, fp32
    out = q * d * 4
    assert c.blocks == groups and k.blocks == groups * P
    assert c.terms["l2"] == pytest.approx((partials + out) / float(GPU.l2_to_smem))
    assert c.terms["hbm"] == pytest.approx(out / float(GPU.hbm))
    assert c.terms["launch"] == k.terms["launch"] == LAUNCH
    moved = nc.cost(decode.diagram, sizes=decode.optimum.sizes).H_bytes[1]
    assert k.terms["l2"] == pytest.approx((moved - partials - out) / float(GPU.l2_to_smem))
    busy = groups * T / -(-T // P)                                 # the busiest part runs ⌈T/P⌉ slices
    waves = -(-k.blocks // (GPU.sm_count * k.resident))
    assert k.utilisation == pytest.approx(busy / (waves * GPU.sm_count * k.resident))
    assert k.terms["wave"] == waves * WAVE and c.terms["wave"] == 0
    assert k.time == pytest.approx(max(k.terms["hbm"], k.terms["l2"], sum(k.terms[p] for p in
                                   ("tensor", "special", "general"))) / k.utilisation + waves * WAVE + LAUNCH
                                   + c.time)
    assert decode.prediction.time == pytest.approx(k.time)


def test_the_partial_states_count_in_global_memory(decode):
    S = dict(decode.optimum.sizes)
    P, q, d = S["p_x"], S["q"], S["d"]
    unsplit = 2 * S["x"] * d + q * d                              # K, V and Q: what it reads
    assert nc.cost(decode.diagram, sizes=S).M[0] == unsplit + P * q * (d + 2)
    p = nc.plan(decode.diagram, S)
    held = sum(v.size for v in p.variables if v.level == 0 and "partials" in v.origin)
    assert held.subs({nc.symbol(k): v for k, v in S.items()}) == P * q * (d + 2)


def test_an_axis_longer_than_the_instruction_and_not_a_multiple_stays_refused():
    with pytest.raises(HardwareError, match="tile g_q of an axis of 96: it must be a multiple of 64"):
        nc.derive(nc.library.attention(), sizes={"q": 96, "x": 256, "d": 16}, hardware=GPU)
