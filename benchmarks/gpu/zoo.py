"""The mask zoo of the GPU benchmark, each mask twice: as napkin-cat derives it (a diagram over one head, woven over
``h``) and as torch computes it (FlexAttention's ``mask_mod`` / ``score_mod``), the second the baseline's and the
float64 reference's.

=============  ==============================================  ======================================  ==========
kind           the diagram (``nc.library``)                    FlexAttention's mods                    inputs
=============  ==============================================  ======================================  ==========
``backward``   ``multi_head_attention``                        none                                    Q K V
``window``     ``sliding_window_attention(w)``                 ``|q − kv| ≤ w``                        Q K V
``prefix-lm``  ``prefix_lm_attention(P)``: ``x ≤ q ∨ x < P``   ``kv ≤ q | kv < P``                     Q K V
``document``   ``document_attention()``: a mask from data      ``ids[q] == ids[kv]`` (block mask)      Q K V ids ids
``alibi``      ``alibi_attention(slope)`` (causal)             ``score + slope·(kv − q)``, ``kv ≤ q``  Q K V
``softcap``    ``softcap_attention(c)``: ``c·tanh(s/c)``       ``c·tanh(score/c)``                     Q K V
=============  ==============================================  ======================================  ==========

Every diagram has ``lse=True`` (outputs O and L = logsumexp of the scaled, masked scores: what the backward
``nc.grad(f, saved=True, aux=1)`` reads).  The reference (:func:`reference`) evaluates the mods on index grids in
float64 with torch, the library not involved.

>>> sorted(MASKS)
['alibi', 'backward', 'document', 'prefix-lm', 'softcap', 'window']
>>> import torch
>>> m = mods("prefix-lm", {"N": 8})["mask_mod"]
>>> [bool(m(0, 0, torch.tensor(1), torch.tensor(k))) for k in (0, 1, 2, 3)]     # prefix P = N/4 = 2
[True, True, False, False]
"""
from __future__ import annotations

import math

import torch

import napkin_cat as nc

#: the kinds of this module's rows: dense attention's forward+backward, then the masks
MASKS = ("backward", "window", "prefix-lm", "document", "alibi", "softcap")
#: the ALiBi slope and the softcap (Gemma 2's attention softcap is 50; 20 makes tanh bend at these scores)
SLOPE, CAP = 0.125, 20.0


def window_of(cfg) -> int:
    """The sliding window: a quarter of the sequence, at least 1 (4,096 keys at N = 16,384)."""
    return max(1, cfg["N"] // 4)


def prefix_of(cfg) -> int:
    """The prefix-LM's bidirectional prefix: the first quarter of the sequence."""
    return max(1, cfg["N"] // 4)


def documents(cfg) -> torch.Tensor:
    """Segment ids (int32, one per position) of documents of unequal lengths, 3/8, 1/8, 1/4, 1/4 of N (the last
    one takes what rounding leaves)."""
    n = cfg["N"]
    cuts = [0, 3 * n // 8, n // 2, 3 * n // 4, n]
    return torch.cat([torch.full((b - a,), i, dtype=torch.int32) for i, (a, b) in enumerate(zip(cuts, cuts[1:]))])


def one_head(kind: str, cfg, formats):
    """The diagram of one head of ``kind`` with ``lse=True`` (see the module docstring)."""
    L = nc.library
    if kind == "backward":
        return L.attention(formats=formats, lse=True)
    if kind == "window":
        return L.sliding_window_attention(window_of(cfg), formats=formats, lse=True)
    if kind == "prefix-lm":
        return L.prefix_lm_attention(prefix_of(cfg), formats=formats, lse=True)
    if kind == "document":
        return L.document_attention(formats=formats, lse=True)
    if kind == "alibi":
        return L.alibi_attention(SLOPE, formats=formats, lse=True)
    if kind == "softcap":
        return L.softcap_attention(CAP, formats=formats, lse=True)
    raise ValueError(f"no mask {kind!r}; the zoo's kinds are {list(MASKS)}")


def forward(kind: str, cfg, formats):
    """The forward diagram of ``kind`` over ``h`` heads (Q, K, V woven; a mask's own inputs shared by the heads)."""
    return nc.weave(one_head(kind, cfg, formats), "h", inputs=[0, 1, 2])


def mods(kind: str, cfg, ids: torch.Tensor | None = None) -> dict:
    """FlexAttention's ``mask_mod`` and ``score_mod`` of ``kind`` (None where it has none)."""
    if kind == "window":
        w = window_of(cfg)
        return {"mask_mod": lambda b, h, q, kv: (q - kv).abs() <= w, "score_mod": None}
    if kind == "prefix-lm":
        p = prefix_of(cfg)
        return {"mask_mod": lambda b, h, q, kv: (kv <= q) | (kv < p), "score_mod": None}
    if kind == "document":
        return {"mask_mod": lambda b, h, q, kv: ids[q] == ids[kv], "score_mod": None}
    if kind == "alibi":
        return {"mask_mod": lambda b, h, q, kv: kv <= q, "score_mod": lambda s, b, h, q, kv: s + SLOPE * (kv - q)}
    if kind == "softcap":
        return {"mask_mod": None, "score_mod": lambda s, b, h, q, kv: CAP * torch.tanh(s / CAP)}
    return {"mask_mod": None, "score_mod": None}


def reference(kind: str, cfg, Q, K, V, dO, ids=None) -> dict:
    """``{"O", "L", "dQ", "dK", "dV"}`` in float64: the mods evaluated on index grids, masked scores to −∞,
    softmax, and torch.autograd for the gradients of O (the cotangent ``dO``; none for L)."""
    m = mods(kind, cfg, None if ids is None else ids.to(Q.device).long())
    q, k, v = (t.detach().double().requires_grad_(True) for t in (Q, K, V))
    qi = torch.arange(q.shape[-2], device=q.device)[:, None]
    xi = torch.arange(k.shape[-2], device=q.device)[None, :]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if m["score_mod"] is not None:
        s = m["score_mod"](s, 0, 0, qi, xi)
    if m["mask_mod"] is not None:
        s = s.masked_fill(~m["mask_mod"](0, 0, qi, xi), float("-inf"))
    O = torch.softmax(s, -1) @ v
    L = torch.logsumexp(s, -1)
    dq, dk, dv = torch.autograd.grad(O, (q, k, v), dO.double())
    return {"O": O.detach(), "L": L.detach(), "dQ": dq, "dK": dk, "dV": dv}


def allowed(kind: str, cfg, ids=None) -> float:
    """The fraction of (query, key) pairs the mask lets through (1 without a mask)."""
    m = mods(kind, cfg, None if ids is None else ids.long())["mask_mod"]
    if m is None:
        return 1.0
    n = cfg["N"]
    return float(m(0, 0, torch.arange(n)[:, None], torch.arange(n)[None, :]).double().mean())
