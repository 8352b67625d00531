"""The order of an n-ary contraction: split it into pairwise contractions along a binary tree.

A contraction of ``n ≥ 3`` operands (one ``nc.einsum`` with three inputs or more) is one loop nest over
every axis, ``n · Π(all axes)`` FLOPs (:func:`rewrites.sum_product.loop_nest_flops`).  Sum-product
associativity (:mod:`rewrites.sum_product`) splits it along any binary tree over its operands: each inner
node contracts its two children, keeping an axis iff the output or an operand outside the node names it.
Which tree is cheapest depends on the sizes: this is the matrix-chain problem (opt_einsum's ``optimal`` and
``dp`` paths solve it for FLOPs).

===========================  ========================================================================
rule                         lhs → rhs
===========================  ========================================================================
``pairwise_contraction``     C(X₀ … Xₙ₋₁) → the pairwise contractions of a tree ``order="((0 1) 2)"``
===========================  ========================================================================

The rule's choices are the trees no other tree beats at every size: a dynamic programme over the subsets of
operands (:func:`pareto_orders`) keeps, per subset, the trees whose (FLOPs, values of the intermediates) no
other tree's is at most at every size ≥ 1 (a polynomial inequality checked on its coefficients), so the
tree with the fewest FLOPs at any sizes is among them (up to a cap of :data:`KEEP` per subset).  A search
(``nc.derive``, where the rule plays ``prepare``) then costs each choice's transfers at its memory.

>>> import napkin_cat as nc
>>> linear = nc.einsum("q d, x d, x e -> q e")
>>> [m.params["order"] for m in pairwise_contraction.matches(linear)]
['((0 1) 2)', '(0 (1 2))', '((0 2) 1)']
>>> right = pairwise_contraction.using(order="(0 (1 2))").apply(linear)
>>> nc.cost(linear).flops, nc.cost(right).flops
({'tensor': 3*d*e*q*x}, {'tensor': 2*d*e*q + 2*d*e*x})
>>> bool(nc.equivalent(linear, right))
True
"""
from __future__ import annotations

import re
from functools import lru_cache

import sympy

from napkin_cat.cost.iocost import numel
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import Pattern, where
from rewrites.contraction import flops_claim
from rewrites.contraction_instances import random_einsum
from rewrites.sum_product import Term, axis_names, loop_nest_flops, one_format, sum_product_associativity

#: Trees kept for the whole contraction and per proper subset of its operands (the cheapest in FLOPs at
#: :data:`REFERENCE` first), beyond which the dynamic programme drops the rest: exact for three operands
#: (three trees) and for the five orders of a chain of four.
KEEP, KEEP_INNER = 6, 3
#: Past this many operands the programme (3ⁿ splits) gives way to one greedy tree: the cheapest pair at the
#: reference first, as opt_einsum's ``greedy`` path.
EXACT = 6
#: The size at which kept trees are ranked (every symbolic axis): a typical extent of a model's axes.
REFERENCE = 1024


# ---------------------------------------------------------------------- trees
def parse_order(text, n: int):
    """``"((0 1) 2)"`` → ``((0, 1), 2)``: a binary tree whose leaves are the ports ``0 … n-1`` once each;
    a string says why ``text`` is not one."""
    tokens = re.findall(r"\(|\)|\d+|\S", str(text))
    pos = 0

    def tree():
        nonlocal pos
        if pos >= len(tokens):
            raise ValueError("it ends early")
        tok = tokens[pos]
        pos += 1
        if tok.isdigit():
            return int(tok)
        if tok != "(":
            raise ValueError(f"{tok!r} is neither a port nor '('")
        pair = (tree(), tree())
        if pos >= len(tokens) or tokens[pos] != ")":
            raise ValueError("a pair must be '(' two trees ')'")
        pos += 1
        return pair
    try:
        t = tree()
        if pos != len(tokens):
            raise ValueError(f"{' '.join(tokens[pos:])!r} follows the tree")
    except ValueError as e:
        return f"order={text!r} is not a binary tree such as '((0 1) 2)': {e}"
    if sorted(leaves(t)) != list(range(n)):
        return f"order={text!r} must name each operand port 0..{n - 1} once, got {sorted(leaves(t))}"
    return t


def leaves(tree) -> list:
    return [tree] if isinstance(tree, int) else leaves(tree[0]) + leaves(tree[1])


