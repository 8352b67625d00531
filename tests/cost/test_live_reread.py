"""The live data's totals re-summed only where a layer changed them (issue 35, item 4).

A column's total at a level was built afresh (a sympy sum of every distinct monomial live) whenever a layer
touched the level, so a chain of maps beside ``n`` pass-through wires each of its own size cost ``n`` terms per box
(quadratic in the diagram).  :class:`~napkin_cat.cost.live.Live` now keeps a level's total while the terms a layer
touched come back to their values (a map replacing its input by an output of the same size); the fold before this
change is kept as the specification, :class:`~napkin_cat.cost.live.Resummed`, and the two folds must give the same
Cost (H, M per level, FLOPs, the columns themselves) on random programs and on stacked transformer blocks.
"""
from __future__ import annotations

import importlib
import random

import pytest

import napkin_cat as nc
from napkin_cat.cost.ordered_sum import OrderedSum
from napkin_cat.cost.polynomial import POLYNOMIAL, SYMPY

live = importlib.import_module("napkin_cat.cost.live")
iocost = importlib.import_module("napkin_cat.cost.iocost")   # (the package exports the function `cost`)

TYPES = ["a b", "b c", "a c", "a", "p0", "p1 a", "p2"]


def random_program(seed: int) -> nc.Diagram:
    """A random function on the arrays of :data:`TYPES`: maps, sums of two equal-typed values, contractions
    ``a b, b c -> a c`` and reductions, values read several times (copies) or never (discards)."""
    rng = random.Random(seed)
    ins = [rng.choice(TYPES) for _ in range(rng.randint(3, 7))]
    b = nc.Builder(nc.types(", ".join(ins)))
    vals = list(zip(b.inputs, ins))
    for _ in range(rng.randint(4, 14)):
        kind = rng.choice(["map", "map", "add", "mm", "sum"])
        x, tx = rng.choice(vals)
        if kind == "add":
            same = [v for v in vals if v[1] == tx]
            y = rng.choice(same)[0]
            vals.append((b(nc.elementwise("add", f"{tx}, {tx} -> {tx}"), x, y), tx))
        elif kind == "mm" and any(t == "a b" for _, t in vals) and any(t == "b c" for _, t in vals):
            p = rng.choice([v for v, t in vals if t == "a b"])
            q = rng.choice([v for v, t in vals if t == "b c"])
            vals.append((b(nc.einsum("a b, b c -> a c"), p, q), "a c"))
        elif kind == "sum" and len(tx.split()) == 2:
            out = tx.split()[0]
            vals.append((b(nc.reduce("sum", f"{tx} -> {out}"), x), out))
        else:
            vals.append((b(nc.elementwise(rng.choice(["exp", "relu"]), tx), x), tx))
    outs = rng.sample([v for v, _ in vals], rng.randint(1, min(3, len(vals))))
    return b.build(*outs)


def stacked_blocks(n_blocks: int) -> nc.Diagram:
    return nc.library.transformer_stack(n_blocks)


def _both(diagram, arithmetic, monkeypatch):
    """The cost of ``diagram`` by the fold (:class:`Live`) and by its specification (:class:`Resummed`)."""
    new = iocost.cost(diagram, arithmetic=arithmetic)
    spec = (lambda: live.Resummed()) if arithmetic is SYMPY else (lambda: live.Resummed(arithmetic.terms_of,
                                                                                       arithmetic.total))
    with monkeypatch.context() as m:
        m.setattr(type(arithmetic), "live", lambda self: spec())
        old = iocost.cost(diagram, arithmetic=arithmetic)
    return new, old


def _same(new, old, M=True):
    """Equal H, FLOPs and columns (and M, their max: a sympy record's; a Poly record keeps its columns)."""
    assert new.H == old.H and new.flops == old.flops and (not M or new.M == old.M)
    assert new.columns == old.columns


@pytest.mark.parametrize("seed", range(12))
def test_random_programs_cost_as_the_specification(seed, monkeypatch):
    d = random_program(seed)
    for diagram in (d, nc.unfused(d)):
        _same(*_both(diagram, SYMPY, monkeypatch))
    _same(*_both(nc.unfused(d), POLYNOMIAL, monkeypatch), M=False)


@pytest.mark.parametrize("form", ["function", "unfused"])
def test_stacked_blocks_cost_as_the_specification(form, monkeypatch):
    d = stacked_blocks(2)
    d = d if form == "function" else nc.unfused(d)
    new, old = _both(d, SYMPY, monkeypatch)
    _same(new, old)
    assert old.M[0] != 0 and (form == "function" or old.H[1] != 0)      # something was compared


def beside(n: int) -> nc.Diagram:
    """``n`` maps on ``q d`` beside ``n`` pass-through wires, each of its own size ``p_k``."""
    boxes = [nc.elementwise("exp" if k % 2 else "relu", "q d") for k in range(n)]
    left = nc.types(", ".join(f"p{k}" for k in range(n // 2)))
    right = nc.types(", ".join(f"p{k}" for k in range(n // 2, n)))
    return nc.Diagram.id(left) @ nc.Diagram.id(boxes[0].dom).then(*boxes) @ nc.Diagram.id(right)


def _terms_summed_per_box(diagram, monkeypatch) -> float:
    """How many monomials the fold adds into a level's total, per box (its work on the column sums): each term a
    total summed afresh adds, and each term a level's ordered sum moves (:class:`~napkin_cat.cost.ordered_sum.
    OrderedSum`, the sympy totals since item 4's second part)."""
    count = [0]
    real, real_set = live.summed_afresh, OrderedSum.set

    def counting(total, items):
        items = list(items)
        count[0] += len(items)
        return real(total, items)

    def placing(self, m, c):
        count[0] += 1
        return real_set(self, m, c)
    with monkeypatch.context() as m:
        m.setattr(live, "summed_afresh", counting)
        m.setattr(OrderedSum, "set", placing)
        live.TOTALS.clear()
        nc.cost(diagram)
    return count[0] / len(diagram.inside)


def test_maps_beside_distinct_wires_sum_no_more_terms_per_box_when_wider(monkeypatch):
    """Eighty maps beside eighty wires of distinct sizes sum no more monomials per box than twenty (before: each
    layer re-summed every wire's monomial, so work per box grew with the width)."""
    short, long = (_terms_summed_per_box(beside(n), monkeypatch) for n in (20, 80))
    assert 0 < long <= 1.5 * short, (short, long)
    d = beside(12)
    _same(*_both(d, SYMPY, monkeypatch))
    assert nc.cost(d).M[0] == sum(nc.symbol(f"p{k}") for k in range(12)) + nc.symbol("q") * nc.symbol("d")
