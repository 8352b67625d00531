"""The normal form: an operation written by hand out of smaller ones becomes the primitive that names it.

A user writes SoftMax as max, subtract, exp, sum and divide; squares by ``x · x``; divides by multiplying with
a reciprocal.  Each is equal to one primitive that the search's rules know (SoftMax streams with a contraction in
one pass, ``square`` is the variance's, ``div`` broadcasts a statistic), so the search brings the function to
this normal form before it prepares and partitions it (the rules play ``normalise`` in the rule book: applied to
a fixpoint, each step in the derivation's trace).

=======================  ==============================================================================
rule                     lhs → rhs
=======================  ==============================================================================
``written_softmax``      e = exp(x − c) ; e / Σ_A e  →  SoftMax_A(x)   (any shift c constant along A)
``unshifted_softmax``    e = exp(x) ; e / Σ_A e  →  SoftMax_A(x)        (equal exactly; the primitive is stable)
``written_logsumexp``    m = max_A x ; log Σ_A exp(x − m) + m  →  LSE_A(x)
``scale_into_softmax``   SoftMax_{A,β}(c · x)  →  SoftMax_{A,βc}(x)
                         SoftMax_{A,β}(mean_B x)  →  SoftMax_{A,β/|B|}(Σ_B x)     (a mean is a scaled sum)
``product_with_itself``  x · x  →  square(x)
``times_reciprocal``     x · recip(y)  →  x / y
``mean_of_sum``          (1/|A|) · Σ_A x  →  mean_A(x)
=======================  ==============================================================================

Every rule matches by structure and by the axes on its wires, not by names: any axes reduced (``A``, one or
several), any axes mapped over, in any order (a box that writes its output in another order than it reads
keeps that order).  A mean is a scaled sum, mean_B x = (1/|B|)·Σ_B x (:func:`factor`): written either way it
reaches one normal form, as each rule that takes a scale (or a sum, :mod:`rewrites.sum_normal_form`) takes a mean
too, as its sum and its factor.  Every rule decreases :func:`measure`, the netlist's nodes and wires plus its means
(``mean_of_sum`` removes a box and a wire and makes a mean; a mean taken as a scaled sum becomes a sum or a scale),
so a fixpoint is reached in fewer steps than that measure: the normal form is bounded by construction (each proof
checks it).

Numerics: the primitive is evaluated, the stable form (``exp(x − μ)`` with the row's max μ).  The written SoftMax
shifted by the max, and the written log-sum-exp, compute what it computes; shifted by anything else (a mean, a
constant, nothing) the written SoftMax is equal in exact arithmetic and overflows or underflows where the primitive
does not (``written_softmax``, ``unshifted_softmax``).  A row that is all −∞ is NaN in the written SoftMax and in the
primitive, and NaN in the written log-sum-exp where the primitive gives its limit −∞ (the rewrite makes it
defined).  A row holding +∞ is NaN in the written forms (∞ − ∞) and, in the SoftMax primitive, NaN where it divides
∞ by ∞ and 0 elsewhere, so the proofs draw scores that are finite or −∞ (masked).

>>> import napkin_cat as nc
>>> b = nc.Builder(nc.types("q x"))
>>> (S,) = b.inputs
>>> m = b(nc.reduce("max", "q x -> q"), S)
>>> e = b(nc.elementwise("exp", "q x"), b(nc.elementwise("sub", "q x, q -> q x"), S, m))
>>> written = b.build(b(nc.elementwise("div", "q x, q -> q x"), e, b(nc.reduce("sum", "q x -> q"), e)))
>>> from rewrites.basic import RULES as BASIC     # the max, read by nothing once rewritten, deleted
>>> nc.isomorphic(nc.rewrite(written, RuleSet((written_softmax,)) + BASIC).diagram, nc.softmax("q x", over="x"))
True
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import Pattern, kind, structural
from rewrites.softmax import extreme_inputs
from rewrites.normal_form_boxes import (SCALINGS, box_like, buildable, count, factor, fewer_nodes, one_format,
                                        private_to, reduced, spelled, unscaled, without_factor)
from rewrites.softmax_instances import (exp_over_sum_of_shifted, finite_row_inputs, maybe_permuted, moderate_inputs,
                                        random_axes, rows_and_over, scores_source, shifted_exp, shifted_inputs,
                                        written_softmax_instance)


def _softmax_box(m):
    return box_like("softmax", [m.node("sb").dom[0]], m.node("dv").cod[0], core=reduced(m.node("sm")))


def _softmax_rhs(m):
    b, ins = m.wiring()
    return m.finish(b, {("dv", 0): b(_softmax_box(m), ins[("sb", 0)])})


def shift_operands(node) -> tuple:
    """The arrays a shift box subtracts from the scores (its operand 0): a ``sub``'s operand 1; none for a ``shift``
    box, which adds its constant."""
    return tuple(node.dom[1:])


def _constant_shift(m):
    """The shift does not vary along the axes the sum reduces (so exp(−c) is one factor of every summand)."""
    over = set(reduced(m.node("sm")))
    varying = sorted({n for arr in shift_operands(m.node("sb")) for n in arr.names} & over)
    return not varying or f"the shift {m.node('sb').name!r} reads a value over {varying}, which the sum reduces"


def _same_reduced(first, second):
    def test(m):
        a, b = set(reduced(m.node(first))), set(reduced(m.node(second)))
        return a == b or f"{m.node(first).name} reduces {sorted(a)}, {m.node(second).name} reduces {sorted(b)}"
    return test


def _one_box(last: str, box_of):
    """The replacement of a pattern from the copy ``c`` of its input to the node ``last``: one box on the input
    (``box_of(match)``), read where ``last`` was; the copy's other readers keep the input itself."""
    def rhs(m):
        b, ins = m.wiring()
        x = ins[("c", 0)]
        y = b(box_of(m), x)
        return m.finish(b, {p: (y if p == (last, 0) else x) for p in m.outputs})
    return rhs


