"""The assumption names a serialised ``Symbol`` may carry (io/exprjson.ASSUMPTIONS), read off sympy's public
``is_`` properties, against sympy's own table of defined facts (a second route: its private list, read here only)."""
import sympy
import importlib

from napkin_cat.io.exprjson import ASSUMPTIONS


def test_assumptions_are_sympys_defined_facts():
    assert ASSUMPTIONS == set(importlib.import_module("sympy.core.assumptions")._assume_defined)


def test_each_name_round_trips_on_a_symbol():
    for name in ASSUMPTIONS:
        assert getattr(sympy.Symbol("x", **{name: True}), "is_" + name) is True
    assert not {"Symbol", "scalar", "comparable", "evil"} & ASSUMPTIONS
