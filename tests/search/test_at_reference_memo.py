"""``crossings.at_reference`` keeps its answers per (expression, sizes): the envelope reads each breakpoint at every
drawing (its spans and where it drops an empty piece).  The memo is checked against the slow exact route, ``subs``
then ``float`` on every call, on the breakpoints of symbolic answers, and a memo keyed on the expression alone (the
mutation) is caught: the same breakpoint at two sets of sizes gives two numbers.
"""
import itertools

import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import NapkinError
from napkin_cat.search.crossings import at_reference

L = nc.library


def slow(expr, env) -> float:
    """The exact route: ``subs`` then ``float``, nothing kept."""
    return float(sympy.sympify(expr).subs(env))


@pytest.mark.parametrize("f, sizes", [(L.grouped_query_attention(), {"q": 96, "x": 120, "d": 24, "h": 3, "g": 2}),
                                      (L.mlp(), None)])
def test_every_breakpoint_as_the_exact_route(f, sizes):
    r = nc.derive(f, memory="M", reference=sizes)
    bounds = [b for g in r.regimes for b in (g.lower, g.upper) if b is not None and b != sympy.oo]
    symbols = sorted(set().union(*(sympy.sympify(b).free_symbols for b in bounds)), key=str)
    assert symbols, "no breakpoint in the sizes"
    for k, env in enumerate(({s: 64 + 8 * i for i, s in enumerate(symbols)},
                             {s: 1000 + 3 * i for i, s in enumerate(symbols)})):
        for b, _ in itertools.product(bounds, range(2)):      # (read twice: the second from the memo)
            assert at_reference(b, env) == slow(b, env)
            assert at_reference(b, dict(reversed(list(env.items())))) == slow(b, env)    # (order of the sizes)


def test_one_expression_at_two_sizes():
    n, m = sympy.symbols("n m", positive=True)
    e = n ** 2 / (m + 1)
    assert at_reference(e, {n: 4, m: 1}) == 8.0
    assert at_reference(e, {n: 4, m: 3}) == 4.0       # (a memo keyed on the expression alone answers 8.0)
    assert at_reference(e, {n: 4, m: 1}) == 8.0


def test_not_a_number_is_typed_every_time():
    n, m = sympy.symbols("n m", positive=True)
    for _ in range(2):      # (an error is not kept: asked again, it is raised again)
        with pytest.raises(NapkinError, match="cannot evaluate"):
            at_reference(n + m, {n: 1})