written_softmax = Rule(
    "written_softmax",
    Pattern({"sb": kind("sub", "shift"), "ex": kind("exp"), "k": structural("copy"), "sm": kind("reduce_sum"),
             "dv": kind("div")},
            [("sb", 0, "ex", 0), ("ex", 0, "k", 0), ("k", None, "sm", 0), ("k", None, "dv", 0), ("sm", 0, "dv", 1)]),
    _softmax_rhs,
    conditions=(Condition("constant_shift", _constant_shift,
                          "the shift must not vary along the axes the SoftMax reduces"),
                Condition("private", private_to("dv"),
                          "shifted scores, exponentials and their sum must be read by the SoftMax alone"),
                Condition("one_format", one_format, "the written SoftMax must compute in one format at one level"),
                Condition("signature", buildable(_softmax_box),
                          "the SoftMax must write its reduced axes in the order it reads them")),
    obligation=Obligation(written_softmax_instance, inputs=shifted_inputs, symbolic=(exp_over_sum_of_shifted,),
                          cost=fewer_nodes, rtol=1e-9, atol=1e-12),
    doc="""e = exp(x − c) ; e / Σ_A e → SoftMax_A(x) for any shift c constant along A: a SoftMax written by hand is
    the primitive.

    exp(xᵢ − c)/Σⱼ exp(xⱼ − c) = exp(xᵢ)/Σⱼ exp(xⱼ) whatever c is, as long as it is one value for the whole sum
    (exp(−c) cancels): the row's max, its mean, a constant (a ``shift`` box), an input or a value computed elsewhere,
    over any of the rows' axes but none of ``A`` (condition ``constant_shift``).  Over any axes ``A`` (the sum's),
    weaved over the others in any order; the scores and the shift may be read elsewhere too, the intermediates
    only here.  The shift is discarded (its producer, read by nothing else, goes with the ``simplify`` rules).

    The primitive is evaluated: the stable form exp(x − μ)/Σ exp(x − μ) with μ the row's max, which is what the
    written form computes where c is the max.  With another shift the two are equal in exact arithmetic, not in
    floating point: by hand a score more than ~709 above c makes exp = ∞ and its row NaN (∞/∞), and a row whose
    scores are all more than ~745 below c is 0/0; the primitive is finite on both (the rewrite only removes
    overflow and underflow).  The proofs draw scores where the written form is defined.""")


