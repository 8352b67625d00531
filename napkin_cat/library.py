"""Algorithms built only from the public constructors (paper §3 and a transformer's parts).

Every function takes optional axis sizes (ints; symbolic when omitted).

>>> import napkin_cat as nc
>>> len(attention().boxes), attention().cod
(3, Ty(Array(q×d)))
>>> grouped_query_attention().dom
Ty(Array(h×g×q×d), Array(h×x×d), Array(h×x×d))
"""
from __future__ import annotations

import sympy

from napkin_cat.adapter import Diagram
from napkin_cat.axis import Axis
from napkin_cat.builder import Builder
from napkin_cat.construct import einsum, elementwise, reduce, rename, softmax, types


def _sizes(**kw):
    return {k: v for k, v in kw.items() if v is not None}


def _for(signature: str, sizes: dict) -> dict:
    """The sizes that ``signature`` names (constructors reject sizes for axes they lack)."""
    names = set(signature.replace(",", " ").replace("->", " ").split())
    return {k: v for k, v in sizes.items() if k in names}


class _Sized:
    """The public constructors with the sizes an algorithm was given, each keeping those it names."""

    def __init__(self, sizes: dict):
        self.sizes = sizes

    def einsum(self, sig):
        return einsum(sig, **_for(sig, self.sizes))

    def elementwise(self, name, sig, **kw):
        return elementwise(name, sig, **kw, **_for(sig, self.sizes))

    def reduce(self, name, sig):
        return reduce(name, sig, **_for(sig, self.sizes))

    def softmax(self, sig, **kw):
        return softmax(sig, **kw, **_for(sig, self.sizes))

    def rename(self, sig):
        return rename(sig, **_for(sig, self.sizes))

    def types(self, sig):
        return types(sig, **_for(sig, self.sizes))


def inverse_temperature(d) -> sympy.Expr:
    """β = d^(-1/2), symbolic in ``d`` unless ``d`` is an int."""
    size = Axis("d", d).size
    return 1 / sympy.sqrt(size)


def matmul(a=None, b=None, c=None) -> Diagram:
    """Matrix multiplication ``(a b, b c) -> a c``: contraction weaved over a and c (§3.1)."""
    return einsum("a b, b c -> a c", **_sizes(a=a, b=b, c=c))


def _attention(batch: str, kv: str, q, x, d, **more) -> Diagram:
    s = _sizes(q=q, x=x, d=d, **more)
    k = _Sized(s)
    pre = f"{batch} " if batch else ""
    kvp = f"{kv} " if kv else ""
    b = Builder(k.types(f"{pre}q d, {kvp}x d, {kvp}x d"))
    Q, K, V = b.inputs
    S = b(k.einsum(f"{pre}q d, {kvp}x d -> {pre}q x"), Q, K)
    P = b(k.softmax(f"{pre}q x", over="x", beta=inverse_temperature(d)), S)
    return b.build(b(k.einsum(f"{pre}q x, {kvp}x d -> {pre}q d"), P, V))


def attention(q=None, x=None, d=None) -> Diagram:
    """``SoftMax(Q Kᵀ/√d) V`` with Q: q×d, K: x×d, V: x×d (§3.2)."""
    return _attention("", "", q, x, d)


def multi_head_attention(q=None, x=None, d=None, h=None) -> Diagram:
    """Attention with a head axis ``h`` weaved over every operation (Fig. mha)."""
    return _attention("h", "h", q, x, d, h=h)


def grouped_query_attention(q=None, x=None, d=None, h=None, g=None) -> Diagram:
    """Grouped-query attention: ``g`` query heads share each of ``h`` key/value heads (Fig. gqa)."""
    return _attention("h g", "h", q, x, d, h=h, g=g)


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


