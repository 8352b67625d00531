"""The threads of a thread block that issue its tensor-core products: one scaling unit of the GPU's hierarchy (Hopper's
warpgroup, Ampere's warp) per ``m`` rows of its first tensor-core instruction (wgmma 64, wmma 16), at least one unit
and at most :data:`ISSUING_THREADS` threads; the registers of those threads hold the block's tensors other than its
loaded tiles (:mod:`~napkin_cat.hardware.predict`)::

    threads(rows) = unit · max(1, min(⌊ISSUING_THREADS / unit⌋, ⌊rows / m⌋))

>>> from napkin_cat.hardware.model import load
>>> issuing_threads(load("h100-sxm5"), 16), issuing_threads(load("a100"), 16)     # a warpgroup; a warp
(128, 32)
"""
from __future__ import annotations

import functools

from napkin_cat.hardware.model import GPU
from napkin_cat.hardware.toy import load_hierarchy


#: rows of a tensor-core product one warpgroup issues (Hopper's wgmma: m = 64)
ROWS_PER_WARPGROUP = 64


def warpgroups(rows: int) -> int:
    """Warpgroups of a thread block whose tensor-core products have ``rows`` rows: one per 64 rows, 1 to 2
    (more would split a row's reductions across warpgroups)."""
    return max(1, min(2, rows // ROWS_PER_WARPGROUP))


#: the most threads of a thread block that issue one tile's tensor-core products: two Hopper warpgroups, eight
#: Ampere warps (more would split a row's reductions across more units than the kernels people write use)
ISSUING_THREADS = 256


@functools.cache
def scaling_unit(hierarchy: str) -> str:
    """The unit a toy hierarchy (named by a hardware model) scales by: ``warpgroup`` (Hopper), ``warp`` (Ampere)."""
    return load_hierarchy(hierarchy).scaling_unit


def issuing_threads(gpu: GPU, rows: int) -> int:
    """Threads of a thread block whose tensor-core products have ``rows`` rows: one scaling unit of ``gpu``'s
    hierarchy (Hopper's warpgroup of 128 threads, Ampere's warp of 32) per ``m`` rows of its first tensor-core
    instruction (wgmma 64, wmma 16), at least one unit, at most :data:`ISSUING_THREADS` threads.

    >>> from napkin_cat.hardware.model import load
    >>> [issuing_threads(load("h100-sxm5"), r) for r in (16, 64, 128, 256)]
    [128, 128, 256, 256]
    >>> [issuing_threads(load("a100"), r) for r in (16, 64, 128, 256)]
    [32, 128, 256, 256]
    """
    unit = scaling_unit(gpu.hierarchy)
    per_unit = gpu.threads(unit)
    m = gpu.tensor_shapes[0].m if gpu.tensor_shapes else ROWS_PER_WARPGROUP
    return per_unit * max(1, min(max(1, ISSUING_THREADS // per_unit), rows // m))


#: fp32 values of a kernel's largest on-chip tensor one warp holds where the kernel has no tensor-core products
VALUES_PER_WARP = 2048


def register_warps(largest: int) -> int:
    """Warps of a thread block without tensor-core products (its tiles in its threads' registers): one per
    :data:`VALUES_PER_WARP` values of its largest on-chip tensor, 4 to 8 (the printed kernels' launch, and the
    threads the time model spreads those tiles over).

    >>> register_warps(128 * 128), register_warps(64 * 64)
    (8, 4)
    """
    return 8 if largest > 4 * VALUES_PER_WARP else 4


__all__ = ["ROWS_PER_WARPGROUP", "ISSUING_THREADS", "VALUES_PER_WARP", "warpgroups", "scaling_unit",
           "issuing_threads", "register_warps"]
