"""Hypothesis profiles: CI runs derandomized (the same examples every run, so a landing is
reproducible); local runs draw fresh examples each time and so keep exploring.  The suite's options
(``--fuzz``, ``--fuzz-long``), and the scheduling of its files over pytest-xdist's workers."""
import compileall
import gc
import json
import os
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


#: the packages every process of a run imports: the workers, each notebook's kernel, the subprocesses of the CLI,
#: docs, torch and benchmark tests
PACKAGES = ("napkin_cat", "rewrites")


def compile_packages():
    """The packages' bytecode, compiled where it is stale, before anything imports them (the first conftest loaded:
    the controller compiles before the workers start; they and later processes find it fresh).  Where
    ``PYTHONDONTWRITEBYTECODE`` is set (as on the project's machines) no process writes bytecode, so each one compiled
    the packages' 48,000 lines itself: ``import napkin_cat`` is 3.9 s of CPU without bytecode and 2.6 s with it
    (measured, four runs each; 3.8 vs 3.0 s in six alternating runs on a busier machine; a notebook kernel 5.2 vs 4.5),
    in each process of a run (two workers, eight notebook kernels, the subprocesses).
    Reading bytecode is allowed there; writing it into the packages' ``__pycache__`` (ignored by git) is this step."""
    root = Path(__file__).resolve().parent
    for package in PACKAGES:
        compileall.compile_dir(root / package, quiet=2)   # a read-only tree: no bytecode, no noise


compile_packages()


def pytest_collectstart(collector):
    """The library imported whole before any of its files is collected.  With ``--import-mode=importlib`` pytest
    imports a module it collects by its path, and a parent package not yet imported by its path too, as a second
    module object, which it then sets on the grandparent: collecting ``napkin_cat/cost/hierarchy.py`` alone made
    ``nc.cost`` the package ``napkin_cat.cost`` (a copy) instead of the cost functor, and the module's doctests failed
    with "'module' object is not callable".  Imported first, every package is found in ``sys.modules``."""
    import napkin_cat  # noqa: F401  (imported for its effect; cached after the first collector)


#: The cyclic collector's young generation collected every 100,000 allocations rather than 700, from the start of
#: the run: collecting (importing and rewriting the assertions of 300 test modules, building their parameters) makes
#: many short-lived objects beside a heap that already holds the packages, sympy and torch, and every collection of
#: the old generation walked that heap again (measured, ``pytest --collect-only`` in one process, two alternating runs
#: each: 17.2 and 19.5 s of CPU with the default thresholds, 14.0 and 13.6 s with these; each worker collects the
#: whole suite).  During the tests, the counting runner's and the rewrites' short-lived objects likewise stop
#: triggering collections that find nothing (``tests/paper/test_reproduce.py`` alone: 67.3 → 61.2 s of CPU).
GC_THRESHOLD = (100_000, 50, 100)
gc.set_threshold(*GC_THRESHOLD)