def _normalise(b: Builder, X, s, eps, *, centre: bool):
    k = _Sized(s)
    nd = "n d"
    if centre:
        mu = b(k.reduce("mean", "n d -> n"), X)
        X = b(k.elementwise("sub", "n d, n -> n d"), X, mu)
    var = b(k.reduce("mean", "n d -> n"), b(k.elementwise("square", nd), X))
    inv = b(k.elementwise("rsqrt", "n"), b(k.elementwise("shift", "n", const=eps), var))
    return b(k.elementwise("mul", "n d, n -> n d"), X, inv)


def layer_norm(n=None, d=None, *, eps: float = 1e-5) -> Diagram:
    """LayerNorm over ``d``: ``γ (x − mean)/sqrt(var + ε) + β``; inputs X: n×d, γ: d, β: d."""
    s = _sizes(n=n, d=d)
    k = _Sized(s)
    b = Builder(k.types("n d, d, d"))
    X, gamma, beta = b.inputs
    y = _normalise(b, X, s, eps, centre=True)
    y = b(k.elementwise("mul", "n d, d -> n d"), y, gamma)
    return b.build(b(k.elementwise("add", "n d, d -> n d"), y, beta))


def rms_norm(n=None, d=None, *, eps: float = 1e-6) -> Diagram:
    """RMSNorm over ``d``: ``γ x / sqrt(mean(x²) + ε)``; inputs X: n×d, γ: d."""
    s = _sizes(n=n, d=d)
    k = _Sized(s)
    b = Builder(k.types("n d, d"))
    X, gamma = b.inputs
    y = _normalise(b, X, s, eps, centre=False)
    return b.build(b(k.elementwise("mul", "n d, d -> n d"), y, gamma))


def transformer_block(n=None, e=None, h=None, d=None, f=None, *, activation: str = "gelu",
                      eps: float = 1e-5) -> Diagram:
    """A pre-norm transformer block (self-attention over ``n`` tokens, ``h`` heads of size ``d``).

    ``y = x + MHA(LN₁(x)) W_o``, ``out = y + MLP(LN₂(y))``.  Inputs, in order:
    X: n×e, γ₁, β₁: e, W_q, W_k, W_v: e×h×d, W_o: h×d×e, γ₂, β₂: e, W₁: e×f, b₁: f, W₂: f×e, b₂: e.
    """
    s = _sizes(n=n, e=e, h=h, d=d, f=f)
    k = _Sized(s)
    b = Builder(k.types("n e, e, e, e h d, e h d, e h d, h d e, e, e, e f, f, f e, e"))
    X, g1, be1, Wq, Wk, Wv, Wo, g2, be2, W1, b1, W2, b2 = b.inputs
    ln = _rename_axis(layer_norm(**_sizes(n=n, d=e), eps=eps), "d", "e", Axis("e", e).size)
    x1 = b(ln, X, g1, be1)
    Q = b(k.einsum("n e, e h d -> h n d"), x1, Wq)
    K = b(k.einsum("n e, e h d -> h n d"), x1, Wk)
    V = b(k.einsum("n e, e h d -> h n d"), x1, Wv)
    # self-attention: keys live on a second token axis ``m`` of the same size as ``n``
    K = b(k.rename("h n d -> h m d"), K)
    V = b(k.rename("h n d -> h m d"), V)
    att = multi_head_attention(**_sizes(d=d, h=h))
    att = _rename_axis(_rename_axis(att, "q", "n", Axis("n", n).size), "x", "m", Axis("n", n).size)
    A = b(att, Q, K, V)
    Y = b(k.elementwise("add", "n e"), X, b(k.einsum("h n d, h d e -> n e"), A, Wo))
    x2 = b(ln, Y, g2, be2)
    m = mlp(**_sizes(n=n, i=e, f=f, o=e), activation=activation)
    m = _rename_axis(_rename_axis(m, "i", "e", Axis("e", e).size), "o", "e", Axis("e", e).size)
    return b.build(b(k.elementwise("add", "n e"), Y, b(m, x2, W1, b1, W2, b2)))


def _rename_axis(diagram: Diagram, old: str, new: str, size=None) -> Diagram:
    from napkin_cat.relabel import rename_axis
    return rename_axis(diagram, old, new, size)