def show(tree) -> str:
    return str(tree) if isinstance(tree, int) else f"({show(tree[0])} {show(tree[1])})"


def intermediate(term: Term, ports) -> object:
    """The array a node over ``ports`` computes: the axes of its operands that the output or an operand
    outside it names (the output itself when ``ports`` are all of them)."""
    ports = set(ports)
    if len(ports) == len(term.operands):
        return term.output
    needed = set(term.output.names) | set(axis_names(x for j, x in enumerate(term.operands) if j not in ports))
    kept = [term.axes[n] for n in axis_names(term.operands[i] for i in sorted(ports)) if n in needed]
    return term.output.replace(axes=tuple(kept))


def pairwise_terms(term: Term, tree) -> list:
    """The two-operand contractions of ``tree``, children before parents."""
    out = []

    def visit(t):
        if isinstance(t, int):
            return term.operands[t]
        a, b = visit(t[0]), visit(t[1])
        out.append(Term((a, b), intermediate(term, leaves(t))))
        return out[-1].output
    visit(tree)
    return out


# ---------------------------------------------------------------------- choosing trees
class Posynomial(dict):
    """A polynomial in the size symbols with non-negative coefficients, as ``{monomial: coefficient}`` (a
    monomial: sorted ``(symbol, power)`` pairs), which is what FLOPs and array sizes are: fast to add and to
    compare at every size ≥ 1 (:meth:`never_above`), where sympy would expand."""

    @classmethod
    def of(cls, expr) -> "Posynomial":
        expr = sympy.expand(sympy.sympify(expr))
        free = sorted(expr.free_symbols, key=str)
        if not free:
            return cls({(): expr})
        poly = sympy.Poly(expr, *free)
        return cls({tuple((s, k) for s, k in zip(free, powers) if k): c for powers, c in poly.terms()})

    def __add__(self, other):
        out = Posynomial(self)
        for m, c in other.items():
            out[m] = out.get(m, 0) + c
        return out

    def at(self, value) -> float:
        """The value with every size symbol at ``value``."""
        return float(sum(c * value ** sum(k for _, k in m) for m, c in self.items()))

    def never_above(self, other) -> bool:
        """``self ≤ other`` at every size ≥ 1: with each size ``s = 1 + t``, every coefficient of
        ``other − self`` in the ``t`` is ≥ 0 (a sufficient test; exact for one monomial each)."""
        diff = {}
        for sign, poly in ((1, other), (-1, self)):
            for m, c in poly.items():
                for sub in _below(m):
                    weight = 1
                    for (s, k), j in zip(m, sub):
                        weight *= _choose(k, j)
                    key = tuple((s, j) for (s, _), j in zip(m, sub) if j)
                    diff[key] = diff.get(key, 0) + sign * c * weight
        return all(v >= 0 for v in diff.values())


@lru_cache(maxsize=None)
def _choose(k, j) -> int:
    return sympy.binomial(k, j)


@lru_cache(maxsize=4096)
def _below(monomial) -> list:
    """The powers ``j ≤ k`` of a monomial's symbols (each a tuple aligned with the monomial)."""
    out = [()]
    for _, k in monomial:
        out = [o + (j,) for o in out for j in range(k + 1)]
    return out


@lru_cache(maxsize=4096)
def _posynomial(expr) -> Posynomial:
    return Posynomial.of(expr)


def _flops(term: Term) -> Posynomial:
    return _posynomial(sympy.Add(*loop_nest_flops(term).values()))


def _pareto(cands: list, keep: int) -> list:
    """The candidates ``(flops, values, tree)`` that no other is at most in both (first kept on ties), the
    ``keep`` cheapest at the reference first."""
    cands = sorted(cands, key=lambda c: (c[0].at(REFERENCE), c[1].at(REFERENCE)))
    kept = []
    for c in cands:
        if any(k[0].never_above(c[0]) and k[1].never_above(c[1]) for k in kept):
            continue
        kept = [k for k in kept if not (c[0].never_above(k[0]) and c[1].never_above(k[1]))] + [c]
        if len(kept) >= keep:
            break
    return kept


