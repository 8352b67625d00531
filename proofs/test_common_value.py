"""Obligations of ``common_value`` (``rewrites.basic``): two boxes computing one value, f(x) ⊗ f(x), are one box
whose value is copied, copy ∘ f(x); on random instances (maps of one and two operands, scales, reductions,
contractions, SoftMax; the two read by different readers or as outputs, other work between them) and random
variants (axes renamed, extra axes weaved anywhere), exactly; one box fewer after the copy law; mutants that merge
boxes with other parameters or other operand orders fail; what is not one value (another parameter, the operands the
other way round for a kind whose record does not say it commutes, a transfer) is not merged; ``x + y`` and
``y + x`` are."""
from dataclasses import replace

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.rewriting import ObligationError, RuleSet
from napkin_cat.rewriting.closed import source
from napkin_cat.syntax.primitive import kind_of
from rewrites import SIMPLIFY
from rewrites.basic import boxes, common_value, computes, twins

proves = pytest.mark.proves


@proves("common_value")
def test_one_value_computed_twice_is_computed_once():
    proof = common_value.obligation.discharge(common_value, trials=24, variants=12)
    assert proof.rewrites >= 24 and proof.varied >= 6 and proof.cost_checked
    assert proof.max_error == 0.0


def _kind_and_arrays(net, nid):
    """A mutant's key: the kind and the arrays on the ports, and the values read; the parameters forgotten."""
    node = net.nodes[nid]
    if node.kind != "box":
        return None
    return node.spec.kind, node.dom, node.cod, tuple(source(net, w) for w in net.ins[nid])


def _any_order(net, nid):
    """A mutant's key: the values read in any order (as if every kind commuted)."""
    key = computes(net, nid)
    return None if key is None else (key[0], tuple(sorted(key[1], key=str)))


@pytest.mark.parametrize("key", [_kind_and_arrays, _any_order], ids=["parameters forgotten", "ports in any order"])
def test_a_mutant_fails_the_proof(key):
    mutant = replace(common_value, pattern=twins(key))
    with pytest.raises(ObligationError, match="is unsound"):
        mutant.obligation.discharge(mutant, trials=24)


def _two(make, sig="n d"):
    b = nc.Builder(nc.types(f"{sig}, {sig}"))
    X, Y = b.inputs
    return b.build(*make(b, X, Y))


@pytest.mark.parametrize("make", [
    lambda b, X, Y: (b(nc.elementwise("scale", "n d", const=2), X), b(nc.elementwise("scale", "n d", const=3), X)),
    lambda b, X, Y: (b(nc.elementwise("sub", "n d, n d -> n d"), X, Y),
                     b(nc.elementwise("sub", "n d, n d -> n d"), Y, X)),
    lambda b, X, Y: (b(nc.elementwise("max", "n d, n d -> n d"), X, Y),
                     b(nc.elementwise("max", "n d, n d -> n d"), Y, X)),
    lambda b, X, Y: (b(nc.elementwise("exp", "n d"), X), b(nc.elementwise("exp", "n d"), Y)),
    lambda b, X, Y: (b(nc.reduce("sum", "n d -> n"), X), b(nc.reduce("sum", "n d -> d"), X)),
    lambda b, X, Y: (b(nc.softmax("n d", over="d"), X), b(nc.softmax("n d", over="d", beta=2), X)),
], ids=["scales 2 and 3", "x - y and y - x", "max(x, y) and max(y, x) (its record: not commutative, ±0)",
        "exp of two inputs", "sums over other axes", "SoftMax at other temperatures"])
def test_what_is_not_one_value_is_not_merged(make):
    assert common_value.matches(_two(make)) == []


def test_transfers_are_not_merged():
    t = nc.types("n d", level=1).inside[0]
    b = nc.Builder(nc.Ty(t))
    (X,) = b.inputs
    d = b.build(b(nc.transfer("save", t), X), b(nc.transfer("save", t), X))
    assert common_value.matches(d) == []


def test_a_chain_computed_twice_is_one_chain():
    """exp(x − y) computed twice: the two subtractions merge, then the two exponentials (their inputs one value
    now); one box of each is left, both outputs read it, and the values are numpy's."""
    b = nc.Builder(nc.types("n d, n d"))
    X, Y = b.inputs
    outs = [b(nc.elementwise("exp", "n d"), b(nc.elementwise("sub", "n d, n d -> n d"), X, Y)) for _ in range(2)]
    d = b.build(*outs)
    r = nc.rewrite(d, RuleSet((common_value,)) + SIMPLIFY)
    assert [s.rule for s in r.trace.steps].count("common_value") == 2
    assert boxes(r.diagram) == 2 and boxes(d) == 4
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    for got in nc.evaluate(r.diagram, x, y):
        np.testing.assert_array_equal(got, np.exp(x - y))
    assert nc.isomorphic(r.trace.replay(d), r.diagram)


@pytest.mark.parametrize("kind_name", ["add", "mul"])
def test_a_commutative_kind_read_either_way_is_one_value(kind_name):
    """x ∘ y and y ∘ x for a kind whose record says it commutes: merged, and exactly equal to numpy's."""
    d = _two(lambda b, X, Y: (b(nc.elementwise(kind_name, "n d, n d -> n d"), X, Y),
                              b(nc.elementwise(kind_name, "n d, n d -> n d"), Y, X)))
    assert kind_of(kind_name).commutative
    r = nc.rewrite(d, RuleSet((common_value,)) + SIMPLIFY)
    assert boxes(r.diagram) == 1
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    for got in nc.evaluate(r.diagram, x, y):
        np.testing.assert_array_equal(got, {"add": np.add, "mul": np.multiply}[kind_name](x, y))


def test_a_broadcast_read_the_other_way_round_is_left():
    b = nc.Builder(nc.types("n d, n"))
    X, c = b.inputs
    d = b.build(b(nc.elementwise("add", "n d, n -> n d"), X, c), b(nc.elementwise("add", "n, n d -> n d"), c, X))
    assert common_value.matches(d) == []
