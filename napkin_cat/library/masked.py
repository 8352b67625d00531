"""Masked and biased attention: ``SoftMax(where(mask, Q Kᵀ/√d + bias, −∞)) V`` with the mask a diagram; and
soft-capped attention, ``SoftMax(where(mask, c·tanh(Q Kᵀ/(√d·c)), −∞)) V``.

(SoftMax scales its input by β = 1/√d, so the scores it gets are ``Q Kᵀ + √d·bias``, or ``(c/β)·tanh((β/c)·Q Kᵀ)``.)

The mask and the bias are diagrams (:mod:`.masks`), computed from positions, so a kernel reads no q×x
array for them, and a stream along ``x`` skips every slice on which the mask is never true
(:mod:`napkin_cat.algorithms.skipping`).  Inputs: Q, K, V, then the mask's inputs, then the bias's.

>>> import numpy as np, napkin_cat as nc
>>> att = causal_attention(q=3, x=3, d=2)
>>> Q, K, V = np.ones((3, 2)), np.ones((3, 2)), np.arange(6.).reshape(3, 2)
>>> nc.evaluate(att, Q, K, V).tolist()
[[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]]
>>> nc.evaluate(prefix_lm_attention(2, q=3, x=3, d=2), Q, K, V).tolist()       # q = 0 sees keys 0 and 1 too
[[1.0, 2.0], [1.0, 2.0], [2.0, 3.0]]
>>> [str(a) for a in document_attention().dom.inside]
['q×d', 'x×d', 'x×d', 'q:int32', 'x:int32']
"""
from __future__ import annotations

import math
import numbers

from napkin_cat.errors import ArgumentError, IndexingError
from napkin_cat.library.attention import inverse_temperature, number_formats, weigh
from napkin_cat.library.masks import alibi_bias, causal_mask, document_mask, prefix_lm_mask, window_mask
from napkin_cat.library.sizing import Sized, given_sizes
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import elementwise
from napkin_cat.syntax.indices import logical, where


def _over_scores(what: str, d: Diagram, scores) -> str:
    """The signature of ``d``'s one output over the scores' axes, or IndexingError naming the axis it lacks."""
    if len(d.cod) != 1:
        raise IndexingError(f"the {what} must have one output (an array over q × x), got {len(d.cod)}")
    arr = d.cod.inside[0]
    for a in arr.axes:
        if a.name not in scores.names:
            raise IndexingError(f"the {what} is over axis {a.name!r}, which the scores {scores} lack; a {what} "
                                f"varies along the scores' axes {list(scores.names)} only")
        if a.size != scores.axis(a.name).size:
            raise IndexingError(f"the {what}'s axis {a.name!r} has size {a.size}, the scores' has "
                                f"{scores.axis(a.name).size}; build it with the attention's sizes")
    if what == "mask" and arr.dtype.family != "bool":
        raise IndexingError(f"the mask's output is {arr.dtype.name}; a mask is a bool array (a comparison)")
    return " ".join(arr.names)


