"""A probability picked by a gather: a SoftMax read only by a gather along its axes is exp(βx − LSE(βx)), so the
gather is taken before the exponential and the picked values need only the row's log-sum-exp.

``p[i] = SoftMax_v(L[i, :])[t_i]`` written with the SoftMax makes the n × v probabilities (or reads the logits twice:
the SoftMax's statistics pass and its normalising pass) to keep n of them.  Written as ``exp(L[i, t_i] − LSE_v(L[i,
:]))`` it reads the logits once: one streamed log-sum-exp over v, and the n gathered logits (which a gather reads in
that same stream, its slices adding up).  ``softmax_of_gathered`` writes the probabilities as ``exp(βx − LSE(βx))``
where a gather along a reduced axis is the SoftMax's only reader, and takes the gather before the subtraction and
the exponential by ``gather_before_maps`` (:mod:`rewrites.log_probability`, applied to the rule's own right-hand side:
the two laws composed), which then run on the picked values.

==========================  ==============================================================================
rule                        lhs → rhs
==========================  ==============================================================================
``softmax_of_gathered``     gather_a(SoftMax_{A,β}(x), t)  →  [0 ≤ t < |a|] · exp(gather_a(βx, t) − LSE_A(βx)),
                            a ∈ A, the SoftMax read by that gather alone
==========================  ==============================================================================

It is offered (role ``prepare``), not normal: the search weighs the form it makes against the SoftMax's.  The new
form reads the logits once, but its streamed kernel holds one value more (the picked logit beside the log-sum-exp's
running max and sum), so at the least memory a SoftMax derives at (3 values: n 3, v 64) it does not fit; as a normal
form it would have raised that least memory to 4.  Weighed, it is taken wherever it moves less (every memory where a
row does not fit: half the transfers) and the SoftMax's form is kept where it alone fits.

Where it does not fire: a SoftMax read by another reader too (a sum, a contraction, an output, a second gather)
stays as it is: that reader needs the whole SoftMax, which costs the same statistics pass and normalising pass with
or without the gather, and a split (the SoftMax kept for the others, exp(βx − LSE) for the gather) would compute the
row's statistics twice for a gather that reads n values of the SoftMax already made.  A gather along an axis the
SoftMax does not reduce picks whole rows: the SoftMax is not a probability along that axis, the law is not this one.
Two gathers of one SoftMax are left too: ``gather_before_maps`` takes the maps only a single gather reads, so the
rewritten form would make exp(βx − LSE) whole for both, as the SoftMax was made.

Numerics: in exact arithmetic exp(βxᵢ)/Σⱼ exp(βxⱼ) = exp(βxᵢ − log Σⱼ exp(βxⱼ)) (the symbolic proof).  In floating
point both forms are computed from the row's max μ (the primitive is exp(βx − μ)/z; the log-sum-exp μ + log z), so a
tiny probability underflows alike: where βxᵢ − μ − log z is below the smallest double both give 0, and above it both
give the same value up to rounding (a subnormal one within its spacing, far below any tolerance).  A masked (−∞)
score is 0 in both (exp(−∞ − μ)/z; exp(−∞ − LSE)); a row all −∞ is NaN in both (0/0; exp(−∞ − (−∞))).  A +∞ score
is NaN in both at its place and the rest of its row 0 in the SoftMax and NaN in exp(x − LSE) (∞ − ∞), or 0 where the
gather took a finite score first: the proofs draw scores βx finite (spread up to ±10⁴ so that probabilities
underflow) or −∞ (x = +∞ where β < 0).

Termination: the rule removes a SoftMax and makes none, so a prepared form applies it at most once per SoftMax.

>>> import napkin_cat as nc
>>> b = nc.Builder(nc.types("n v") @ nc.types("n", dtype=nc.INT32))
>>> L, t = b.inputs
>>> p = b.build(b(nc.gather("n v, n -> n"), b(nc.softmax("n v", over="v"), L), t))
>>> sorted(b.data.kind for b in softmax_of_gathered.apply(p).boxes if b.data is not None)
['eq', 'exp', 'gather', 'gather', 'position', 'reduce_logsumexp', 'sub', 'where']
"""
from __future__ import annotations

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import Pattern, kind
from rewrites.log_probability import gather_before_maps, gather_of_map, index_inputs, scores_less_lse
from rewrites.normal_form_boxes import box_like, reduced


