"""The variance written E[x²] − E[x]² is the centred variance E[(x − E[x])²], in the normal form.

Over the axes ``A`` of a row, with μ = mean_A x,

    mean_A(x²) − μ²  =  mean_A((x − μ)²)

(Σ(xᵢ − μ)²/n = Σxᵢ²/n − 2μ·Σxᵢ/n + μ² = Σxᵢ²/n − μ², as Σxᵢ/n = μ).  A user writes the variance either way;
the search's rules know the centred one (``centred_statistics_pass`` makes mean, centring, square and mean one
streamed reduction, Welford's running mean and variance), so the normal form writes the centred one, reading the
mean μ the program computes already (the mean the uncentred form squares: no second mean is made), and the
centred values x − μ where the program computes them too (LayerNorm's normalising pass): the variance is then
written as LayerNorm written with the centred variance writes it, and derives to its H.  The rule
plays ``normalise``; ``product_with_itself`` and ``mean_of_sum`` bring ``x · x`` and ``Σ_A x / |A|`` to
``square`` and ``mean`` first, so it matches the variance written with either.

=========================  ==================================================================================
rule                       lhs → rhs
=========================  ==================================================================================
``uncentred_variance``     μ = mean_A x ; mean_A(x²) − μ²  →  μ = mean_A x ; mean_A((x − μ)²)
=========================  ==================================================================================

Numerics: the centred form is evaluated (the rewrite's right-hand side), the stable one.  The two are equal in
exact arithmetic (:func:`uncentred_is_centred`, over symbolic entries, and :func:`moments_identity`, the identity
itself), not in floating point: where a row's mean dwarfs its spread, E[x²] and E[x]² agree in every digit the
format holds and their difference is rounding (in float32, rows of 10⁴ + noise of 10⁻² have a variance of 10⁻⁴
and E[x²] − E[x]² gives 0, 0, 16 and −8 on four such rows of 256, multiples of 8, the spacing of float32 near
10⁸), where the centred form is within 0.2 % of the float64 variance.  The proofs draw rows at mean 0 or 3 and
spread 1 or 2, where the two agree to rounding in float64.

Measure: the rewrite decreases :func:`rewrites.normal_form_boxes.measure` (nodes plus wires, plus means: the means are
as many on both sides), the normal form's termination argument.  Where it makes x − μ, that one box, its square
and its mean take the places of x², its mean, μ² and the subtraction (a box and a wire fewer).  Where it reads the
program's x − μ, the right-hand side leaves the two inputs it no longer reads (x and μ, read there by x − μ) to
discards, one node and one wire more than the left-hand side, which the copy law (``copy_discard``, a ``simplify``
rule the normal form's driver applies with it) removes with the copies' branches: with them the netlist is smaller
(22 → 17 on LayerNorm's statistics; the proof checks the decrease after the copy law on every instance).

>>> import napkin_cat as nc
>>> b = nc.Builder(nc.types("n d"))
>>> (X,) = b.inputs
>>> mu = b(nc.reduce("mean", "n d -> n"), X)
>>> ex2 = b(nc.reduce("mean", "n d -> n"), b(nc.elementwise("square", "n d"), X))
>>> written = b.build(b(nc.elementwise("sub", "n, n -> n"), ex2, b(nc.elementwise("square", "n"), mu)))
>>> [b.data.kind for b in uncentred_variance.apply(written).boxes if b.data is not None]
['reduce_mean', 'sub', 'square', 'reduce_mean']
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet, rewrite, shape_of
from napkin_cat.rewriting.closed import source
from napkin_cat.rewriting.match import Pattern, kind
from rewrites.basic import copy_discard
from rewrites.normal_form_boxes import box_like, fewer_nodes, reduced


def _sig(names) -> str:
    return " ".join(names) or "()"   # () is an array without axes


def _mean_of_the_row(m):
    """The squared statistic μ is mean_A of the array whose square is averaged, over the same axes ``A``."""
    net = m.net
    src = source(net, net.ins[m.nodes["m2"]][0])
    node = net.nodes.get(src[0])
    if node is None or node.kind != "box" or node.spec.kind != "reduce_mean":
        return f"the subtracted square is of {getattr(node, 'name', 'an input')!r}, not of a mean"
    if source(net, net.ins[src[0]][0]) != source(net, net.ins[m.nodes["q"]][0]):
        return f"{node.name!r} averages another array than the one whose square is averaged"
    a, b = set(reduced(node)), set(reduced(m.node("mq")))
    return a == b or f"{node.name!r} averages over {sorted(a)}, the mean of squares over {sorted(b)}"


def _one_format(m):
    arrays = {(a.level, a.dtype) for v in m.nodes for a in (*m.node(v).dom, *m.node(v).cod)}
    return len(arrays) == 1 or f"the matched values are in {len(arrays)} formats or levels"


def _readers(net, nid) -> list:
    """The ``(node, port)`` pairs that read ``nid``'s first output, through copies."""
    found, todo = [], list(net.consumers(nid))
    while todo:
        v, port = todo.pop()
        if v in net.nodes and net.nodes[v].kind == "copy":
            todo.extend(net.consumers(v))
        elif v in net.nodes:
            found.append((v, port))
    return found


