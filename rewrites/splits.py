"""Split streams as a rule: a kernel's stream cut into parts run by parallel blocks, their states merged.

================  ====================================================================================
rule              lhs → rhs
================  ====================================================================================
``split_stream``  Kernel(Stream_{b, s}(F)) → Kernel(Stream_{b, s, parts=P}(F))   (every reducer has a merge)
================  ====================================================================================

The right-hand side runs ``P`` parts of the slices from the empty state, writes each part's state, and merges
them with each reducer's merge ``⊕`` (:mod:`napkin_cat.algorithms.splits`): ``fold(x₁ ⧺ x₂) = fold(x₁) ⊕
fold(x₂)``, proved for every merge in ``proofs/test_splits.py``.  It plays ``split`` in the rule book:
``nc.derive(..., min_blocks=B)`` uses it where the groups alone launch fewer than ``B`` blocks.

>>> import napkin_cat as nc
>>> k = nc.stream(nc.kernel(nc.library.matmul(a=2, b=8, c=2)), "b", 2)
>>> split_stream.using(parts=4).apply(k).boxes[0].arg.boxes[0].params["parts"]
4
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.algorithms.splitting import split
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import Pattern, where
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.rewriting.obligation import shape_of


def _streamed_kernel(net, n) -> bool:
    return n.kind == "region" and isinstance(n.box, nc.Kernel) and any(
        isinstance(b, nc.Stream) and b.params.get("parts") is None for b in n.box.arg.boxes)


STREAMED_KERNEL = where("Kernel with an unsplit stream", _streamed_kernel, nodes=("region",))


def _axis(m):
    axis = m.params.get("axis")
    if axis is not None:
        return axis
    return next(b.axis for b in m.box("k").arg.boxes if isinstance(b, nc.Stream) and b.params.get("parts") is None)


def _rhs(m):
    k = m.box("k")
    return split(nc.Diagram.id(k.dom).then(k), _axis(m), m.params.get("parts", 2))


def _splittable(m):
    try:
        _rhs(m)
    except RewriteError as e:
        return str(e)
    return True


def _instance(rng):
    """A streamed kernel at concrete sizes (at least two slices): attention, a matmul, a max, a log-sum-exp."""
    n = int(rng.integers(4, 9))
    algos = [(lambda: nc.library.attention(q=2, x=n, d=3), "x"), (lambda: nc.library.matmul(a=3, b=n, c=2), "b"),
             (lambda: nc.reduce("max", "q x -> q", q=2, x=n), "x"),
             (lambda: nc.reduce("logsumexp", "q x -> q", q=3, x=n), "x")]
    make, axis = algos[int(rng.integers(len(algos)))]
    return nc.stream(nc.kernel(make()), axis, int(rng.integers(1, 3)))


def _inputs(rng, diagram, sizes):
    """Values far from zero and far apart (a merge that rescaled by the wrong maximum would overflow)."""
    return [rng.normal(size=shape_of(a, sizes)) * [1.0, 30.0][int(rng.integers(2))] for a in diagram.dom.inside]


def _at_least_zero(e) -> bool:
    """Whether ``e`` is ≥ 0 at every positive size: a number, or a polynomial in the sizes without a negative
    coefficient."""
    e = sympy.expand(e)
    if not e.free_symbols:
        return bool(e >= 0)
    return bool(e.is_nonnegative) or all(c >= 0 for c in sympy.Poly(e, *sorted(e.free_symbols, key=str)).coeffs())


def _partials_cost(lhs, rhs, m):
    """The split moves, beyond the stream, what its extra heads load and each part's state twice: no more (at
    any sizes: a woven axis may be symbolic)."""
    a, b = nc.cost(lhs).H[1], nc.cost(rhs).H[1]
    grown = sympy.expand(b - a)
    assert grown != 0 and _at_least_zero(grown), f"H grows by {grown}"
    (stream,) = [x for x in m.box("k").arg.boxes if isinstance(x, nc.Stream)]
    state = sum((sympy.Mul(*[a.size for a in s.array.axes]) for r in schedule_of(stream).reducers for s in r.state),
                sympy.Integer(0))
    assert _at_least_zero(grown - 4 * state), \
        f"H grows by {grown}: less than the partial states written and read ({4 * state})"


split_stream = Rule(
    "split_stream",
    Pattern({"k": STREAMED_KERNEL}),
    _rhs,
    conditions=(Condition("mergeable", _splittable, "every reducer of the stream must have a merge"),),
    obligation=Obligation(_instance, inputs=_inputs, cost=_partials_cost, rtol=1e-9, atol=1e-9),
    doc="""Kernel(Stream_{b,s}(F)) → Kernel(Stream_{b,s,parts=P}(F)) when every reducer has a merge.

    The parts run in parallel blocks (FlashDecoding, split-K); each writes its state, the combine merges them
    with the reducers' merges (:mod:`napkin_cat.algorithms.splits`).  Cost claim: H grows by the partial states
    written and read back (and the heads the extra parts run).""",
    oriented=False,
)

RULES = RuleSet((split_stream,))

__all__ = ["RULES", "split_stream"]
