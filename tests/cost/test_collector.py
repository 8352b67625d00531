"""The cyclic collector is paused while ``nc.cost`` and ``nc.derive`` run (issue 35: after a large derive, costing
its result paid full collections over the heap the derive left), and enabled again after.

Route: ``gc.callbacks`` sees every collection that starts; with the thresholds at one allocation the same work
outside a paused call starts collections, inside none.
"""
from __future__ import annotations

import gc
import weakref

import pytest

import napkin_cat as nc
from napkin_cat.cost import collector


@pytest.fixture(autouse=True)
def aging(monkeypatch):
    """The aging on leaving (off by default: ``collector.AGE_ON_EXIT``) switched on for this file's tests of it."""
    monkeypatch.setattr(collector, "AGE_ON_EXIT", True)


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


class Node:
    """A container in a reference cycle (``self.me = self``), weakly referenceable."""

    def __init__(self):
        self.me = self


def test_what_a_paused_call_leaves_is_aged_not_walked_young():
    """What a paused call made and kept is in the oldest generation when it ends (the next young collections do not
    walk it: the work saved, ``gc.get_objects(generation)``), and a cycle it dropped is still collected
    (``gc.collect()``: nothing leaks frozen).  Mutations: ``AGE_ON_EXIT = False`` (kept in generation 0), freezing
    without ``gc.unfreeze()`` (the cycle never collected, the freeze count grows)."""
    from napkin_cat.cost.collector import collector_paused
    frozen = gc.get_freeze_count() > 0                # (the suite's conftest freezes what collecting made)
    gc.unfreeze()
    try:
        assert gc.isenabled()
        with collector_paused:
            kept = [Node() for _ in range(100)]
            dropped = weakref.ref(Node())
        assert gc.isenabled() and gc.get_freeze_count() == 0
        young = {id(o) for o in gc.get_objects(generation=0)} | {id(o) for o in gc.get_objects(generation=1)}
        assert not any(id(k) in young for k in kept)
        old = {id(o) for o in gc.get_objects(generation=2)}
        assert all(id(k) in old for k in kept)
        assert dropped() is not None                  # a cycle: no reference count frees it
        gc.collect()
        assert dropped() is None
    finally:
        if frozen:
            gc.collect()
            gc.freeze()


def test_a_process_s_own_freeze_is_left_alone():
    """A process that froze objects keeps them frozen through a paused call (nothing is aged then: the call's objects
    stay young, as without the pause's aging).  Mutation: the ``gc.get_freeze_count() == 0`` guard dropped."""
    from napkin_cat.cost.collector import collector_paused
    was = gc.get_freeze_count()
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with collector_paused:
            kept = [Node() for _ in range(10)]
        assert gc.get_freeze_count() == frozen
        assert all(any(k is o for o in gc.get_objects(generation=0)) for k in kept[:2])
    finally:
        if not was:
            gc.unfreeze()


def test_a_loop_of_paused_calls_frees_its_cycles(monkeypatch):
    """Aging is bounded: a loop of paused calls, each dropping cycles, collects in full once the objects aged since
    the last full collection pass ``AGED_LIMIT`` (here 2,000), so at most that many of its cycles are alive at once
    (the interpreter's own full collection never comes: nothing passes through generation 1).  Mutation: the limit
    not checked (aged forever: the cycles pile up, 5,000 of them); a full collection not counted afresh (one per call
    past the limit: 400 walks of the whole heap)."""
    from napkin_cat.cost import collector
    monkeypatch.setattr(collector, "AGED_LIMIT", 2_000)
    frozen = gc.get_freeze_count() > 0
    gc.unfreeze()
    try:
        gc.collect()
        full, alive = collector.collector_paused.full, []
        for _ in range(500):
            with collector.collector_paused:
                alive += [weakref.ref(Node()) for _ in range(10)]
            alive = [r for r in alive if r() is not None]
            assert len(alive) <= 2_000
        assert 0 < collector.collector_paused.full - full <= 50     # one per ~2,000 aged, not one per call
    finally:
        if frozen:
            gc.collect()
            gc.freeze()


class Finalized:
    """A cycle whose finalizer makes a paused call (``nc.cost``) as the pause's full collection frees it."""

    def __init__(self, seen):
        self.me, self.seen = self, seen

    def __del__(self):
        self.seen.append(nc.cost(nc.library.matmul()).H)


def test_a_finalizer_may_call_a_paused_function_as_the_pause_collects(monkeypatch):
    """The full collection past ``AGED_LIMIT`` runs outside the pause's lock: a finalizer it runs that calls
    ``nc.cost`` (entering the pause again) completes.  Mutation: ``gc.collect()`` under the lock (a deadlock: the
    test never ends, under pytest's timeout where one is set)."""
    from napkin_cat.cost import collector
    monkeypatch.setattr(collector, "AGED_LIMIT", 0)
    frozen = gc.get_freeze_count() > 0
    gc.unfreeze()
    seen = []
    try:
        gc.collect()
        with collector.collector_paused:
            Finalized(seen)
        assert len(seen) == 1 and gc.isenabled()
    finally:
        if frozen:
            gc.collect()
            gc.freeze()
