"""PROVISIONAL (remove when ``Cost.ops`` lands in main): the per-op FLOP breakdown of a streamed algorithm.

The clock-table engine reads ``nc.cost(d).ops``, which another branch is adding to the cost functor.
Until it exists, the paper-reproduction tests call :func:`ops_of`, which returns ``cost.ops`` when the
functor has it and otherwise walks the derived diagram here, in the tests only (the library must not
duplicate the cost functor).  What it emits is what the tests expect ``Cost.ops`` to give:

* one record per (body box, pipeline): item FLOPs × the box's weave sizes (tile sizes inside the region),
  ``trips`` = group trips × stream trips, ``region`` = the enclosing ("grid", axis) / ("stream", axis),
  ``role`` body for the streamed loop's chunk/softmax/reduce ops, ``dtype`` the output's, ``operands``
  the inputs' dtypes, ``index`` the box's position;
* for a SoftMax-contraction accumulator (online softmax, Table 4), its per-trip combine: one exp per row
  for ``δ = exp(μ′ − μ)`` (recorded on the SoftMax box, the paper's ``s_x + s_x/u_x``), and
  ``O ← O·δ + ΔO``, two general FLOPs per output value (the paper's "FP16 Accumulate", ``2d`` per row).
"""
from __future__ import annotations

import sympy

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.cost.iocost import numel
from napkin_cat.hardware.clock import OpRecord
from napkin_cat.syntax.adapter import is_structural, layers
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.syntax.weave import core_of

ROLE = {"chunk": "body", "softmax": "body", "reduce": "body", "head": "head", "tail": "tail"}


def ops_of(cost, diagram):
    """``cost.ops`` once the cost functor has it; the provisional walk of ``diagram`` until then."""
    ops = getattr(cost, "ops", None)
    return list(ops) if ops is not None else provisional_ops(diagram)


def _box_flops(box):
    spec = box.data
    per_item = kind_of(spec.kind).item_flops(core_of(spec, box.dom, box.cod))
    weave = sympy.Integer(1)
    for w in spec.weave_names:
        for arr in box.cod.inside:
            if w in arr.names:
                weave *= arr.axis(w).size
                break
    return {p: sympy.sympify(f) * weave for p, f in per_item.items()}


def provisional_ops(diagram, region=(), trips=sympy.Integer(1)):
    out = []
    for _, box in layers(diagram):
        if is_structural(box) is not None:
            continue
        if isinstance(box, Stream):
            out += _stream_ops(box, region + (("stream", box.axis),),
                               trips * sympy.sympify(box.full_size()) / sympy.sympify(box.size))
        elif isinstance(box, Grid):
            out += provisional_ops(box.arg, region + (("grid", box.axis),),
                                   trips * sympy.sympify(box.full_size()) / sympy.sympify(box.size))
        elif isinstance(box, Region):
            out += provisional_ops(box.arg, region, trips)
    return out


def _stream_ops(box, region, trips):
    plan = box.plan
    out = []
    for i, (b, _ins, _outs) in enumerate(plan.ops):
        if isinstance(b, Region) or b.data.kind in ("load", "save"):
            continue
        role = ROLE[plan.role[i]]
        for p, f in _box_flops(b).items():
            out.append(OpRecord(b.name, b.data.kind, p, f, trips, region, role, b.cod.inside[0].dtype.name,
                                tuple(a.dtype.name for a in b.dom.inside), i))
    for r in plan.reducers:
        if r.kind != "softmax-contraction":
            continue
        sm, mm = plan.ops[r.softmax][0], plan.ops[r.op][0]
        row = sm.dom.inside[0]
        rows = numel(row) / row.axis(plan.axis).size
        out.append(OpRecord(sm.name, sm.data.kind, "special", rows, trips, region, "body",
                            sm.cod.inside[0].dtype.name, tuple(a.dtype.name for a in sm.dom.inside), r.softmax))
        o = mm.cod.inside[0]
        out.append(OpRecord("accumulate", "accumulate", "general", 2 * numel(o), trips, region, "body",
                            o.dtype.name, (o.dtype.name,), len(plan.ops) + r.op))
    return out
