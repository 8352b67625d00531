"""The search's arithmetic and ``Cost.M`` linear in boxes (issue 35, item 4): work counted, not timed.

* A column's :class:`~napkin_cat.cost.polynomial.Poly` total (``cost(d, arithmetic=POLYNOMIAL)``, what the search
  costs its candidates in) was built afresh from every live term whenever a layer changed it, and hashed term by
  term when the record pooled it: on a balanced tree of products or a deep MLP with its own width per layer (most
  wires live in every column) that is the square of the length.  Each level's total is now kept as its terms change
  (:class:`~napkin_cat.cost.poly_sum.PolySum`), with the hash of its terms' frozenset.
* ``Cost.M``'s :func:`~napkin_cat.cost.maxima.column_max` compared every pair of columns; it now compares each
  column with the few current maxima that could bound it or that it could bound
  (:func:`~napkin_cat.cost.maxima.undominated`), and keeps exactly the columns the pairwise rule kept.
"""
from __future__ import annotations

import importlib
import random
import sys

import pytest
import sympy

from napkin_cat.cost.iocost import cost
from napkin_cat.cost.maxima import column_max, undominated
from napkin_cat.cost.poly_sum import SAME_AS_FROZENSET, PolySum
from napkin_cat.cost.polynomial import POLYNOMIAL, Poly
from napkin_cat.syntax.axis import symbol
from tests.cost.test_live_linear import deep_mlp, product_tree, unfused_deep_mlp

live = importlib.import_module("napkin_cat.cost.live")
maxima = importlib.import_module("napkin_cat.cost.maxima")

SHAPES = {"deep mlp": (deep_mlp, 2), "product tree": (product_tree, 1), "unfused deep mlp": (unfused_deep_mlp, 2)}


def _poly_work_per_box(d, monkeypatch) -> float:
    """Terms the search's arithmetic places into its running totals or sums afresh into a total, per box."""
    count = [0]
    real_set, real_afresh = PolySum.set, live.summed_afresh

    def placing(self, m, c):
        count[0] += 1
        return real_set(self, m, c)

    def afresh(total, items):
        items = list(items)
        count[0] += len(items)
        return real_afresh(total, items)
    with monkeypatch.context() as m:
        m.setattr(PolySum, "set", placing)
        m.setattr(live, "summed_afresh", afresh)
        live.TOTALS.clear()
        c = cost(d, arithmetic=POLYNOMIAL)
    assert c.columns[0]
    return count[0] / len(d.inside)


@pytest.mark.parametrize("shape", SHAPES)
def test_poly_columns_cost_what_changed_not_what_is_live(shape, monkeypatch):
    """Four times as deep, no more terms per box (before: every changed column summed all its live terms)."""
    make, per = SHAPES[shape]
    short, long = (_poly_work_per_box(make(n), monkeypatch) for n in (10 * per, 40 * per))
    assert 0 < long <= 1.25 * short and long <= 16, (short, long)


@pytest.mark.parametrize("shape", SHAPES)
def test_poly_columns_are_the_resummed_ones_and_hash_as_them(shape, monkeypatch):
    """The running totals are the totals summed afresh (:class:`~napkin_cat.cost.live.Resummed`, the
    specification), column for column, and each hashes as the polynomial of its terms does."""
    make, per = SHAPES[shape]
    d = make(8 * per)
    new = cost(d, arithmetic=POLYNOMIAL)
    with monkeypatch.context() as m:
        m.setattr(type(POLYNOMIAL), "live", lambda self: live.Resummed(self.terms_of, self.total))
        old = cost(d, arithmetic=POLYNOMIAL)
    assert new.H == old.H and new.flops == old.flops and new.columns == old.columns
    for cols in new.columns.values():
        for c in cols:
            assert hash(c) == hash(Poly(dict(c.terms))), c