def _centred_values(net, nodes):
    """The program's own x − μ, absorbed as ``c`` where it computes one (μ the squared mean, x the averaged array,
    broadcast over the same axes): the centred variance then reads it, as LayerNorm written with the centred
    variance does; else nothing."""
    mu = source(net, net.ins[nodes["m2"]][0])[0]
    if mu not in net.nodes:
        return {}
    x = source(net, net.ins[nodes["q"]][0])
    names = set(net.nodes[nodes["q"]].dom[0].names)
    for v, port in sorted(_readers(net, mu)):
        node = net.nodes[v]
        if (port == 1 and node.kind == "box" and node.spec.kind == "sub" and source(net, net.ins[v][0]) == x
                and set(node.dom[0].names) == set(node.cod[0].names) == names):
            return {"c": v}
    return {}


def _centred_rhs(m):
    b, ins = m.wiring()
    x, mu, out = m.node("q").dom[0], m.node("m2").dom[0], m.node("v").cod[0]
    if "c" in m.nodes:
        centred, x = b(m.box("c"), ins[("c", 0)], ins[("c", 1)]), m.node("c").cod[0]
    else:
        centred = b(box_like("sub", [x, mu], x), ins[("q", 0)], ins[("m2", 0)])
    var = b(box_like("reduce_mean", [x], out), b(box_like("square", [x], x), centred))
    outs = {("v", 0): var, ("c", 0): centred}
    return m.finish(b, {p: outs[p] for p in m.outputs})


# ---------------------------------------------------------------------- proofs
def uncentred_is_centred():
    """Σᵢ(xᵢ − μ)²/n = Σᵢxᵢ²/n − μ² with μ = Σᵢxᵢ/n, over n symbolic entries, n = 1 … 5: a polynomial identity."""
    for n in range(1, 6):
        xs = sympy.symbols(f"x1:{n + 1}", real=True)
        mu = sum(xs) / n
        centred = sum((x - mu) ** 2 for x in xs) / n
        assert sympy.expand(centred - (sum(x ** 2 for x in xs) / n - mu ** 2)) == 0, n


def moments_identity():
    """The identity for any n: with S₁ = Σxᵢ, S₂ = Σxᵢ² and μ = S₁/n, Σ(xᵢ − μ)² = S₂ − 2μS₁ + nμ² (expanded
    term by term, a sum of n copies of the square), which is S₂ − nμ², so the centred mean is S₂/n − μ²."""
    n = sympy.Symbol("n", positive=True, integer=True)
    s1, s2 = sympy.symbols("S1 S2", real=True)
    x, mu_ = sympy.symbols("x mu", real=True)
    term = sympy.expand((x - mu_) ** 2)                    # x² − 2μx + μ²: summed, x² → S₂, x → S₁, 1 → n
    summed = term.coeff(x, 2) * s2 + term.coeff(x, 1) * s1 + term.coeff(x, 0) * n
    mu = s1 / n
    assert sympy.simplify(summed.subs(mu_, mu) / n - (s2 / n - mu ** 2)) == 0


