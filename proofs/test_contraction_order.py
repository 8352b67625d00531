"""Discharge ``pairwise_contraction`` (``rewrites/contraction_order.py``): an n-ary contraction as pairwise ones.

Numerically against numpy's ``einsum`` on the one-box contraction (every order the rule offers), its FLOPs
claim, the choice of orders against a brute force over every binary tree (the FLOPs-optimal tree at random
sizes is always offered), the comparison of polynomials it rests on, linear attention's numbers, and every
refusal by name.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import sympy
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.rewriting import random_sizes, shape_of
from rewrites import pairwise_contraction
from rewrites import contraction_order as order
from rewrites.contraction_instances import random_einsum
from rewrites.contraction_order import (Posynomial, greedy_order, leaves, pairwise_terms, pareto_orders,
                                        parse_order, show)
from rewrites.sum_product import Term, loop_nest_flops

proves = pytest.mark.proves
SEEDS = st.integers(0, 2 ** 32 - 1)
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def term_of(diagram) -> Term:
    (node,) = [n for n in nc.engine.to_netlist(diagram).nodes.values() if n.kind == "box"]
    return Term.of(node)


def numpy_einsum(term: Term, xs):
    """The contraction by ``np.einsum`` (no napkin_cat)."""
    letters = {}

    def sub(arr):
        return "".join(letters.setdefault(n, LETTERS[len(letters)]) for n in arr.names)
    spec = ",".join(sub(a) for a in term.operands) + "->" + sub(term.output)
    return np.einsum(spec, *xs)


def trees(ports):
    """Every binary tree over ``ports`` (each unordered pair once)."""
    if len(ports) == 1:
        yield ports[0]
        return
    first, rest = ports[0], ports[1:]
    for mask in range(2 ** len(rest) - 1):   # the subtree holding ``first`` never takes every other port
        left = [first] + [p for k, p in enumerate(rest) if mask >> k & 1]
        right = [p for k, p in enumerate(rest) if not mask >> k & 1]
        for a in trees(left):
            for b in trees(right):
                yield (a, b)


def flops_at(term: Term, tree, env) -> int:
    return int(sum(sympy.sympify(v).subs(env) for t in pairwise_terms(term, tree)
                   for v in loop_nest_flops(t).values()))


# ---------------------------------------------------------------------- soundness
@proves("pairwise_contraction")
def test_pairwise_contraction_is_sound():
    proof = pairwise_contraction.obligation.discharge(pairwise_contraction, trials=20)
    assert proof.rewrites >= 20 and proof.cost_checked and proof.symbolic == ("sum_product_associativity",)


@proves("pairwise_contraction")
@settings(max_examples=25, deadline=None)
@given(seed=SEEDS, n=st.integers(3, 6))
def test_every_offered_order_is_the_einsum(seed, n):
    rng = np.random.default_rng(seed)
    lhs = random_einsum(rng, n)
    term = term_of(lhs)
    ms = pairwise_contraction.matches(lhs)
    assert ms and len({m.params["order"] for m in ms}) == len(ms)
    sizes = random_sizes(rng, lhs, 1, 4)
    xs = [rng.normal(size=shape_of(a, sizes)) for a in lhs.dom.inside]
    want = numpy_einsum(term, xs)
    for m in ms[:4]:
        rhs = pairwise_contraction.apply(lhs, m)
        boxes = [b for b in rhs.boxes if b.name == "·"]
        assert len(boxes) == n - 1 and all(len(b.dom) == 2 for b in boxes)
        assert np.allclose(nc.evaluate(rhs, *xs, sizes=sizes), want, rtol=1e-9, atol=1e-9)
        pairwise_contraction.obligation.cost(lhs, rhs, m)


@proves("pairwise_contraction")
def test_an_order_given_by_hand_is_built_as_written():
    four = nc.einsum("a b, b c, c d, d e -> a e", a=2, b=3, c=4, d=5, e=6)
    rhs = pairwise_contraction.using(order="((0 1) (2 3))").apply(four)
    shapes = [" ".join(" ".join(a.names) for a in b.dom.inside) + " -> " + " ".join(b.cod.inside[0].names)
              for b in rhs.boxes if b.name == "·"]
    assert sorted(shapes) == ["a b b c -> a c", "a c c e -> a e", "c d d e -> c e"]
    assert nc.cost(rhs).flops == {"tensor": 2 * (2 * 3 * 4 + 4 * 5 * 6 + 2 * 4 * 6)}
    assert nc.equivalent(four, rhs)


# ---------------------------------------------------------------------- the orders offered
@proves("pairwise_contraction")
@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, n=st.integers(3, 4))
def test_the_cheapest_tree_at_any_sizes_is_offered(seed, n):
    """Brute force over every binary tree at random concrete sizes: the fewest FLOPs is among the offered orders
    (three operands with the default caps; four with the caps lifted, the programme being exact)."""
    rng = np.random.default_rng(seed)
    term = term_of(random_einsum(rng, n))
    with lifted_caps(n == 4):
        offered = [parse_order(o, n) for o in pareto_orders(term)]
    everything = list(trees(list(range(n))))
    assert len(everything) == {3: 3, 4: 15}[n]
    for _ in range(4):
        env = {s: int(2 ** rng.integers(0, 11)) for s in set().union(*(sympy.sympify(a.size).free_symbols
                                                                      for a in term.axes.values()))}
        best = min(flops_at(term, t, env) for t in everything)
        assert min(flops_at(term, t, env) for t in offered) == best, (show(min(
            everything, key=lambda t: flops_at(term, t, env))), pareto_orders(term), env)


@contextmanager
def lifted_caps(lift: bool):
    """The programme without its caps (``lift``), its memo cleared before and after."""
    caps = order.KEEP, order.KEEP_INNER
    if lift:
        order.KEEP = order.KEEP_INNER = 100
    pareto_orders.cache_clear()
    try:
        yield
    finally:
        order.KEEP, order.KEEP_INNER = caps
        pareto_orders.cache_clear()


@proves("pairwise_contraction")
def test_linear_attention_offers_the_cheap_order():
    """``q d, x d, x e -> q e`` at q = x = 4096, d = e = 64: 2.06·10¹¹ FLOPs as one box, 6.7·10⁷ as φ(Q)(φ(K)ᵀV)."""
    sizes = dict(q=4096, x=4096, d=64, e=64)
    one = nc.einsum("q d, x d, x e -> q e")
    env = {nc.symbol(k): v for k, v in sizes.items()}
    assert nc.cost(one).flops["tensor"].subs(env) == 206_158_430_208
    flops = {m.params["order"]: nc.cost(pairwise_contraction.apply(one, m)).flops for m in
             pairwise_contraction.matches(one)}
    assert sorted(flops) == ["((0 1) 2)", "((0 2) 1)", "(0 (1 2))"]
    assert flops["(0 (1 2))"]["tensor"].subs(env) == 67_108_864
    assert flops["((0 1) 2)"]["tensor"].subs(env) == 4_294_967_296


@proves("pairwise_contraction")
def test_past_the_exact_programme_one_greedy_tree():
    chain = nc.einsum("a b, b c, c d, d e, e f, f g, g h -> a h", a=2, b=64, c=2, d=64, e=2, f=64, g=2, h=64)
    (only,) = pareto_orders(term_of(chain))
    tree = parse_order(only, 7)
    assert sorted(leaves(tree)) == list(range(7)) and show(greedy_order(term_of(chain))) == only
    assert nc.equivalent(chain, pairwise_contraction.using(order=only).apply(chain))


@settings(max_examples=60, deadline=None)
@given(seed=SEEDS)
def test_never_above_is_sound(seed):
    """``p.never_above(q)`` claims ``p ≤ q`` at every size ≥ 1: no random point contradicts it, and it is exact
    for two monomials."""
    rng = np.random.default_rng(seed)
    a, b, c = syms = sympy.symbols("a b c", positive=True, integer=True)

    def poly():
        return sum(int(rng.integers(1, 4)) * a ** int(rng.integers(0, 3)) * b ** int(rng.integers(0, 3))
                   * c ** int(rng.integers(0, 2)) for _ in range(int(rng.integers(1, 4))))
    p, q = poly(), poly()
    if Posynomial.of(p).never_above(Posynomial.of(q)):
        for _ in range(20):
            env = dict(zip(syms, (int(v) for v in rng.integers(1, 50, size=3))))
            assert p.subs(env) <= q.subs(env), (p, q, env)
    assert Posynomial.of(a * b).never_above(Posynomial.of(a * b * c))
    assert not Posynomial.of(3 * a * b).never_above(Posynomial.of(2 * a + 2 * b))


# ---------------------------------------------------------------------- refusals, by name
@proves("pairwise_contraction")
def test_bad_orders_are_named():
    three = nc.einsum("a b, b c, c d -> a d")
    for bad, why in [("((0 1) 3)", r"must name each operand port 0..2 once, got \[0, 1, 3\]"),
                     ("(0 1 2)", "a pair must be"), ("((0 1)", "it ends early"), ("0 1", "follows the tree"),
                     ("left", "is neither a port")]:
        with pytest.raises(nc.RewriteError, match=rf"condition 'order' fails: .*{why}"):
            pairwise_contraction.using(order=bad).apply(three)


@proves("pairwise_contraction")
def test_two_operands_and_mixed_formats_are_refused():
    with pytest.raises(nc.RewriteError, match="does not match.*contraction of three operands or more"):
        pairwise_contraction.apply(nc.einsum("a b, b c -> a c"))
    with pytest.raises(nc.RewriteError, match="same_format"):
        pairwise_contraction.using(order="((0 1) 2)").apply(nc.apply("contract", "a b, b c, c d -> a d",
                                                                     out_level=1))


@proves("pairwise_contraction")
def test_the_cost_claim_can_fail():
    """Claiming that the pairwise form costs what the one box did is false."""
    one = nc.einsum("q d, x d, x e -> q e")
    m = pairwise_contraction.matches(one)[1]
    rhs = pairwise_contraction.apply(one, m)
    pairwise_contraction.obligation.cost(one, rhs, m)
    from rewrites.contraction import flops_claim
    with pytest.raises(AssertionError, match="tensor FLOPs: the cost functor gives"):
        flops_claim(lambda m: ((), ()))(one, rhs, m)
