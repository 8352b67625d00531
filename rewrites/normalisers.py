"""Multi-pass normalisers: a statistics pass over the row, then a normalising pass that reads the row again.

A normaliser (SoftMax, LayerNorm) divides every value of a row by statistics of the whole row, so done in one
pass its kernel holds the row: past the memory, no algorithm fits.  Written as two passes that share only the
statistics, the first is a streamed reduction (an online log-sum-exp; a running mean and variance) and the
second a map, each of which fits any memory; the row is read twice.

================================  ==================================================================================
rule                              lhs → rhs
================================  ==================================================================================
``softmax_statistics_pass``       SoftMax_x(βs) → exp(βs − LSE_x(βs))              (LSE = log Σ exp, streamed online)
``centred_statistics_pass``       μ = mean_x X ; C = X − μ ; (mean_x C², C read elsewhere)
                                  → μ = mean_x X ; mean_x (X − μ)² ; (X − μ) read elsewhere
================================  ==================================================================================

The second rule gives the variance its own centred values, so that ``mean, X − μ, square, mean`` is one
reduction (the running mean and variance of :mod:`napkin_cat.algorithms.moments`, Welford's update merged
chunk by chunk), and the normalising pass recomputes ``X − μ`` from ``X`` and ``μ`` instead of reading a
stored copy.  Both are ``prepare`` rules: ``nc.derive`` costs the one-pass and the two-pass forms and keeps
the cheaper that fits (the two-pass form moves the row once more; it wins where the row does not fit).

>>> import napkin_cat as nc
>>> two = softmax_statistics_pass.apply(nc.softmax("n v", over="v"))
>>> [b.name for b in two.boxes if b.name in ("LSE", "sub", "exp")]
['LSE', 'sub', 'exp']
>>> bool(nc.equivalent(nc.softmax("n v", over="v"), two))
True
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import Pattern, kind
from napkin_cat.rewriting.closed import source
from napkin_cat.rewriting import shape_of
from rewrites.softmax import extreme_inputs


def _sig(names) -> str:
    return " ".join(names) or "()"   # () is an array without axes


def _fmt(arr) -> dict:
    return dict(level=arr.level, dtype=arr.dtype, **{a.name: a.size for a in arr.axes})


# ---------------------------------------------------------------------- SoftMax: log-sum-exp, then exp(x − lse)
def _softmax_vars(m):
    node = m.node("s")
    scores = node.dom[0]
    weaves = set(node.spec.weave_names)
    return {"scores": scores, "rows": tuple(n for n in scores.names if n in weaves),
            "over": tuple(n for n in scores.names if n not in weaves), "beta": node.spec.param("beta", 1),
            "out": node.cod[0]}


def _readers(net, wid) -> list:
    """The nodes that read wire ``wid``, through copies."""
    dst = net.wires[wid].dst[0]
    if dst in net.nodes and net.nodes[dst].kind == "copy":
        return [r for w in net.outs[dst] for r in _readers(net, w)]
    return [dst] if dst in net.nodes else []


def _not_contracted(m):
    """True unless a contraction sums the SoftMax's output over its own axes: the online SoftMax-contraction
    (``softmax_contraction_to_unscaled``) streams that in one pass, with no statistics pass to pay."""
    net, over = m.net, set(m.vars["over"])
    for nid in _readers(net, net.outs[m.nodes["s"]][0]):
        node = net.nodes[nid]
        if node.kind == "box" and node.spec.kind == "contract" and not over & set(node.cod[0].names):
            return f"{node.name!r} sums it over {sorted(over)}: the online SoftMax-contraction streams it in one pass"
    return True


def _softmax_rhs(m):
    """exp(βs − LSE(βs)), each pass scaling the row itself (a scaled copy of the row is never stored); the
    exponential writes the SoftMax's output order, which a weave may have made another than its input's."""
    v = m.vars
    b, ins = m.wiring()
    x, scores, out = ins[("s", 0)], v["scores"], v["out"]

    def scaled():
        if v["beta"] == 1:
            return x
        return b(nc.elementwise("scale", _sig(scores.names), const=v["beta"], **_fmt(scores)), x)
    rows = scores.replace(axes=tuple(a for a in scores.axes if a.name in v["rows"]))
    lse = b(nc.reduce("logsumexp", f"{_sig(scores.names)} -> {_sig(rows.names)}", **_fmt(scores)), scaled())
    shifted = b(nc.elementwise("sub", f"{_sig(scores.names)}, {_sig(rows.names)} -> {_sig(scores.names)}",
                               **_fmt(scores)), scaled(), lse)
    y = b(nc.elementwise("exp", f"{_sig(scores.names)} -> {_sig(out.names)}", **_fmt(scores)), shifted)
    return m.finish(b, {("s", 0): b.convert(y, out.dtype)})


def softmax_instance(rng):
    """A SoftMax over one or two axes, weaved over one or two, at a random temperature; maybe read twice."""
    rows = [str(n) for n in rng.permutation(["n", "h"])[:int(rng.integers(1, 3))]]
    over = ["v"] if rng.random() < 0.75 else ["v", "w"]
    names = [str(n) for n in rng.permutation(rows + over)]
    beta = [1, 0.5, 0.125][int(rng.integers(3))]
    sm = nc.softmax(_sig(names), over=over, beta=beta)
    return sm >> nc.elementwise("neg", _sig(names)) if rng.integers(2) else sm


def exp_of_shifted_lse():
    """exp(βxᵢ − log Σⱼ exp(βxⱼ)) = exp(βxᵢ) / Σⱼ exp(βxⱼ): the SoftMax, whatever the scores."""
    xs = sympy.symbols("x1:5", real=True)
    beta = sympy.Symbol("beta", positive=True)
    lse = sympy.log(sum(sympy.exp(beta * x) for x in xs))
    for x in xs:
        two = sympy.exp(beta * x - lse)
        one = sympy.exp(beta * x) / sum(sympy.exp(beta * y) for y in xs)
        assert sympy.simplify(two - one) == 0, x


def one_more_exp_per_value(lhs, rhs, m):
    """The cost of the second pass: the statistics pass computes one exp per value and one log per row, the
    normalising pass one exp per value as the SoftMax did (special-function FLOPs grow by values + rows)."""
    scores, rows = m.vars["scores"], m.vars["rows"]
    values = sympy.Mul(*(a.size for a in scores.axes))
    per_row = sympy.Mul(*(a.size for a in scores.axes if a.name in rows))
    grown = nc.cost(rhs).flops.get("special", 0) - nc.cost(lhs).flops.get("special", 0)
    assert sympy.expand(grown - values - per_row) == 0, f"special FLOPs grow by {grown}, expected {values + per_row}"


softmax_statistics_pass = Rule(
    "softmax_statistics_pass",
    Pattern({"s": kind("softmax")}, bind=_softmax_vars),
    _softmax_rhs,
    conditions=(Condition("rows", lambda m: bool(m.vars["rows"]) or "no weave axis",
                          "the SoftMax must be weaved over at least one axis (one statistic per row)"),
                Condition("row_is_the_output", _not_contracted,
                          "the SoftMax's output must not be summed over its axes by a contraction")),
    obligation=Obligation(softmax_instance, inputs=extreme_inputs, symbolic=(exp_of_shifted_lse,),
                          cost=one_more_exp_per_value),
    doc="""SoftMax_x(βs) → exp(βs − LSE_x(βs)): a statistics pass and a normalising pass.

    LSE_x (log Σ exp over x, :mod:`napkin_cat.syntax.logsumexp`) streams along x with the online log-sum-exp
    (running max μ and rescaled sum z, the SoftMax₁ of paper Table 4 without its output), so the first pass
    fits any memory; the second is a map over the row.  Where the row fits, the one-pass SoftMax moves less
    and the search keeps it.  A SoftMax summed over its axes by a contraction (attention) streams in one pass
    by the online SoftMax-contraction instead, so the rule leaves it.""")


# ---------------------------------------------------------------------- mean and variance: X − μ computed twice
def _variance_of(net, nodes):
    """The copy of X − μ, the square and the mean that make the variance (absorbed into the match), or None when
    X − μ is not copied to ``square ; mean`` and elsewhere."""
    dst = net.wires[net.outs[nodes["s"]][0]].dst[0]
    if dst not in net.nodes or net.nodes[dst].kind != "copy":
        return None
    for w in net.outs[dst]:
        q = net.wires[w].dst[0]
        if q in net.nodes and net.nodes[q].kind == "box" and net.nodes[q].spec.kind == "square":
            v = net.wires[net.outs[q][0]].dst[0]
            if v in net.nodes and net.nodes[v].kind == "box" and net.nodes[v].spec.kind == "reduce_mean":
                return {"copy": dst, "q": q, "v": v}
    return None


CENTRED = Pattern({"m": kind("reduce_mean"), "s": kind("sub")}, [("m", 0, "s", 1)], absorb=_variance_of)


def _same_row(m):
    """The centred value is the averaged one, over the same axes both times."""
    net = m.net
    if source(net, net.ins[m.nodes["s"]][0]) != source(net, net.ins[m.nodes["m"]][0]):
        return "X − μ subtracts μ from another array than the one it averages"
    over = [{a for a in m.node(v).dom[0].names if a not in m.node(v).spec.weave_names} for v in ("m", "v")]
    return over[0] == over[1] or f"the mean runs over {sorted(over[0])}, the variance over {sorted(over[1])}"


def _centred_rhs(m):
    b, ins = m.wiring()
    x, x2 = ins[("m", 0)], ins[("s", 0)]
    mu = b(m.box("m"), x)
    var = b(m.box("v"), b(m.box("q"), b(m.box("s"), x2, mu)))
    again = b(m.box("s"), x, mu)     # the normalising pass centres the row it reads itself
    outs = {("m", 0): mu, ("v", 0): var}
    return m.finish(b, {p: outs.get(p, again) for p in m.outputs})


def layer_norm_instance(rng):
    """A LayerNorm (or its centred core) over a random feature axis, weaved over one or two row axes."""
    rows = [str(n) for n in rng.permutation(["n", "h"])[:int(rng.integers(1, 3))]]
    names = [str(n) for n in rng.permutation(rows + ["d"])]
    sig, r = _sig(names), _sig(n for n in names if n != "d")
    b = nc.Builder(nc.types(sig))
    (X,) = b.inputs
    mu = b(nc.reduce("mean", f"{sig} -> {r}"), X)
    centred = b(nc.elementwise("sub", f"{sig}, {r} -> {sig}"), X, mu)
    var = b(nc.reduce("mean", f"{sig} -> {r}"), b(nc.elementwise("square", sig), centred))
    inv = b(nc.elementwise("rsqrt", r), b(nc.elementwise("shift", r, const=1e-5), var))
    y = b(nc.elementwise("mul", f"{sig}, {r} -> {sig}"), centred, inv)
    return b.build(y, var) if rng.integers(2) else b.build(y)


def centred_inputs(rng, diagram, sizes):
    """Rows whose mean dwarfs their spread (a variance by E[x²] − E[x]² would lose every digit) or not."""
    return [rng.normal(size=shape_of(a, sizes)) * [1.0, 1e-3][int(rng.integers(2))] + [0.0, 1e3][int(rng.integers(2))]
            for a in diagram.dom.inside]


def one_more_subtraction_per_value(lhs, rhs, m):
    """The cost of recomputing: one subtraction per value of the row, nothing else."""
    values = sympy.Mul(*(a.size for a in m.node("s").cod[0].axes))
    grown = nc.cost(rhs).flops.get("general", 0) - nc.cost(lhs).flops.get("general", 0)
    assert sympy.expand(grown - values) == 0, f"general FLOPs grow by {grown}, expected {values}"


def variance_identity():
    """mean((x − mean x)²) of a concatenation from each half's (count, mean, M2) by the pairwise update."""
    xs = sympy.symbols("x1:6", real=True)
    a, b = xs[:2], xs[2:]

    def stats(v):
        n = len(v)
        mean = sum(v) / n
        return n, mean, sum((x - mean) ** 2 for x in v)
    (na, ma, m2a), (nb, mb, m2b) = stats(a), stats(b)
    k = na + nb
    delta = mb - ma
    mean = ma + delta * sympy.Rational(nb, k)
    m2 = m2a + m2b + delta ** 2 * sympy.Rational(na * nb, k)
    whole = stats(xs)
    assert sympy.simplify(mean - whole[1]) == 0 and sympy.simplify(m2 - whole[2]) == 0


centred_statistics_pass = Rule(
    "centred_statistics_pass",
    CENTRED,
    _centred_rhs,
    conditions=(Condition("same_row", _same_row, "X − μ must centre the averaged array over the same axes"),),
    obligation=Obligation(layer_norm_instance, inputs=centred_inputs, symbolic=(variance_identity,),
                          cost=one_more_subtraction_per_value, rtol=1e-6, atol=1e-6),
    doc="""μ = mean_x X ; C = X − μ ; mean_x C² (C read elsewhere) → μ = mean_x X ; mean_x (X − μ)² ; (X − μ) elsewhere.

    The variance gets centred values of its own, so that mean, centring, square and mean are one streamed
    reduction (the running count, mean and sum of squares of :mod:`napkin_cat.algorithms.moments`: a statistics
    pass), and the normalising pass recomputes X − μ from the row it reads and the mean, instead of reading a
    centred copy of the row stored by the statistics pass.  LayerNorm over a row longer than the memory is then
    two passes.""")


RULES = RuleSet((softmax_statistics_pass, centred_statistics_pass))

__all__ = ["RULES", "softmax_statistics_pass", "centred_statistics_pass"]
