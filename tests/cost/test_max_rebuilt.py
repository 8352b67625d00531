"""A cost's peak memory (``napkin_cat.cost.maxima.Max``) is the largest column however sympy rebuilds it.

sympy compares the arguments of a ``Max`` naming ``Max`` and ``Min`` by identity, so a subclass made by sympy's own
constructor kept the first of two numbers: ``nc.cost(attention).M[0].xreplace(sizes)`` and ``.evalf(subs=sizes)``
read 196,608 where the peak is 1,114,112 (d = 64, q = x = 1024).  The second route here is Python's ``max`` over the
columns, each evaluated with Python integers (no sympy).
"""
from __future__ import annotations

import pickle
import random

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.cost.maxima import Max, column_max


def _by_ints(columns, env: dict) -> int:
    """The largest column at ``env`` (names to ints), each column's terms evaluated in Python integers."""
    values = []
    for col in columns:
        total = 0
        for term, coeff in sympy.expand(col).as_coefficients_dict().items():
            value = int(coeff)
            for base, exp in term.as_powers_dict().items():
                value *= 1 if base == 1 else env[str(base)] ** int(exp)
            total += value
        values.append(total)
    return max(values)


def _equal(got, want: int) -> bool:
    """An exact number equal to ``want``, or ``evalf``'s float of it (sympy's ``Float(7) == 7`` is False)."""
    return float(got) == float(want) if isinstance(got, sympy.Float) else got == want


def _rebuilt(peak, at: dict) -> dict:
    """The ways a sympy user puts numbers into an expression, each as a number."""
    return {"subs": peak.subs(at), "xreplace": peak.xreplace(at), "evalf(subs=)": peak.evalf(subs=at),
            "func(*args) then xreplace": peak.func(*peak.args).xreplace(at),
            "pickled then xreplace": pickle.loads(pickle.dumps(peak)).xreplace(at)}


@pytest.mark.parametrize("name", ["attention", "causal_attention", "mlp", "swiglu", "linear_cross_entropy"])
def test_a_library_costs_peak_is_its_largest_column_at_numbers(name):
    cost = nc.cost(getattr(nc.library, name)())
    rng = random.Random(name)
    for level, peak in cost.M.items():
        columns = cost.columns[level]
        for _ in range(5):
            env = {str(s): rng.choice([1, 7, 64, 1024, 4096]) for s in peak.free_symbols}
            at = {s: sympy.Integer(env[str(s)]) for s in peak.free_symbols}
            want = _by_ints(columns, env)
            for how, got in _rebuilt(peak, at).items():
                assert _equal(got, want), (name, level, env, how, got, want)


def test_random_peaks_rebuilt_are_the_largest_column():
    """Columns of random monomials over three sizes, pruned (``exact=False``: the arguments left as they are) and
    not; every rebuild at random sizes is the largest column by Python integers."""
    rng = random.Random(0)
    names = ["a", "b", "c"]
    syms = [nc.symbol(n) for n in names]
    for trial in range(16):
        columns = []
        for _ in range(rng.randint(2, 6)):
            col = sum(rng.randint(1, 4) * syms[rng.randrange(3)] ** rng.randint(0, 2) * syms[rng.randrange(3)]
                      for _ in range(rng.randint(1, 3)))
            columns.append(col)
        for exact in (True, False):
            peak = column_max(columns, exact=exact)
            if not isinstance(peak, Max):
                continue
            env = {n: rng.randint(1, 50) for n in names}
            at = {s: sympy.Integer(env[str(s)]) for s in syms}
            want = _by_ints(columns, env)
            for how, got in _rebuilt(peak, at).items():
                assert _equal(got, want), (trial, exact, columns, env, how, got, want)


def test_a_partial_rebuild_stays_a_lazy_max_with_the_same_value():
    """Numbers for some sizes only: still this class (its ``subs`` stays linear), and equal in value to sympy's
    ``Max`` of the columns once the rest are put in."""
    a, b, c = (nc.symbol(n) for n in "abc")
    columns = [a * b, b * c, a * c, a + b + c]
    peak = column_max(columns, exact=False)
    part = peak.xreplace({a: sympy.Integer(3)})
    assert isinstance(part, Max)
    assert part.subs({b: 5, c: 2}) == sympy.Max(*columns).subs({a: 3, b: 5, c: 2}) == 15


def test_a_symbolic_answers_pieces_are_chosen_alike_by_subs_and_xreplace():
    """layer_norm's symbolic H has a piece that ends at ``Max(4d, 3d + 1)``: at memories on either side of it the
    Piecewise read with ``xreplace`` and with ``subs`` is one number."""
    r = nc.derive(nc.library.layer_norm(), memory="M")
    assert any(isinstance(a, Max) for a in sympy.preorder_traversal(r.H))
    d, n, M = (next(s for s in r.H.free_symbols if str(s) == k) for k in ("d", "n", "M"))
    for dv in (1, 2, 64):
        for mv in (3 * 40, 4 * dv - 1, 4 * dv, 3 * dv + 1, 4 * dv + 1, 10 ** 6):
            at = {d: sympy.Integer(dv), n: sympy.Integer(40), M: sympy.Integer(mv)}
            assert r.H.xreplace(at) == r.H.subs(at), (dv, mv)