def greedy_order(term: Term):
    """One tree: repeatedly contract the pair of subtrees whose contraction has the fewest FLOPs at the reference."""
    trees = list(range(len(term.operands)))

    def array(t):
        return term.operands[t] if isinstance(t, int) else intermediate(term, leaves(t))
    while len(trees) > 1:
        pairs = [(i, j) for i in range(len(trees)) for j in range(i + 1, len(trees))]
        i, j = min(pairs, key=lambda p: _flops(Term((array(trees[p[0]]), array(trees[p[1]])),
                                                   intermediate(term, leaves(trees[p[0]]) + leaves(trees[p[1]]))))
                   .at(REFERENCE))
        trees = [t for k, t in enumerate(trees) if k not in (i, j)] + [(trees[i], trees[j])]
    return trees[0]


@lru_cache(maxsize=256)
def pareto_orders(term: Term) -> tuple:
    """The trees over ``term``'s operands that no other tree beats in FLOPs and intermediate values at every
    size (module docstring), cheapest in FLOPs at the reference sizes first; one greedy tree past
    :data:`EXACT` operands."""
    n = len(term.operands)
    if n > EXACT:
        return (show(greedy_order(term)),)
    full = (1 << n) - 1
    zero = Posynomial()
    best = {1 << i: [(zero, zero, i)] for i in range(n)}
    for s in sorted(range(1, full + 1), key=lambda m: (bin(m).count("1"), m)):
        if s in best:
            continue
        low = s & -s
        made = intermediate(term, [i for i in range(n) if s >> i & 1])
        values = _posynomial(numel(made)) if s != full else zero
        cands = []
        a = (s - 1) & s
        while a:   # every split s = a ⊔ (s − a) with the lowest port in a
            if a & low:
                b = s & ~a
                left, right = (intermediate(term, [i for i in range(n) if x >> i & 1]) if x & (x - 1)
                               else term.operands[x.bit_length() - 1] for x in (a, b))
                node = _flops(Term((left, right), made))
                for fa, va, ta in best[a]:
                    for fb, vb, tb in best[b]:
                        cands.append((fa + fb + node, va + vb + values, (ta, tb)))
            a = (a - 1) & s
        best[s] = _pareto(cands, KEEP if s == full else KEEP_INNER)
    return tuple(show(t) for _, _, t in best[full])


# ---------------------------------------------------------------------- the rule
def _many_operands(net, node) -> bool:
    return node.kind == "box" and node.spec.kind == "contract" and len(node.dom) >= 3


NARY = where("contraction of three operands or more", _many_operands, nodes=("box",))


def _order(m):
    return parse_order(m.params.get("order"), len(m.node("c").dom))


def _choices(m):
    if "order" in m.params:
        return [{}]
    return [{"order": o} for o in pareto_orders(Term.of(m.node("c")))]


def _rhs(m):
    b, ins = m.wiring()
    term, tree = Term.of(m.node("c")), _order(m)

    def build(t):
        if isinstance(t, int):
            return ins[("c", t)], term.operands[t]
        (wa, a), (wb, bb) = build(t[0]), build(t[1])
        made = intermediate(term, leaves(t))
        return b(Term((a, bb), made).box(), wa, wb), made
    return m.finish(b, {("c", 0): build(tree)[0]})


def _terms(m) -> tuple:
    term = Term.of(m.node("c"))
    return (term,), tuple(pairwise_terms(term, _order(m)))


def _instance(rng):
    return random_einsum(rng, int(rng.integers(3, 6)))


def _legal_order(m):
    got = _order(m)
    return got if isinstance(got, str) else True


pairwise_contraction = Rule(
    "pairwise_contraction",
    Pattern({"c": NARY}),
    _rhs,
    conditions=(Condition("order", _legal_order, "order= must be a binary tree over the operand ports"),
                Condition("weaves_carried", lambda m: Term.of(m.node("c")).carried(),
                          "every output axis must be carried by an operand (a broadcast weave has no index)"),
                Condition("same_format", lambda m: one_format(Term.of(m.node("c"))),
                          "operands and output must have one level and dtype")),
    obligation=Obligation(_instance, cost=flops_claim(_terms), symbolic=(sum_product_associativity,)),
    oriented=False,
    choices=_choices,
    doc="""C(X₀ … Xₙ₋₁) → C₍ₙ₋₁₎(… C₁(Xᵢ, Xⱼ) …): the n-ary contraction as pairwise ones along the binary tree
    ``order`` (enumerated: the trees no other beats in FLOPs and intermediate values at every size).

    Sum-product associativity applied at each node of the tree (paper §2.1; the matrix-chain problem).  Cost:
    the FLOPs of the pairwise loop nests replace the one loop nest's; no transfer changes.""")

RULES = RuleSet((pairwise_contraction,))