def masked_attention(mask: Diagram | None = None, bias: Diagram | None = None, q=None, x=None, d=None, *,
                     formats=None, lse: bool = False) -> Diagram:
    """Attention whose scores get ``bias`` added and are set to −∞ where ``mask`` is false (§3.2); with
    ``lse`` also the log-sum-exp of the scaled scores (as :func:`~napkin_cat.library.attention.attention`)."""
    s = given_sizes(q=q, x=x, d=d)
    f = number_formats(formats)
    k = Sized(s)
    extra = Ty(*((mask.dom.inside if mask is not None else ()) + (bias.dom.inside if bias is not None else ())))
    b = Builder(k.types("q d", dtype=f["Q"]) @ k.types("x d", dtype=f["K"]) @ k.types("x d", dtype=f["V"]) @ extra)
    Q, K, V, *rest = b.inputs
    S = b(k.einsum("q d, x d -> q x", dtype=f["Q"], out_dtype=f["S"]), Q, K)
    sig = " ".join(S.array.names)
    fmt = dict(level=S.array.level, dtype=S.array.dtype, **{a.name: a.size for a in S.array.axes})
    if bias is not None:
        over = _over_scores("bias", bias, S.array)
        B = b(bias, *rest[len(mask.dom) if mask is not None else 0:])
        B = b.convert(B, S.array.dtype)      # SoftMax scales its input by β = 1/√d: the bias enters as √d·bias
        B = b(elementwise("scale", over, const=1 / inverse_temperature(d), level=fmt["level"], dtype=fmt["dtype"],
                          **{n: fmt[n] for n in B.array.names}), B)
        S = b(elementwise("add", f"{sig}, {over} -> {sig}", **fmt), S, B)
    if mask is not None:
        over = _over_scores("mask", mask, S.array)
        m = b(mask, *rest[:len(mask.dom)])
        S = b(where(f"{over}, {sig} -> {sig}", **fmt), m, S)
    return b.build(*weigh(b, k, S, V, d, f, lse))


def causal_attention(q=None, x=None, d=None, *, formats=None, lse: bool = False) -> Diagram:
    """Causal attention: query ``q`` attends to the keys ``x ≤ q`` (the mask from positions, no input).

    ``lse``: also the log-sum-exp of the scaled scores, as :func:`masked_attention`.

    >>> causal_attention(lse=True).cod
    Ty(Array(q×d), Array(q))
    """
    return masked_attention(causal_mask(q=q, x=x), None, q, x, d, formats=formats, lse=lse)


def sliding_window_attention(window, q=None, x=None, d=None, *, formats=None, lse: bool = False) -> Diagram:
    """Attention to the keys within ``window`` positions: ``|q − x| ≤ w``.

    ``lse`` as :func:`masked_attention`."""
    return masked_attention(window_mask(window, q=q, x=x), None, q, x, d, formats=formats, lse=lse)


def prefix_lm_attention(prefix, q=None, x=None, d=None, *, formats=None, lse: bool = False) -> Diagram:
    """Prefix-LM attention: query ``q`` attends to the keys ``x ≤ q`` and to the first ``prefix`` keys,
    ``x < P`` (the prefix is read both ways, the rest causally; ``0 ≤ P ≤ x``, ``P = 0`` is causal attention).

    A stream over ``x`` skips every tile of keys after the prefix and after its queries' last position.
    ``lse`` as :func:`masked_attention`.

    >>> prefix_lm_attention(128, q=512, x=512, d=64).dom
    Ty(Array(q[512]×d[64]), Array(x[512]×d[64]), Array(x[512]×d[64]))
    """
    return masked_attention(prefix_lm_mask(prefix, q=q, x=x), None, q, x, d, formats=formats, lse=lse)


def _cap(cap) -> float:
    """``cap`` as a finite float ``c > 0``, else ArgumentError naming it."""
    if isinstance(cap, bool) or not isinstance(cap, numbers.Real):
        raise ArgumentError(f"softcap_attention: the cap c = {cap!r} is not a real number; the scores s become "
                            f"c·tanh(s/c), c a finite real > 0 (Gemma 2: 50)")
    if not (math.isfinite(cap) and cap > 0):
        raise ArgumentError(f"softcap_attention: the cap c = {cap!r} is not a finite positive number; the scores s "
                            f"become c·tanh(s/c), c a finite real > 0 (Gemma 2: 50)")
    return float(cap)


