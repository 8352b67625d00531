"""Attention with the dtypes of the paper's configuration and of FlashAttention-3, derived by the rules.

The dtypes are the inputs the paper states (Table 1: FP8 queries and keys, FP16 values; FA3 FP16 with FP32
scores and accumulators; FA3 FP8 with FP8 operands); everything after is derived (flash_attention) and
costed (nc.cost); the op breakdown is the cost functor's ``Cost.ops``.  (A module of its own name: two folders'
``conftest`` on the path, the one found first would be imported for both.)
"""
from __future__ import annotations

import napkin_cat as nc
from rewrites import flash_attention


def typed_attention(qk, scores, probs, v, out, *, axes=("q", "x", "d")):
    """Attention in the given number formats (the library's ``formats``), with the axes renamed if asked."""
    d = nc.library.attention(formats={"Q": qk, "K": qk, "S": scores, "P": probs, "V": v, "O": out})
    for old, new in zip(("q", "x", "d"), axes):
        if old != new:
            d = nc.rename_axis(d, old, new)
    return d


def derived(diagram):
    r = flash_attention(diagram)
    c = nc.cost(r.diagram)
    return r.diagram, c, list(c.ops)


VARIANTS = {
    # the paper's derived algorithm (Table 1 quantizations)
    "paper": (nc.FP8, nc.FP16, nc.FP16, nc.FP16, nc.FP16),
    # the paper's configuration in FP16 throughout (a GPU without FP8 tensor cores)
    "fp16": (nc.FP16, nc.FP16, nc.FP16, nc.FP16, nc.FP16),
    # FlashAttention-3 FP16: FP32 scores and accumulators (§6.1)
    "fa3-fp16": (nc.FP16, nc.FP32, nc.FP16, nc.FP16, nc.FP32),
    # FlashAttention-3 FP8: FP8 operands for both products, FP16 accumulators (§6.2)
    "fa3-fp8": (nc.FP8, nc.FP32, nc.FP8, nc.FP8, nc.FP16),
}
