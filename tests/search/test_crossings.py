"""Where two closed forms cross (:mod:`napkin_cat.search.crossings`, issue 35): the closed root of ``Ha = Hb`` whose
value at the reference sizes is the crossing found by number, or None where ``Ha − Hb`` is no sum of powers of ``M``.

:func:`~napkin_cat.search.crossings.power_root` reads first whether the two forms' terms that are no power of ``M``
cancel (:func:`~napkin_cat.search.crossings.off_powers`, each form expanded once and remembered), before expanding
their difference (the block's forms of 7,000 operations met several others).  Second route: the definition, the
difference expanded and read by :func:`~napkin_cat.cost.optimum.power_terms` (it raises where the sum is not one),
on seeded random forms with radicals and quotients in ``M`` shared, with equal or different numbers, or cancelling
only once expanded; and ``sympy.solve`` for the root where they cancel.  Counted, never timed: a form met again is
not expanded again, and a crossing asked again is not solved again.
"""
from __future__ import annotations

import random

import sympy

import napkin_cat as nc
from napkin_cat.cost.optimum import power_terms
from napkin_cat.errors import NapkinError
from napkin_cat.search import crossings
from napkin_cat.search.crossings import cancel, crossing_root, off_power, off_powers

S = nc.symbol
M, a, b, d, n = (S(k) for k in "Mabdn")

#: terms no power of M: radicals of sums and quotients by sums in M (what a two-tile point's form holds)
ODD = [sympy.sqrt(M + d * n), 1 / (M + d), d * sympy.sqrt(M + a) / (M + n),
       sympy.sqrt(d) * (M + a ** 2) ** sympy.Rational(3, 2)]
#: sums of powers of M
POWERS = [a * b, a ** 2 * n / M, d * sympy.sqrt(a) / sympy.sqrt(M), (a + n) * M, b ** 3 / M ** 2]


def by_expanding(Ha, Hb) -> bool:
    """The second route: whether ``Ha − Hb`` expanded is a sum of powers of ``M``."""
    try:
        power_terms(sympy.expand(Ha - Hb), M)
    except NapkinError:
        return False
    return True


def form(rng, odd):
    """A random form: some powers of M, plus the odd terms ``odd`` each times a small number, some grouped as a
    product that only expanding splits."""
    H = sum((rng.randint(1, 5) * p for p in rng.sample(POWERS, 3)), sympy.Integer(0))
    for c, x in odd:
        H += (x * (a + c) - x * a) if rng.random() < 0.5 else c * x      # c·x, or a·x + c·x − a·x written apart
    return H


def test_the_odd_terms_cancel_exactly_where_the_difference_is_a_sum_of_powers():
    rng = random.Random(35)
    kinds = {True: 0, False: 0}
    for _ in range(60):
        shared = [(rng.randint(1, 3), x) for x in rng.sample(ODD, rng.randint(0, 2))]
        other = list(shared)
        pick = rng.random()
        if pick < 0.3 and shared:           # one shared term with another number on one side
            c, x = other[0]
            other[0] = (c + 1, x)
        elif pick < 0.5:                    # a term on one side only
            other.append((1, rng.choice(ODD)))
        Ha, Hb = form(rng, shared), form(rng, other)
        law = cancel(off_powers(Ha, M), off_powers(Hb, M))
        assert law == by_expanding(Ha, Hb), (Ha, Hb)
        kinds[law] += 1
    assert kinds[True] >= 15 and kinds[False] >= 15       # both answers met: the test reads the law on each side


def test_a_shared_radical_cancels_and_the_root_is_sympys():
    """``a²/M + x = a + x`` with ``x = d·√(M + a)/(M + n)`` written apart on one side: the root is ``M = a``."""
    x = ODD[2]
    Ha, Hb = a ** 2 / M + x * (b + 1) - x * b, a + x
    ref = {a: 40, b: 3, d: 7, n: 11}
    roots = [r for r in sympy.solve(sympy.Eq(a ** 2 / M, a), M)]    # the second route: where the rest crosses
    assert roots == [a]
    assert crossing_root(Ha, Hb, M, ref, 40.0) == a
    assert crossing_root(Ha, Hb + x, M, ref, 40.0) is None           # x left over on one side: no closed root


