"""FlexAttention's interface: ``nc.torch.flex_attention(query, key, value, score_mod, mask_mod)``, the mods traced
into the diagram of masked attention and run as a derived, compiled op (:func:`~napkin_cat.torch.ops.compile`).

On ``(B, H, N, d)`` tensors, with FlexAttention's conventions (``score_mod(score, b, h, q_idx, kv_idx)``,
``mask_mod(b, h, q_idx, kv_idx)``, written with torch operations on index tensors and on tensors they capture)::

    S[b,h,q,x] = score_mod(scale · Q[b,h,q]·K[b,h,x], b, h, q, x)     where mask_mod(b, h, q, x), else −∞
    O[b,h,q]   = softmax_x(S[b,h,q]) · V[b,h]                         L[b,h,q] = logsumexp_x S[b,h,q]

The function is exported by ``torch.export`` with the index tensors as inputs and translated by
:mod:`~napkin_cat.torch.exported`: ``b, h, q_idx, kv_idx`` become ``nc.position`` boxes along the batch, heads,
queries and keys (no input), a captured tensor (document ids, a bias table, a per-head slope) an input read by a
one-hot contraction (``aten.index``).  A row no key may attend has ``O = 0`` and ``L = −∞`` (FlexAttention's
convention; the diagram's softmax gives NaN there, mapped to 0 after the op).

>>> import torch, napkin_cat as nc
>>> torch.set_num_threads(1)
>>> q, k, v = (torch.randn(1, 2, 8, 4, dtype=torch.float64) for _ in range(3))
>>> O = nc.torch.flex_attention(q, k, v, mask_mod=lambda b, h, qi, xi: xi <= qi, memory=64)
>>> causal = torch.full((8, 8), float("-inf"), dtype=torch.float64).triu(1)
>>> bool(torch.allclose(O, torch.softmax(q @ k.transpose(-1, -2) / 2 + causal, -1) @ v))
True
"""
from __future__ import annotations

import math

import torch

from napkin_cat.errors import ShapeError, TensorError
from napkin_cat.torch.exported import translate
from napkin_cat.torch.ops import compile

#: the index tensors' names and the (input, dimension) each is the positions along
POSITIONS = {"b": ("query", 0), "h": ("query", 1), "q_idx": ("query", 2), "kv_idx": ("key", 2)}
NAMES = {"query": "b h q d", "key": "b h x d", "value": "b h x e"}


class Scores(torch.nn.Module):
    """Masked attention with the mods, as torch computes it: what is exported and translated."""

    def __init__(self, score_mod, mask_mod, scale: float):
        super().__init__()
        self.score_mod, self.mask_mod, self.scale = score_mod, mask_mod, scale

    def forward(self, query, key, value, b, h, q_idx, kv_idx):
        s = query @ key.transpose(-1, -2) * self.scale
        if self.score_mod is not None:
            s = self.score_mod(s, b, h, q_idx, kv_idx)
        if self.mask_mod is not None:
            s = s.masked_fill(~self.mask_mod(b, h, q_idx, kv_idx), float("-inf"))
        return torch.softmax(s, -1) @ value, torch.logsumexp(s, -1)


def flex_attention(query, key, value, score_mod=None, mask_mod=None, *, scale=None, enable_gqa=False,
                   return_lse=False, memory=None, hardware=None):
    """``torch.nn.attention.flex_attention``'s outputs (see the module docstring) by napkin-cat's derived kernels,
    differentiable (the derived backward).  ``mask_mod`` is the function FlexAttention's ``create_block_mask``
    takes.  ``memory`` and ``hardware`` go to :func:`~napkin_cat.torch.ops.compile`.  Returns ``O`` (and the
    log-sum-exp ``L``, natural logarithm, with ``return_lse``)."""
    query, key, value = heads(query, key, value, enable_gqa)
    d = query.shape[-1]
    module = Scores(score_mod, mask_mod, 1 / math.sqrt(d) if scale is None else float(scale))
    B, H, N, X = query.shape[0], query.shape[1], query.shape[2], key.shape[2]
    index = (torch.arange(B).view(B, 1, 1, 1), torch.arange(H).view(1, H, 1, 1), torch.arange(N).view(1, 1, N, 1),
             torch.arange(X).view(1, 1, 1, X))
    example = (query.detach(), key.detach(), value.detach(), *index)
    program = torch.export.export(module, example)
    r = translate(program, module, example, None, NAMES, positions=POSITIONS)
    op = compile(r.diagram, aux=1, memory=memory, hardware=hardware, name="flex_attention")
    given = {"query": query, "key": key, "value": value}
    captured = dict(program.constants)
    args = []
    for name, axes in r.axes.items():
        x = given.get(name, captured.get(name))
        x = torch.as_tensor(r.inputs[name]) if x is None else x
        args.append(int32(name, x).reshape([s for s, a in zip(x.shape, axes) if a is not None]))
    O, L = op(*args)
    O, L = (y.reshape(s) for y, s in zip((O, L), ((B, H, N, value.shape[-1]), (B, H, N))))
    O = torch.where(torch.isneginf(L)[..., None], torch.zeros((), dtype=O.dtype), O)
    return (O, L) if return_lse else O


def int32(name: str, x: torch.Tensor) -> torch.Tensor:
    """An integer tensor (a captured document id) in the diagram's integer format, int32; others as they are."""
    if x.dtype in (torch.int64, torch.int16, torch.int8, torch.uint8):
        if x.numel() and (x.min() < -2 ** 31 or x.max() >= 2 ** 31):
            raise TensorError(f"the captured tensor {name!r} holds integers outside int32, the diagram's format")
        return x.to(torch.int32)
    return x


def heads(query, key, value, enable_gqa: bool):
    """``key`` and ``value`` with as many heads as ``query`` (grouped-query attention repeats each ``H/Hkv`` times)."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        if x.dim() != 4:
            raise ShapeError(f"flex_attention takes (B, H, N, d) tensors; {name} has shape {tuple(x.shape)}")
    if key.shape[:3] != value.shape[:3] or query.shape[0] != key.shape[0] or query.shape[3] != key.shape[3]:
        raise ShapeError(f"query {tuple(query.shape)}, key {tuple(key.shape)} and value {tuple(value.shape)} must "
                         f"agree: one batch, key and value one length, query and key one head dimension")
    hq, hk = query.shape[1], key.shape[1]
    if hq != hk:
        if not enable_gqa or hq % hk:
            raise ShapeError(f"query has {hq} heads and key {hk}: equal, or with enable_gqa=True a divisor of {hq}")
        key, value = (x.repeat_interleave(hq // hk, dim=1) for x in (key, value))
    return query, key, value
