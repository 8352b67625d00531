"""A split stream's combine (FlashDecoding's second launch) runs one block per row of the groups, not one per group:
multi-query decoding (one key/value head, all query heads in one group) no longer combines its partial states in one
block while the GPU idles.  Second routes: the plan's launches as the printers read them, against the time model's
combine blocks (``h·g·q``, from the sizes); the runner's transfers against the cost functor's and against the
sizes' arithmetic (K and V read once where a group holds every query head of its key/value head: Q, O and the
partial states besides); the Triton kernel under the interpreter against numpy's grouped-query attention."""
from __future__ import annotations

import importlib.util
import math
import os

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.launches import kernel_launches
from napkin_cat.codegen.launch import launches
from napkin_cat.hardware.predict import predict

BF16 = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}
HAVE_TRITON = all(importlib.util.find_spec(m) for m in ("torch", "triton"))


def _decode(formats=None):
    f = nc.library.grouped_query_attention(**({"formats": formats} if formats else {}))
    return nc.group(nc.group(nc.group(nc.stream(nc.kernel(f), "x", "s_x", parts="p_x"), "q", "g_q"), "g", "g_g"),
                    "h", "g_h")


def _sizes(h, g, x=200, g_g=None, p=3):
    """One query row, ``x`` keys (200: not a power of two, 64 no divisor of it), the group of query heads whole."""
    return {"q": 1, "x": x, "d": 16, "h": h, "g": g, "g_q": 1, "g_g": g_g or g, "g_h": 1, "s_x": 64, "p_x": p}


def _gqa(Q, K, V):
    s = np.einsum("hgqd,hxd->hgqx", Q.astype(np.float64), K.astype(np.float64)) / math.sqrt(Q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("hgqx,hxd->hgqd", p / p.sum(axis=-1, keepdims=True), V.astype(np.float64))


def _inputs(S, seed=0):
    rng = np.random.default_rng(seed)
    h, g, q, x, d = (S[k] for k in "hgqxd")
    return [rng.standard_normal(s).astype(np.float32) for s in ((h, g, q, d), (h, x, d), (h, x, d))]


@pytest.mark.parametrize("h, g", [(1, 32), (2, 4), (8, 1), (1, 6)])
def test_the_combine_launches_one_block_per_row(h, g):
    S = _sizes(h, g, g_g=4 if g == 6 else None)           # g = 6 in groups of 4: a ragged last group
    p = nc.plan(_decode(BF16), S)
    parts, combine = launches(p)
    groups = h * math.ceil(g / S["g_g"])
    assert (parts.blocks, combine.blocks) == (groups * S["p_x"], h * g)
    (k,) = kernel_launches(_decode(BF16))
    assert int(nc.Sizes(S).subs(k.launches[1])) == h * g
    gpu = nc.hardware.load("h100-sxm5")
    (kt,) = predict(p, gpu).kernels
    assert kt.blocks == groups * S["p_x"] and kt.combine.blocks == h * g


@pytest.mark.parametrize("h", [1, 2, 8])
@pytest.mark.parametrize("g", [1, 4, 32])
def test_k_and_v_are_read_once_per_group_and_the_cost_counts_the_run(h, g):
    S = _sizes(h, g)
    d = _decode()
    O, counted = nc.plan(d, S).run(*_inputs(S))
    assert np.allclose(O, _gqa(*_inputs(S)), atol=1e-5)
    assert counted.transfers == nc.cost(d, sizes=S).H and counted.columns[1] == [nc.cost(d, sizes=S).M[1]]
    x, dd, P = S["x"], S["d"], S["p_x"]
    # K and V once; Q read by each part's head, O written once; each row's P partial states (o, μ, z) out and back
    kv, qo, partials = 2 * h * x * dd, (P + 1) * h * g * dd, 2 * P * h * g * (dd + 2)
    assert counted.transfers[1] == kv + qo + partials


@pytest.mark.skipif(not HAVE_TRITON, reason="needs torch and triton (pip install '.[kernels]')")
@pytest.mark.parametrize("h, g, g_g", [(1, 6, 4), pytest.param(1, 32, 32, marks=pytest.mark.skipif(
    not os.environ.get("NAPKIN_SLOW"), reason="~9 s interpreted: NAPKIN_SLOW=1 (a ragged group of 4 runs always)"))])
def test_the_combine_by_rows_in_triton_equals_numpy(h, g, g_g, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    S = _sizes(h, g, x=100, g_g=g_g, p=2)
    k = nc.codegen.triton(nc.plan(_decode(BF16), S))
    Q, K, V = _inputs(S, 1)
    assert np.allclose(np.asarray(k(Q, K, V), dtype=np.float64), _gqa(Q, K, V), atol=3e-2)