def test_a_form_is_expanded_once_and_a_crossing_solved_once(monkeypatch):
    """Two crossings of a new form ``Hc`` with two others expand ``Hc`` once (its terms read once); the same crossing
    asked again expands nothing."""
    c = random.Random().randint(10 ** 3, 10 ** 6)             # a form no other call asked for
    Hc = c * sympy.sqrt(M + d * n) * (a + b) + a * b / (M + a)     # (two shifts of M: solved in M itself)
    expanded = []
    real = crossings.expanded           # (sympy.expand, each repeated subexpression once: napkin_cat.cost.expanded)
    monkeypatch.setattr(crossings, "expanded", lambda e: expanded.append(e) or real(e))
    ref = {a: 40, b: 3, d: 7, n: 11}
    assert crossing_root(Hc, a ** 2 / M, M, ref, 10.0) is None
    assert crossing_root(b ** 2 / M, Hc, M, ref, 10.0) is None
    assert sum(1 for e in expanded if e == Hc) == 1
    before = len(expanded)
    assert crossing_root(Hc, a ** 2 / M, M, ref, 10.0) is None
    assert len(expanded) == before


def test_a_crossing_asked_again_is_not_solved_again(monkeypatch):
    c = random.Random().randint(10 ** 3, 10 ** 6)             # forms no other call asked for
    x = sympy.sqrt(M + d) + 1 / (M + n)                       # (two shifts of M: solved in M itself)
    Ha, Hb = c * a ** 2 / M + x, c * a + x
    solved = []
    real = crossings.power_root                               # (a linear crossing: no sympy.roots to count)
    monkeypatch.setattr(crossings, "power_root", lambda *x, **k: solved.append(x) or real(*x, **k))
    ref = {a: 40, d: 7, n: 11}
    assert [crossing_root(Ha, Hb, M, ref, 40.0) for _ in range(2)] == [a, a] and len(solved) == 1


def by_collecting(term) -> bool:
    """The second route of :func:`off_power`: sympy's ``as_coeff_exponent`` (a ``collect``), its coefficient's ``M``."""
    return bool(term.as_coeff_exponent(M)[0].has(M))


def test_a_term_is_off_the_powers_as_sympys_coefficient_says():
    """Every term of the random forms above, of their shifts, and of the forms a symbolic derive of attention,
    grouped-query attention and a SwiGLU MLP compares, expanded: :func:`off_power` (its factors read) is what
    ``as_coeff_exponent`` says; and on terms whose sums collect to a power of ``M`` (an integer power, a radical).
    Mutations (``collected_power``): every sum read as one in ``M`` fails on grouped-query attention's
    ``1/(−M√g + Mg)``; a radical of a sum that collects to ``M^k``·more split whatever the rest's sign fails on
    ``√(Ma − M)``."""
    rng = random.Random(36)
    forms = [form(rng, [(rng.randint(1, 3), x) for x in rng.sample(ODD, rng.randint(0, 3))]) for _ in range(30)]
    for f in (nc.library.attention(), nc.library.grouped_query_attention(), nc.library.swiglu_mlp()):
        forms += [sympy.sympify(H) for _, H in nc.derive(f, memory="M").candidates]
    forms += [H.xreplace({M: M + d * n}) for H in forms[:10]]
    terms = [t for H in forms for t in sympy.Add.make_args(sympy.expand(H))]
    terms += [a * sympy.sqrt(M * a - M), d * sympy.sqrt(M * a + M * b), n / (M * a - M * b) ** 2, sympy.log(M) * a,
              d / (M * sympy.sqrt(M + n) + M * a), M ** a * d]     # (sums in M collected, a radical's sign unknown)
    kinds = [by_collecting(t) for t in terms]
    assert [off_power(t, M) for t in terms] == kinds
    assert sum(kinds) >= 30 and len(kinds) - sum(kinds) >= 30        # both answers met
    m, y = sympy.symbols("m y")     # signs unknown: a radical of m·(y − 1) is not split, a square is
    for t in (a * sympy.sqrt(m * y - m), d / (m * y - m * b) ** 2, d * sympy.sqrt(m * a + m * b)):
        assert off_power(t, m) == bool(t.as_coeff_exponent(m)[0].has(m))
