"""Obligations of the multi-pass normalisers (``rewrites.normalisers``): a statistics pass and a normalising pass
compute what the one-pass normaliser computes, at random sizes and temperatures, logits up to ±1e4 with masked
(−∞) entries; the rules' cost claims; and the refusals that keep attention's SoftMax in one pass."""
import numpy as np
import pytest

import napkin_cat as nc
from rewrites.normalisers import softmax_statistics_pass

proves = pytest.mark.proves


@proves("softmax_statistics_pass")
def test_softmax_statistics_pass_is_sound():
    proof = softmax_statistics_pass.obligation.discharge(softmax_statistics_pass, trials=24)
    assert proof.rewrites >= 24 and proof.max_error < 1e-9 and proof.cost_checked
    assert proof.symbolic == ("exp_of_shifted_lse",)


def test_the_statistics_pass_streams_and_the_normalising_pass_maps():
    sm = nc.softmax("n v", over="v", beta=0.5)
    r = nc.derive(sm, memory=8, sizes={"n": 3, "v": 11}, tiles="any")
    assert r.variant.prepared == ("softmax_statistics_pass",) and len(r.variant.kernels) == 2
    assert r.variant.kernels[0].stream == "v" and not r.variant.kernels[0].sliced
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3, 11)) * 30
    X[0, :5] = -np.inf
    want = nc.evaluate(sm, X)
    np.testing.assert_allclose(nc.evaluate(r.diagram, X, sizes=r.optimum.sizes), want, rtol=1e-12)


@pytest.mark.parametrize("build, why", [
    (nc.library.attention, "row_is_the_output"),
    (lambda: nc.softmax("v", over="v"), "rows"),
])
def test_the_rule_leaves_a_softmax_that_streams_in_one_pass_or_has_no_rows(build, why):
    with pytest.raises(nc.RewriteError, match=why):
        softmax_statistics_pass.apply(build())


@proves("centred_statistics_pass")
def test_centred_statistics_pass_is_sound():
    from rewrites.normalisers import centred_statistics_pass
    proof = centred_statistics_pass.obligation.discharge(centred_statistics_pass, trials=16)
    assert proof.rewrites >= 16 and proof.max_error < 1e-6 and proof.cost_checked
    assert proof.symbolic == ("variance_identity",)


def test_the_centred_rule_leaves_a_variance_of_another_array():
    from rewrites.normalisers import centred_statistics_pass
    b = nc.Builder(nc.types("n d, n d"))
    X, Y = b.inputs
    mu = b(nc.reduce("mean", "n d -> n"), X)
    c = b(nc.elementwise("sub", "n d, n -> n d"), Y, mu)
    var = b(nc.reduce("mean", "n d -> n"), b(nc.elementwise("square", "n d"), c))
    with pytest.raises(nc.RewriteError, match="another array"):
        centred_statistics_pass.apply(b.build(c, var))
