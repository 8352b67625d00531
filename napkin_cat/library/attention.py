"""Attention and its batched forms: ``SoftMax(Q Kᵀ/√d) V`` (paper §3.2, Figs. mha, gqa).

``formats`` gives the number formats of the arrays (the quantization labels of the paper's
configurations, §5 step 3 and Table 1): ``Q`` and ``K`` (one format: the first product takes its
operands in one format), ``S`` = QKᵀ, ``P`` = SoftMax(S), ``V`` (the format of ``P``: the second
product takes its operands in one format) and ``O``; unnamed arrays are fp32.

>>> attention().dom
Ty(Array(q×d), Array(x×d), Array(x×d))
>>> attention(lse=True).cod                 # O and L = logsumexp_x(QKᵀ/√d), what a backward pass reads
Ty(Array(q×d), Array(q))
>>> grouped_query_attention().dom
Ty(Array(h×g×q×d), Array(h×x×d), Array(h×x×d))
>>> attention(formats={"Q": "fp8", "K": "fp8", "S": "fp16", "P": "fp16", "V": "fp16", "O": "fp16"}).dom
Ty(Array(q×d:fp8), Array(x×d:fp8), Array(x×d:fp16))
"""
from __future__ import annotations

import sympy

from napkin_cat.errors import SignatureError
from napkin_cat.library.sizing import Sized, given_sizes
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.dtype import FP32, as_dtype

ARRAYS = ("Q", "K", "V", "S", "P", "O")


def number_formats(formats) -> dict:
    """The format of every array of attention from a partial mapping (see module docstring)."""
    out = dict.fromkeys(ARRAYS, FP32)
    for name, value in (formats or {}).items():
        if name not in ARRAYS:
            raise SignatureError(f"attention has no array {name!r}; its arrays are {list(ARRAYS)}")
        out[name] = as_dtype(value)
    for a, b, why in (("Q", "K", "QKᵀ"), ("P", "V", "P·V")):
        if out[a] != out[b]:
            raise SignatureError(f"{a} is {out[a].name} but {b} is {out[b].name}: the product {why} takes its "
                                 f"operands in one format; convert one of them (nc.cast) or give both one format")
    return out


def inverse_temperature(d) -> sympy.Expr:
    """β = d^(-1/2), symbolic in ``d`` unless ``d`` is an int."""
    size = Axis("d", d).size
    return 1 / sympy.sqrt(size)


def weigh(b, k, S, V, d, f, lse: bool = False):
    """``O = SoftMax_β(S) V`` over the scores' last axis ``x`` (β = 1/√d), and with ``lse`` also
    ``L = logsumexp_x(β·S)``, the statistic a backward pass reads (``nc.grad(..., saved=True)``)."""
    sig, beta = " ".join(S.array.names), inverse_temperature(d)
    rows = " ".join(n for n in S.array.names if n != "x")
    kv = " ".join(n for n in V.array.names if n != "d")
    P = b(k.softmax(sig, over="x", beta=beta, dtype=f["S"], out_dtype=f["P"]), S)
    O = b(k.einsum(f"{sig}, {kv} d -> {rows} d", dtype=f["P"], out_dtype=f["O"]), P, V)
    if not lse:
        return (O,)
    scaled = b(k.elementwise("scale", sig, const=beta, level=S.array.level, dtype=f["S"]), S)
    return O, b(k.reduce("logsumexp", f"{sig} -> {rows}", dtype=f["S"]), scaled)


def _attention(batch: str, kv: str, q, x, d, formats=None, lse=False, **more) -> Diagram:
    s = given_sizes(q=q, x=x, d=d, **more)
    f = number_formats(formats)
    k = Sized(s)
    pre = f"{batch} " if batch else ""
    kvp = f"{kv} " if kv else ""
    b = Builder(k.types(f"{pre}q d", dtype=f["Q"]) @ k.types(f"{kvp}x d", dtype=f["K"])
                @ k.types(f"{kvp}x d", dtype=f["V"]))
    Q, K, V = b.inputs
    S = b(k.einsum(f"{pre}q d, {kvp}x d -> {pre}q x", dtype=f["Q"], out_dtype=f["S"]), Q, K)
    return b.build(*weigh(b, k, S, V, d, f, lse))


def attention(q=None, x=None, d=None, *, formats=None, lse: bool = False) -> Diagram:
    """``SoftMax(Q Kᵀ/√d) V`` with Q: q×d, K: x×d, V: x×d (§3.2); with ``lse`` also the log-sum-exp of the
    scaled scores, ``L = logsumexp_x(QKᵀ/√d)`` (outputs O, L)."""
    return _attention("", "", q, x, d, formats, lse)


def multi_head_attention(q=None, x=None, d=None, h=None, *, formats=None, lse: bool = False) -> Diagram:
    """Attention with a head axis ``h`` weaved over every operation (Fig. mha); ``lse`` as in attention."""
    return _attention("h", "h", q, x, d, formats, lse, h=h)


def grouped_query_attention(q=None, x=None, d=None, h=None, g=None, *, formats=None, lse: bool = False) -> Diagram:
    """Grouped-query attention: ``g`` query heads share each of ``h`` key/value heads (Fig. gqa); ``lse`` as
    in attention."""
    return _attention("h g", "h", q, x, d, formats, lse, h=h, g=g)
