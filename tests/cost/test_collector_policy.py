"""The pause's full collections scaled to the heap (issue 35): :func:`~napkin_cat.cost.collector.full_collection_due`
at its boundary, and a loop of paused calls in a fresh interpreter with an old heap of a known size (the collector's
module loaded alone, by its path: no other heap than the one built), its full collections counted with
``gc.callbacks`` and its cycles with weak references.

Route: the survivors the pause counts, checked against ``len(gc.get_objects())`` after a ``gc.collect()``; the full
collections against the law's count (aged objects / a quarter of the heap), and the fixed limit's (aged / limit).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from napkin_cat.cost import collector
from napkin_cat.cost.collector import full_collection_due

LIMIT = 2_000


@pytest.mark.parametrize("aged, survivors, due", [
    (LIMIT, 0, False), (LIMIT + 1, 0, True),                          # the floor: AGED_LIMIT itself
    (LIMIT + 1, 4 * LIMIT, True),                                      # a heap of 4 * LIMIT: still the floor
    (10_000, 40_000, False), (10_001, 40_000, True),                   # a quarter of the survivors
    (10_000, 39_999, True), (2 * LIMIT, 10 ** 9, False),               # a large heap: the fixed limit passed, not due
])
def test_the_law_at_its_boundary(monkeypatch, aged, survivors, due):
    """due <=> aged > max(AGED_LIMIT, survivors / 4).  Mutations: the old fixed limit (``aged > AGED_LIMIT``: the
    large heaps due); ``>=`` for ``>`` (due at the boundary itself); ``survivors / 2`` (10,001 of 40,000 not due)."""
    monkeypatch.setattr(collector, "AGED_LIMIT", LIMIT)
    assert full_collection_due(aged, survivors) is due


LOOP = r"""
import gc, importlib.util, json, sys, weakref
path, heap, limit, calls, per = sys.argv[1], *map(int, sys.argv[2:])
spec = importlib.util.spec_from_file_location("collector_alone", path)
collector = importlib.util.module_from_spec(spec)
spec.loader.exec_module(collector)
collector.AGED_LIMIT = limit

class Node:
    def __init__(self):
        self.me = self

old = [[i] for i in range(heap)]
gc.collect()
tracked = len(gc.get_objects())
full, counted = [0], []
def note(phase, info):
    if phase == "stop" and info["generation"] == 2:
        full[0] += 1
gc.callbacks.append(note)
pause = collector.CollectorPause()
alive, most = [], 0
for _ in range(calls):
    with pause:
        alive += [weakref.ref(Node()) for _ in range(per)]
    if pause.survivors is not None:
        counted.append(pause.survivors)
    alive = [r for r in alive if r() is not None]
    most = max(most, len(alive))
paused = full[0]
gc.collect()
left = sum(r() is not None for r in alive)
print(json.dumps(dict(full=paused, made=pause.full, most=most, counted=counted, tracked=tracked, left=left)))
"""


def loop(heap, calls, per):
    """A fresh interpreter's old heap of ``heap`` lists, then ``calls`` paused calls each dropping ``per`` cycles."""
    out = subprocess.run([sys.executable, "-c", LOOP, collector.__file__, str(heap), str(LIMIT), str(calls), str(per)],
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def test_a_large_old_heap_is_not_collected_every_limit():
    """400,000 old objects, 100 paused calls ageing ~1,000 objects each (~100,000 in all, 50 times AGED_LIMIT): at
    most a full collection or two (a quarter of the heap is aged once), where the fixed limit made one every
    2,000 aged objects; with no old heap the floor still collects (one per ~AGED_LIMIT).  Mutation: the old fixed
    limit (``4 * aged > 4 * AGED_LIMIT``): ~50 full collections over the large heap."""
    large = loop(400_000, 100, 500)
    assert large["full"] <= 2 and large["full"] == large["made"], large
    assert all(abs(s - large["tracked"]) <= 1_000 for s in large["counted"]), large     # (the survivors, counted)
    small = loop(0, 100, 500)
    assert small["full"] >= 20, small


def test_cycles_left_by_paused_calls_are_freed_within_the_bound():
    """40,000 old objects, 200 paused calls each dropping 500 cycles: the cycles alive at once stay within the law's
    bound (a quarter of the survivors, ~1 object more per cycle for its weak reference, one call's worth of slack)
    and above the fixed limit (the heap's quarter is the bound, not AGED_LIMIT); every cycle is freed by the pause's
    full collections and the last ``gc.collect()``.  Mutations: the limit not checked (``return False``: 100,000
    cycles alive); the old fixed limit (at most 2,000 alive)."""
    out = loop(40_000, 200, 500)
    bound = max(LIMIT, out["tracked"] / 4) + 500
    assert LIMIT < out["most"] <= bound, out
    assert out["full"] >= 5 and out["left"] == 0, out
