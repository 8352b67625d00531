"""The search's state as a value: what one derivation remembers, and the costed kernels that calls may share.

A ``derive`` call owns a :class:`Search`: the level it searches, the kernel cache it reads and fills, and the
segment problems it has solved.  Nothing the search remembers is a module global that two calls or two threads
could share wrongly.

* **Costed kernels** (:class:`KernelCache`).  A block's partitions and their cost curves
  (:class:`~napkin_cat.search.paths.Choice`) are a function of the block's kernel and the level alone:

      choice(graph, block, level) = Choice(graph.subdiagram(block), level),  keyed by (graph.key(block), level)

  where :meth:`~napkin_cat.search.blocks.OpGraph.key` holds every box (its kind, parameters and arrays) and the
  wiring, so equal keys are equal kernels.  Nothing else enters a Choice: the rule book only filters its
  partitions by role when a path is evaluated (:func:`~napkin_cat.search.paths.playable`), and its curves keep
  their points under their own complete keys (sizes, memory, tile grid, caps).  So one cache may serve many
  calls, in any thread: :data:`KERNELS`, the default of ``derive(..., cache=)``, bounded (the least recently used
  kernel goes past ``limit``) and locked; the backward's derivations in one process cost their equal kernels once.
  ``derive(..., cache=KernelCache())`` searches cold.

  **A kernel met twice is costed once.**  Two blocks whose keys differ may still be one kernel: a block's key says
  which of its outputs other operations read and which values a form computes once, and two such blocks can build
  the same function diagram (a recomputed copy folded away, say).  A Choice is a function of its kernel's diagram,
  the level and the density alone (:class:`~napkin_cat.search.paths.Choice` reads nothing else), so a block whose
  key is new is looked up a second time by ``(diagram, level, density)`` (diagram equality is structural: every
  box, its spec and arrays, and the wiring) and shares the Choice found, its partitions, curves and their points::

      choice(graph, block, level, density) is choice(graph', block', level, density)
          whenever graph.subdiagram(block) == graph'.subdiagram(block')
* **Solved segments** (:attr:`Search.solved`).  A segment's cheapest split depends on what its call fixes (the
  rule book's roles, the sizes, memories, tile grid and requirement), so it is remembered by that call alone: alike
  segments of one function are solved once (:mod:`.segments`), and a second call solves its own.  Segments that
  differ only by the names of their axes (sizes kept) are one problem too: kept once more under their key up to a
  renaming of axes (:func:`~napkin_cat.search.relabelling.relabelled`; cost and optimum commute with a renaming), the
  split moved to each renamed copy and checked there (``searched`` and ``renamed`` count both).

>>> import napkin_cat as nc
>>> from napkin_cat.search.blocks import OpGraph
>>> g = OpGraph(nc.engine.to_netlist(nc.library.attention()))
>>> cache = KernelCache(limit=2)
>>> first = cache.choice(g, 0b001, 1)                          # Q·Kᵀ's kernel at level 1
>>> cache.choice(g, 0b001, 1) is first, cache.choice(g, 0b001, 2) is first      # the level is part of the key
(True, False)
>>> _ = cache.choice(g, 0b010, 1); len(cache), cache.choice(g, 0b001, 1) is first   # the least recent went
(2, False)
>>> KernelCache(limit=0)
Traceback (most recent call last):
...
napkin_cat.errors.ArgumentError: a kernel cache's limit is a positive int (kernels kept), got 0
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from napkin_cat.cost.record import fraction
from napkin_cat.errors import ArgumentError
from napkin_cat.search.paths import Choice

#: the most kernels the shared cache keeps (as many as the process-wide memo it replaces held before it was cleared)
KERNEL_LIMIT = 20_000


class KernelCache:
    """Costed kernels by ``(canonical form, level)``, the least recently used dropped past ``limit`` (see the
    module docstring); safe to share between calls and threads.

    A kernel missing from the cache is costed outside the lock (two threads may cost it at once: the first kept
    wins, and both get it); a :class:`~napkin_cat.search.paths.Choice` publishes each lazily built part whole."""

    def __init__(self, limit: int = KERNEL_LIMIT):
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ArgumentError(f"a kernel cache's limit is a positive int (kernels kept), got {limit!r}")
        self.limit = limit
        self._choices: OrderedDict = OrderedDict()
        self._kernels: OrderedDict = OrderedDict()     # (function diagram, level, density) -> its Choice
        self._lock = threading.Lock()

    def choice(self, graph, block: int, level: int, density=1) -> Choice:
        """The partitions and cost curves of ``block``'s kernel in ``graph`` at ``level`` (a mask from data running
        ``density`` of its trips), costed once per key."""
        key = (graph.key(block), level, density)
        with self._lock:
            found = self._choices.get(key)
            if found is not None:
                self._choices.move_to_end(key)
                return found
        function = graph.subdiagram(block)
        alike = (function, level, density)       # the kernel itself: what the Choice is a function of
        with self._lock:
            found = self._kernels.get(alike)
        made = Choice(function, level, density) if found is None else found
        with self._lock:
            made = self._kernels.setdefault(alike, made)
            self._kernels.move_to_end(alike)
            found = self._choices.setdefault(key, made)
            self._choices.move_to_end(key)
            for kept in (self._choices, self._kernels):
                while len(kept) > self.limit:
                    kept.popitem(last=False)
        return found

    def __len__(self) -> int:
        return len(self._choices)

    @property
    def distinct(self) -> int:
        """How many distinct kernels the cache holds (``len(cache)`` counts block keys: two keys may share one)."""
        return len(self._kernels)

    def clear(self) -> None:
        with self._lock:
            self._choices.clear()
            self._kernels.clear()

    def __repr__(self) -> str:
        return f"KernelCache({len(self)} of {self.limit} kernels)"


#: the cache ``derive`` reads by default: one per process, shared by its calls and threads (module docstring)
KERNELS = KernelCache()


@dataclass
class Search:
    """One derivation's state: its ``level``, the ``cache`` of costed kernels it reads and fills, the segment
    problems it has ``solved`` (keyed by the segment's canonical form and what the selection fixed), and the steps of
    the symbolic mode's closed forms it has worked out (``closed``, keyed by the ``srepr`` of what each step reads:
    :func:`napkin_cat.cost.lagrange.remembered`); ``searched`` and ``renamed`` count the segment problems searched and
    those moved from an alike one up to a renaming of axes (:mod:`.segments`)."""

    level: int
    cache: KernelCache = field(default_factory=lambda: KERNELS)
    solved: dict = field(default_factory=dict)
    density: object = 1       # the fraction of a stream's trips a mask from data lets run (1: dense)
    closed: dict = field(default_factory=dict)   # closed-form steps by srepr (napkin_cat.cost.lagrange.remembered)
    searched: int = 0         # segment problems searched (.segments)
    renamed: int = 0          # segments solved by moving the split of one alike up to a renaming of axes (.segments)

    def choice(self, graph, block: int) -> Choice:
        """The block's partitions and cost curves at this search's level and density (:meth:`KernelCache.choice`)."""
        return self.cache.choice(graph, block, self.level, self.density)


def search_of(level: int, cache=None, density=1) -> Search:
    """A fresh :class:`Search` at ``level`` reading ``cache`` (default :data:`KERNELS`), its masks from data running
    ``density`` of their trips (an exact rational 0 … 1); an ArgumentError naming what was given when ``cache`` is
    not a :class:`KernelCache` or ``density`` is not a fraction."""
    if cache is None:
        cache = KERNELS
    if not isinstance(cache, KernelCache):
        raise ArgumentError(f"cache= takes a KernelCache (napkin_cat.search.context), got {type(cache).__name__}")
    return Search(level, cache, density=fraction(density, "density="))


__all__ = ["KernelCache", "KERNELS", "KERNEL_LIMIT", "Search", "search_of"]