def _sig(names) -> str:
    return " ".join(names) or "()"


def _gathered_axis(node) -> str:
    (a,) = [n for n in node.dom[0].names if n not in node.spec.weave_names]
    return a


def _read_by_the_gather_alone(m):
    s, g = m.nodes["s"], m.nodes["g"]
    others = [c for c in m.net.consumers(s) if c != (g, 0)]
    return not others or (f"the SoftMax is read by {len(others)} other reader(s) besides the gather: another reader "
                          f"needs the whole SoftMax (legal: the gather its only reader)")


def _along_a_reduced_axis(m):
    a, over = _gathered_axis(m.node("g")), reduced(m.node("s"))
    return a in over or (f"the gather picks along '{a}', which the SoftMax does not reduce (it reduces "
                         f"{list(over)}): legal is a gather along one of those")


def _one_format(m):
    """The SoftMax and the gathered table are in one format at one level (the index may be another)."""
    s, g = m.node("s"), m.node("g")
    arrays = {(a.level, a.dtype) for a in (*s.dom, *s.cod, g.dom[0], *g.cod)}
    return len(arrays) == 1 or f"the SoftMax and the gather are in {len(arrays)} formats or levels (legal: one)"


def _gathered_softmax_rhs(m):
    s, g = m.node("s"), m.node("g")
    probs = s.cod[0]
    b, ins = m.wiring()
    logp = scores_less_lse(b, s, ins[("s", 0)], probs)
    p = b(box_like("exp", [probs], probs), logp)
    hole = m.finish(b, {("g", 0): b(g.box, p, ins[("g", 1)])})
    return gathered_first(hole)


def gathered_first(hole):
    """``hole`` (the SoftMax written exp(βx − LSE), gathered) with the gather taken before the exponential and the
    subtraction by ``gather_before_maps``; as it is where that rule's conditions refuse (an index over axes the
    table lacks: gathered first, the maps would run on more values)."""
    for cand in gather_before_maps.candidates(hole):
        try:
            return gather_before_maps.apply(hole, cand)
        except RewriteError:
            continue
    return hole


# ---------------------------------------------------------------------- the proof obligation
def softmax_of_gathered_instance(rng):
    """SoftMax_β(x) over one or two random axes (rows one or two, in any order), at a random β, gathered along one
    reduced axis at an index over some of the other axes (at times an axis of its own too: the gather then stays
    after the maps), the gather's output in any order, x maybe read again."""
    rows = [str(n) for n in rng.permutation(["n", "h"])[:int(rng.integers(1, 3))]]
    over = [str(n) for n in rng.permutation(["v", "w"])[:1 + int(rng.random() < 0.3)]]
    names = [str(n) for n in rng.permutation(rows + over)]
    sig = _sig(names)
    a = over[int(rng.integers(len(over)))]
    rest = [n for n in names if n != a]
    idx = [n for n in rows if rng.random() < 0.7] or rows[:1]
    extra = ["k"] if rng.random() < 0.2 else []
    beta = [1, 0.5, 2, -1][int(rng.integers(4))]
    b = nc.Builder(nc.types(sig) @ nc.types(_sig(idx + extra), dtype=nc.INT32))
    X, t = b.inputs
    probs = b(nc.softmax(sig, over=over, beta=beta), X)
    y = b(nc.gather(f"{sig}, {_sig(idx + extra)} -> {_sig(rng.permutation(rest + extra))}"), probs, t)
    return b.build(y, b(nc.elementwise("exp", sig), X)) if rng.random() < 0.3 else b.build(y)