def softcap_attention(cap=50.0, q=None, x=None, d=None, *, mask: Diagram | None = None, formats=None,
                      lse: bool = False) -> Diagram:
    """Soft-capped attention (Gemma 2): the scaled scores ``s = Q Kᵀ/√d`` become ``c·tanh(s/c)`` before the
    SoftMax, so every score lies in ``(−c, c)``; with a mask, the capped scores are set to −∞ where it is false.

    ``mask`` is a diagram, as for :func:`masked_attention` (its inputs follow Q, K, V).  SoftMax scales its
    input by β = 1/√d, so it gets ``(c/β)·tanh((β/c)·Q Kᵀ)``; the mask applies after the cap, so a stream over
    ``x`` skips the tiles the mask rules out.  ``c`` is a finite real ``> 0`` (Gemma 2's attention uses 50);
    ``lse`` as :func:`masked_attention` (of the capped scores).

    >>> import numpy as np, napkin_cat as nc
    >>> Q, K, V = np.array([[30.0], [0.0]]), np.array([[1.0], [0.0]]), np.array([[1.0], [0.0]])
    >>> O = nc.evaluate(softcap_attention(1.0, q=2, x=2, d=1), Q, K, V)    # scores 30 and 0 capped at 1
    >>> round(float(O[0, 0]), 6) == round(np.e / (np.e + 1), 6)
    True
    >>> softcap_attention(mask=causal_mask(), lse=True).cod
    Ty(Array(q×d), Array(q))
    """
    c = _cap(cap)
    if mask is not None and not isinstance(mask, Diagram):
        raise ArgumentError(f"softcap_attention: the mask is a {type(mask).__name__}; a mask is a diagram with one "
                            f"bool output over q × x (nc.library.causal_mask(), prefix_lm_mask(P), ...) or None")
    s = given_sizes(q=q, x=x, d=d)
    f = number_formats(formats)
    k = Sized(s)
    extra = Ty(*(mask.dom.inside if mask is not None else ()))
    b = Builder(k.types("q d", dtype=f["Q"]) @ k.types("x d", dtype=f["K"]) @ k.types("x d", dtype=f["V"]) @ extra)
    Q, K, V, *rest = b.inputs
    S = b(k.einsum("q d, x d -> q x", dtype=f["Q"], out_dtype=f["S"]), Q, K)
    sig, beta = " ".join(S.array.names), inverse_temperature(d)
    fmt = dict(level=S.array.level, dtype=S.array.dtype)
    S = b(k.elementwise("scale", sig, const=beta / c, **fmt), S)
    S = b(k.elementwise("tanh", sig, **fmt), S)
    S = b(k.elementwise("scale", sig, const=c / beta, **fmt), S)
    if mask is not None:
        over = _over_scores("mask", mask, S.array)
        m = b(mask, *rest)
        S = b(where(f"{over}, {sig} -> {sig}", level=fmt["level"], dtype=fmt["dtype"],
                    **{a.name: a.size for a in S.array.axes}), m, S)
    return b.build(*weigh(b, k, S, V, d, f, lse))


def alibi_attention(slope=0.125, q=None, x=None, d=None, *, causal: bool = True, formats=None,
                    lse: bool = False) -> Diagram:
    """ALiBi: scores biased by ``slope · (x − q)``, causal by default (as ALiBi's models are).

    ``lse`` as :func:`masked_attention`."""
    return masked_attention(causal_mask(q=q, x=x) if causal else None, alibi_bias(slope, q=q, x=x), q, x, d,
                            formats=formats, lse=lse)


def document_attention(q=None, x=None, d=None, *, causal: bool = False, formats=None, lse: bool = False) -> Diagram:
    """Attention within documents: inputs Q, K, V, then the segment ids of q and x (int32); with ``causal``,
    also ``x ≤ q``.

    ``lse`` as :func:`masked_attention`."""
    mask = document_mask(q=q, x=x)
    if causal:
        s = given_sizes(q=q, x=x)
        b = Builder(mask.dom)
        same = b(mask, *b.inputs)
        mask = b.build(b(logical("and", "q x, q x -> q x", **s), same, b(causal_mask(q=q, x=x))))
    return masked_attention(mask, None, q, x, d, formats=formats, lse=lse)


__all__ = ["masked_attention", "causal_attention", "sliding_window_attention", "prefix_lm_attention",
           "softcap_attention", "alibi_attention", "document_attention"]
