"""Attention's backward, the numbers its tests check derive against, computed without the library: FlashAttention-2's
backward IO and the backward IO lower bound, written out from their papers, and the transfers a derived plan's
instrumented run counts at the derivation's own tiles.

FlashAttention-2's backward (Dao 2023, arXiv 2307.08691, Algorithm 2, with the block size of FlashAttention's
Algorithm 1, B_c = ⌈M/4d⌉): D = rowsum(dO ∘ O) reads dO and O and writes D (2Nd + N); per block of K and V
(⌈N/B_c⌉ of them) the inner loop reads Qᵢ, Oᵢ, dOᵢ, dQᵢ, Lᵢ, Dᵢ and writes dQᵢ over all N rows (5Nd + 2N); K and
V are read and dK, dV written once (4Nd):

    IO_FA2(N, d, M) = 6Nd + N + ⌈N/B_c⌉ · (5Nd + 2N)  =  Θ(N²d²/M).

>>> io_fa2(4096, 128, 2 ** 16), io_fa2(256, 32, 2 ** 12)
(87298048, 381184)

The lower bound (Li and Xu, arXiv 2410.09397, constant 1): min((qxd² + xd³)/M, (qxd + xd²)/√M).

The tests derive at q = x = 256, d = 32 and M = 2^12, 2^13, 2^14 (:data:`SIZES`, :data:`MEMORIES`), where the
structure of q = x = 4096, d = 128 at 2^18 … 2^20 appears (the same ⌈N/B_c⌉ = 8, 4, 2 blocks of keys) and the
instrumented run of a derived plan at its own tiles takes seconds; q = x = 4096 runs with ``NAPKIN_SLOW=1``.
"""
from __future__ import annotations

import functools
import math

import numpy as np

import napkin_cat as nc

SIZES = {"q": 256, "x": 256, "d": 32}
MEMORIES = (2 ** 12, 2 ** 13, 2 ** 14)
LARGE = {"q": 4096, "x": 4096, "d": 128}


def io_fa2(N, d, M):
    """FlashAttention-2's backward IO (module docstring)."""
    Bc = math.ceil(M / (4 * d))
    return 6 * N * d + N + math.ceil(N / Bc) * (5 * N * d + 2 * N)


def io_lower(q, x, d, M):
    """The backward IO lower bound (module docstring)."""
    return min((q * x * d ** 2 + x * d ** 3) / M, (q * x * d + x * d ** 2) / math.sqrt(M))


def compulsory(diagram, sizes):
    """Each input of ``diagram`` read once and each output written once, at ``sizes``."""
    return sum(math.prod(sizes[a] for a in arr.names) for arr in diagram.dom.inside + diagram.cod.inside)


@functools.lru_cache(maxsize=None)
def unsaved(memories=MEMORIES, large=False):
    """``nc.derive(nc.grad(attention))`` at :data:`SIZES` (or :data:`LARGE`) and ``memories``."""
    return nc.derive(nc.grad(nc.library.attention()), list(memories), sizes=LARGE if large else SIZES)


def counted(regime, seed=0) -> dict:
    """The values the instrumented run of ``regime``'s plan, at its sizes and tiles, moves per level (random
    inputs: the counts do not depend on the values)."""
    sizes = dict(regime.optimum.sizes)
    d = regime.diagram
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=tuple(sizes[a] for a in arr.names)) for arr in d.dom.inside]
    with np.errstate(all="ignore"):
        _, c = nc.plan(d, sizes).run(*xs)
    return c.transfers
