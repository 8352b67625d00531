"""Hypothesis profiles: CI runs derandomized (the same examples every run, so a landing is
reproducible); local runs draw fresh examples each time and so keep exploring.  The suite's options
(``--fuzz``, ``--fuzz-long``), and the scheduling of its files over pytest-xdist's workers."""
import compileall
import gc
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
#: The longest work units (measured: 30 s to 70 s each on 2 cores), handed out first, longest first, so that
#: no worker is left running one of them alone at the end; then those of few tests that take 4 s to 20 s (a notebook,
#: a file of one to eleven tests), which xdist's order (most tests first, for the rest) put last: the seven notebooks
#: were the last seven units of the run (durations of the cold run at a78e9f8, ``--durations=60``).  Notebook 08
#: comes well after tests/torch/test_gpt_train.py, which compiles three of its four ops at the same sizes and memory:
#: it reads their derivations back from the cache folder (napkin_cat/torch/stored.py) instead of searching them again
#: beside it on the other worker.  Files added since, measured in CPU s (one process, suite-35): the outside checks
#: of issue 35 (test_outside_35s 29 s in seven tests, test_outside_35f 12 s in 23), test_symbolic_probes 14 s in
#: three, test_symbolic_made 9 s in five, then files of one to four tests taking 4 s to 8 s: xdist's order put each
#: after every file of more tests, among the last units of the run.  Files added or grown since, measured in CPU s
#: (tests/search in one process, fresh caches, suite-36): test_kernels_apart 31 s in twelve tests, test_scan_route
#: 31 s in eight, test_axes_apart 20 s in eighteen, then 5 s to 13 s in two to sixteen tests (symbolic_within_axes,
#: symbolic_growing_need, grid_shortcuts, gathered_softmax, symbolic_exact_need, two_pass, joins_make_one_kernel,
#: crossings; tests/torch: searched_code 8 s in eleven, flex_registry 5 s in two).  tests/cost/test_collector.py
#: first of all: its tests unfreeze, collect and walk the worker's whole heap (``gc.get_objects``), which grows with
#: what the worker ran (the search's memos, sympy's caches): run late, 155 s of one worker (a cold run at 6a7f323,
#: ``--durations=40``); in isolation 1.5 s.  Last, files of one to three tests taking 6 s to 10 s that ran in the last
#: 150 s of a cold run at 36d497c (its junit, in the order the reports came): test_nested, test_offered_forms_timed,
#: test_cluster_zigzag, the flexgraph doctest, test_cluster_ring_gathered, test_symbolic_past_axis,
#: test_device_memory_steers.
NOTEBOOK = "tests/test_notebooks.py::test_notebook_runs[{}]"
FIRST = ("tests/cost/test_collector.py", "tests/search/test_derive_backward", NOTEBOOK.format("07_backward"),
         "tests/rewriting/test_rewrite.py",
         "tests/paper/test_reproduce.py", "tests/search/test_outside_35s.py", "tests/search/test_kernels_apart.py",
         "tests/search/test_scan_route.py", "tests/search/test_heldout.py",
         "tests/testing/test_fuzz.py", "tests/search/test_fuzz.py", "proofs/", "tests/search/test_derive_masked.py",
         "tests/search/test_outside_35f.py", "tests/search/test_symbolic_probes.py",
         "tests/search/test_symbolic_made.py", "tests/search/test_axes_apart.py", "tests/test_gpu_benchmark.py",
         "tests/test_docs.py", "tests/torch/test_flex.py", "tests/torch/test_compile.py", "tests/distributed/",
         "tests/torch/test_gpt_train.py", "tests/codegen/test_triton.py",
         "tests/rewriting/test_rules_rewrite_what_they_offer.py", NOTEBOOK.format("02_deriving_flash_attention"),
         "tests/codegen/test_property.py", "tests/codegen/test_c_block_mask_backward.py",
         "tests/torch/test_flex_known.py", "tests/hardware/test_estimate_ranking.py",
         NOTEBOOK.format("08_training_a_gpt"), NOTEBOOK.format("03_performance_models"),
         NOTEBOOK.format("04_plans_and_kernels"), "napkin_cat/torch/flex.py", NOTEBOOK.format("06_masks_and_losses"),
         NOTEBOOK.format("05_hopper_configuration"), NOTEBOOK.format("01_tour"), "tests/codegen/test_triton_ranges.py",
         "tests/torch/test_flex_modules.py", "tests/torch/test_flex_literals.py",
         "tests/search/test_symbolic_reference_values.py", "tests/torch/test_negative_indices.py",
         "tests/torch/test_flex_lse_grad.py", "tests/search/test_symbolic_within_axes.py",
         "tests/search/test_symbolic_growing_need.py", "tests/search/test_grid_shortcuts.py",
         "tests/search/test_gathered_softmax.py", "tests/search/test_symbolic_exact_need.py",
         "tests/search/test_two_pass.py", "tests/torch/test_searched_code.py",
         "tests/search/test_joins_make_one_kernel.py", "tests/search/test_crossings.py",
         "tests/torch/test_flex_registry.py", "tests/codegen/test_nested.py",
         "tests/hardware/test_offered_forms_timed.py", "tests/hardware/test_cluster_zigzag.py",
         "napkin_cat/torch/flexgraph.py", "tests/hardware/test_cluster_ring_gathered.py",
         "tests/search/test_symbolic_past_axis.py", "tests/hardware/test_device_memory_steers.py")


class FirstQueue(OrderedDict):
    """xdist's queue of work units (scope → its tests), those of :data:`FIRST` kept in front, in its order."""

    def __setitem__(self, scope, unit):
        super().__setitem__(scope, unit)
        if scope in FIRST:
            for s in sorted((s for s in self if s in FIRST and FIRST.index(s) <= FIRST.index(scope)),
                            key=FIRST.index, reverse=True):
                self.move_to_end(s, last=False)


if LoadFileScheduling is not None:
    class FileScheduling(LoadFileScheduling):
        """``--dist loadfile`` (a file's tests in one worker, so that a module fixture is built once), with the
        units of :data:`TOGETHER` and :data:`APART`, those of :data:`FIRST` handed out first."""

        def __init__(self, config, log=None):
            super().__init__(config, log)
            self.workqueue = FirstQueue()

        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(APART):
                return nodeid
            scope = super()._split_scope(nodeid)
            return next((t for t in TOGETHER if scope.startswith(t)), scope)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadfile":
        return FileScheduling(config, log)
    return None
