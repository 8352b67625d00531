"""The time models on masks from positions read the tiles a mask skips: at the kernel's tiles (ragged ones too)
the CPU model's and the GPU model's FLOPs and transfers are what the plan's counting runner counts on a run, and
the runner's tensor FLOPs are those of the (query tile, key slice) pairs on which the mask is true somewhere,
enumerated here from the mask's formula (a third route: neither the cost functor nor the runner).  Decoding's split
count is the model's choice: the parts that leave the fewest SMs idle at that context length, with the partial
states and the combine's launch in the prediction."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware.cputime import MASK_APPLIED_ON_WHOLE_TRIPS, predict_cpu
from napkin_cat.hardware.predict import predict

#: ragged on purpose: 8 does not divide 37, 5 does not divide 37
SIZES = {"q": 37, "x": 37, "d": 8, "g_q": 8, "s_x": 5}
WINDOW, PREFIX = 6, 12
MASKS = {
    "causal": (nc.library.causal_attention, lambda q, x: x <= q),
    "window": (lambda: nc.library.sliding_window_attention(WINDOW), lambda q, x: abs(q - x) <= WINDOW),
    "prefix-lm": (lambda: nc.library.prefix_lm_attention(PREFIX), lambda q, x: (x <= q) | (x < PREFIX)),
}


def _tiled(f):
    return nc.group(nc.stream(nc.kernel(f), "x", "s_x"), "q", "g_q")


def _counted(d):
    """The instrumented run's counters (transfers, bytes, FLOPs) of ``d`` at :data:`SIZES`."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((SIZES[a], SIZES["d"])) for a in ("q", "x", "x")]
    return nc.plan(d, SIZES).run(*arrays)[1]


def _pairs_tensor_flops(allowed) -> int:
    """2·(rows)·(keys)·d for QKᵀ and as many for PV, over every (query tile, key slice) pair where ``allowed`` holds
    for some (q, x) of it: the tiles a skipping kernel runs, from the mask's formula."""
    q, x, d, g, s = (SIZES[k] for k in ("q", "x", "d", "g_q", "s_x"))
    total = 0
    for i in range(0, q, g):
        for j in range(0, x, s):
            rows, keys = np.arange(i, min(i + g, q)), np.arange(j, min(j + s, x))
            if allowed(rows[:, None], keys[None, :]).any():
                total += 2 * 2 * len(rows) * len(keys) * d
    return total


@pytest.fixture(scope="module")
def dense():
    return _counted(_tiled(nc.library.attention()))


@pytest.mark.parametrize("kind", sorted(MASKS))
def test_the_cpu_and_gpu_predictions_count_what_the_run_counts_on_the_tiles_the_mask_allows(kind, dense):
    make, allowed = MASKS[kind]
    d = _tiled(make())
    run = _counted(d)
    assert run.flops["tensor"] == _pairs_tensor_flops(allowed) < dense.flops["tensor"]
    (cpu,) = predict_cpu(d, "epyc-zen3-dev", SIZES).kernels
    assert cpu.flops == {p: float(run.flops.get(p, 0)) for p in ("tensor", "special", "general")}
    assert cpu.bytes["values_moved"] == run.transfers[1] < dense.transfers[1]
    assert cpu.bytes["moved"] == run.bytes[1]
    (gpu,) = predict(d, "h100-sxm5", SIZES).kernels
    assert gpu.bytes["moved"] == run.bytes[1]
    assert gpu.flops["special"] == run.flops["special"]
    # a product too small for the tensor-core instruction runs on the CUDA cores (general) or padded (more)
    assert gpu.flops.get("tensor", 0) + gpu.flops["general"] >= run.flops["tensor"] + run.flops["general"]


def test_the_masks_predicted_time_falls_with_the_tiles_it_skips(dense):
    """Among the masks, fewer tiles run, less time predicted (same structure and tiles): the prediction's order
    is the run's."""
    counted, cpu = {}, {}
    for kind, (make, _) in MASKS.items():
        d = _tiled(make())
        counted[kind] = _counted(d).flops["tensor"]
        cpu[kind] = predict_cpu(d, "epyc-zen3-dev", SIZES).time
    assert sorted(counted, key=counted.get) == sorted(cpu, key=cpu.get)
    assert max(cpu.values()) < predict_cpu(_tiled(nc.library.attention()), "epyc-zen3-dev", SIZES).time


def test_a_masked_prediction_says_what_it_charges_the_mask():
    """The C kernel leaves a mask out on the trips where it allows every pair (the printer's full trips); the model
    charges its maps on the other trips that run, as the runner counts (tests/hardware/test_whole_trips.py), and
    says what it still charges there: only where a mask skips."""
    masked = predict_cpu(_tiled(nc.library.causal_attention()), "epyc-zen3-dev", SIZES).assumptions
    dense = predict_cpu(_tiled(nc.library.attention()), "epyc-zen3-dev", SIZES).assumptions
    assert MASK_APPLIED_ON_WHOLE_TRIPS in masked and MASK_APPLIED_ON_WHOLE_TRIPS not in dense
    c = nc.codegen.c(nc.plan(_tiled(nc.library.causal_attention()), SIZES)).source
    assert "the mask is true on every pair: not made" in c         # what the sentence is about: its whole loop


GPU = "h100-sxm5"


@pytest.fixture(scope="module")
def decodes():
    """One query row against 4,096 and 65,536 keys, derived for the GPU model."""
    return {x: nc.derive(nc.library.attention(), sizes={"q": 1, "x": x, "d": 16}, hardware=GPU)
            for x in (4096, 65536)}


def test_decodings_split_count_is_the_models_least_and_grows_with_the_context(decodes):
    chosen = {}
    for x, r in decodes.items():
        tiles = {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}
        P = chosen[x] = tiles["p_x"]
        by_parts: dict = {}
        for label, t, seconds, _ in r.timings:
            parts = {str(k): int(v) for k, v in t.items()}.get("p_x")
            if label == str(r.variant) and parts is not None:
                by_parts[parts] = min(seconds, by_parts.get(parts, seconds))
        assert len(by_parts) > 4 and min(by_parts, key=by_parts.get) == P
        # predicted again from the plan at the chosen tiles: the same time, parts and combine
        p = predict(nc.plan(r.diagram, r.optimum.sizes), GPU)
        assert p.time == pytest.approx(r.prediction.time)
        (k,) = p.kernels
        assert k.blocks == P and k.combine is not None and k.combine.blocks == 1
        partials = P * (16 + 2) * 4                 # each part's o (d values), μ and z, fp32
        assert k.combine.bytes["moved"] == partials + 16 * 4
        held = nc.cost(r.diagram, sizes=r.optimum.sizes).M[0]
        assert held == 2 * x * 16 + 16 + P * (16 + 2)        # K, V, Q and the partial states in global memory
    assert chosen[4096] < chosen[65536]
