"""``equivalent``'s tolerance follows the precision the comparison evaluates in (``semantics.precision``).

The law: entries agree when ``|a − b| ≤ rtol·|b| + atol``, ``rtol = C·n·u`` (``u`` the unit roundoff of the narrowest
format a cast of either diagram rounds to, float64's when none does; ``n`` the sum of the axes' lengths),
``atol = rtol·max|b|``; an explicit ``rtol`` or ``atol`` replaces its default.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.semantics.precision import SAFETY, Precision, default_rtol, precision_of, precision_of_values

ALIBI_SIZES = {"q": 61, "x": 139, "d": 20}


@pytest.fixture(scope="module")
def alibi():
    """Non-causal ALiBi and its algorithm derived at a small memory: its bias is cast to fp32 (the scores' format),
    and the algorithm scales it once by slope·√d where the function scales it twice, each rounding in fp32."""
    f = nc.library.alibi_attention(0.3, causal=False)
    return f, nc.derive(f, 256, sizes=ALIBI_SIZES).diagram


def _scaled(f, by):
    """``f`` with its one output multiplied by ``by``: a wrong algorithm, off by ``by − 1`` relative."""
    out = f.cod.inside[0]
    return f >> nc.elementwise("scale", " ".join(out.names), const=by, dtype=out.dtype,
                               sizes={a.name: a.size for a in out.axes})


# --------------------------------------------------------------------------- fp32: a cast in the diagrams
def test_a_correct_alibi_algorithm_is_accepted_in_fp32(alibi):
    f, algorithm = alibi
    v = nc.equivalent(f, algorithm, sizes=ALIBI_SIZES)
    assert v, v.message
    assert v.precision.format == "fp32" and "cast" in str(v.precision)
    n = sum(ALIBI_SIZES.values())
    assert v.rtol == default_rtol(Precision("fp32", 23), n) == SAFETY * n * 2.0 ** -24
    assert 1e-6 < v.max_error < v.atol         # off by more than float64's old 1e-6/1e-8 allowed
    # the float64 tolerance it had before rejects it: the default is what changed
    assert not nc.equivalent(f, algorithm, sizes=ALIBI_SIZES, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_wrong_alibi_algorithm_is_rejected_in_fp32(alibi, seed):
    f, algorithm = alibi
    v = nc.equivalent(f, _scaled(algorithm, 1 + 1e-3), sizes=ALIBI_SIZES, seed=seed)
    assert not v and v.precision.format == "fp32" and "tolerance in fp32" in v.message
    assert not nc.equivalent(f, _scaled(f, 1 + 1e-3), seed=seed)       # random sizes too


def test_a_rule_broken_on_purpose_is_rejected_in_fp32(alibi):
    """ALiBi with another slope (0.3 → 0.3003): the bias of a rule that dropped a rounding of the slope."""
    f, _ = alibi
    v = nc.equivalent(f, nc.library.alibi_attention(0.3003, causal=False), sizes=ALIBI_SIZES)
    assert not v and v.precision.format == "fp32"


def test_a_whole_output_off_by_1e_3_is_rejected_in_fp32_at_any_size():
    """Past n·C·u = √u (n ≈ 1000 in fp32) the tolerance stops growing: 1e-3 stays above 2·√u."""
    f = nc.cast("a", to="fp32") >> nc.elementwise("exp", "a")
    big = {"a": 5000}
    assert default_rtol(precision_of(f), 5000) == 2.0 ** -12 < SAFETY * 5000 * 2.0 ** -24
    assert nc.equivalent(f, _scaled(f, 1 + 1e-4), sizes=big)
    v = nc.equivalent(f, _scaled(f, 1 + 1e-3), sizes=big)
    assert not v and v.rtol == 2.0 ** -12


def test_an_fp16_algorithm_is_compared_in_fp16():
    """P and V cast to fp16: the derived algorithm rounds other values than the function (1.6e-4 off), which
    float64's tolerance (and the old 1e-6) rejected; a 10% error is still rejected."""
    f, sizes = nc.library.attention(formats={"P": "fp16", "V": "fp16"}), {"q": 32, "x": 48, "d": 16}
    algorithm = nc.derive(f, 256, sizes=sizes).diagram
    v = nc.equivalent(f, algorithm, sizes=sizes)
    assert v and v.precision.format == "fp16" and v.max_error > 1e-5
    assert not nc.equivalent(f, algorithm, sizes=sizes, rtol=1e-6, atol=1e-8)
    assert not nc.equivalent(f, _scaled(algorithm, 1.1), sizes=sizes)


# --------------------------------------------------------------------------- float64: nothing rounds
def test_float64_keeps_a_tight_tolerance():
    f = nc.library.attention()
    assert precision_of(f).format == "float64"
    assert nc.equivalent(f, nc.stream(f, "x", "s_x"))
    for off in (1e-3, 1e-7):
        v = nc.equivalent(f, _scaled(f, 1 + off))
        assert not v and v.precision.format == "float64" and v.rtol < 1e-12, off
    assert nc.equivalent(f, _scaled(f, 1 + 1e-7), rtol=1e-6, atol=1e-8)      # the old default let 1e-7 through


def test_the_same_error_passes_in_fp32_and_fails_in_float64():
    """One relative error of 1e-7, below fp32's tolerance and above float64's: the verdict follows the precision."""
    f64 = nc.elementwise("exp", "a b")
    f32 = nc.cast("a b", to="fp32") >> f64
    assert precision_of(f32).format == "fp32"
    assert nc.equivalent(f32, _scaled(f32, 1 + 1e-7))
    assert not nc.equivalent(f64, _scaled(f64, 1 + 1e-7))


def test_the_narrowest_cast_anywhere_sets_the_precision():
    half = nc.cast("a b", to="fp16") >> nc.cast("a b", to="fp32", dtype="fp16")
    inside = nc.stream(nc.kernel(nc.einsum("a b -> a") >> nc.elementwise("exp", "a")), "b", "s_b")
    p = precision_of(inside)
    assert p.format == "float64" and p.unit_roundoff == 2.0 ** -53
    assert precision_of(half).format == "fp16" and precision_of(half).unit_roundoff == 2.0 ** -11
    region = nc.stream(nc.kernel(half >> nc.einsum("a b -> a")), "b", "s_b")        # the cast inside a region
    assert precision_of(region).format == "fp16"
    v = nc.equivalent(half >> nc.einsum("a b -> a"), region)
    assert v and v.precision.format == "fp16"


def test_the_outputs_numpy_type_counts_where_narrower():
    assert precision_of_values([np.zeros(3), np.arange(3)]).format == "float64"
    p = precision_of_values([np.zeros(3), np.zeros(3, np.float16)], "second")
    assert p.format == "float16" and p.unit_roundoff == 2.0 ** -11 and "second" in str(p)


# --------------------------------------------------------------------------- explicit tolerances
def test_an_explicit_tolerance_wins_and_is_reported():
    f = nc.library.attention()
    v = nc.equivalent(f, _scaled(f, 1 + 1e-3), rtol=0.5)
    assert v and v.rtol == 0.5 and v.atol > 0           # atol: rtol times the output's largest magnitude
    v = nc.equivalent(f, _scaled(f, 1 + 1e-3), rtol=0, atol=10.0)
    assert v and (v.rtol, v.atol) == (0.0, 10.0)


@pytest.mark.parametrize("bad", [-1e-3, float("nan"), float("inf"), "1e-6", True])
def test_a_bad_tolerance_is_refused(bad):
    f = nc.library.attention()
    with pytest.raises(nc.NapkinError, match=r"rtol must be a finite number ≥ 0 \(or None"):
        nc.equivalent(f, f, rtol=bad)
    with pytest.raises(nc.NapkinError, match=r"atol must be a finite number ≥ 0"):
        nc.equivalent(f, f, atol=bad)
