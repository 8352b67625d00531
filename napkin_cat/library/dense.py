"""Dense layers: matrix multiplication, a linear layer, a two-layer MLP (paper §3.1).

>>> matmul().cod
Ty(Array(a×c))
>>> [b.name for b in mlp(activation="relu").boxes if b.name not in ("·", "add")]
['relu']
"""
from __future__ import annotations

from napkin_cat.library.sizing import _Sized, _sizes
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import einsum


def matmul(a=None, b=None, c=None) -> Diagram:
    """Matrix multiplication ``(a b, b c) -> a c``: contraction weaved over a and c (§3.1)."""
    return einsum("a b, b c -> a c", **_sizes(a=a, b=b, c=c))


def linear(n=None, i=None, o=None, *, bias: bool = True) -> Diagram:
    """``X W + b`` with X: n×i, W: i×o, b: o (inputs in that order)."""
    s = _sizes(n=n, i=i, o=o)
    k = _Sized(s)
    mm = k.einsum("n i, i o -> n o")
    if not bias:
        return mm
    b = Builder(k.types("n i, i o, o"))
    X, W, bias_ = b.inputs
    return b.build(b(k.elementwise("add", "n o, o -> n o"), b(mm, X, W), bias_))


def mlp(n=None, i=None, f=None, o=None, *, activation: str = "gelu") -> Diagram:
    """Two-layer MLP ``act(X W₁ + b₁) W₂ + b₂``; inputs X, W₁, b₁, W₂, b₂."""
    s = _sizes(n=n, i=i, f=f, o=o)
    k = _Sized(s)
    b = Builder(k.types("n i, i f, f, f o, o"))
    X, W1, b1, W2, b2 = b.inputs
    h = b(k.elementwise("add", "n f, f -> n f"), b(k.einsum("n i, i f -> n f"), X, W1), b1)
    h = b(k.elementwise(activation, "n f"), h)
    y = b(k.elementwise("add", "n o, o -> n o"), b(k.einsum("n f, f o -> n o"), h, W2), b2)
    return b.build(y)
