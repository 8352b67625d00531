"""Normalisation layers: LayerNorm and RMSNorm over the feature axis ``d``.

>>> layer_norm().dom
Ty(Array(n×d), Array(d), Array(d))
"""
from __future__ import annotations

from napkin_cat.library.sizing import Sized, given_sizes
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.builder import Builder


def _normalise(b: Builder, X, s, eps, *, centre: bool):
    k = Sized(s)
    nd = "n d"
    if centre:
        mu = b(k.reduce("mean", "n d -> n"), X)
        X = b(k.elementwise("sub", "n d, n -> n d"), X, mu)
    var = b(k.reduce("mean", "n d -> n"), b(k.elementwise("square", nd), X))
    inv = b(k.elementwise("rsqrt", "n"), b(k.elementwise("shift", "n", const=eps), var))
    return b(k.elementwise("mul", "n d, n -> n d"), X, inv)


def layer_norm(n=None, d=None, *, eps: float = 1e-5) -> Diagram:
    """LayerNorm over ``d``: ``γ (x − mean)/sqrt(var + ε) + β``; inputs X: n×d, γ: d, β: d."""
    s = given_sizes(n=n, d=d)
    k = Sized(s)
    b = Builder(k.types("n d, d, d"))
    X, gamma, beta = b.inputs
    y = _normalise(b, X, s, eps, centre=True)
    y = b(k.elementwise("mul", "n d, d -> n d"), y, gamma)
    return b.build(b(k.elementwise("add", "n d, d -> n d"), y, beta))


def rms_norm(n=None, d=None, *, eps: float = 1e-6) -> Diagram:
    """RMSNorm over ``d``: ``γ x / sqrt(mean(x²) + ε)``; inputs X: n×d, γ: d."""
    s = given_sizes(n=n, d=d)
    k = Sized(s)
    b = Builder(k.types("n d, d"))
    X, gamma = b.inputs
    y = _normalise(b, X, s, eps, centre=False)
    return b.build(b(k.elementwise("mul", "n d, d -> n d"), y, gamma))
