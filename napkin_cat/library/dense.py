"""Dense layers: matrix multiplication, a linear layer, a two-layer MLP, SwiGLU (paper §3.1).

>>> matmul().cod
Ty(Array(a×c))
>>> [b.name for b in mlp(activation="relu").boxes if b.name not in ("·", "add")]
['relu']
>>> swiglu().dom, swiglu_mlp(o=512).cod
(Ty(Array(n×e), Array(e×f), Array(e×f)), Ty(Array(n×o[512])))
"""
from __future__ import annotations

from napkin_cat.library.sizing import Sized, given_sizes
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import einsum


def matmul(a=None, b=None, c=None) -> Diagram:
    """Matrix multiplication ``(a b, b c) -> a c``: contraction weaved over a and c (§3.1)."""
    return einsum("a b, b c -> a c", **given_sizes(a=a, b=b, c=c))


def linear(n=None, i=None, o=None, *, bias: bool = True) -> Diagram:
    """``X W + b`` with X: n×i, W: i×o, b: o (inputs in that order)."""
    s = given_sizes(n=n, i=i, o=o)
    k = Sized(s)
    mm = k.einsum("n i, i o -> n o")
    if not bias:
        return mm
    b = Builder(k.types("n i, i o, o"))
    X, W, bias_ = b.inputs
    return b.build(b(k.elementwise("add", "n o, o -> n o"), b(mm, X, W), bias_))


def mlp(n=None, i=None, f=None, o=None, *, activation: str = "gelu") -> Diagram:
    """Two-layer MLP ``act(X W₁ + b₁) W₂ + b₂``; inputs X, W₁, b₁, W₂, b₂."""
    s = given_sizes(n=n, i=i, f=f, o=o)
    k = Sized(s)
    b = Builder(k.types("n i, i f, f, f o, o"))
    X, W1, b1, W2, b2 = b.inputs
    h = b(k.elementwise("add", "n f, f -> n f"), b(k.einsum("n i, i f -> n f"), X, W1), b1)
    h = b(k.elementwise(activation, "n f"), h)
    y = b(k.elementwise("add", "n o, o -> n o"), b(k.einsum("n f, f o -> n o"), h, W2), b2)
    return b.build(y)


def swiglu(n=None, e=None, f=None) -> Diagram:
    """SwiGLU's gated up-projection ``silu(X W₁) ⊙ (X W₃)`` (Shazeer 2020); inputs X: n×e, W₁, W₃: e×f.

    Both contractions read X: a kernel that fuses them loads it once (``rewrites.shared_load``)."""
    k = Sized(given_sizes(n=n, e=e, f=f))
    b = Builder(k.types("n e, e f, e f"))
    X, W1, W3 = b.inputs
    gate = b(k.elementwise("silu", "n f"), b(k.einsum("n e, e f -> n f"), X, W1))
    return b.build(b(k.elementwise("mul", "n f, n f -> n f"), gate, b(k.einsum("n e, e f -> n f"), X, W3)))


def swiglu_mlp(n=None, e=None, f=None, o=None) -> Diagram:
    """A SwiGLU MLP ``(silu(X W₁) ⊙ (X W₃)) W₂`` (LLaMA's, no biases); inputs X: n×e, W₁, W₃: e×f, W₂: f×o."""
    s = given_sizes(n=n, e=e, f=f, o=o)
    k = Sized(s)
    b = Builder(k.types("n e, e f, e f, f o"))
    X, W1, W3, W2 = b.inputs
    h = b(swiglu(**{a: v for a, v in s.items() if a != "o"}), X, W1, W3)
    return b.build(b(k.einsum("n f, f o -> n o"), h, W2))
