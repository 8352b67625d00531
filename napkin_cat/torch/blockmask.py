"""FlexAttention's ``BlockMask`` given to ``nc.torch.flex_attention``: read as the ``mask_mod`` it was made from,
once its blocks are checked to say what that mask says.

FlexAttention runs a ``BlockMask`` over query tiles of ``BQ`` rows and key tiles of ``BK`` columns: a *full* block
is attended whole (the mask_mod not called), a *partial* one where ``mask_mod`` allows, any other not at all::

    allowed(b, h, q, x) = full[b, h, q // BQ, x // BK]  ∨  (partial[b, h, q // BQ, x // BK]  ∧  mask_mod(b, h, q, x))

(the block tables broadcast along a batch or head dimension of size 1).  napkin-cat derives its own tiles and its own
block tables (from positions, or from the data at each call), so it takes the mask as ``mask_mod`` alone, which is
the same mask exactly when every full block is one the mask allows whole and every block neither full nor partial
one the mask allows nowhere::

    full ⇒ all_{block} mask_mod          ¬full ∧ ¬partial ⇒ ¬any_{block} mask_mod

:func:`mask_of` checks this on the call's sizes (``create_block_mask``'s blocks always pass, with or without
``separate_full_blocks``; so do blocks marked partial where the mask allows none) and refuses a block mask
that says something else (``BlockMask.from_kv_blocks`` tables that drop blocks the mask allows, a mask of other
lengths, a batch or heads it does not broadcast to) with a :class:`~napkin_cat.errors.BlockMaskError` naming the
first block at fault.  The check evaluates the mask on every (query, key) pair, as ``create_block_mask`` did.

>>> import torch
>>> from torch.nn.attention.flex_attention import create_block_mask
>>> causal = lambda b, h, q, x: x <= q
>>> mask_of(create_block_mask(causal, None, None, 8, 8, device="cpu", BLOCK_SIZE=4), (2, 3, 8, 8)) is causal
True
"""
from __future__ import annotations

import torch

from napkin_cat.errors import BlockMaskError


def is_block_mask(value) -> bool:
    """Whether ``value`` is a FlexAttention ``BlockMask`` (its tables and the mask_mod it was made from)."""
    return all(hasattr(value, a) for a in ("kv_num_blocks", "kv_indices", "BLOCK_SIZE", "seq_lengths", "mask_mod"))


def tables(num, indices, blocks: int) -> torch.Tensor:
    """The bool table ``(B, H, QB, blocks)`` of the key blocks each query block lists: the first ``num[b, h, i]``
    entries of ``indices[b, h, i]``."""
    listed = torch.arange(indices.shape[-1], device=indices.device) < num[..., None]
    out = torch.zeros((*indices.shape[:-1], blocks + 1), dtype=torch.bool, device=indices.device)
    out.scatter_(-1, torch.where(listed, indices.long().clamp(0, blocks), blocks), listed)    # unlisted: the spare
    return out[..., :blocks]


def mask_of(block_mask, shape, *, blocks: bool = True) -> object:
    """The ``mask_mod`` of ``block_mask`` for attention of ``shape = (B, H, N, X)`` (queries, keys), after checking
    that the block mask says what it says there (see the module docstring); a BlockMaskError otherwise.
    ``blocks=False`` checks its lengths and the shapes of its tables only (inside ``torch.compile``, where the
    blocks' values are not known while the graph is captured)."""
    B, H, N, X = shape
    lengths = tuple(int(n) for n in block_mask.seq_lengths)
    if lengths != (N, X):
        raise BlockMaskError(f"the block mask was made for {lengths[0]} queries and {lengths[1]} keys; this call has "
                             f"{N} queries and {X} keys (make it with create_block_mask(mask_mod, B, H, {N}, {X}))")
    BQ, BK = (int(s) for s in block_mask.BLOCK_SIZE)
    QB, KB = -(-N // BQ), -(-X // BK)
    partial = tables(block_mask.kv_num_blocks, block_mask.kv_indices, KB)
    full = tables(block_mask.full_kv_num_blocks, block_mask.full_kv_indices, KB) \
        if block_mask.full_kv_num_blocks is not None else torch.zeros_like(partial)
    Bm, Hm = partial.shape[0], partial.shape[1]
    if Bm not in (1, B) or Hm not in (1, H) or partial.shape[2] != QB:
        raise BlockMaskError(f"the block mask's tables are {tuple(partial.shape[:3])} (batch, heads, query blocks of "
                             f"{BQ}); this call takes batch 1 or {B}, heads 1 or {H}, and {QB} query blocks")
    mask_mod = block_mask.mask_mod
    if not blocks:
        return mask_mod
    index = [torch.arange(n, device=partial.device).view([-1 if j == p else 1 for j in range(4)])
             for p, n in enumerate((B, H, N, X))]
    allowed = torch.as_tensor(mask_mod(*index), device=partial.device).broadcast_to((B, H, N, X))
    pad = (0, KB * BK - X, 0, QB * BQ - N)
    blocked = (lambda m, fill: torch.nn.functional.pad(m, pad, value=fill).view(B, H, QB, BQ, KB, BK))
    every = blocked(allowed, True).all(5).all(3)
    some = blocked(allowed, False).any(5).any(3)
    full, partial = full.expand(B, H, QB, KB), partial.expand(B, H, QB, KB)
    wrong = (full & ~every) | (~full & ~partial & some)
    if bool(wrong.any()):
        b, h, i, j = (int(c) for c in wrong.nonzero()[0])
        said = "full (its mask_mod not applied)" if bool(full[b, h, i, j]) else "empty (skipped)"
        holds = "allows only some of its pairs" if bool(some[b, h, i, j]) else "allows none of its pairs"
        raise BlockMaskError(
            f"the block mask's block (b={b}, h={h}, queries {i * BQ}…{min((i + 1) * BQ, N) - 1}, keys {j * BK}…"
            f"{min((j + 1) * BK, X) - 1}) is {said}, but its mask_mod {holds}; napkin-cat computes the mask_mod "
            f"and makes its own blocks: pass a block mask made by create_block_mask(mask_mod, ...), or mask_mod=")
    return mask_mod


__all__ = ["is_block_mask", "mask_of", "tables"]
