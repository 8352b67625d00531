"""Python's cyclic garbage collector paused while a cost or a search runs, enabled again after (if it was).

A search makes and drops hundreds of thousands of small objects (candidate diagrams, sympy terms, cost records), few
of them in cycles, and leaves millions alive (its kept kernels and their curves); each full collection walks every
live object.  The collections alone took a fifth of a derive's time (the saved attention backward at q = x = 4096,
M = 2^16: 8.1 s of CPU with the collector, 6.1 s without; one transformer block 12.6 → 10.4 s, its peak memory
181 → 213 MB), and ``nc.cost`` of a 32-block derive's winner, called after it, paid ~1 s of full collections over
the heap the derive left (``benchmarks/bench_cost.py``).

**What the pause leaves is aged, not walked young** (:data:`AGE_ON_EXIT`).  Every object a paused call made and kept
is young when the collector comes back (generation 0 is only counted, never collected, while it is paused), so the
first collection after it walked them all, and the one after that walked them again in generation 1, before they
reached the oldest generation that they belong to (a symbolic derive of the transformer block keeps ~1.2 M tracked
objects: 0.56 CPU s at the end of the derive, more in the next generation-1 collection).  The last call to leave
moves every tracked object into the oldest generation (``gc.freeze()`` and at once ``gc.unfreeze()``: nothing stays
frozen), so the next full collection walks them once, as it walks every long-lived object::

    with the collector enabled after the pause:  gc.collect() frees every cycle the paused call left  (none leaks)

The price: a cycle the call left (or left young before it) is freed by the next full collection (or
``gc.collect()``), no longer by the next young one (the block's derive: ~90,000 objects, 7 MiB).  The interpreter's
own full collection counts only what generation 1 hands on, never what was aged, so the pause counts what it aged
since the last full collection (anyone's: ``gc.callbacks``) and, as the last call leaves, collects in full by
CPython's own law for its oldest generation, scaled to the heap (3.11's ``gcmodule.c``: a full collection only when
``long_lived_pending`` reaches a quarter of ``long_lived_total``, the objects that survived the last one, so that each
walk of the heap is paid for by as many new long-lived objects as a quarter of it)::

    collect in full  <=>  aged > max(AGED_LIMIT, survivors / 4)           (:func:`full_collection_due`)

``survivors`` is counted once between two full collections, when ``aged`` first passes :data:`AGED_LIMIT` (the
tracked objects then, less ``aged``: ``gc.get_freeze_count()`` between the freeze and the unfreeze, an eighth of a
full collection's walk of as many objects).  What paused calls drop in cycles is so bounded by a quarter of the heap (or
:data:`AGED_LIMIT`), as the interpreter bounds its own; a fixed limit instead collected a long-lived process's whole
heap every 2^21 aged objects.

A process that froze objects of its own (``gc.get_freeze_count() > 0``, e.g. a test session after collecting its
tests, or before forking) keeps them frozen: then nothing is aged, and the first young collection walks what the call
left, as before.  ``gc.get_freeze_count()`` walks every frozen object: asked as every paused call left, it was what
slowed a test session with aging on (a worker's 374,000 frozen objects walked at each of 258 calls: 10.7 of the
39 CPU s of tests/library, autodiff, algorithms and distributed; no full collection was due), so the pause asks it
only when a call left more young objects than it saw frozen last time (:attr:`CollectorPause.frozen`): a frozen heap
is walked once per change of the freeze, or by a call that left more young objects than it holds.

The collector is the process's, so the pause is one per process (:data:`collector_paused`, a decorator on
``nc.derive`` and ``nc.cost``): it counts the calls running, in any thread, and the last to end enables the
collector again, if it was enabled when the first began (a call ending in one thread never enables it under
another, and a call nested in another leaves it paused).

>>> import gc
>>> with collector_paused:
...     with collector_paused:
...         pass
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""
from __future__ import annotations

import contextlib
import gc
import threading

__all__ = ["CollectorPause", "collector_paused", "full_collection_due", "AGE_ON_EXIT", "AGED_LIMIT"]

#: whether the last call to leave moves every tracked object into the oldest generation (module docstring)
AGE_ON_EXIT = True
#: the fewest objects aged since the last full collection that collect in full (~2 M: what two symbolic derives of a
#: transformer block keep); a larger heap waits for a quarter of its survivors (:func:`full_collection_due`)
AGED_LIMIT = 1 << 21


def full_collection_due(aged, survivors):
    """Whether the pause collects in full as the last call leaves: ``aged`` objects aged unwalked since the last full
    collection, which left ``survivors`` tracked objects (CPython's law for its oldest generation, with a floor)::

        due  <=>  aged > max(AGED_LIMIT, survivors / 4)

    >>> full_collection_due(AGED_LIMIT, 0), full_collection_due(AGED_LIMIT + 1, 0)
    (False, True)
    >>> full_collection_due(AGED_LIMIT + 1, 4 * (AGED_LIMIT + 1)), full_collection_due(AGED_LIMIT + 1, 4 * AGED_LIMIT)
    (False, True)
    """
    return 4 * aged > max(4 * AGED_LIMIT, survivors)


class CollectorPause(contextlib.ContextDecorator):
    """The pause of the cyclic collector (module docstring): entered by every call it decorates, the collector
    disabled by the first and enabled by the last to leave, if it was enabled when the first came."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running = 0
        self._enable = False
        self.aged = 0           # young objects aged unwalked since the last full collection (:meth:`_collected`)
        self.survivors = None   # tracked objects the last full collection left (counted when first needed)
        self.frozen = 0         # the process's frozen objects, as last asked (``gc.get_freeze_count()``)
        self.full = 0           # full collections this pause made (:func:`full_collection_due`)
        gc.callbacks.append(self._collected)

    def _collected(self, phase, info):
        """A full collection (anyone's) walked what was aged: counted afresh from it."""
        if phase == "stop" and info["generation"] == len(gc.get_count()) - 1:
            self.aged, self.survivors = 0, None

    def __enter__(self):
        with self._lock:
            if self._running == 0:
                self._enable = gc.isenabled()
                gc.disable()
            self._running += 1
        return self

    def __exit__(self, *exc):
        collect = False
        with self._lock:
            self._running -= 1
            if self._running == 0 and self._enable:
                if AGE_ON_EXIT:
                    collect = self._age()
                gc.enable()
        if collect:                        # (outside the lock: a finalizer it runs may enter a paused call)
            self.full += 1
            gc.collect()                   # the cycles aged so far, freed (and the count starts again)
        return False

    def _age(self):
        """Every tracked object moved into the oldest generation, unless the process froze some of its own; whether a
        full collection is due (:func:`full_collection_due`)."""
        young = gc.get_count()[0]          # (tracked objects made less those freed since the last collection)
        if young <= self.frozen:           # (asking would walk more frozen objects than the young walk it saves)
            return False
        self.frozen = gc.get_freeze_count()
        if self.frozen:
            return False
        aged = self.aged + young
        gc.freeze()                        # every tracked object into the permanent generation (gen 0 count reset) ...
        if aged > AGED_LIMIT and self.survivors is None:
            self.survivors = max(gc.get_freeze_count() - aged, 0)
        gc.unfreeze()                      # ... and back into the oldest: the next full collection walks them once
        self.aged = aged
        return full_collection_due(aged, self.survivors or 0)


#: the process's one pause of the cyclic collector (:class:`CollectorPause`)
collector_paused = CollectorPause()
