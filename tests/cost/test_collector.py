"""The cyclic collector is paused while ``nc.cost`` and ``nc.derive`` run (issue 35: after a large derive, costing
its result paid full collections over the heap the derive left), and enabled again after.

Route: ``gc.callbacks`` sees every collection that starts; with the thresholds at one allocation the same work
outside a paused call starts collections, inside none.
"""
from __future__ import annotations

import gc

import pytest

import napkin_cat as nc


@pytest.fixture
def collections():
    """The generations of the collections that start, with a collection due at almost every allocation."""
    seen, thresholds = [], gc.get_threshold()

    def note(phase, info):
        if phase == "start":
            seen.append(info["generation"])
    gc.set_threshold(1, 1, 1)
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*thresholds)


#: collections a paused call may start as it enters, before the pause begins (its arguments' allocations)
AT_ENTRY = 5

ATTENTION = nc.group(nc.stream(nc.library.attention(), "x", "s_x"), "q", "g_q")
AT = {"q": 64, "x": 64, "d": 8, "g_q": 8, "s_x": 4}


@pytest.mark.parametrize("sizes", [None, AT], ids=["symbolic", "at sizes"])
def test_no_collection_inside_a_cost(collections, sizes):
    """The same work, unpaused (the function under the decorator), starts many collections."""
    nc.cost(ATTENTION, sizes=sizes)                 # (anything made once per process, made)
    collections.clear()
    getattr(nc.cost, "__wrapped__", nc.cost)(ATTENTION, sizes=sizes)
    unpaused = len(collections)
    collections.clear()
    nc.cost(ATTENTION, sizes=sizes)
    paused = len(collections)
    assert unpaused > 10 * AT_ENTRY and paused <= AT_ENTRY, (unpaused, paused)
    assert gc.isenabled()


def test_no_collection_inside_a_derive(collections):
    f, sizes = nc.library.matmul(), {"a": 32, "b": 32, "c": 32}
    collections.clear()
    nc.derive(f, memory=2 ** 8, sizes=sizes)
    paused = len(collections)
    assert paused <= AT_ENTRY, paused
    assert gc.isenabled()
    _ = [[k] for k in range(100)]
    assert len(collections) > paused, "enabled again after"
