"""Overlap schedules: the simulator on hand-made loops, then FlashAttention-3's utilisation predicted from
clock tables computed from derived diagrams (§6)."""
from __future__ import annotations

from fractions import Fraction as F

import pytest

from napkin_cat.hardware import ScheduleError, Task, clock_table_of, inter, intra, load, overlap_table, sequential
from napkin_cat.hardware import simulate
from napkin_cat.hardware.overlap import Barrier, Program, tasks_of

FA3 = {"d": 128, "s_x": 128, "g_q": 128}     # §6.1: effective g_q = 128, s_x = 128, d = 128


# ------------------------------------------------------------------------------------------- engine
def test_sequential_is_the_sum_and_intra_hides_the_shorter_side():
    tasks = [Task("A", "tensor", F(3)), Task("B", "special", F(5)), Task("C", "tensor", F(1))]
    assert simulate(sequential(tasks)).period() == 9
    # intra: A_j, C_{j−1} issued, then B_j: period = A + B when B ≥ C
    assert simulate(intra(tasks)).period() == 8
    assert simulate(intra(tasks)).utilisation() == F(4, 8)


def test_two_warpgroups_fill_the_tensor_pipe_until_another_pipe_saturates():
    tasks = [Task("A", "tensor", F(3)), Task("B", "special", F(2)), Task("C", "tensor", F(3))]
    assert simulate(inter(tasks, warpgroups=2)).utilisation() == 1
    slow = [Task("A", "tensor", F(3)), Task("B", "special", F(2), F(3, 2)), Task("C", "tensor", F(1))]
    # the special pipe needs 2·(1 + 3/2) = 5 per iteration per warpgroup: tensor 4/5 at best
    assert simulate(inter(slow, warpgroups=3)).utilisation() == F(4, 5)


def test_synchronous_tensor_ops_cannot_overlap_inside_a_warp():
    tasks = [Task("A", "tensor", F(3)), Task("B", "special", F(5)), Task("C", "tensor", F(1))]
    assert simulate(intra(tasks, asynchronous=())).period() == 9


def test_overhead_occupies_the_ops_own_pipeline():
    s = simulate(sequential([Task("A", "general", F(2), F(1, 2))]))
    assert s.period() == 3 and s.utilisation("general") == F(2, 3) and s.occupancy("general") == 1


def test_a_barrier_that_never_opens_is_reported():
    tasks = [Task("A", "tensor", F(1)), Task("B", "general", F(1))]
    p = Program("stuck", tasks, 2, [(0, 0), (1, 0)], [Barrier(0, 0, 1, 1), Barrier(1, 0, 0, 1)])
    with pytest.raises(ScheduleError, match=r"stuck: no op can issue \(a barrier never opens\)"):
        simulate(p)
    with pytest.raises(ScheduleError, match="at least 30"):
        simulate(sequential(tasks), iterations=10)


# ------------------------------------------------------------------------------------------- FlashAttention-3
@pytest.fixture(scope="module")
def fa3(variant):
    out = {}
    for name in ("fa3-fp16", "fa3-fp8"):
        _, cost, ops = variant(name)
        out[name] = clock_table_of(cost, load("h100-sxm5"), FA3, ops=ops)
    return out


SOFTMAX_OVERHEAD = {"special": F(2, 3)}      # §6.3: "if we assume a 66% overhead in SoftMax"


def test_fa3_fp16_intra_warpgroup_predicts_75_percent(fa3):
    s = simulate(intra(tasks_of(fa3["fa3-fp16"], SOFTMAX_OVERHEAD)))
    assert abs(float(s.utilisation()) - 740 / 989) <= 0.01          # measured 740 of 989 TFLOP/s
    assert abs(float(s.utilisation()) - 0.75) <= 0.01               # "4/3 as long as necessary"


def test_fa3_fp8_inter_warpgroup_predicts_60_percent(fa3):
    s = simulate(inter(tasks_of(fa3["fa3-fp8"], SOFTMAX_OVERHEAD), warpgroups=2))
    assert abs(float(s.utilisation()) - 0.60) <= 0.01               # printed 60% (1.2/1.98 = 60.6%, D-11)
    assert s.occupancy("special") == 1                               # bound by the special-function unit


def test_fp8_intra_warpgroup_loses_a_third_even_without_overhead(fa3):
    s = simulate(intra(tasks_of(fa3["fa3-fp8"])))
    assert 1 - s.utilisation() >= F(33, 100)
    assert 1 - s.utilisation("special") >= F(33, 100)                # the SFU idles while P·V runs


def test_fp16_inter_warpgroup_accommodates_the_softmax_overhead(fa3):
    s = simulate(inter(tasks_of(fa3["fa3-fp16"], SOFTMAX_OVERHEAD), warpgroups=2))
    assert s.utilisation() > simulate(intra(tasks_of(fa3["fa3-fp16"], SOFTMAX_OVERHEAD))).utilisation() + F(1, 10)


def test_overlap_table_renders_every_strategy(fa3):
    t = overlap_table(fa3["fa3-fp8"], overhead=SOFTMAX_OVERHEAD)
    assert [name for name, _ in t.rows][:3] == ["sequential", "intra", "inter (2 warpgroups)"]
    assert "59.5%" in t.to_text() and '"tensor_utilisation"' in t.to_json()
    with pytest.raises(ScheduleError, match="unknown strategy 'magic'"):
        overlap_table(fa3["fa3-fp8"], strategies=[("magic", {})])
