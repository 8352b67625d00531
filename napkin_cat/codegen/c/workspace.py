"""The level-0 workspace of a C kernel, kept between its runs: buffers mapped and touched once, not at every call.

A plan whose launches pass an intermediate through main memory (a backward's ``P = exp(S − L)`` and ``dS``: level-0
variables that are neither inputs nor outputs) needs that workspace at every run.  Allocated inside the run
(``nc_run``'s ``nc_alloc``), a buffer past glibc's mmap threshold (32 MiB at most) is a fresh mapping each time,
and the kernel pays a page fault, and the kernel's zeroing of the page, per 4 KiB of it on first touch: 16,384
faults per call for attention's backward at N = 1,024 and 8 heads (two 32 MiB buffers, ``perf stat``), some 50 ms
of system time.  A :class:`Workspaces` holds the buffer sets between runs instead (the C kernel calls
``nc_run_in``, which takes the workspace as arguments)::

    run:  take a free set (else make one)  ;  nc_run_in(inputs, outputs, set, tables)  ;  give the set back

so that a run after a run finds its pages mapped, and two runs at once (threads calling the kernel, which ctypes
lets run together) never share a set: the sets held are at most the runs ever in flight together.
:meth:`Workspaces.release` drops the free sets (their memory goes back to the system; the next run makes one).

>>> w = Workspaces([100, 40])
>>> with w.held() as a, w.held() as b:          # two runs at once: two sets
...     len(a), a[0] % 64, a != b
(2, 0, True)
>>> with w.held() as c:                         # a run after them: a set they gave back
...     c in (a, b)
True
>>> len(w.free), w.bytes
(2, 536)
>>> w.release(); (len(w.free), w.bytes)
(0, 0)
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

#: the alignment of each buffer (a cache line; what ``nc_alloc``'s ``posix_memalign`` gave)
ALIGN = 64


class Workspaces:
    """A pool of workspace sets for a kernel whose workspace variables take ``sizes`` bytes each (see the module
    docstring); a set is one aligned buffer per variable, as addresses the C entry point takes."""

    def __init__(self, sizes):
        self.sizes = tuple(int(s) for s in sizes)
        self.free: list[tuple[int, ...]] = []
        self._buffers: dict = {}      # a set's addresses → the numpy arrays that own them
        self._lock = threading.Lock()

    def __repr__(self):
        return f"Workspaces({list(self.sizes)}, sets={len(self._buffers)}, free={len(self.free)})"

    @property
    def bytes(self) -> int:
        """The bytes the sets held now own (free ones and ones in use)."""
        return sum(sum(a.nbytes for a in arrays) for arrays in self._buffers.values())

    def make(self) -> tuple[int, ...]:
        """A fresh set: one buffer per variable, each ``ALIGN``-aligned (the arrays kept, the addresses returned)."""
        arrays, addresses = [], []
        for size in self.sizes:
            raw = np.empty(max(size, 1) + ALIGN, dtype=np.uint8)
            arrays.append(raw)
            addresses.append(raw.ctypes.data + (-raw.ctypes.data) % ALIGN)
        key = tuple(addresses)
        self._buffers[key] = arrays
        return key

    @contextlib.contextmanager
    def held(self):
        """A set for one run (a free one, else a fresh one), given back when the run ends."""
        with self._lock:
            found = self.free.pop() if self.free else None
            if found is None:
                found = self.make()
        try:
            yield found
        finally:
            with self._lock:
                if found in self._buffers:
                    self.free.append(found)

    def release(self):
        """Drop the free sets (a set in use stays, free again when its run ends)."""
        with self._lock:
            for key in self.free:
                del self._buffers[key]
            self.free.clear()
