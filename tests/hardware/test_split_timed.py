"""Split streams timed by the hardware model: with a plan, a FlashDecoding structure (the streamed axis cut in P
parts, one block each) is timed beside the unsplit ones, at P = 1, 2, 4, …; at a small query count on a long
context, the one-block-per-group structures leave the GPU idle and the split wins."""
from __future__ import annotations

import napkin_cat as nc
from napkin_cat.hardware.predict import KernelForm, kernels_of
from napkin_cat.hardware.model import load


def test_a_split_kernel_launches_its_parts_as_blocks():
    d = nc.group(nc.stream(nc.library.attention(), "x", "s_x", parts="P"), "q", "g_q")
    S = {"q": 64, "x": 4096, "d": 64, "g_q": 16, "s_x": 64, "P": 8}
    (box,) = kernels_of(d)
    form = KernelForm(box, load("h100-sxm5"), overlap="sequential", ceilings={}, level=1,
                      sample={nc.symbol(k): v for k, v in S.items()})
    assert form.values({nc.symbol(k): v for k, v in S.items()})["blocks"] == (64 // 16) * 8


def test_hardware_derive_picks_a_split_stream_at_a_small_query_count():
    f = nc.library.attention()
    r = nc.derive(f, sizes={"q": 64, "x": 65536, "d": 128}, hardware="h100-sxm5")
    assert any(k.parts for k in r.variant.kernels) and r.blocks >= 64
    unsplit = [t for label, _, t, _ in r.timings if "×" not in label]
    assert unsplit and r.prediction.time * 10 < min(unsplit)
