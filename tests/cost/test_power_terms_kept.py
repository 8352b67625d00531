"""``power_terms`` is a pure function of its form, remembered (issue 35): the block's symbolic derive reads 161 forms
of which 108 differ; and where a form is no sum of powers its error is raised without printing the form, printed
only where read (the block's largest forms took 0.6 s to print in messages nobody read).

Second route: the terms read off by expanding and factoring (``by_factor`` of ``test_power_terms``, the definition),
and the message the f-string prints.  Counted, never timed: the expansions (``optimum_record.expand``) and sympy's
printer are counted.
"""
from __future__ import annotations

import random

import pytest
import sympy
import sympy.printing.str as sympy_str

import napkin_cat as nc
from napkin_cat.cost import optimum_record
from napkin_cat.cost.optimum import power_terms
from napkin_cat.errors import NapkinError

S = nc.symbol
M, a, d, n = (S(k) for k in "Madn")


def by_factor(expr):
    """The second route: every coefficient of ``expr`` expanded, collected by the power of ``M`` and factored."""
    out = {}
    for term in sympy.Add.make_args(sympy.expand(expr)):
        coeff, exp = term.as_coeff_exponent(M)
        out[sympy.nsimplify(-exp)] = out.get(sympy.nsimplify(-exp), 0) + coeff
    return sorted(((sympy.factor(c), b) for b, c in out.items()), key=lambda t: t[1])


def test_a_form_read_again_is_not_expanded_again_and_its_terms_are_the_definitions(monkeypatch):
    c = random.Random().randint(10 ** 3, 10 ** 6)        # a form no other call asked for
    H = (a + c) * (d + n) / M + a * d + c * n ** 2 / sympy.sqrt(M)
    expected = by_factor(H)
    expanded = []
    real = optimum_record.expand                         # (``napkin_cat.cost.expanded.expand``, as the module reads it)
    monkeypatch.setattr(optimum_record, "expand", lambda e, *x, **k: expanded.append(e) or real(e, *x, **k))
    first = power_terms(H, M)
    assert len(expanded) == 1
    first.append("changed by its reader")                # each answer is the reader's own list
    second = power_terms(H, M)
    assert len(expanded) == 1
    assert [(sympy.srepr(x), sympy.srepr(y)) for x, y in second] == \
        [(sympy.srepr(x), sympy.srepr(y)) for x, y in expected]


def test_the_error_names_the_form_and_prints_it_only_where_read(monkeypatch):
    c = random.Random().randint(10 ** 3, 10 ** 6)
    H = c * sympy.sqrt(M + d * n) + a / M
    printed = []
    real = sympy_str.sstr
    monkeypatch.setattr(sympy_str, "sstr", lambda e, **k: printed.append(e) or real(e, **k))
    for _ in range(2):                                   # raised each time, also when remembered
        with pytest.raises(NapkinError) as err:
            power_terms(H, M)
    assert printed == []
    monkeypatch.setattr(sympy_str, "sstr", real)
    assert str(err.value) == f"{H} is not a sum of powers of {M}"
