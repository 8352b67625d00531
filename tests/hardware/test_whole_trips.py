"""A mask's maps are charged only on the trips it does not allow whole: on a trip whose every pair the mask allows
(causal tiles below the diagonal, a window's inside, a prefix's block) the C kernel makes no mask and reads it as
true, and the cost at sizes, the plan's counting runner and the CPU prediction count it so.  Second routes: the
runner (counting what it runs) against the cost functor and the prediction; the FLOPs saved against the (query
tile, key slice) pairs the mask allows whole, enumerated here from the mask's formula at two ragged tilings: one
constant of FLOPs per pair for each mask."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.hardware.cputime import MASK_APPLIED_ON_WHOLE_TRIPS, predict_cpu
from napkin_cat.hardware.masks import MASK_LEFT_OUT_ON_WHOLE_TRIPS
from napkin_cat.hardware.predict import predict
from napkin_cat.plan.runner import Machine

WINDOW, PREFIX = 6, 12
MASKS = {
    "causal": (nc.library.causal_attention, lambda q, x: x <= q),
    "window": (lambda: nc.library.sliding_window_attention(WINDOW), lambda q, x: abs(q - x) <= WINDOW),
    "prefix-lm": (lambda: nc.library.prefix_lm_attention(PREFIX), lambda q, x: (x <= q) | (x < PREFIX)),
}
#: ragged tilings: 8 and 5 do not divide 37, nor 6 and 7 41
TILINGS = ({"q": 37, "x": 37, "d": 8, "g_q": 8, "s_x": 5}, {"q": 41, "x": 41, "d": 8, "g_q": 6, "s_x": 7})


def _tiled(f):
    return nc.group(nc.stream(nc.kernel(f), "x", "s_x"), "q", "g_q")


def _whole_area(allowed, sizes) -> int:
    """Σ rows·keys over the (query tile, key slice) pairs on which ``allowed`` holds for every (q, x)."""
    q, x, g, s = (sizes[k] for k in ("q", "x", "g_q", "s_x"))
    total = 0
    for i in range(0, q, g):
        for j in range(0, x, s):
            rows, keys = np.arange(i, min(i + g, q)), np.arange(j, min(j + s, x))
            if allowed(rows[:, None], keys[None, :]).all():
                total += len(rows) * len(keys)
    return total


def _run(d, sizes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((sizes[a], sizes["d"])) for a in ("q", "x", "x")]
    return nc.plan(d, sizes).run(*arrays)


@pytest.mark.parametrize("kind", sorted(MASKS))
def test_the_mask_is_charged_only_where_it_is_not_whole(kind, monkeypatch):
    make, allowed = MASKS[kind]
    d = _tiled(make())
    per_pair = set()
    for sizes in TILINGS:
        out, run = _run(d, sizes)
        c = nc.cost(d, sizes=sizes)
        assert (c.flops, c.H) == (run.flops, run.transfers)
        (k,) = predict_cpu(d, "epyc-zen3-dev", sizes).kernels
        assert k.flops == {p: float(run.flops.get(p, 0)) for p in ("tensor", "special", "general")}
        with monkeypatch.context() as m:        # every trip as written: the mask made on each
            m.setattr(Machine, "left_out", lambda self, s, frame: None)
            out_written, written = _run(d, sizes)
        np.testing.assert_allclose(out, out_written, rtol=1e-12, atol=1e-12)
        assert written.flops["tensor"] == run.flops["tensor"] and written.transfers == run.transfers
        area = _whole_area(allowed, sizes)
        saved = written.flops["general"] - run.flops["general"]
        assert area > 0 and saved > 0 and saved % area == 0
        per_pair.add(saved // area)
    assert len(per_pair) == 1           # the mask's maps per pair: one constant, whatever the tiles


def test_the_predictions_say_what_they_charge_a_mask():
    sizes = TILINGS[0]
    causal, dense = _tiled(nc.library.causal_attention()), _tiled(nc.library.attention())
    assert MASK_APPLIED_ON_WHOLE_TRIPS in predict_cpu(causal, "epyc-zen3-dev", sizes).assumptions
    assert MASK_APPLIED_ON_WHOLE_TRIPS not in predict_cpu(dense, "epyc-zen3-dev", sizes).assumptions
    assert MASK_LEFT_OUT_ON_WHOLE_TRIPS in predict(causal, "h100-sxm5", sizes).assumptions
    assert MASK_LEFT_OUT_ON_WHOLE_TRIPS not in predict(dense, "h100-sxm5", sizes).assumptions
    c = nc.codegen.c(nc.plan(causal, sizes)).source
    assert "the mask is true on every pair: not made" in c         # what the CPU sentence is about: its whole loop
    t = nc.codegen.triton(nc.plan(causal, sizes)).source
    assert "the mask is true on every pair" in t                    # what the GPU sentence is about


def test_a_block_mask_from_data_charges_its_mask_only_on_partial_blocks(monkeypatch):
    """A document mask with its data's block mask: the runner given it = the cost given it, and the FLOPs saved over
    every trip as written are one constant per pair of the blocks the data allows whole (enumerated here)."""
    n, g, s = 48, 8, 6
    ids = np.repeat(np.arange(4), [20, 4, 16, 8])
    allowed = ids[:, None] == ids[None, :]
    d = _tiled(nc.library.document_attention())
    sizes = {"q": n, "x": n, "d": 4, "g_q": g, "s_x": s}
    bm = nc.block_mask(nc.library.document_mask(q=n, x=n), ids, ids)
    rng = np.random.default_rng(1)
    Q, K, V = (rng.standard_normal((n, 4)) for _ in range(3))
    p = nc.plan(d, sizes)
    out, run = p.run(Q, K, V, ids, ids, block_mask=bm)
    c = nc.cost(d, sizes=sizes, block_mask=bm)
    assert (c.flops, c.H) == (run.flops, run.transfers)
    with monkeypatch.context() as m:
        m.setattr(Machine, "left_out", lambda self, s, frame: None)
        out_written, written = p.run(Q, K, V, ids, ids, block_mask=bm)
    np.testing.assert_allclose(out, out_written, rtol=1e-12, atol=1e-12)
    area = _whole_area(lambda q, x: allowed[q, x], sizes)
    saved = written.flops["general"] - run.flops["general"]
    assert area > 0 and saved > 0 and saved % area == 0
    assert written.transfers == run.transfers        # the ids' loads counted on every trip that runs (as stated)
