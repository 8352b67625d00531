"""Fusion proper: eliminate an intermediate's round trip through the level above.

=========================  ==========================================================
rule                       lhs → rhs
=========================  ==========================================================
``save_load_elimination``  Save(x) ; Load → x      (the load returns x to its own level)
=========================  ==========================================================

Cost claim: the rewrite removes exactly the intermediate's round trip, ``2·size``
values (and ``2·size·bytes`` bytes) at the array's level; nothing else changes.

>>> import napkin_cat as nc
>>> t = nc.types("q d", level=1).inside[0]
>>> d = nc.transfer("save", t) >> nc.transfer("load", t.replace(level=0))
>>> save_load_elimination.apply(d) == nc.Id(nc.Ty(t))
True
>>> transfer_volume(d)
2*d*q
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting.match import Pattern, kind
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from rewrites.basic import UNARY, random_type


def numel(arr):
    n = sympy.Integer(1)
    for a in arr.axes:
        n = n * a.size
    return n


def transfer_volume(diagram):
    """Values moved by the Load/Save boxes of a flat diagram (sympy)."""
    return sum((numel(b.dom.inside[0]) for b in diagram.boxes
                if getattr(b.data, "kind", None) in ("load", "save")), sympy.Integer(0))


def _instance(rng):
    arr = random_type(rng, level=1)
    sig = " ".join(arr.names)
    b = nc.Builder(nc.Ty(arr, random_type(rng, level=1)))
    X, Y = b.inputs
    h = b(nc.elementwise(UNARY[int(rng.integers(len(UNARY)))], sig, level=1), X)
    back = b(nc.transfer("load", arr.replace(level=0)), b(nc.transfer("save", arr), h))
    out = b(nc.elementwise("tanh", sig, level=1), back)
    other = b(nc.transfer("save", Y.array), Y)  # an unrelated save stays
    return b.build(other, out) if rng.integers(2) else b.build(out, other)


def _cost_claim(lhs, rhs, m):
    arr = m.node("s").dom[0]
    size = numel(arr)
    moved = sympy.simplify(transfer_volume(lhs) - transfer_volume(rhs) - 2 * size)
    assert moved == 0, f"the rewrite removes {transfer_volume(lhs) - transfer_volume(rhs)}, not 2·{size}"
    before, after = nc.cost(lhs), nc.cost(rhs)
    level = arr.level
    dh = sympy.simplify(before.H.get(level, 0) - after.H.get(level, 0) - 2 * size)
    assert dh == 0, f"cost functor: H[{level}] drops by {before.H.get(level, 0) - after.H.get(level, 0)}"
    for lv in set(before.H) | set(after.H):
        if lv != level:
            assert sympy.simplify(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed"
    if before.H_bytes:
        db = sympy.simplify(before.H_bytes.get(level, 0) - after.H_bytes.get(level, 0)
                            - 2 * size * arr.dtype.bytes)
        assert db == 0, "bytes moved must drop by 2·size·dtype.bytes"


save_load_elimination = Rule(
    "save_load_elimination",
    Pattern({"s": kind("save"), "l": kind("load")}, [("s", 0, "l", 0)]),
    lambda m: nc.Id(m.dom),
    conditions=(Condition("round_trip", lambda m: m.node("l").cod == m.node("s").dom,
                          "the load must return the saved array to its own level, dtype and axes"),),
    obligation=Obligation(_instance, cost=_cost_claim),
    doc="""Save(x) ; Load → x.

    Fusion proper (paper §2.2, Fig. SoftMax_MatMul_algorithm: the transfer cost
    is the total size of the arrays changing level): an intermediate saved and
    loaded straight back need not leave its level; this removes 2·size transfers.""")

RULES = RuleSet((save_load_elimination,))
