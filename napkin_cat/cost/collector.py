"""Python's cyclic garbage collector paused while a cost or a search runs, enabled again after (if it was).

A search makes and drops hundreds of thousands of small objects (candidate diagrams, sympy terms, cost records), few
of them in cycles, and leaves millions alive (its kept kernels and their curves); each full collection walks every
live object.  The collections alone took a fifth of a derive's time (the saved attention backward at q = x = 4096,
M = 2^16: 8.1 s of CPU with the collector, 6.1 s without; one transformer block 12.6 → 10.4 s, its peak memory
181 → 213 MB), and ``nc.cost`` of a 32-block derive's winner, called after it, paid ~1 s of full collections over
the heap the derive left (``benchmarks/bench_cost.py``).  What cycles a paused call leaves are collected by the next
collection after it.

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

__all__ = ["CollectorPause", "collector_paused"]


class CollectorPause(contextlib.ContextDecorator):
    """The pause of the cyclic collector (module docstring): entered by every call it decorates, the collector
    disabled by the first and enabled by the last to leave, if it was enabled when the first came."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running = 0
        self._enable = False

    def __enter__(self):
        with self._lock:
            if self._running == 0:
                self._enable = gc.isenabled()
                gc.disable()
            self._running += 1
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._running -= 1
            if self._running == 0 and self._enable:
                gc.enable()
        return False


#: the process's one pause of the cyclic collector (:class:`CollectorPause`)
collector_paused = CollectorPause()