# ---------------------------------------------------------------------- a SoftMax without its max
def unshifted_softmax_instance(rng):
    """exp(x) / Σ exp(x) over random axes (no max subtracted), maybe after a map, maybe with x read again after,
    the division's output in another order."""
    names, rows, over = rows_and_over(rng)
    sig, r = spelled(names), spelled(maybe_permuted(rng, rows))
    b = nc.Builder(nc.types(sig))
    (X,) = b.inputs
    S = scores_source(rng, b, X, names, consts=(0.5, 2))
    e = b(nc.elementwise("exp", sig), S)
    z = b(nc.reduce("sum", f"{sig} -> {r}"), e)
    out = [n for n in names if n not in over] + [n for n in names if n in over] if rng.random() < 0.3 else names
    P = b(nc.elementwise("div", f"{sig}, {r} -> {spelled(out)}"), e, z)
    return b.build(P, b(nc.elementwise("neg", sig), S)) if rng.random() < 0.3 else b.build(P)


def _unshifted_box(m):
    return box_like("softmax", [m.node("ex").dom[0]], m.node("dv").cod[0], core=reduced(m.node("sm")))


def _unshifted_rhs(m):
    b, ins = m.wiring()
    return m.finish(b, {("dv", 0): b(_unshifted_box(m), ins[("ex", 0)])})


unshifted_softmax = Rule(
    "unshifted_softmax",
    Pattern({"ex": kind("exp"), "k": structural("copy"), "sm": kind("reduce_sum"), "dv": kind("div")},
            [("ex", 0, "k", 0), ("k", None, "sm", 0), ("k", None, "dv", 0), ("sm", 0, "dv", 1)]),
    _unshifted_rhs,
    conditions=(Condition("private", private_to("dv"),
                          "the exponentials and their sum must be read by the SoftMax alone"),
                Condition("one_format", one_format, "the written SoftMax must compute in one format at one level"),
                Condition("signature", buildable(_unshifted_box),
                          "the SoftMax must write its reduced axes in the order it reads them")),
    obligation=Obligation(unshifted_softmax_instance, inputs=moderate_inputs, symbolic=(exp_over_sum_of_shifted,),
                          cost=fewer_nodes, rtol=1e-9, atol=1e-12),
    doc="""e = exp(x) ; e / Σ_A e → SoftMax_A(x): a SoftMax written without its max is the primitive.

    Equal in exact arithmetic (exp(xᵢ)/Σⱼ exp(xⱼ) = exp(xᵢ − μ)/Σⱼ exp(xⱼ − μ) for any μ: the symbolic proof),
    not in floating point: the primitive is the stable form (μ the row's max), so the rewrite only removes
    overflow and underflow.  By hand a score above ~709 makes exp(x) = ∞ and its row NaN (∞/∞), and a row whose
    scores are all below ~−745 is 0/0 = NaN; the primitive is finite on both.  Where the written form is defined
    (finite scores, −∞ ones masked) the two agree to rounding; a row all −∞ is NaN in both, and a +∞ score is
    NaN in both at its place and 0 elsewhere in its row.  The proofs draw finite scores that neither overflow
    nor underflow, or −∞.""")


# ---------------------------------------------------------------------- log-sum-exp
def written_logsumexp_instance(rng):
    """log Σ exp(x − max x) + max x over random axes, the addition's operands in either order."""
    names, rows, over, sig, r, b, S, mx, e = shifted_exp(rng)
    lg = b(nc.elementwise("log", r), b(nc.reduce("sum", f"{sig} -> {r}"), e))
    out = spelled(maybe_permuted(rng, rows))
    L = b(nc.elementwise("add", f"{r}, {r} -> {out}"), *((lg, mx) if rng.integers(2) else (mx, lg)))
    return b.build(L, S) if rng.random() < 0.3 else b.build(L)


