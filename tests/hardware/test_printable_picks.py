"""``derive(hardware=)`` offers only what the printers print (issue 36's run 5): at d = 64 the H200 model prefers
an attention backward that writes dS (q·x·h elements) between its two kernels, and at N = 4,096 with 128 heads dS
has 2^31 elements, one more than the printers' 32-bit indices reach, so the derived pick was refused by
``nc.codegen.triton`` on the GPU.  The search now takes the fastest assignment whose every array holds at most
``LARGEST_INDEX`` elements (:func:`napkin_cat.hardware.timed.admissible`), the limit the printers check too.

Second routes: each array's elements from the plan the printers print (``Plan.widest``, and by hand: q·x·h for dS);
the limit moved below dS's size at small sizes makes the same search pick another structure, which prints.
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.hardware import timed
from napkin_cat.plan.program import LARGEST_INDEX

FORMATS = {"Q": "bf16", "K": "bf16", "S": "fp32", "P": "bf16", "V": "bf16", "O": "bf16"}
SIZES = {"q": 1024, "x": 1024, "d": 64, "h": 8}


@pytest.fixture(scope="module")
def backward():
    f = nc.weave(nc.library.attention(formats=FORMATS, lse=True), "h", inputs=[0, 1, 2])
    return nc.grad(f, wrt=[0, 1, 2], saved=True, aux=1)


def widest(r, sizes):
    tiles = {str(a): int(v) for a, v in r.optimum.exact_sizes.items()}
    return nc.plan(r.diagram, {**sizes, **tiles}).widest


def test_the_printers_limit_is_the_plans():
    assert LARGEST_INDEX == 2 ** 31 - 1
    p = nc.plan(nc.library.matmul(), {"a": 4, "b": 8, "c": 16})
    assert p.widest == ("x1", 8 * 16)                        # b × c, by hand


def test_the_pick_never_holds_an_array_the_printers_refuse(backward, monkeypatch):
    free = nc.derive(backward, sizes=SIZES, hardware="h200")
    name, n = widest(free, SIZES)
    q, x, h = SIZES["q"], SIZES["x"], SIZES["h"]
    assert n == q * x * h                                    # the pick writes dS between its kernels (by hand)
    monkeypatch.setattr(timed, "LARGEST_INDEX", n - 1)       # dS one element too many, as at N = 4,096, 128 heads
    bounded = nc.derive(backward, sizes=SIZES, hardware="h200")
    assert str(bounded.variant) != str(free.variant)
    assert widest(bounded, SIZES)[1] <= n - 1
    assert bounded.prediction.time >= free.prediction.time  # the faster one was left out, not missed
    assert any("within the printers' 32-bit indices" in n for n in bounded.optimum.notes)


def test_nothing_printable_is_a_typed_error_naming_the_array(backward, monkeypatch):
    monkeypatch.setattr(timed, "LARGEST_INDEX", 1000)        # smaller than every input
    with pytest.raises(nc.MemoryLimitError, match=r"32-bit indices \(the fastest's '\w+' has \d+\)"):
        nc.derive(backward, sizes=SIZES, hardware="h200")
