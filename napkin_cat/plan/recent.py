"""A memo of the most recent results: at most ``size`` entries, the least recently used evicted, one lock.

What a caller keeps for the life of a process (a compiled op's traced mods, the block tables derived for a
batch of data) is bounded by it, and its key holds everything the result depends on (the caller's concern).

>>> memo = Recent(2)
>>> memo.put("a", 1); memo.put("b", 2); memo.get("a")
1
>>> memo.put("c", 3); memo.get("b") is None, memo.get("a"), len(memo)      # "b" was the least recently used
(True, 1, 2)
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from napkin_cat.errors import ArgumentError


class Recent:
    """At most ``size`` results by key, least recently used evicted; safe to share between threads."""

    def __init__(self, size: int):
        if not isinstance(size, int) or size < 1:
            raise ArgumentError(f"a memo holds at least one entry: size must be a positive int, got {size!r}")
        self.size, self.entries, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key):
        """The result kept under ``key`` (now the most recently used), or None."""
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
            return found

    def put(self, key, value) -> None:
        """Keep ``value`` under ``key``, evicting the least recently used past ``size``."""
        with self.lock:
            self.entries[key] = value
            self.entries.move_to_end(key)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self.entries)
