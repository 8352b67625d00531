"""A device's global memory steers the algorithm its program runs (issue 37's follow-up: "device memory does not
steer the per-device algorithm"): the cluster's time model derived each device's program by time alone and checked
its memory after, so a form whose fastest algorithm writes more than the device holds was refused, though a slower
one fits (the transformer block on one H100 at 128K tokens: 2.2 TB, attention's scores written; FlashAttention holds
a few GB).  ``derive_for_time(global_memory=)`` takes the fastest structure that holds at most that at level 0, and
``time_form`` passes each program the device's room.

Second routes: the chosen algorithm's level-0 memory by the cost functor (``nc.cost(...).M[0]`` at its tiles) and by
hand (Q, K and V whole, fp32: no partials of a split stream); the capacity against the uncapped choice's need.
"""
from __future__ import annotations

import dataclasses

import pytest

import napkin_cat as nc
from napkin_cat.hardware.clustered import time_form
from napkin_cat.hardware.model import load
from napkin_cat.hardware.timed import derive_for_time
from napkin_cat.rewriting.trace import Trace
from napkin_cat.search.devices import DeviceForm


def test_a_device_too_small_for_the_fastest_algorithm_runs_one_that_fits():
    n, d = 1024, 64
    sizes = {"q": n, "x": n, "d": d}
    by_hand = 3 * n * d * 4                  # Q, K, V in global memory, 4 B each; a split stream adds its partials
    capacity = by_hand + 4 * n * d           # room for them and the output's size again, not for the partials
    c = nc.hardware.cluster(dataclasses.replace(load("h100-sxm5"), gmem=capacity), devices=2, link="nvlink4")
    r = time_form(DeviceForm("one device", nc.library.attention(), Trace((), ())), c, sizes, compute="time")
    assert r.refused is None                 # main: "memory: each device holds 2949120 B, more than ... 1310720 B"
    (alg,) = r.local
    held = int(nc.cost(alg.diagram, sizes=dict(alg.optimum.sizes)).M[0]) * 4
    assert r.memory == held == by_hand <= capacity
    assert "×p" not in str(alg.variant)      # the split stream (fastest, 2.95 MB here) does not fit


def test_no_algorithm_within_the_limit_is_a_typed_error_naming_level_0():
    with pytest.raises(nc.MemoryLimitError, match=r"holds at most 100 values at level 0 \(global memory\)"):
        derive_for_time(nc.einsum("a b, b c -> a c"), "h100-sxm5", {"a": 64, "b": 64, "c": 64}, global_memory=100)
