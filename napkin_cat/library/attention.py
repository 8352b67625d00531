"""Attention and its batched forms: ``SoftMax(Q Kᵀ/√d) V`` (paper §3.2, Figs. mha, gqa).

>>> attention().dom
Ty(Array(q×d), Array(x×d), Array(x×d))
>>> grouped_query_attention().dom
Ty(Array(h×g×q×d), Array(h×x×d), Array(h×x×d))
"""
from __future__ import annotations

import sympy

from napkin_cat.library.sizing import _Sized, _sizes
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.axis import Axis
from napkin_cat.syntax.builder import Builder


def inverse_temperature(d) -> sympy.Expr:
    """β = d^(-1/2), symbolic in ``d`` unless ``d`` is an int."""
    size = Axis("d", d).size
    return 1 / sympy.sqrt(size)


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