def log_sum_exp_shifted():
    """log Σⱼ exp(xⱼ − μ) + μ = log Σⱼ exp(xⱼ) for any μ (here the max)."""
    xs = sympy.symbols("x1:5", real=True)
    mu = sympy.Symbol("mu", real=True)
    written = sympy.log(sum(sympy.exp(x - mu) for x in xs)) + mu
    assert sympy.cancel(sympy.expand(sympy.exp(written) - sum(sympy.exp(x) for x in xs))) == 0


def _lse_box(m):
    return box_like("reduce_logsumexp", [m.node("c").dom[0]], m.node("ad").cod[0])


_lse_rhs = _one_box("ad", _lse_box)


written_logsumexp = Rule(
    "written_logsumexp",
    Pattern({"c": structural("copy"), "mx": kind("reduce_max"), "k": structural("copy"), "sb": kind("sub"),
             "ex": kind("exp"), "sm": kind("reduce_sum"), "lg": kind("log"), "ad": kind("add")},
            [("c", None, "mx", 0), ("c", None, "sb", 0), ("mx", 0, "k", 0), ("k", None, "sb", 1), ("sb", 0, "ex", 0),
             ("ex", 0, "sm", 0), ("sm", 0, "lg", 0), ("lg", 0, "ad", None), ("k", None, "ad", None)]),
    _lse_rhs,
    conditions=(Condition("same_axes", _same_reduced("mx", "sm"), "the max and the sum must reduce the same axes"),
                Condition("private", private_to("c", "ad"),
                          "the max, exponentials, sum and log must be read by the log-sum-exp alone"),
                Condition("one_format", one_format,
                          "the written log-sum-exp must compute in one format at one level"),
                Condition("signature", buildable(_lse_box), "the log-sum-exp must be writable as one reduction")),
    obligation=Obligation(written_logsumexp_instance, inputs=finite_row_inputs, symbolic=(log_sum_exp_shifted,),
                          cost=fewer_nodes, rtol=1e-9, atol=1e-9),
    doc="""m = max_A x ; log Σ_A exp(x − m) + m → LSE_A(x): a log-sum-exp written by hand is the reduction.

    Over any axes ``A``, weaved over the others in any order, the sum's operands in either order.  Where a
    row is all −∞ the written form is NaN (−∞ − (−∞)) and the reduction its limit −∞.""")


# ---------------------------------------------------------------------- a scale into the SoftMax's β
def sum_over_count():
    """(1/n) Σᵢ xᵢ is the mean of n values."""
    xs = sympy.symbols("x1:6", real=True)
    assert sympy.simplify(sum(xs) / len(xs) - sympy.Rational(1, len(xs)) * sum(xs)) == 0


def scale_into_softmax_instance(rng):
    """SoftMax_β(c · x) over random axes, at a random β and c (negative ones too), maybe written out of order; or
    SoftMax_β(mean_B x), the mean over one or two random axes placed anywhere (their sizes given or symbolic)."""
    names, rows, over = rows_and_over(rng)
    if not rows:
        rows, names = ["n"], names + ["n"]
    sig = spelled(names)
    seen = spelled(maybe_permuted(rng, names)) if rng.random() < 0.3 else sig
    seen_over = [n for n in seen.split() if n in over]
    if seen_over != [n for n in names if n in over]:
        seen = sig
    c = [0.5, 3, -2, sympy.Rational(1, 7)][int(rng.integers(4))]
    beta = [1, 0.125, 2][int(rng.integers(3))]
    if rng.random() < 0.4:
        averaged = random_axes(rng, ["u", "t"], 1, 2)
        sizes = {n: int(rng.integers(2, 5)) for n in averaged} if rng.random() < 0.5 else {}
        wide = spelled([str(n) for n in rng.permutation(names + averaged)])
        return nc.reduce("mean", f"{wide} -> {seen}", sizes=sizes) >> nc.softmax(seen, over=over, beta=beta)
    return nc.elementwise("scale", f"{sig} -> {seen}", const=c) >> nc.softmax(seen, over=over, beta=beta)