def spread_scores(rng, diagram, sizes):
    """Indices along the gathered axis (:func:`rewrites.log_probability.index_inputs`: mostly positions, some −1 and
    the axis's size); the scores at a spread of 1, 30 or 10⁴ (probabilities underflow at the last), some entries (at
    times a whole row) masked: the score βx is −∞ there (x = −∞ at β > 0, +∞ at β < 0)."""
    xs = index_inputs(rng, diagram, sizes)
    betas = [dict(box.data.params).get("beta", 1) for box in diagram.boxes
             if getattr(box.data, "kind", None) == "softmax"]
    masked = -np.inf if not betas or float(betas[0]) > 0 else np.inf
    for i, x in enumerate(xs):
        if not np.issubdtype(np.asarray(x).dtype, np.integer):
            x = x * [1.0, 30.0, 1e4][int(rng.integers(3))]
            x[rng.random(x.shape) < [0.0, 0.2, 0.5][int(rng.integers(3))]] = masked
            if x.ndim and rng.random() < 0.3:
                x[(0,) * (x.ndim - 1)] = masked   # a line along the last axis masked whole
            xs[i] = x
    return xs


def softmax_as_exp_of_log():
    """exp(βxᵢ) / Σⱼ exp(βxⱼ) = exp(βxᵢ − log Σⱼ exp(βxⱼ)), exactly (any real β and x)."""
    xs = sympy.symbols("x1:5", real=True)
    beta = sympy.Symbol("beta", real=True)
    z = sum(sympy.exp(beta * y) for y in xs)
    for x in xs:
        assert sympy.simplify(sympy.exp(beta * x) / z - sympy.exp(beta * x - sympy.log(z))) == 0, x


def _picked_need_the_statistic_alone(lhs, rhs, m):
    """The cost claim: no transfer changes; where the gather is taken first (an index over the table's axes) the
    exponentials are the log-sum-exp's (one per score, one per row) and one per picked value, where the SoftMax had
    one per score: a row's log and a picked value's exponential more, none of them on the n × v table."""
    s, g = m.node("s"), m.node("g")
    x = s.dom[0]
    scores = sympy.Mul(*(a.size for a in x.axes))
    rows = sympy.Mul(*(a.size for a in x.axes if a.name not in reduced(s)))
    picked = sympy.Mul(*(a.size for a in g.cod[0].axes))
    before, after = nc.cost(lhs), nc.cost(rhs)
    assert sympy.expand(nc.cost(s.box).flops.get("special", 0) - scores) == 0, "one exponential per score"
    first = set(g.dom[1].names) <= set(g.dom[0].names)
    more = rows + (picked if first else scores)
    grew = after.flops.get("special", 0) - before.flops.get("special", 0)
    assert sympy.expand(grew - more) == 0, f"special FLOPs grew by {grew}, not {more}"
    for lv in set(before.H) | set(after.H):
        assert sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed on the function"


softmax_of_gathered = Rule(
    "softmax_of_gathered",
    Pattern({"s": kind("softmax"), "g": kind("gather")}, [("s", 0, "g", 0)]),
    _gathered_softmax_rhs,
    conditions=(Condition("read_by_the_gather_alone", _read_by_the_gather_alone,
                          "the SoftMax must be read by the gather alone (another reader needs it whole)"),
                Condition("along_a_reduced_axis", _along_a_reduced_axis,
                          "the gather must pick along an axis the SoftMax reduces"),
                Condition("one_format", _one_format, "the SoftMax and the gather must compute in one format")),
    obligation=Obligation(softmax_of_gathered_instance, inputs=spread_scores,
                          symbolic=(softmax_as_exp_of_log, gather_of_map), cost=_picked_need_the_statistic_alone,
                          rtol=1e-9, atol=1e-12),
    doc="""gather_a(SoftMax_{A,β}(x), t) → [0 ≤ t < |a|] · exp(gather_a(βx, t) − LSE_A(βx)), a ∈ A, the gather the
    SoftMax's only reader: a picked probability is its score less the row's log-sum-exp, exponentiated.

    Over any axes ``A``, weaved over the others in any order, at any β (a scale of the scores where β ≠ 1), the
    gather's index over any of the other axes.  The composite of SoftMax = exp(βx − LSE) and ``gather_before_maps``
    (the gather before the exponential and the subtraction; kept after them where that rule refuses): the function
    reads the scores once, for their log-sum-exp, and the picked scores (module docstring: where it does not fire,
    why it is offered, the numerics).""")


RULES = RuleSet((softmax_of_gathered,))

__all__ = ["RULES", "softmax_of_gathered", "gathered_first", "spread_scores"]
