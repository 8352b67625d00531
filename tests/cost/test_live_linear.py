"""The cost functor linear in boxes on every shape (issue 35, item 4): work counted, not timed.

A column's total was a sympy ``Add`` of every live monomial, sorted afresh (``Basic.compare``) whenever a layer
changed it, and ``nc.cost(d, sizes=…)`` evaluated each such total at the sizes: on a deep MLP whose every layer has
its own width (its weights, of distinct sizes, live until used) and a balanced tree of matrix products, every column
holds most of the wires, so both grew with the square of the length.  Now

* a level's sympy total keeps its terms in sympy's order (:class:`~napkin_cat.cost.ordered_sum.OrderedSum`): a
  column places the terms that changed, and its ``Add`` equals the one sympy sorts (:class:`Resummed`, the
  specification, in ``test_live_reread``), argument for argument;
* at the sizes, each level's live data is a running number (:class:`~napkin_cat.cost.live_at.LiveAt`), equal to the
  symbolic column evaluated at the sizes, the route it replaced.
"""
from __future__ import annotations

import importlib
import random

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.cost.ordered_sum import OrderedSum
from napkin_cat.syntax.axis import symbol
from napkin_cat.testing.checks import algorithm, size_env
from napkin_cat.testing.programs import random_program
from napkin_cat.testing.scaling import deep_mlp

live = importlib.import_module("napkin_cat.cost.live")
exact = importlib.import_module("napkin_cat.cost.exact_arithmetic")
ordered_sum = importlib.import_module("napkin_cat.cost.ordered_sum")


def product_tree(n: int) -> nc.Diagram:
    """A balanced tree of matrix products of the inputs c_i × c_{i+1}, i < n, level by level."""
    b = nc.Builder(nc.types(", ".join(f"c{i} c{i + 1}" for i in range(n))))
    level = [(x, i, i + 1) for i, x in enumerate(b.inputs)]
    while len(level) > 1:
        nxt = [(b(nc.einsum(f"c{a} c{m}, c{m} c{z} -> c{a} c{z}"), x, y), a, z)
               for (x, a, m), (y, _, z) in zip(level[0::2], level[1::2])]
        level = nxt + (level[-1:] if len(level) % 2 else [])
    return b.build(level[0][0])


def sizes_of(d: nc.Diagram) -> dict:
    names = sorted({a.name for arr in (*d.dom.inside, *d.cod.inside) for a in arr.axes})
    return {name: 3 + k % 5 for k, name in enumerate(names)}


def unfused_deep_mlp(k: int) -> nc.Diagram:
    """:func:`deep_mlp` with every box a kernel of its own: each reads the column without its inputs (a region)."""
    return nc.unfused(deep_mlp(k))


SHAPES = {"deep mlp": (deep_mlp, 2), "product tree": (product_tree, 1), "unfused deep mlp": (unfused_deep_mlp, 2)}


def _symbolic_work_per_box(d, monkeypatch) -> float:
    """Terms the functor places or sums into its columns' totals, per box: each term an ordered sum moves, and each
    term of a total summed afresh (:func:`~napkin_cat.cost.live.summed_afresh`)."""
    count = [0]
    real_set, real_afresh = OrderedSum.set, live.summed_afresh

    def placing(self, m, c):
        count[0] += 1
        return real_set(self, m, c)

    def afresh(total, items):
        items = list(items)
        count[0] += len(items)
        return real_afresh(total, items)
    with monkeypatch.context() as m:
        m.setattr(OrderedSum, "set", placing)
        m.setattr(live, "summed_afresh", afresh)
        live.TOTALS.clear()
        c = nc.cost(d)
    assert c.columns[0]
    return count[0] / len(d.inside)


@pytest.mark.parametrize("shape", SHAPES)
def test_symbolic_columns_cost_what_changed_not_what_is_live(shape, monkeypatch):
    """Four times as deep, no more terms placed per box (before: a column summed every live monomial, so the work
    per box grew with the depth); each box changes a few terms (and a kernel reads its column without its inputs),
    so a few per box."""
    make, per = SHAPES[shape]
    short, long = (_symbolic_work_per_box(make(n), monkeypatch) for n in (10 * per, 40 * per))
    assert 0 < long <= 1.25 * short and long <= 16, (short, long)


def _walked_per_box(d, monkeypatch) -> float:
    """Nodes of size expressions the cost at sizes evaluates (:mod:`~napkin_cat.cost.exact_arithmetic`), per box."""
    count = [0]
    real = exact.walk

    def walking(node, env):
        count[0] += 1
        return real(node, env)
    with monkeypatch.context() as m:
        m.setattr(exact, "walk", walking)
        c = nc.cost(d, sizes=sizes_of(d))
    assert c.M[0] > 0
    return count[0] / len(d.inside)


@pytest.mark.parametrize("shape", SHAPES)
def test_columns_at_sizes_evaluate_what_enters_not_what_is_live(shape, monkeypatch):
    """At the sizes, an array's size is evaluated once, not once per column it is live in."""
    make, per = SHAPES[shape]
    short, long = (_walked_per_box(make(n), monkeypatch) for n in (10 * per, 40 * per))
    assert 0 < long <= 1.25 * short, (short, long)


def _symbolic_M_at(d, sizes) -> dict:
    """The route the running numbers replace: every symbolic column evaluated at the sizes, the largest kept."""
    env = size_env(sizes)
    return {lvl: max(value(col, env) for col in cols) for lvl, cols in nc.cost(d).columns.items()}


@pytest.mark.parametrize("seed", range(10))
def test_memory_at_sizes_is_the_symbolic_columns_at_the_sizes(seed):
    p = random_program(seed)
    alg, sizes = algorithm(p, seed)
    for d, s in ((p.diagram, dict(p.sizes)), (nc.unfused(p.diagram), dict(p.sizes)), (alg, sizes)):
        assert nc.cost(d, sizes=s).M == _symbolic_M_at(d, s)


@pytest.mark.parametrize("shape", SHAPES)
def test_memory_of_the_shapes_at_sizes_is_the_symbolic_one(shape):
    make, per = SHAPES[shape]
    d = make(6 * per)
    assert nc.cost(d, sizes=sizes_of(d)).M == _symbolic_M_at(d, sizes_of(d))


def test_ordered_sum_is_sympys_sum_argument_for_argument():
    """Random monomials set, changed and removed in any order: the total is ``sympy.Add`` of the terms (its args
    in sympy's order, a constant first), or None when none is left."""
    xs = [symbol(n) for n in "abcde"]
    rng = random.Random(7)
    monomials = [sympy.Integer(1)] + xs + [x * y for x in xs for y in xs if str(x) < str(y)] + [xs[0] ** 2 / xs[1]]
    s, now = OrderedSum(), {}
    for _ in range(400):
        m = rng.choice(monomials)
        c = rng.choice([0, 0, 1, 2, 5, sympy.Rational(3, 2)])
        s.set(m, c)
        now = {k: v for k, v in {**now, m: c}.items() if v}
        want = sympy.Add(*(ordered_sum.term(k, v) for k, v in now.items())) if now else None
        got = s.total()
        assert got == want and (got is None or got.args == want.args), (got, want)