def pytest_collection_finish(session):
    """The objects that importing and collecting made (modules, the rule book, sympy's caches: long-lived) moved
    out of the cyclic collector's generations, so that its full collections stop walking them again at every
    test (measured, one process: the rewrite and program fuzzes 91 → 81 s of CPU; ``nc.derive`` pauses the
    collector on its own, :data:`napkin_cat.cost.collector.collector_paused`); the thresholds stay
    :data:`GC_THRESHOLD` (a test that changes them has them back here)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def pytest_unconfigure(config):
    """The process's heap moved out of the cyclic collector's generations as the run ends: the interpreter collects
    as it shuts down, and each process of a run (the controller, each worker) then walked everything its tests left
    (the search's memos, sympy's caches, torch) once more, at the end of the run, where a worker's last seconds are
    the run's tail (measured in one process, CPU after ``pytest_unconfigure`` without this / with it:
    ``tests/paper/test_reproduce.py`` 2.5 / 0.2 s; ``tests/paper/``, ``tests/rewriting/test_rewrite.py`` and
    ``tests/search/test_heldout.py``, 77 s of CPU before it, 5.1 / 0.3 s: it grows with what a process ran).
    Not where Triton was imported into the process: its extension (nanobind) reports each object of its own still
    alive at exit as a leak, and a frozen object is never collected (a screenful of "nanobind: leaked ..." on
    stderr); its kernels run and compile in worker processes, so most processes of a run never import it."""
    if "triton" not in sys.modules:
        gc.freeze()


def pytest_addoption(parser):
    parser.addoption("--fuzz", type=int, default=2_500, metavar="N",
                     help="rule applications the soundness fuzzer makes (tests/search/test_fuzz.py; default 2500)")
    parser.addoption("--fuzz-long", action="store_true", default=False,
                     help="the random-program fuzz (tests/testing/test_fuzz.py) on 20 times as many programs "
                          "(also: NAPKIN_FUZZ_LONG=1, or NAPKIN_FUZZ_SCALE=<factor>)")


# ---------------------------------------------------------------- pytest-xdist (`-n 2 --dist loadfile` in addopts)
try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:                     # xdist not installed: `-n` is then unknown; run with `-o addopts=""`
    LoadFileScheduling = None

#: Work units that hold more than one file: ``proofs/`` runs in one worker, because its meta-test
#: (``proofs/test_meta.py``, last) judges the proofs that ran *in its own session* (``proofs/conftest.py``); the
#: backward's derivations in one worker, because they cost the same kernels (measured: the four files 197 s of CPU
#: apart, 164 s together: a kernel costed by one file is found in the search's memo by the next); the distributed
#: tests in one worker, because they share one world of ranks (``tests/distributed/conftest.py``).
TOGETHER = ("proofs/", "tests/search/test_derive_backward", "tests/distributed/")
#: Tests each of whose cases is a work unit of its own (no module fixture shared): a notebook runs in its kernel.
APART = ("tests/test_notebooks.py::test_notebook_runs",)
#: Units handed out before every other, for a reason their weight does not give: ``tests/cost/test_collector.py``
#: first of all, because its tests unfreeze, collect and walk the worker's whole heap (``gc.get_objects``), which grows
#: with what the worker ran (run late, 155 s of one worker in a cold run at 6a7f323; 1.5 s in isolation); then
#: ``tests/torch/test_gpt_train.py``, which compiles three of notebook 08's four ops at its sizes and memory, so that
#: the notebook (handed out later, by its weight) reads their derivations back from the cache folder
#: (``napkin_cat/torch/stored.py``) instead of searching them again beside it on the other worker.
FIRST = ("tests/cost/test_collector.py", "tests/torch/test_gpt_train.py")


#: The measured weight of each work unit (``.ci/weights.json``, written by ``.ci/weights.py`` from a run's
#: ``--durations=0``): after the units of :data:`FIRST`, the others are handed out heaviest first, so that the run does
#: not end on one worker running a long unit while the other has nothing left.  xdist's own order, most tests first,
#: puts the units of few long tests last (the notebooks; ``tests/test_docs.py``, 61 s in ten tests); the hand-kept list
#: that moved them in front had gone stale as files were added (``tests/codegen/test_triton_whole_trips.py``, 37 s in
#: eight tests, and ``test_trip_ranges.py``, 35 s in fifteen, were not on it).  A unit not weighed yet counts its
#: tests at the run's mean seconds per test.
WEIGHTS = Path(__file__).resolve().parent / ".ci" / "weights.json"


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its file, or the unit of :data:`TOGETHER` that holds it, or the case itself where
    :data:`APART` names it (``tests/test_notebooks.py::test_notebook_runs[01_tour]``)."""
    if nodeid.startswith(APART):
        return nodeid
    scope = nodeid.split("::", 1)[0]
    return next((t for t in TOGETHER if scope.startswith(t)), scope)


def _weights(path: Path = WEIGHTS) -> tuple:
    """``(units, per_test)`` of the weights file; none (every unit weighed by its tests) where it is missing."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, 1.0
    return dict(data["units"]), float(data["per_test"])


class FirstQueue(OrderedDict):
    """xdist's queue of work units (scope → its tests), kept in the order they are handed out in: those of
    :data:`FIRST` in front, in its order; then the others heaviest first by :data:`WEIGHTS` (of equal weight, in
    the order xdist filled them in)."""

    def __init__(self, *args, weights=None):
        self.units, self.per_test = _weights() if weights is None else weights
        self.ranks: dict = {}
        super().__init__(*args)

    def rank(self, scope, unit) -> tuple:
        """``(0, place in FIRST)`` for a unit of :data:`FIRST`; else ``(1, −weight)``."""
        if scope in FIRST:
            return 0, FIRST.index(scope)
        return 1, -self.units.get(scope, len(unit) * self.per_test)

    def __setitem__(self, scope, unit):
        super().__setitem__(scope, unit)
        rank = self.ranks[scope] = self.rank(scope, unit)
        for s in [s for s in self if self.ranks[s] > rank]:     # (the queue stays in rank order)
            self.move_to_end(s)


if LoadFileScheduling is not None:
    class FileScheduling(LoadFileScheduling):
        """``--dist loadfile`` (a file's tests in one worker, so that a module fixture is built once), with the
        units of :data:`TOGETHER` and :data:`APART`, handed out in :class:`FirstQueue`'s order."""

        def __init__(self, config, log=None):
            super().__init__(config, log)
            self.workqueue = FirstQueue()

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadfile":
        return FileScheduling(config, log)
    return None
