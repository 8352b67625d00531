"""Hypothesis profiles: CI runs derandomized (the same examples every run, so a landing is
reproducible); local runs draw fresh examples each time and so keep exploring.  The suite's options
(``--fuzz``, ``--fuzz-long``), and the scheduling of its files over pytest-xdist's workers."""
import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_addoption(parser):
    parser.addoption("--fuzz", type=int, default=5_000, metavar="N",
                     help="rule applications the soundness fuzzer makes (tests/search/test_fuzz.py; default 5000)")
    parser.addoption("--fuzz-long", action="store_true", default=False,
                     help="the random-program fuzz (tests/testing/test_fuzz.py) on 20 times as many programs "
                          "(also: NAPKIN_FUZZ_LONG=1, or NAPKIN_FUZZ_SCALE=<factor>)")


# ---------------------------------------------------------------- pytest-xdist (`-n 2 --dist loadfile` in addopts)
try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:                     # xdist not installed: `-n` is then unknown; run with `-o addopts=""`
    LoadFileScheduling = None

#: Work units that hold more than one file: ``proofs/`` runs in one worker, because its meta-test
#: (``proofs/test_meta.py``, last) judges the proofs that ran *in its own session* (``proofs/conftest.py``).
TOGETHER = ("proofs/",)


if LoadFileScheduling is not None:
    class FileScheduling(LoadFileScheduling):
        """``--dist loadfile`` (a file's tests in one worker, so a module fixture is built once) with the folders
        of :data:`TOGETHER` kept in one work unit."""

        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return next((t for t in TOGETHER if scope.startswith(t)), scope)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadfile":
        return FileScheduling(config, log)
    return None