@pytest.mark.skipif(sys.implementation.name != "cpython", reason="the frozenset hash copied is CPython's")
def test_running_hash_is_the_frozensets():
    """Terms set, changed and removed at random: the running hash is ``hash(frozenset(items))`` all along."""
    assert SAME_AS_FROZENSET
    rng = random.Random(3)
    s = PolySum(Poly.hashed)
    keys = [(), (("a", 1),), (("a", 1), ("b", 2)), (("c", -1),), "x", 7]
    for _ in range(300):
        m, c = rng.choice(keys), rng.choice([0, 0, 1, 2, -3, 5])
        s.set(m, c)
        assert s.hash() == hash(frozenset(s.of.items())), s.of


def _old_rule(terms):
    """The pairwise rule ``column_max`` applied before (the specification of :func:`undominated`)."""
    return [i for i, t in enumerate(terms)
            if not any(j != i and maxima.dominated(t, terms[j]) and (not maxima.dominated(terms[j], t) or j < i)
                       for j in range(len(terms)))]


@pytest.mark.parametrize("seed", range(30))
def test_undominated_keeps_what_the_pairwise_rule_kept(seed):
    """Random columns over a few monomials (ties, zero and negative coefficients, columns never compared)."""
    rng = random.Random(seed)
    monomials = ["1", "a", "b", "ab", "c"]
    terms = []
    for _ in range(rng.randint(1, 25)):
        if rng.random() < 0.08:
            terms.append(None)
            continue
        t = {m: rng.choice([1, 1, 2, 3, -1, 0]) for m in rng.sample(monomials, rng.randint(1, 4))}
        terms.append(t)
        if rng.random() < 0.2:
            terms.append(dict(t))
    assert undominated(terms) == _old_rule(terms)


def _comparisons_per_column(d, monkeypatch) -> float:
    count = [0]
    real = maxima.undominated
    with monkeypatch.context() as m:
        m.setattr(maxima, "undominated", lambda terms: real(terms, count))
        c = cost(d)
        assert c.M[0] != 0
    return count[0] / len(c.columns[0])


def test_memory_compares_each_column_with_a_few_maxima(monkeypatch):
    """A deep MLP's columns (each layer its own width: none bounds another) four times as many, no more
    comparisons per column (before: every pair)."""
    short, long = (_comparisons_per_column(deep_mlp(n), monkeypatch) for n in (20, 80))
    assert long <= 1.25 * short and long <= 4, (short, long)


def _reference_max(cols) -> list:
    """The columns ``column_max(cols, exact=False)`` kept before: each expanded by sympy, compared pairwise in sympy's
    arithmetic."""
    def terms(c):
        out = sympy.expand(c).as_coefficients_dict()
        return out if all(k == 1 or k.is_positive for k in out) else None

    def below(b, a):
        return a is not None and b is not None and all(a.get(m, 0) - b.get(m, 0) >= 0 for m in set(a) | set(b))
    ts = [terms(c) for c in cols]
    return [c for i, c in enumerate(cols)
            if not any(j != i and below(ts[i], ts[j]) and (not below(ts[j], ts[i]) or j < i) for j in range(len(ts)))]


@pytest.mark.parametrize("seed", range(12))
def test_column_max_keeps_the_columns_it_kept(seed):
    """Random columns, expanded or not (a product of sums), with rational coefficients: the same arguments."""
    rng = random.Random(seed)
    a, b, c = symbol("a"), symbol("b"), symbol("c")
    pieces = [a, b, c, a * b, b * c, a / c, sympy.Integer(1)]
    cols = []
    for _ in range(rng.randint(9, 30)):
        col = sum(rng.choice([1, 2, sympy.Rational(1, 2), sympy.Rational(3, 2)]) * p
                  for p in rng.sample(pieces, rng.randint(1, 4)))
        cols.append(col if rng.random() < 0.7 else sympy.Mul(col, a + 1, evaluate=False))
    cols = list(dict.fromkeys(cols))
    got = column_max(cols, exact=False)
    want = _reference_max(cols)
    assert len(want) > 1 and isinstance(got, sympy.Max) and set(got.args) == set(want) and len(got.args) == len(want)
