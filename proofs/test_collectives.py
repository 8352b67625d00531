"""Obligations of sequence parallelism's rules (``rewrites/collectives.py``, ``rewrites/local_fusion.py``): each
keeps the function on the left-hand sides the derivation meets (MLPs made tensor-parallel at 2 to 4 devices, ragged
sizes, the input arriving sharded along the tokens; plain, with a residual, pre-normed, with a map before or after)
and its cost claim, the link counted per device from numpy's shards; mutants fail."""
from __future__ import annotations

from dataclasses import replace

import pytest

import rewrites.collectives as collectives
from napkin_cat.errors import ObligationError
from napkin_cat.syntax.collectives import Collective
from napkin_cat.syntax.primitive import KINDS
from rewrites.collectives import device_gather_later, device_gather_output, device_scatter
from rewrites.local_fusion import device_local_fusion

proves = pytest.mark.proves


@proves("device_scatter")
def test_device_scatter_is_sound():
    rule = device_scatter.using(axis="n")
    proof = rule.obligation.discharge(rule, trials=8)
    assert proof.rewrites >= 8 and proof.cost_checked


@proves("device_gather_later")
def test_device_gather_later_is_sound():
    rule = device_gather_later.using(axis="n")
    proof = rule.obligation.discharge(rule, trials=8)
    assert proof.rewrites >= 8 and proof.cost_checked


@proves("device_gather_output")
def test_device_gather_output_is_sound():
    proof = device_gather_output.obligation.discharge(device_gather_output, trials=8)
    assert proof.rewrites >= 8 and proof.cost_checked


@proves("device_local_fusion")
def test_device_local_fusion_is_sound():
    proof = device_local_fusion.obligation.discharge(device_local_fusion, trials=6)
    assert proof.rewrites >= 6 and proof.cost_checked


def test_a_gather_moved_past_a_box_that_reads_a_device_s_own_value_is_caught(monkeypatch):
    """Without the condition that the box's other inputs are alike on every device, the all-gather moves past the
    column-parallel matmul (its weight is each device's shard of h): device q's rows computed with device q's
    weights, the reduce-scatter then sums other devices' rows."""
    monkeypatch.setattr(collectives, "same_everywhere", lambda k, vals: {v for _, ins, _ in vals.ops for v in ins}
                        | set(vals.dom))
    rule = device_gather_later.using(axis="n")
    with pytest.raises(ObligationError, match="unsound"):
        rule.obligation.discharge(rule, trials=8)


def test_a_reduce_scatter_that_keeps_another_device_s_shard_is_caught(monkeypatch):
    kind = KINDS["reducescatter"]
    run, moves = kind.collective.run, kind.collective.moves

    def shifted(box, xs, merge):
        outs = run(box, xs, merge)
        return outs[1:] + outs[:1]
    monkeypatch.setitem(KINDS, "reducescatter", replace(kind, collective=Collective(shifted, moves)))
    rule = device_scatter.using(axis="n")
    with pytest.raises(ObligationError):
        rule.obligation.discharge(rule, trials=8)
