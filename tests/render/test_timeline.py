"""Timelines of overlap schedules: blocks, hatched overhead, barriers, files."""
from __future__ import annotations

from fractions import Fraction as F

import pytest

from napkin_cat.errors import NapkinError
from napkin_cat.hardware.overlap import Task, inter, simulate
from napkin_cat.render.timeline import draw_timeline

TASKS = [Task("QK", "tensor", F(4)), Task("SM", "special", F(8), F(2, 3)), Task("PV", "tensor", F(4))]


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_draws_blocks_hatches_and_barriers(tmp_path, suffix):
    path = tmp_path / f"t.{suffix}"
    fig = draw_timeline(simulate(inter(TASKS, warpgroups=2)), path, iterations=(30, 32))
    info = fig.napkin_timeline
    assert info["blocks"] == 2 * 2 * 3 and info["hatched"] == 4 and info["barriers"] == 4
    assert path.stat().st_size > 1000


def test_bad_path():
    with pytest.raises(NapkinError, match=r"give a .png, .svg or .pdf path"):
        draw_timeline(simulate(inter(TASKS)), "t.gif")
