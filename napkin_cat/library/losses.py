"""Losses: cross-entropy at integer targets, and the linear layer fused into it.

==========================  ============================================  ==========================
function                    computes, per row ``i``                       inputs
==========================  ============================================  ==========================
``cross_entropy``           ``log Σ_v exp Lᵢᵥ − L[i, tᵢ]``                logits n×v, targets n (int32)
``linear_cross_entropy``    the same with ``L = H Wᵀ``                    hidden n×e, weight v×e, targets n
==========================  ============================================  ==========================

The target's logit is a gather (:func:`napkin_cat.syntax.indices.gather`), not a product with a
one-hot n×v array: a stream along ``v`` reads the targets as n integers, and each slice contributes
only where the target falls in it.  Streamed along ``v``, log-sum-exp keeps its running max and
rescaled sum (:mod:`napkin_cat.algorithms.online`): no n×v array is ever written.

>>> import numpy as np, napkin_cat as nc
>>> L, t = np.log(np.array([[1., 1., 2.], [1., 3., 4.]])), np.array([2, 0])
>>> nc.evaluate(cross_entropy(), L, t).round(4).tolist()          # −log(2/4), −log(1/8)
[0.6931, 2.0794]
"""
from __future__ import annotations

from napkin_cat.library.sizing import Sized, given_sizes
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.dtype import FP32, INT32, as_dtype
from napkin_cat.syntax.indices import gather


def _loss(b: Builder, k: Sized, logits, targets, s: dict):
    lse = b(k.reduce("logsumexp", "n v -> n"), logits)
    picked = b(gather("n v, n -> n", dtype=logits.array.dtype, **{a: s[a] for a in ("n", "v") if a in s}),
               logits, targets)
    return b(k.elementwise("sub", "n, n -> n"), lse, picked)


def cross_entropy(n=None, v=None, *, dtype="fp32") -> Diagram:
    """Per-row cross-entropy of logits n×v at integer targets n."""
    s = given_sizes(n=n, v=v)
    k = Sized(s)
    b = Builder(k.types("n v", dtype=as_dtype(dtype)) @ k.types("n", dtype=INT32))
    L, t = b.inputs
    return b.build(_loss(b, k, L, t, s))


def linear_cross_entropy(n=None, e=None, v=None, *, dtype="fp32") -> Diagram:
    """Per-row cross-entropy of the logits ``H Wᵀ`` (hidden n×e, weight v×e) at integer targets n; ``dtype``: the
    format of H and W (the logits are fp32, the product's accumulator, as the loss reads them).

    >>> linear_cross_entropy(dtype="bf16").dom
    Ty(Array(n×e:bf16), Array(v×e:bf16), Array(n:int32))
    """
    s = given_sizes(n=n, e=e, v=v)
    k = Sized(s)
    fmt = as_dtype(dtype)
    b = Builder(k.types("n e", dtype=fmt) @ k.types("v e", dtype=fmt) @ k.types("n", dtype=INT32))
    H, W, t = b.inputs
    L = b(k.einsum("n e, v e -> n v", dtype=fmt, out_dtype=FP32), H, W)     # the logits: the product's fp32 sums
    return b.build(_loss(b, k, L, t, s))


__all__ = ["cross_entropy", "linear_cross_entropy"]
