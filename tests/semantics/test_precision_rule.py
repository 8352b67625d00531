"""One precision rule for every numeric comparison (``semantics.precision``): ``nc.equivalent`` and a rule's proof
obligation (``rewriting.obligation``) read it; declared formats narrower than the default count; and the
function's condition number ``κ`` (measured by perturbing its inputs, float64 only) widens ``rtol`` to
``min(C·(n + κ)·u, √u)``.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.errors import ObligationError
from napkin_cat.rewriting import Obligation, Rule
from napkin_cat.rewriting.match import Pattern, kind
from napkin_cat.semantics.precision import UNDECLARED, Precision, agreements, perturbed, precision_of

SIG = "q x"


def _scale(by, dtype="fp32"):
    return nc.elementwise("scale", SIG, const=by, dtype=dtype)


def _exp_rule(rhs, obligation):
    return Rule("exp_rewritten", Pattern({"f": kind("exp")}), lambda m: rhs, obligation=obligation)


# --------------------------------------------------------------------------- 1. the obligations read the rule
def test_an_obligation_proves_a_correct_rule_in_float64():
    """exp(x) → 1 / exp(−x): the same function, rounded otherwise (a few ulps): within C·n·u."""
    rhs = _scale(-1.0) >> nc.elementwise("exp", SIG) >> nc.elementwise("recip", SIG)
    rule = _exp_rule(rhs, Obligation(lambda rng: nc.elementwise("exp", SIG), trials=6))
    proof = rule.obligation.discharge(rule)
    assert proof.rewrites == 6 and 0 < proof.max_error < 1e-12


def test_an_obligation_rejects_a_rule_off_by_1e_9():
    """exp(x) → exp(x)·(1 + 1e-9): the obligation's old fixed 1e-6/1e-8 let it through; float64's rule does not."""
    rhs = nc.elementwise("exp", SIG) >> _scale(1 + 1e-9)
    rule = _exp_rule(rhs, Obligation(lambda rng: nc.elementwise("exp", SIG), trials=3))
    with pytest.raises(ObligationError, match=r"unsound: counterexample .*tolerance in float64: rtol"):
        rule.obligation.discharge(rule)
    old = _exp_rule(rhs, Obligation(lambda rng: nc.elementwise("exp", SIG), trials=3, rtol=1e-6, atol=1e-8))
    assert old.obligation.discharge(old).rewrites == 3           # an explicit tolerance still replaces the rule


def test_an_obligation_in_fp32_follows_the_cast():
    """A cast to fp32 on the right-hand side: fp32's u (an fp32 rounding passes, a 1e-3 error does not)."""
    rounded = nc.cast(SIG, to="fp32") >> nc.elementwise("exp", SIG)
    ok = _exp_rule(rounded, Obligation(lambda rng: nc.elementwise("exp", SIG), trials=3))
    assert ok.obligation.discharge(ok).max_error > 1e-9
    wrong = _exp_rule(rounded >> _scale(1 + 1e-3), Obligation(lambda rng: nc.elementwise("exp", SIG), trials=3))
    with pytest.raises(ObligationError, match=r"tolerance in fp32 \(cast in the second diagram\)"):
        wrong.obligation.discharge(wrong)


# --------------------------------------------------------------------------- 2. declared formats
def _declared(fmt, const=0.3):
    return nc.elementwise("exp", SIG, dtype=fmt) >> nc.elementwise("scale", SIG, const=const, dtype=fmt)


def test_a_declared_format_without_a_cast_sets_the_precision():
    f = nc.library.attention(formats={"S": "fp16", "P": "fp16", "V": "fp16", "O": "fp16"})
    assert not any(b.name == "cast" for b in f.boxes)
    p = precision_of(f)
    assert p.format == "fp16" and "declared" in p.where
    assert precision_of(nc.library.attention()).format == "float64"      # the default format declares nothing
    assert UNDECLARED.name == "fp32"


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_a_constant_rounded_to_the_declared_format_is_accepted(fmt):
    """A kernel storing in fp16 (bf16) holds 0.3 rounded to it: a correct algorithm at the declared format, whose
    error float64's tolerance rejects; the same constant 3% off is rejected."""
    held = float(nc.syntax.dtype.as_dtype(fmt).quantize(np.float64(0.3)))
    assert held != 0.3
    v = nc.equivalent(_declared(fmt), _declared(fmt, held))
    assert v and v.precision.format == fmt and v.max_error > 1e-5
    assert not nc.equivalent(_declared("fp32"), _declared("fp32", held))        # undeclared: float64
    assert not nc.equivalent(_declared(fmt), _declared(fmt, 0.3 * 1.2))          # bf16's cap: 12.5% (item 3)


