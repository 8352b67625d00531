"""The SoftMax rules' symbolic proofs (paper Table 4, Fig. softmax_stream), in sympy: the identities the rules of
:mod:`rewrites.softmax` carry as their obligations.

* :func:`online_softmax_identity`: combining two chunks' ``(μ, z, y)`` is the unsplit SoftMax-contraction, whatever
  the baselines;
* :func:`table4_identity`: Auxiliary SoftMax expanded chunk by chunk (``rhs(step(x⃗, μ′, z′))``, Table 4's
  SoftMax₁ then SoftMax₀) is the SoftMax of the concatenation, and ``δz′·e^μ`` the prior sum, rebased;
* :func:`division_identity`: a division moved after a contraction, ``(Σ_x s_x v_x)/z = Σ_x (s_x/z) v_x``.

>>> division_identity()
>>> table4_identity()
"""
from __future__ import annotations

import functools

import numpy as np
import sympy


def online_softmax_identity():
    """Combining (μ₁, z₁, y₁) and (μ₂, z₂, y₂) is the unsplit SoftMax-contraction (any baselines)."""
    xs, vs = sympy.symbols("x1:6", real=True), sympy.symbols("v1:6", real=True)
    m1, m2, m = sympy.symbols("m1 m2 m", real=True)
    halves = ((xs[:2], vs[:2], m1), (xs[2:], vs[2:], m2))
    parts = []
    for x, v, base in halves:
        z = sum(sympy.exp(xi - base) for xi in x)
        o = sum(sympy.exp(xi - base) * vi for xi, vi in zip(x, v))  # unscaled accumulator
        parts.append((base, z, o))
    (b1, z1, o1), (b2, z2, o2) = parts
    d1, d2 = sympy.exp(b1 - m), sympy.exp(b2 - m)
    z = d1 * z1 + d2 * z2
    y = (d1 * o1 + d2 * o2) / z
    y_aux = (d1 * z1 * (o1 / z1) + d2 * z2 * (o2 / z2)) / z  # auxiliary: rescale y′ by δz′/z
    target = sum(sympy.exp(xi) * vi for xi, vi in zip(xs, vs)) / sum(sympy.exp(xi) for xi in xs)
    assert sympy.simplify(sympy.powsimp(sympy.expand(y - target))) == 0, "unscaled combine"
    assert sympy.simplify(sympy.powsimp(sympy.expand(y_aux - target))) == 0, "auxiliary combine"
    assert sympy.simplify(z - sum(sympy.exp(xi - m) for xi in xs)) == 0, "running sum"


def unscaled_step(x, beta, mu_prev, z_prev):
    """Table 4's SoftMax₁(x⃗, (μ′, ·, z′)) → (s⃗, μ, δ, z), in sympy: the rule's right-hand side runs it."""
    mu = sympy.Max(*(beta * xi for xi in x), mu_prev)
    s = [sympy.exp(beta * xi - mu) for xi in x]
    delta = sympy.exp(mu_prev - mu)
    return s, mu, delta, delta * z_prev + sum(s)


def auxiliary_from_unscaled(s, mu, delta, z, z_prev):
    """The right-hand side of ``auxiliary_to_unscaled``: SoftMax₀'s outputs (s⃗/z, μ, δ·z′, z) from SoftMax₁'s."""
    return [si / z for si in s], mu, delta * z_prev, z


def textbook_softmax(scores, beta):
    """The textbook SoftMax exp(βxᵢ) / Σⱼ exp(βxⱼ), with no running maximum."""
    total = sum(sympy.exp(beta * xj) for xj in scores)
    return [sympy.exp(beta * xi) / total for xi in scores]


def same_value(a, b) -> bool:
    """a = b: refuted fast at seeded random points, else proved by sympy."""
    diff = a - b
    rng = np.random.default_rng(0)
    for _ in range(3):
        point = {s: sympy.Float(rng.uniform(0.1, 2.0) if s.is_positive else rng.normal()) for s in diff.free_symbols}
        if abs(complex(diff.subs(point).evalf())) > 1e-9:
            return False
    return sympy.simplify(sympy.powsimp(sympy.expand(sympy.powsimp(diff)))) == 0


@functools.cache
def table4_identity(step=unscaled_step, rhs=auxiliary_from_unscaled):
    """Recursively expanded Auxiliary SoftMax is the SoftMax of the concatenation (Table 4, Fig. softmax_stream).

    A prior chunk x⃗′ is summarised, as Base SoftMax computes them, by μ′ = max βx′ⱼ and
    z′ = Σⱼ exp(βx′ⱼ − μ′).  SoftMax₀(x⃗, (μ′, z′)), built as ``rhs(step(x⃗, μ′, z′))``, must give
    y⃗ = the SoftMax of x⃗′ ++ x⃗ restricted to x⃗, δz′·e^μ = Σⱼ exp(βx′ⱼ) (the prior sum, rebased)
    and z·e^μ = Σ over x⃗′ ++ x⃗ (the running sum), each compared with the textbook formula; and
    from Initialize() = (−∞, 0) it gives SoftMax(x⃗).  A check that passed is kept per (step, rhs) (both rules'
    obligations and the proofs call it with the same two): it runs once per process; one that fails raises each time.

    >>> table4_identity() is None and table4_identity.cache_info().currsize >= 1
    True
    """
    x, prior = sympy.symbols("x1:4", real=True), sympy.symbols("p1:3", real=True)
    beta = sympy.Symbol("beta", positive=True)
    mu_prev = sympy.Max(*(beta * p for p in prior))
    z_prev = sum(sympy.exp(beta * p - mu_prev) for p in prior)
    y, mu, dz, z = rhs(*step(x, beta, mu_prev, z_prev), z_prev)
    whole = textbook_softmax(prior + x, beta)[len(prior):]
    assert all(same_value(a, b) for a, b in zip(y, whole)), "y is not the softmax of the concatenation"
    assert same_value(dz * sympy.exp(mu), sum(sympy.exp(beta * p) for p in prior)), "δz′ is not the rebased prior sum"
    assert same_value(z * sympy.exp(mu), sum(sympy.exp(beta * v) for v in prior + x)), "z is not the running sum"
    y0, _, _, z0 = rhs(*step(x, beta, -sympy.oo, 0), 0)
    assert all(same_value(a, b) for a, b in zip(y0, textbook_softmax(x, beta))), "from Initialize() it is not SoftMax"
    assert same_value(z0 * sympy.exp(sympy.Max(*(beta * xi for xi in x))), sum(sympy.exp(beta * xi) for xi in x)), \
        "from Initialize() z is not the sum"


def division_identity():
    """Σᵢ (nᵢ/z) vᵢ = (Σᵢ nᵢ vᵢ)/z: a contraction is linear in each operand."""
    n, v = sympy.symbols("n1:5", real=True), sympy.symbols("v1:5", real=True)
    z = sympy.Symbol("z", positive=True)
    assert sympy.simplify(sum(ni / z * vi for ni, vi in zip(n, v)) - sum(ni * vi for ni, vi in zip(n, v)) / z) == 0


__all__ = ["online_softmax_identity", "unscaled_step", "auxiliary_from_unscaled", "textbook_softmax", "same_value",
           "table4_identity", "division_identity"]
