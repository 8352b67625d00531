"""Python's cyclic garbage collector paused while a cost or a search runs, enabled again after (if it was).

A search makes and drops hundreds of thousands of small objects (candidate diagrams, sympy terms, cost records), few
of them in cycles, and leaves millions alive (its kept kernels and their curves); each full collection walks every
live object.  The collections alone took a fifth of a derive's time (the saved attention backward at q = x = 4096,
M = 2^16: 8.1 s of CPU with the collector, 6.1 s without; one transformer block 12.6 → 10.4 s, its peak memory
181 → 213 MB), and ``nc.cost`` of a 32-block derive's winner, called after it, paid ~1 s of full collections over
the heap the derive left (``benchmarks/bench_cost.py``).

**What the pause leaves may be aged, not walked young** (:data:`AGE_ON_EXIT`, off by default).  Every object a paused
call made and kept is young when the collector comes back (generation 0 is only counted, never collected, while it is
paused), so the first collection after it walked them all, and the one after that walked them again in generation 1,
before they reached the oldest generation that they belong to (a symbolic derive of the transformer block keeps ~1 M
tracked objects, 0.76 M of them its kernels in :data:`~napkin_cat.search.context.KERNELS`: 0.6 CPU s at the end of the
derive, 0.6 s more in the next generation-1 collection).  The last call to leave moves every tracked object into the
oldest generation (``gc.freeze()`` and at once ``gc.unfreeze()``: nothing stays frozen), so the next full collection
walks them once, as it walks every long-lived object::

    with the collector enabled after the pause:  gc.collect() frees every cycle the paused call left  (none leaks)

The price: a cycle the call left (or left young before it) is freed by the next full collection (or
``gc.collect()``), no longer by the next young one (the block's derive: ~90,000 objects, 7 MiB).  A loop of paused
calls never lets the interpreter's own full collection come (it counts only what generation 1 hands on), so the
pause counts what it aged since the last full collection (anyone's) and, past :data:`AGED_LIMIT`, collects in full
as the last call leaves: what the calls drop in cycles is bounded by that many objects.  A process that
froze objects of its own (``gc.get_freeze_count() > 0``, e.g. before forking) keeps them frozen: then nothing is
aged, and the first young collection walks what the call left, as before.

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

__all__ = ["CollectorPause", "collector_paused", "AGE_ON_EXIT", "AGED_LIMIT"]

#: whether the last call to leave moves every tracked object into the oldest generation (module docstring).  Off by
#: default: in a long-lived process with a large heap (a test session, a notebook) the full collections it triggers
#: every AGED_LIMIT aged objects walk the whole heap, and cost more than the young walks they save (tests/library,
#: autodiff, algorithms, distributed: 23.5 s off, 38.3 s on); one symbolic derive in a fresh process is ~1.1× faster on
AGE_ON_EXIT = False
#: the most young objects aged since the last full collection (~2 M: what two symbolic derives of a transformer block
#: keep); past it the last call to leave collects in full instead, so what paused calls drop in cycles stays bounded
AGED_LIMIT = 1 << 21


class CollectorPause(contextlib.ContextDecorator):
    """The pause of the cyclic collector (module docstring): entered by every call it decorates, the collector
    disabled by the first and enabled by the last to leave, if it was enabled when the first came."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running = 0
        self._enable = False
        self.aged = 0           # young objects aged unwalked since the last full collection (:meth:`_collected`)
        self.full = 0           # full collections this pause made (past :data:`AGED_LIMIT`)
        gc.callbacks.append(self._collected)

    def _collected(self, phase, info):
        """A full collection (anyone's) walked what was aged: counted afresh from it."""
        if phase == "stop" and info["generation"] == len(gc.get_count()) - 1:
            self.aged = 0

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
                if AGE_ON_EXIT and gc.get_freeze_count() == 0:
                    young = gc.get_count()[0]      # (tracked objects made less those freed since the last collection)
                    collect = self.aged + young > AGED_LIMIT
                    if not collect:
                        self.aged += young
                        gc.freeze()        # every tracked object into the permanent generation (gen 0 count reset) ...
                        gc.unfreeze()      # ... and back into the oldest: the next full collection walks them once
                gc.enable()
        if collect:                        # (outside the lock: a finalizer it runs may enter a paused call)
            self.full += 1
            gc.collect()                   # the cycles aged so far, freed (and the count starts again)
        return False


#: the process's one pause of the cyclic collector (:class:`CollectorPause`)
collector_paused = CollectorPause()