def test_a_derived_fp16_attention_is_accepted_and_a_wrong_one_rejected():
    formats = {"S": "fp16", "P": "fp16", "V": "fp16", "O": "fp16"}
    f, sizes = nc.library.attention(formats=formats), {"q": 32, "x": 48, "d": 16}
    algorithm = nc.derive(f, 256, sizes=sizes).diagram
    out = f.cod.inside[0]
    axes = {a.name: a.size for a in out.axes}
    once_more = nc.cast(" ".join(out.names), to="fp16", dtype="fp16", **axes)     # O stored in fp16 once more
    off = nc.elementwise("scale", " ".join(out.names), const=1.1, dtype="fp16", **axes)
    v = nc.equivalent(f, algorithm, sizes=sizes)
    assert v and v.precision.format == "fp16"
    assert nc.equivalent(f, algorithm >> once_more, sizes=sizes)
    assert not nc.equivalent(f, algorithm >> off, sizes=sizes)


# --------------------------------------------------------------------------- 3. the condition number κ
def _two_pass():
    from rewrites.normalisers import softmax_statistics_pass
    sm = nc.softmax("n v", over="v")
    return sm, softmax_statistics_pass.apply(sm)


def test_kappa_is_measured_where_rounding_errors_grow_past_n():
    """exp(x − LSE) rounds LSE (≈ 300) before the exp: 300·u off where the one-pass SoftMax is not."""
    x = np.array([300.0, 299.0, 298.5])
    rng = np.random.default_rng(0)

    def one(x, r=lambda v: v):
        e = r(np.exp(r(x - x.max())))
        return (r(e / r(e.sum())),)

    def two(x, r=lambda v: v, by=1.0):
        lse = r(x.max() + r(np.log(r(r(np.exp(r(x - x.max()))).sum()))))
        return (r(np.exp(r(x - lse))) * by,)

    def rerun(by=1.0):
        r = lambda v: perturbed([v], rng)[0]       # noqa: E731
        return lambda: (one(x, r), two(x, r, by))

    (plain,) = agreements(one(x), two(x), Precision(), 3)
    (measured,) = agreements(one(x), two(x), Precision(), 3, rerun=rerun())
    assert not plain and plain.kappa == 0
    assert measured and 50 < measured.kappa < 3000 and measured.rtol > plain.rtol
    (wrong,) = agreements(one(x), two(x, by=1 + 1e-9), Precision(), 3, rerun=rerun(1 + 1e-9))
    assert not wrong and wrong.kappa > 50                  # κ·u is 1e-13 at most: 1e-9 is rejected
    # not in a narrower precision, nor with an explicit rtol
    (fp32,) = agreements(one(x), two(x, by=1 + 1e-4), Precision("fp32", 23), 3, rerun=rerun(1 + 1e-4))
    assert not fp32 and fp32.kappa == 0
    assert not agreements(one(x), two(x), Precision(), 3, rtol=1e-16, rerun=rerun())[0]


@pytest.mark.parametrize("scale", [1e2, 1e3])
def test_logits_of_a_thousand_pass_the_two_pass_softmax_and_a_wrong_one_fails(scale):
    sm, two = _two_pass()
    v = nc.equivalent(sm, two, scale=scale, trials=4)
    assert v, v.message
    wrong = two >> nc.elementwise("scale", "n v", const=1 + 1e-9)
    v = nc.equivalent(sm, wrong, scale=scale, trials=4)
    assert not v and "κ" in v.message
