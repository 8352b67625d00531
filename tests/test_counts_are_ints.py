"""A memory, a size or a number of devices is an int (or a size name), never text that spells one, a bool, or a
float; a count past its documented limit is refused (issue 31).  Each public entry that takes one refuses the rest
with a typed error naming the argument and what is legal, before any work.

Second route: the legal neighbour of every refused value is accepted (the int the text spells, the limit itself), so
the refusal is the value's, not the entry's; and evaluating a device region at ``P`` beyond the limit, which ran
every (idle) device one by one (2^40 of them: no answer in 120 s), is refused at once.

Mutations caught (each fails on today's main): ``memory_limit`` reading any text as a number (``derive(memory=
"1024")`` searched); ``as_devices`` without :data:`LARGEST_DEVICES` (``nc.shard(att, "q", 2**40)`` built);
``device_shards`` without ``check_devices`` (evaluate at ``P = 2^20 + 1`` ran); ``plan``'s memory without its
2^64 bound; the CLI's ``--memory 2^14`` no longer read as text (``napkin cost --derived --memory 2^14`` fails)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.cli import main
from napkin_cat.cost.memory import LARGEST_MEMORY, memory_limit
from napkin_cat.hardware.devices import cluster
from napkin_cat.syntax.collectives import LARGEST_DEVICES

ATT = nc.library.attention()
SIZES = {"q": 16, "x": 16, "d": 8}


@pytest.mark.parametrize("text, value", [("1024", 1024), ("2^14", 2 ** 14), (" 64 ", 64), ("4*16", 64)])
def test_a_memory_written_as_text_is_refused_from_python_and_read_on_the_command_line(text, value):
    for entry in (lambda m: nc.derive(ATT, memory=m, sizes=SIZES), memory_limit):
        with pytest.raises(nc.MemoryLimitError, match=re.escape(f"memory {text!r} is a number written as text: give "
                                                                f"the int {value}")):
            entry(text)
    assert memory_limit(text, text=True) == value == memory_limit(value)
    assert str(memory_limit("M/2")) == "M/2"                  # text naming a size stays the symbolic memory


@pytest.mark.parametrize("bad", [True, 1024.0, 1024.5, [True], LARGEST_MEMORY + 1])
def test_a_memory_that_is_no_count_of_values_is_refused(bad):
    with pytest.raises(nc.MemoryLimitError, match="memory"):
        nc.derive(ATT, memory=bad, sizes=SIZES)


def test_a_plans_memory_is_an_int_of_at_most_2_64():
    from rewrites import flash_attention
    d = flash_attention(ATT).diagram
    sizes = {**SIZES, "g_q": 8, "s_x": 8}
    assert nc.plan(d, sizes, memory=LARGEST_MEMORY).peak[1] <= LARGEST_MEMORY
    for bad in ("1024", True, 1024.5, LARGEST_MEMORY + 1):
        with pytest.raises(nc.MemoryLimitError, match=r"an int, 1 … 2\^64"):
            nc.plan(d, sizes, memory={1: bad})


@pytest.mark.parametrize("bad, match", [("2", r"devices='2' is a number written as text: give the int 2"),
                                        (True, "positive number of devices"), (2.0, "positive number of devices"),
                                        (2.5, "positive number of devices"), (0, "positive number of devices"),
                                        (LARGEST_DEVICES + 1, r"at most 2\^20 = 1048576 devices"),
                                        (2 ** 40, r"at most 2\^20 = 1048576 devices")])
def test_a_device_region_runs_on_an_int_of_at_most_the_largest_devices(bad, match):
    with pytest.raises(nc.AxisError, match=match):
        nc.shard(ATT, "q", bad)
    assert nc.shard(ATT, "q", LARGEST_DEVICES).boxes[0].devices == LARGEST_DEVICES


def test_a_symbolic_number_of_devices_bound_past_the_limit_is_refused_before_any_device_runs():
    region = nc.shard(ATT, "q", "P")
    xs = [np.ones([SIZES[str(n)] for n in a.names]) for a in ATT.dom.inside]
    Q, K, V = xs
    s = Q @ K.T / np.sqrt(SIZES["d"])
    expected = np.exp(s - s.max(1, keepdims=True)) / np.exp(s - s.max(1, keepdims=True)).sum(1, keepdims=True) @ V
    assert np.allclose(nc.evaluate(region, *xs, sizes={**SIZES, "P": 32}), expected)     # 16 of 32 devices idle
    with pytest.raises(nc.AxisError, match=r"at most 2\^20 = 1048576 devices \(LARGEST_DEVICES\), got P=1048577"):
        nc.evaluate(region, *xs, sizes={**SIZES, "P": LARGEST_DEVICES + 1})


def test_a_clusters_devices_are_an_int_of_at_most_the_largest_devices():
    assert cluster("h100-sxm5", devices=8, link="nvlink4").devices == 8
    for bad, match in (("8", "give the int 8"), (True, "positive int or a symbol"), (8.0, "positive int or a symbol"),
                       (LARGEST_DEVICES + 1, r"at most 2\^20")):
        with pytest.raises(nc.HardwareError, match=match):
            cluster("h100-sxm5", devices=bad, link="nvlink4")


def test_the_command_line_reads_a_memory_written_as_text(capsys):
    assert main(["cost", "matmul", "--derived", "--memory", "2^10", "--json"]) == 0
    assert '"optimum"' in capsys.readouterr().out
