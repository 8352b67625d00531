"""Discharge ``axes_apart`` (``rewrites/axes_apart.py``): axes of one name, one class wholly after another, renamed
apart over the whole function.

The obligation (random stacks of 2 … 4 residual MLPs and SwiGLU MLPs sharing the hidden axis name ``f``), exact in
floating point, H, M and FLOPs unchanged at every level, the function's type kept and nothing left to rename; its
varied instances (axes renamed, sizes concrete, extra axes woven) too.  The rule offers nothing where every class keeps
its name (one block, attention), and its step replays.
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.rewriting import Trace
from rewrites import axes_apart

proves = pytest.mark.proves


@proves("axes_apart")
def test_axes_apart_is_sound():
    proof = axes_apart.obligation.discharge(axes_apart, trials=6, variants=3)
    assert proof.rewrites >= 6 and proof.cost_checked and proof.max_error == 0.0


@proves("axes_apart")
def test_nothing_to_rename_nothing_offered_and_a_match_replays():
    assert axes_apart.matches(nc.library.transformer_block()) == []
    assert axes_apart.matches(nc.library.attention()) == []
    f = nc.library.transformer_stack(2)
    r = nc.rewrite(f, [axes_apart])
    assert [s.rule for s in r.trace] == ["axes_apart"]
    assert nc.isomorphic(Trace(r.trace.steps, r.trace.rules).replay(f), r.diagram)
    assert nc.equivalent(f, r.diagram)
