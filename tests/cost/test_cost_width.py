"""The cost functor on wide diagrams: linear work, unchanged values (issue 10, item 14).

Stacked transformer blocks keep the weights of the later blocks live beside every layer of the
earlier ones, so the diagram is as wide as the stack is deep.  The functor must do the same work
per box whatever the width (no timing here: it counts the array sizes it reads), and its numbers
must agree with routes that do not share its bookkeeping: the plain per-layer definition of a
column (sum the distinct values on the wires, expand), the laws of ``>>`` (H and FLOPs add), and
the instrumented plan runner at small sizes.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
import importlib
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.axis import symbol

SIZES = dict(n=3, e=4, h=2, d=2, f=5)
iocost = importlib.import_module("napkin_cat.cost.iocost")   # (the package exports the function `cost`)


def stacked_blocks(n_blocks: int) -> Diagram:
    """``n_blocks`` transformer blocks composed with ``>>``; the later blocks' weights ride beside."""
    block = nc.library.transformer_block()
    x, weights = block.dom.inside[0], block.dom.inside[1:]
    d = Diagram.id(Ty(x, *(weights * n_blocks)))
    for k in range(n_blocks):
        d = d >> (block @ Diagram.id(Ty(*(weights * (n_blocks - k - 1)))))
    return d


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_columns_of_stacked_blocks_are_the_per_layer_definition(n_blocks, helpers):
    d = stacked_blocks(n_blocks)
    assert nc.cost(d).columns == helpers.live_columns(d)


def test_columns_with_swaps_copies_and_discards_are_the_per_layer_definition(helpers):
    a, b = nc.types("q d"), nc.types("x d")
    d = (Diagram.copy(a, 3) @ b >> a @ Diagram.swap(a, a @ b) >> a @ a @ b @ Diagram.copy(a, 0)
         >> nc.elementwise("exp", "q d") @ Diagram.swap(a, b) >> nc.Id("q d") @ nc.einsum("x d, q d -> x q"))
    assert nc.cost(d).columns == helpers.live_columns(d)


def test_stacking_adds_flops_and_transfers():
    """``cost(f >> g) = cost(f) ; cost(g)``: n blocks do n times a block's FLOPs and transfers."""
    one, four = nc.cost(stacked_blocks(1)), nc.cost(stacked_blocks(4))
    assert {p: sympy.expand(4 * f) for p, f in one.flops.items()} == {
        p: sympy.expand(f) for p, f in four.flops.items()}
    u1, u4 = nc.cost(nc.unfused(stacked_blocks(1))), nc.cost(nc.unfused(stacked_blocks(4)))
    assert sympy.expand(u4.H[1] - 4 * u1.H[1]) == 0 and u1.H[1] != 0


def test_unfused_stack_matches_the_plan_runner():
    """Second route: the instrumented runner's transfers, FLOPs and peak equal the functor's at small sizes."""
    function = stacked_blocks(2)
    algorithm = nc.unfused(function)
    env = {symbol(k): v for k, v in SIZES.items()}
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=tuple(int(sympy.sympify(a.size).subs(env)) for a in arr.axes))
          for arr in function.dom.inside]
    y, counters = nc.plan(algorithm, SIZES).run(*xs)
    np.testing.assert_allclose(y, nc.evaluate(function, *xs), rtol=1e-9, atol=1e-9)
    c = nc.cost(algorithm)
    assert counters.transfers == {l: int(h.subs(env)) for l, h in c.H.items()}
    assert counters.flops == {p: int(f.subs(env)) for p, f in c.flops.items()}
    assert counters.peak == {l: int(m.subs(env)) for l, m in c.M.items() if l > 0}


def _sizes_read_per_box(diagram: Diagram, monkeypatch) -> float:
    """How many arrays' sizes the functor multiplies out per box (its work, not its time)."""
    count = [0]
    real = iocost.numel

    def counting(arr):
        count[0] += 1
        return real(arr)
    monkeypatch.setattr(iocost, "numel", counting)
    nc.cost(diagram)
    monkeypatch.setattr(iocost, "numel", real)
    return count[0] / len(diagram.inside)


@pytest.mark.parametrize("form", ["function", "unfused"])
def test_work_per_box_does_not_grow_with_width(form, monkeypatch):
    """Sixteen blocks read no more sizes per box than four (on main, every layer re-read every wire)."""
    make = stacked_blocks if form == "function" else (lambda n: nc.unfused(stacked_blocks(n)))
    four, sixteen = (_sizes_read_per_box(make(n), monkeypatch) for n in (4, 16))
    assert sixteen <= 1.5 * four, (four, sixteen)


def weighted_chain(n: int) -> Diagram:
    """``x ← x + w_k`` for k = 1 … n: every weight not yet added is live beside the running sum."""
    b = nc.Builder(nc.types(", ".join(["q d"] + ["d"] * n)))
    x, *ws = b.inputs
    for w in ws:
        x = b(nc.elementwise("add", "q d, d -> q d"), x, w)
    return b.build(x)


def _values_counted_per_box(diagram: Diagram, monkeypatch) -> float:
    """How many values the functor adds to or takes from a column, or multiplies out, per box (its work)."""
    count = [0]
    live = importlib.import_module("napkin_cat.cost.live")
    columns = importlib.import_module("napkin_cat.cost.columns")
    shift = live.Live.shift

    def counting_shift(self, *args, **kw):
        count[0] += 1
        return shift(self, *args, **kw)
    monkeypatch.setattr(live.Live, "shift", counting_shift)
    def counting(real):
        def numel(arr):
            count[0] += 1
            return real(arr)
        return numel
    for module in (iocost, columns):
        if hasattr(module, "numel"):
            monkeypatch.setattr(module, "numel", counting(module.numel))
    nc.cost(diagram)
    monkeypatch.undo()
    return count[0] / len(diagram.boxes[0].arg.boxes[0].arg.boxes)


@pytest.mark.parametrize("make", [lambda n: nc.stream(nc.kernel(weighted_chain(n)), "q", "s_q", sliced=True),
                                  lambda n: nc.stream(nc.kernel(weighted_chain(n) >> nc.reduce("sum", "q d -> d")),
                                                      "q", "s_q")], ids=["sliced", "reduced"])
def test_work_per_box_of_a_stream_does_not_grow_with_its_length(make, monkeypatch):
    """A stream's columns are read item by item with the live data kept up to date (on main, each of the n items
    of the trip re-added every weight still live: work per box grew with n)."""
    short, long = (_values_counted_per_box(make(n), monkeypatch) for n in (20, 80))
    assert long <= 1.5 * short, (short, long)
