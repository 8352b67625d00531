"""The structures a time model times: those transfers favour at memories above the one its tiles must fit.

A time model (:mod:`~napkin_cat.hardware.timed` on a GPU, :mod:`~napkin_cat.hardware.cputime` on a CPU) times the
structures (kernel splits) the transfer search finds, each at every tile assignment that fits the level its tiles
live in: ``memory`` values (a GPU's shared memory per block, a CPU's L2).  Transfers favour a kernel split that
fuses more (reads each streamed tile once for more outputs, recomputes less) only with more memory than that, and
the larger the sizes the more it needs (causal attention's backward with dK and dV in one kernel: from ``2^17``
values at N = 4,096, ``2^18`` at 8,192, ``2^19`` at 16,384), while tilings of it fit ``memory`` and may run faster
than the split's.  So the search runs on at the memories above ``memory``::

    structure_memories(f, env, M) = [2·M, 4·M, …, 2^k·M]     k the least with 2^k·M ≥ |inputs(f)| + |outputs(f)|

(at ``2^k·M`` an algorithm can read each input and write each output once: more memory lowers no transfer of them,
so no structure is transfer-optimal only above it).  These memories only propose structures: the time model
times each at the tiles that fit ``memory``, the legality it applies below.

>>> import napkin_cat as nc
>>> from napkin_cat.hardware.predict import environment
>>> structure_memories(nc.library.matmul(), environment({"a": 64, "b": 64, "c": 64}), 2 ** 12)   # 3·4,096 values
[8192, 16384]
"""
from __future__ import annotations

import sympy

from napkin_cat.errors import MemoryLimitError
from napkin_cat.search.derivation import derive as derive_transfers


def boundary_values(ty, env: dict) -> int:
    """The values of the arrays of a type (a diagram's inputs or outputs) at ``env``.

    >>> import napkin_cat as nc
    >>> from napkin_cat.hardware.predict import environment
    >>> boundary_values(nc.library.matmul().dom, environment({"a": 2, "b": 3, "c": 5}))    # 2·3 + 3·5
    21
    """
    return sum(int(sympy.Mul(*(sympy.sympify(ax) for ax in a.shape)).subs(env)) for a in ty.inside)


def structure_memories(diagram, env: dict, memory: int) -> list:
    """The memories above ``memory`` whose transfer-optimal structures are timed too: the powers of two
    ``2·memory, 4·memory, …`` up to the first that holds every input and output of ``diagram`` at ``env`` (see the
    module docstring).  Empty where ``memory`` already holds them.

    >>> import napkin_cat as nc
    >>> from napkin_cat.hardware.predict import environment
    >>> structure_memories(nc.library.matmul(), environment({"a": 64, "b": 64, "c": 64}), 2 ** 10)   # 3·4,096
    [2048, 4096, 8192, 16384]
    """
    whole = boundary_values(diagram.dom, env) + boundary_values(diagram.cod, env)
    out, m = [], memory
    while m < whole:
        m *= 2
        out.append(m)
    return out


def derived_at(diagram, memories: list, *, min_blocks, required: bool = False, **options) -> list:
    """The transfer searches at ``memories`` (``derive(diagram, memory=memories, min_blocks=..., **options)``, one
    search over them all: the structures below a time model's level and those above it found together): a list of
    derivations, empty where no memory holds an algorithm (``required``: then the search's
    :class:`~napkin_cat.errors.MemoryLimitError` is raised).

    Where some memories hold no algorithm (a layer norm keeps whole rows; no tiling launches ``min_blocks``
    blocks), the search runs once more over those that do.  They are the memories from the least that does up:
    a tiling that fits ``m`` values fits ``2·m``, and the blocks it launches do not depend on the memory, so
    whether a memory holds one is monotone in it.  The least is the one the search's error names, or, where it
    names none (a requirement of blocks), the one found by bisection (``⌈log₂ n⌉`` searches at one memory).

    >>> import napkin_cat as nc
    >>> [d.memory for d in derived_at(nc.library.matmul(), [2, 2 ** 12], min_blocks=16,
    ...                               sizes={"a": 64, "b": 64, "c": 64})]      # 2 values hold no tiling (3 do)
    [[4096]]
    """
    memories = sorted(set(memories))
    if not memories:
        return []
    try:
        return [derive_transfers(diagram, memory=memories, min_blocks=min_blocks, **options)]
    except MemoryLimitError as e:
        error, least = e, getattr(e, "smallest", None)
    if least is None:
        lo, hi = 0, len(memories)          # the first memory that holds an algorithm: memories[lo] (lo = n: none)
        while lo < hi:
            mid = (lo + hi) // 2
            try:
                derive_transfers(diagram, memory=[memories[mid]], min_blocks=min_blocks, **options)
                hi = mid
            except MemoryLimitError:
                lo = mid + 1
        kept = memories[lo:]
    else:
        kept = [m for m in memories if m >= least]
    if kept:
        try:
            return [derive_transfers(diagram, memory=kept, min_blocks=min_blocks, **options)]
        except MemoryLimitError as e:
            error = e
    if required:
        raise error
    return []
