"""The recomputation rule's proof beyond its random instances: what it recomputes (the statistics are read, not
recomputed), that its claim is exact on a row-normalised map (SoftMax's probabilities from a saved per-row
statistic, as FlashAttention-2's backward recomputes them), and that the check fails on a wrong rewrite."""
from __future__ import annotations

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import ObligationError
from napkin_cat.rewriting import Rule
from rewrites.recompute import recompute, recomputed

proves = pytest.mark.proves


def normalised():
    """``P = exp(S − lse(S))`` with ``S = Q Kᵀ`` (SoftMax written from its log-sum-exp), read by ``P V`` and
    ``Pᵀ W``: the recomputed copy reads the per-row statistic ``lse`` and recomputes ``S`` and ``P``."""
    b = nc.Builder(nc.types("q d, x d, x e, q e"))
    Q, K, V, W = b.inputs
    S = b(nc.einsum("q d, x d -> q x"), Q, K)
    lse = b(nc.reduce("logsumexp", "q x -> q"), S)
    P = b(nc.elementwise("exp", "q x"), b(nc.elementwise("sub", "q x, q -> q x"), S, lse))
    return b.build(b(nc.einsum("q x, x e -> q e"), P, V), b(nc.einsum("q x, q e -> x e"), P, W))


@proves("recompute")
def test_the_statistic_is_read_and_the_rest_recomputed():
    f = normalised()
    (m,) = [m for m in recompute.matches(f) if m.node("f").name == "exp" and m.params["consumer"] == 1]
    again = sorted(m.net.nodes[k].name for k in recomputed(m))
    assert again == ["exp", "sub", "·"]                     # not the log-sum-exp: a statistic over q only
    g = recompute.apply(f, m)
    assert [b.name for b in g.boxes].count("LSE") == 1
    assert nc.equivalent(f, g, trials=3)
    q, x, d = (nc.symbol(a) for a in "qxd")
    grow = {k: sympy.expand(nc.cost(g).flops.get(k, 0) - nc.cost(f).flops.get(k, 0)) for k in nc.cost(g).flops}
    assert grow["tensor"] == 2 * q * x * d                    # S again
    assert grow["special"] == q * x                           # exp again
    assert grow.get("general", 0) == q * x                    # the subtraction again


@proves("recompute")
def test_a_wrong_rewrite_fails_the_check():
    """A right-hand side of the right type that doubles one output is caught by the obligation."""
    bad = Rule("bad_recompute", recompute.pattern, lambda m: _scaled(recompute.rhs(m)), recompute.conditions,
               recompute.obligation, choices=recompute.choices)
    with pytest.raises(ObligationError):
        for seed in range(6):
            bad.obligation.check_instance(bad, seed)


def _scaled(d):
    """``d`` with its last output doubled (a wrong right-hand side of the right type)."""
    n = len(d.cod)
    last = d.cod.inside[-1]
    sig = " ".join(last.names)
    double = nc.elementwise("add", f"{sig}, {sig} -> {sig}")
    b = nc.Builder(d.dom)
    outs = b(d, *b.inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return b.build(*outs[:n - 1], b(double, outs[-1], outs[-1]))


def test_normalised_is_what_numpy_says():
    rng = np.random.default_rng(0)
    Q, K, V, W = rng.normal(size=(3, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 5)), rng.normal(size=(3, 5))
    S = Q @ K.T
    P = np.exp(S - np.log(np.exp(S).sum(1, keepdims=True)))
    y = nc.evaluate(normalised(), Q, K, V, W)
    np.testing.assert_allclose(y[0], P @ V, rtol=1e-10)
    np.testing.assert_allclose(y[1], P.T @ W, rtol=1e-10)


@proves("softmax_to_logsumexp", "recompute")
def test_attentions_backward_recomputes_the_probabilities_from_the_saved_log_sum_exp():
    """FlashAttention-2's backward (Dao 2023, Alg. 2, line 11: Pᵢⱼ = exp(Sᵢⱼ − Lᵢ)): SoftMax written through its
    log-sum-exp, then the probabilities recomputed for one consumer read L and recompute only S, its scale, the
    subtraction and the exponential; the gradient is unchanged."""
    from rewrites.softmax_statistics import softmax_to_logsumexp
    grad = nc.grad(nc.library.attention())
    lse = softmax_to_logsumexp.apply(grad)
    assert nc.equivalent(grad, lse, trials=2)
    (m,) = [m for m in recompute.matches(lse) if m.node("f").name == "exp" and m.params["consumer"] == 0]
    assert sorted(m.net.nodes[k].name for k in recomputed(m)) == ["exp", "scale", "sub", "·"]
    again = recompute.apply(lse, m)
    assert [b.name for b in again.boxes].count("LSE") == 1 and [b.name for b in again.boxes].count("exp") == 2
    assert nc.equivalent(grad, again, trials=2)
