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


@proves("axes_apart")
def test_within_a_kernel_is_alpha_conversion():
    """``within=`` (one kernel's nodes: block 1's MLP and all of block 2): the classes that kernel alone sees are
    renamed apart (block 2's d, h, f, m), nothing it shares with the rest (e, n; block 1's d) is; the function, its
    type and its cost are kept; a node id the netlist has not is no match."""
    from napkin_cat.rewriting.netlist import to_netlist
    f = nc.library.transformer_stack(2)
    net = to_netlist(f)
    boxes = [n for n, node in net.nodes.items() if node.kind == "box"]
    rule = axes_apart.using(within=" ".join(str(n) for n in boxes[len(boxes) // 4:]))
    (m,) = rule.matches(f)
    after = rule.apply(f, m)
    names = {a for b in after.boxes for y in b.cod.inside for a in y.names}
    assert {"d'2", "f'2", "h'2"} <= names and {"d", "f", "h", "n", "e"} <= names
    assert after.dom == f.dom and after.cod == f.cod and nc.equivalent(f, after)
    before, now = nc.cost(f), nc.cost(after)
    assert before.H == now.H and before.flops == now.flops
    assert axes_apart.using(within=str(max(net.nodes) + 1)).matches(f) == []
