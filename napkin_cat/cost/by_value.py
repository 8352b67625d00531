"""Pieces of the cost functor remembered by value: what one candidate's kernel costs, another's reuses.

The search costs hundreds of candidate kernels (:mod:`napkin_cat.search.variants`), each a fresh diagram: the
same operation appears in every kernel that fuses it, and the same array is seen through equal relabellings in
every partition of it.  A memo kept on the object (a box's ``_cost_pieces``, an array's ``_numel_poly``) misses on
each fresh copy; this one is keyed by the *value*, so equal boxes and arrays are costed once per process::

    pieces(box, images) == pieces(box′, images′)      whenever box == box′ and images == images′

(the pieces read nothing but the box's name, data, types and the arrays it is seen through).  Why the process's and
not a call's (issue 35: a cache belongs to the call unless its result is a pure function of its key): each entry is
a pure function of its whole key, an immutable value, as :func:`~napkin_cat.cost.sized_optimum.compiled`'s is; bounded
(:data:`LIMIT` entries, the oldest dropped first) and locked.

>>> memo = ByValue(limit=2)
>>> memo.get(("a",)), memo.put(("a",), 1), memo.get(("a",))
(None, 1, 1)
>>> _ = memo.put(("b",), 2), memo.put(("c",), 3); len(memo), memo.get(("a",))
(2, None)
"""
from __future__ import annotations

import threading

#: the most entries one memo keeps (a process that costs many programs does not grow past it)
LIMIT = 2 ** 16


class ByValue:
    """A bounded memo from hashable values to what they determine (first in, first dropped past ``limit``)."""

    def __init__(self, limit: int = LIMIT):
        self.limit = limit
        self._kept: dict = {}
        self._lock = threading.Lock()

    def get(self, key):
        return self._kept.get(key)

    def put(self, key, value):
        """Keep ``value`` under ``key`` (the first kept wins where two threads put one key) and return the kept."""
        with self._lock:
            found = self._kept.setdefault(key, value)
            while len(self._kept) > self.limit:
                del self._kept[next(iter(self._kept))]
        return found

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


__all__ = ["ByValue", "LIMIT"]