def softmax_of_scaled():
    """exp(β·c·xᵢ) / Σⱼ exp(β·c·xⱼ) is SoftMax at β·c of x: the temperature multiplies."""
    xs = sympy.symbols("x1:4", real=True)
    beta, c = sympy.symbols("beta c", real=True)
    for x in xs:
        scaled = sympy.exp(beta * (c * x)) / sum(sympy.exp(beta * (c * y)) for y in xs)
        assert sympy.cancel(sympy.expand(scaled - sympy.exp((beta * c) * x) / sum(sympy.exp((beta * c) * y)
                                                                          for y in xs))) == 0


def _tempered_box(m):
    s, sc = m.node("s"), m.node("sc")
    beta = sympy.sympify(s.spec.param("beta", 1)) * factor(sc)
    return box_like("softmax", [unscaled(sc)], s.cod[0], core=reduced(s), params={} if beta == 1 else {"beta": beta})


def _tempered_rhs(m):
    b, ins = m.wiring()
    return m.finish(b, {("s", 0): b(_tempered_box(m), without_factor(b, m.node("sc"), ins[("sc", 0)]))})


scale_into_softmax = Rule(
    "scale_into_softmax",
    Pattern({"sc": kind(*SCALINGS), "s": kind("softmax")}, [("sc", 0, "s", 0)]),
    _tempered_rhs,
    conditions=(Condition("one_format", one_format, "the scaling and the SoftMax must compute in one format"),
                Condition("signature", buildable(_tempered_box),
                          "the SoftMax must read its reduced axes in the order the scale reads them")),
    obligation=Obligation(scale_into_softmax_instance, inputs=extreme_inputs,
                          symbolic=(softmax_of_scaled, sum_over_count), cost=fewer_nodes, rtol=1e-9, atol=1e-12),
    doc="""SoftMax_{A,β}(c · x) → SoftMax_{A,βc}(x): a scale of the scores is the SoftMax's temperature; so is a
    mean's: SoftMax_{A,β}(mean_B x) → SoftMax_{A,β/|B|}(Σ_B x).

    exp(β(cxᵢ))/Σⱼ exp(β(cxⱼ)) = exp((βc)xᵢ)/Σⱼ exp((βc)xⱼ) for any real β, c, and mean_B x = (1/|B|)·Σ_B x
    (:func:`factor`).  The scaled scores must be read by the SoftMax alone (else they are computed anyway).  A
    scaled sum and a mean reach one normal form: ``mean_of_sum`` makes Σ_B then 1/|B| a mean, which this rule
    takes back as Σ_B, at the temperature the scale would have given.""")


# ---------------------------------------------------------------------- x · x, x · (1/y), Σ/n
def product_with_itself_instance(rng):
    """mul(x, x) over random axes, the product maybe in another order, x maybe read elsewhere."""
    names = random_axes(rng, ["n", "d", "h"], 1, 3)
    sig, out = spelled(names), spelled(maybe_permuted(rng, names))
    b = nc.Builder(nc.types(sig))
    (X,) = b.inputs
    y = b(nc.elementwise("mul", f"{sig}, {sig} -> {out}"), X, X)
    return b.build(y, b(nc.elementwise("exp", sig), X)) if rng.random() < 0.4 else b.build(y)


def _square_box(m):
    return box_like("square", [m.node("c").dom[0]], m.node("m").cod[0])


_square_rhs = _one_box("m", _square_box)


def _same_axes_both_ports(m):
    a, b = m.node("m").dom
    return a == b or f"the product reads {a} and {b}: not one array twice"


product_with_itself = Rule(
    "product_with_itself",
    Pattern({"c": structural("copy"), "m": kind("mul")}, [("c", None, "m", 0), ("c", None, "m", 1)]),
    _square_rhs,
    conditions=(Condition("one_array", _same_axes_both_ports, "both factors must be the one array"),
                Condition("signature", buildable(_square_box), "the square must be writable with the product's")),
    obligation=Obligation(product_with_itself_instance, cost=fewer_nodes, rtol=0, atol=0),
    doc="""x · x → square(x): a value multiplied by itself is its square (exactly, in floating point too).""")


