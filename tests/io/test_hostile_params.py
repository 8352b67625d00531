"""A document's box whose type or numeric parameter is of the wrong kind is refused, typed, where it is read.

Found from outside (issue 31, checked again, by mutating the JSON of library algorithms at random nodes): a box
whose ``"type"`` is an object escaped the reader's size check as ``TypeError: unhashable type: 'dict'``; a
SoftMax whose ``beta`` is a list (``[["a", "a"]]``) loaded and then ``nc.evaluate`` raised numpy's
``UFuncTypeError`` and ``nc.codegen.c`` Python's ``TypeError``; ``nc.softmax(..., beta=1j)`` was accepted (a
complex inverse temperature), and a ``beta`` of ``sqrt(-d)`` raised sympy's "Cannot convert complex to float".
The parameter's one reading point (``Core.value``, and the printers' ``param`` and ``number``) now refuses what
is not a real number, naming what is legal.

Also: a plain ``sympy.Symbol("d")`` in a parameter, a tile or a size is the sizes' ``d`` (``nc.symbol("d")``, a
positive integer): before, ``sizes={"d": 4}`` never bound it and the error asked for the ``d`` that was given.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import sympy

import napkin_cat as nc

SIZES = {"q": 3, "x": 4, "d": 2}


def _attention_json(kernel: bool = False) -> dict:
    d = nc.library.attention()
    return json.loads(nc.dumps(nc.kernel(d) if kernel else d))


def _softmax_box(doc: dict) -> dict:
    found = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("kind") == "softmax":
                found.append(node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)
    assert len(found) == 1, found
    return found[0]


def _inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((3, 2)), rng.standard_normal((4, 2)), rng.standard_normal((4, 2))


@pytest.mark.parametrize("kind", [{}, {"expr": "0"}, ["swap"], 7])
def test_a_box_type_of_the_wrong_kind_is_refused_by_the_reader(kind):
    doc = _attention_json()
    doc["diagram"]["layers"][0]["box"]["type"] = kind
    with pytest.raises(nc.SerialisationError, match=r"diagram\.layers\[0\]"):
        nc.loads(json.dumps(doc))


@pytest.mark.parametrize("beta", [[["a", "a"]], [1, 2], "d", {"dict": {"a": 1}}])
def test_a_beta_that_is_not_a_number_is_refused_by_evaluate_run_and_codegen(beta):
    doc = _attention_json(kernel=True)
    _softmax_box(doc)["params"]["beta"] = beta
    d = nc.loads(json.dumps(doc))
    with pytest.raises(nc.SignatureError, match="a numeric parameter is a real number"):
        nc.evaluate(d, *_inputs(), sizes=SIZES)
    p = nc.plan(d, SIZES)
    with pytest.raises(nc.SignatureError, match="a numeric parameter is a real number"):
        p.run(*_inputs())
    with pytest.raises(nc.CodegenError, match="is a real number"):
        nc.codegen.c(p)


def test_a_beta_complex_at_the_sizes_is_refused_and_a_real_one_computes_softmax():
    d = sympy.Symbol("d")   # a plain sympy symbol (no assumptions): bound by sizes={"d": …} as the sizes' own d
    x = np.random.default_rng(1).standard_normal((3, 4))
    with pytest.raises(nc.SignatureError, match=r"must be a number \(a real one\)"):
        nc.softmax("q x", over="x", beta=1j)
    with pytest.raises(nc.SignatureError, match=r"must be a number \(a real one\)"):
        nc.softmax("q x", over="x", beta=sympy.sqrt(-d))          # imaginary at every size
    bad = nc.softmax("q x", over="x", beta=sympy.sqrt(1 - d))   # real at d = 1 only
    with pytest.raises(nc.SignatureError, match=r"got sqrt\(1 - d\) = sqrt\(3\)\*I at the sizes given"):
        nc.evaluate(bad, x, sizes={"d": 4})
    good = nc.softmax("q x", over="x", beta=1 / sympy.sqrt(d))   # the second route: softmax from its formula
    z = np.exp(x / 2)
    np.testing.assert_allclose(nc.evaluate(good, x, sizes={"d": 4}), z / z.sum(axis=1, keepdims=True), rtol=1e-12)


def test_a_plain_sympy_symbol_is_the_sizes_symbol_of_its_name():
    """A tile ``sympy.Symbol("g")``: the grouped product costs ``ab + ⌈a/g⌉·bc + ac`` (from the maths) at g = 3."""
    k = nc.kernel(nc.einsum("a b, b c -> a c"))
    g = nc.group(k, "a", sympy.Symbol("g"))
    a, b, c = 5, 4, 2
    assert nc.cost(g, sizes={"a": a, "b": b, "c": c, "g": 3}).H[1] == a * b + 2 * b * c + a * c
    n = nc.einsum("a b, b c -> a c", sizes={"a": 2 * sympy.Symbol("n")})
    assert n.dom.inside[0].axes[0].size == 2 * nc.symbol("n")