def uncentred_instance(rng):
    """mean_A(x²) − (mean_A x)² over one or two random axes ``A``, weaved over zero to two row axes in any order,
    the statistics written in their own orders; x maybe read again (the normalising pass's x − μ, or another map),
    μ maybe read again (the normalising pass), the operands of the squares as x · x at times."""
    rows = [str(n) for n in rng.permutation(["n", "h"])[:int(rng.integers(3))]]
    over = [str(n) for n in rng.permutation(["d", "e"])[:int(rng.integers(1, 3))]]
    names = [str(n) for n in rng.permutation(rows + over)]
    sig = _sig(names)

    def rows_in_some_order():
        return _sig([str(n) for n in rng.permutation(rows)])
    r_mu, r_sq, r_out = rows_in_some_order(), rows_in_some_order(), rows_in_some_order()
    b = nc.Builder(nc.types(sig))
    (X,) = b.inputs
    mu = b(nc.reduce("mean", f"{sig} -> {r_mu}"), X)
    ex2 = b(nc.reduce("mean", f"{sig} -> {r_sq}"), b(nc.elementwise("square", sig), X))
    var = b(nc.elementwise("sub", f"{r_sq}, {r_mu} -> {r_out}"), ex2, b(nc.elementwise("square", r_mu), mu))
    outs = [var]
    k = int(rng.integers(3))
    if k == 1:
        outs.append(b(nc.elementwise("sub", f"{sig}, {r_mu} -> {sig}"), X, mu))
    elif k == 2:
        outs.append(b(nc.elementwise("exp", sig), X))
    return b.build(*outs)


def smaller_after_the_copy_law(lhs, rhs, m):
    """The termination claim: the rewrite, with the copy law's removal of the discards it leaves (``copy_discard``,
    a ``simplify`` rule the normal form's driver applies with it), decreases
    :func:`~rewrites.normal_form_boxes.measure`; no transfer moves (:func:`~rewrites.normal_form_boxes.fewer_nodes` on
    the cleaned right-hand side)."""
    cleaned = rewrite(rhs, RuleSet((copy_discard,)), "fixpoint", max_steps=8).diagram
    fewer_nodes(lhs, cleaned, m)


def spread_inputs(rng, diagram, sizes):
    """Rows at mean 0 and spread 1, or at mean 3 and spread 2: where E[x²] − E[x]² keeps its digits in float64."""
    return [rng.normal(size=shape_of(a, sizes)) * [1.0, 2.0][int(rng.integers(2))] + [0.0, 3.0][int(rng.integers(2))]
            for a in diagram.dom.inside]


uncentred_variance = Rule(
    "uncentred_variance",
    Pattern({"q": kind("square"), "mq": kind("reduce_mean"), "m2": kind("square"), "v": kind("sub")},
            [("q", 0, "mq", 0), ("mq", 0, "v", 0), ("m2", 0, "v", 1)], absorb=_centred_values),
    _centred_rhs,
    conditions=(Condition("mean_of_the_row", _mean_of_the_row,
                          "the subtracted square must be of the mean of the averaged array, over the same axes"),
                Condition("one_format", _one_format, "the variance must compute in one format at one level")),
    obligation=Obligation(uncentred_instance, inputs=spread_inputs, symbolic=(uncentred_is_centred, moments_identity),
                          cost=smaller_after_the_copy_law, rtol=1e-9, atol=1e-9),
    doc="""μ = mean_A x ; mean_A(x²) − μ² → μ = mean_A x ; mean_A((x − μ)²): the uncentred variance is the centred.

    Over any axes ``A``, weaved over the others in any order; the mean μ is the program's (read where the squared
    mean read it, and by its other readers as before), and so are the centred values x − μ where the program
    computes them (absorbed: the variance squares them); the squares and the mean of squares are read here alone
    (the pattern's wires).  The centred form is the one evaluated: stable where the mean dwarfs the spread (the
    module docstring).""")


VARIANCE_FORM = RuleSet((uncentred_variance,))
RULES = VARIANCE_FORM

__all__ = ["RULES", "VARIANCE_FORM", "uncentred_variance", "uncentred_is_centred", "moments_identity",
           "spread_inputs"]