def times_reciprocal_instance(rng):
    """mul(x, recip(y)) or mul(recip(y), x), y broadcast along some of x's axes (or not)."""
    names = random_axes(rng, ["n", "d", "h"], 1, 3)
    kept = [n for n in names if rng.random() < 0.6] or names[:1]
    sig, ys, out = spelled(names), spelled(maybe_permuted(rng, kept)), spelled(maybe_permuted(rng, names))
    b = nc.Builder(nc.types(f"{sig}, {ys}"))
    X, Y = b.inputs
    r = b(nc.elementwise("recip", ys), Y)
    pair, sigs = ((X, r), f"{sig}, {ys}") if rng.integers(2) else ((r, X), f"{ys}, {sig}")
    return b.build(b(nc.elementwise("mul", f"{sigs} -> {out}"), *pair))


def _div_box(m):
    (port,) = [p for v, p in m.inputs if v == "m"]
    x = m.node("m").dom[port]
    return box_like("div", [x, m.node("r").dom[0]], m.node("m").cod[0])


def _div_rhs(m):
    b, ins = m.wiring()
    (port,) = [p for v, p in m.inputs if v == "m"]
    return m.finish(b, {("m", 0): b(_div_box(m), ins[("m", port)], ins[("r", 0)])})


times_reciprocal = Rule(
    "times_reciprocal",
    Pattern({"r": kind("recip"), "m": kind("mul")}, [("r", 0, "m", None)]),
    _div_rhs,
    conditions=(Condition("one_format", one_format, "the reciprocal and the product must compute in one format"),
                Condition("signature", buildable(_div_box), "the quotient must be writable with the product's")),
    obligation=Obligation(times_reciprocal_instance, cost=fewer_nodes, rtol=1e-12, atol=1e-12),
    doc="""x · recip(y) → x / y: multiplying by a reciprocal is dividing (either factor the reciprocal).""")


def mean_of_sum_instance(rng):
    """(1/|A|) · Σ_A x over random axes, the scale written with the sizes (symbolic or given)."""
    names, rows, over = rows_and_over(rng)
    sizes = {n: int(rng.integers(2, 6)) for n in over} if rng.random() < 0.4 else {}
    count = sympy.Mul(*(sizes.get(n, nc.Axis(n).size) for n in over))
    sig, r = spelled(names), spelled(maybe_permuted(rng, rows))
    out = spelled(maybe_permuted(rng, rows))
    return (nc.reduce("sum", f"{sig} -> {r}", sizes=sizes)
            >> nc.elementwise("scale", f"{r} -> {out}", const=1 / count))


def _is_the_count(m):
    c = sympy.sympify(m.node("c").spec.param("c", 1))
    n = count(m.node("s"))
    return sympy.expand(c * n - 1) == 0 or f"the scale is {c}, not 1/{n}"   # a Float 1.0 is not 1 in sympy


def _mean_box(m):
    return box_like("reduce_mean", [m.node("s").dom[0]], m.node("c").cod[0])


def _mean_rhs(m):
    b, ins = m.wiring()
    return m.finish(b, {("c", 0): b(_mean_box(m), ins[("s", 0)])})


mean_of_sum = Rule(
    "mean_of_sum",
    Pattern({"s": kind("reduce_sum"), "c": kind("scale")}, [("s", 0, "c", 0)]),
    _mean_rhs,
    conditions=(Condition("count", _is_the_count, "the scale must be 1 over the number of values summed"),
                Condition("one_format", one_format, "the sum and the scale must compute in one format"),
                Condition("signature", buildable(_mean_box), "the mean must be writable with the sum's signature")),
    obligation=Obligation(mean_of_sum_instance, symbolic=(sum_over_count,), cost=fewer_nodes,
                          rtol=1e-12, atol=1e-12),
    doc="""(1/|A|) · Σ_A x → mean_A(x): a sum scaled by one over its count is the mean (the count read off the
    summed axes' sizes, symbolic or given).""")


NORMAL_FORM = RuleSet((written_softmax, unshifted_softmax, written_logsumexp, scale_into_softmax,
                       product_with_itself, times_reciprocal, mean_of_sum))
RULES = NORMAL_FORM

__all__ = ["RULES", "NORMAL_FORM", "written_softmax", "unshifted_softmax", "written_logsumexp", "scale_into_softmax",
           "product_with_itself", "times_reciprocal", "mean_of_sum"]
