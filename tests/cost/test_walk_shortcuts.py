"""The cost walk's shortcuts (issue 35): each against its specification, on random programs.

* the live data hold their monomials by number (:mod:`napkin_cat.cost.live`): a column is still Σ numel over the
  distinct live values per level, summed here directly in sympy, in both arithmetics, over the same arrays (an array
  costed in one arithmetic and then the other keeps both numberings);
* a column whose totals are the last one's is that very column (:meth:`~napkin_cat.cost.live.Live.column`), and the
  walk does not pool it again (``iocost``): the record equals the walk that re-sums every level and so pools every
  column (:class:`~napkin_cat.cost.live.Resummed`), field by field, columns in order, on random partitioned
  algorithms (:func:`napkin_cat.testing.checks.algorithm`), and the shortcut does fire;
* a diagram's traversal plan (:func:`napkin_cat.syntax.wiring.plan`) is its own: its layers, arities and kinds, read
  again after other diagrams were walked.
"""
import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.iocost import cost
from napkin_cat.cost.live import Resummed, numel
from napkin_cat.cost.polynomial import POLYNOMIAL, SYMPY
from napkin_cat.cost.record import Cost
from napkin_cat.errors import NapkinError, NotPolynomialError
from napkin_cat.syntax.flat import is_structural, layers
from napkin_cat.syntax.wiring import plan
from napkin_cat.testing.checks import algorithm
from napkin_cat.testing.programs import random_program



def _arrays(rng, k: int) -> list:
    """``k`` arrays over axes of symbolic and concrete sizes at levels 0-2 (some equal: interned, one object)."""
    axes = {"q": None, "d": None, "x": 12, "e": 5}
    out = []
    for _ in range(k):
        names = sorted(rng.choice(list(axes), size=int(rng.integers(0, 3)), replace=False))
        level = int(rng.integers(0, 3))
        (arr,) = nc.types(" ".join(names), **{n: s for n, s in axes.items() if s is not None and n in names}).inside
        out.append(arr.replace(level=level))
    return out


def _direct(on: dict) -> dict:
    """Level → Σ numel over the distinct live values, summed in sympy (the paper's column)."""
    col = {}
    for arr in on.values():
        col[arr.level] = col.get(arr.level, 0) + numel(arr)
    return {lvl: sympy.expand(v) for lvl, v in col.items() if sympy.expand(v) != 0}


@pytest.mark.parametrize("seed", range(6))
def test_live_columns_are_the_sums_of_the_live_values_in_both_arithmetics(seed):
    rng = np.random.default_rng(seed)
    arrays = _arrays(rng, 8)
    for arithmetic in (SYMPY, POLYNOMIAL, SYMPY):         # the same arrays, one arithmetic after the other
        data, wires, on = arithmetic.live(), {}, {}
        for step in range(40):
            vid = int(rng.integers(0, len(arrays)))
            if wires.get(vid) and rng.random() < 0.5:
                data.take([(vid, arrays[vid])])
                wires[vid] -= 1
                if not wires[vid]:
                    del on[vid]
            else:
                k = int(rng.integers(1, 3))
                data.put([(vid, arrays[vid])] * k)          # (k = 2: a copy, one value on two wires)
                wires[vid] = wires.get(vid, 0) + k
                on[vid] = arrays[vid]
            got = {lvl: (v.as_expr() if arithmetic is POLYNOMIAL else v) for lvl, v in data.column().items()}
            assert got == _direct(on), (arithmetic.name, step)


def _fields(c: Cost) -> tuple:
    return (dict(c.H), dict(c.H_bytes), {lvl: list(cols) for lvl, cols in c.columns.items()}, dict(c.flops),
            repr(c.groups), repr(c.streams))


def _costed(alg, arithmetic):
    try:
        return _fields(cost(alg, arithmetic=arithmetic, ops=False))
    except NotPolynomialError:
        return None


def test_a_column_not_pooled_again_changes_nothing(monkeypatch):
    pooled = [0]
    add_column = Cost.add_column

    def counting(self, col, **kw):
        pooled[0] += 1
        return add_column(self, col, **kw)
    monkeypatch.setattr(Cost, "add_column", counting)
    saved, tried = 0, 0
    for seed in range(12):
        p = random_program(seed, n_ops=4)
        try:
            alg, _ = algorithm(p, seed)
        except NapkinError:
            continue
        pooled[0] = 0
        fast = [_costed(alg, a) for a in (SYMPY, POLYNOMIAL)]
        shortcut = pooled[0]
        with monkeypatch.context() as m:       # the specification: every column pooled, every level re-summed
            m.setattr(type(SYMPY), "live", lambda self: Resummed())
            m.setattr(type(POLYNOMIAL), "live", lambda self: Resummed(self.terms_of, self.total))
            pooled[0] = 0
            spec = [_costed(alg, a) for a in (SYMPY, POLYNOMIAL)]
        assert fast == spec, p.call
        assert pooled[0] >= shortcut
        saved, tried = saved + pooled[0] - shortcut, tried + 1
    assert tried >= 8 and saved > 0         # the shortcut fired: some column was the last one again


def test_a_diagrams_plan_is_its_own():
    diagrams = [random_program(seed).diagram for seed in range(8)] + [nc.library.attention()]
    want = [[(o, b, len(b.dom), is_structural(b)) for o, b in layers(d)] for d in diagrams]
    for _ in range(2):                     # read again after every other diagram's was made
        for d, w in zip(diagrams, want):
            assert list(plan(d)) == w
    assert plan(diagrams[0]) is plan(diagrams[0])
