"""The proof registry: a test marked ``@pytest.mark.proves("rule")`` discharges that rule's obligation.

Outcomes are recorded per rule while the session runs; ``test_meta.py`` is moved
to the end of the session so that it can demand a passing proof for every rule
of ``rewrites.ALL_RULES`` (when run alone it discharges the obligations itself).
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

DECLARED: dict = {}  # rule name -> node ids of the collected proofs
RESULTS: dict = {}   # rule name -> outcomes ('passed', 'failed', 'skipped') of those proofs


def pytest_configure(config):
    config.addinivalue_line("markers", "proves(name): the test discharges the proof obligation of rule `name`")


def pytest_collection_modifyitems(session, config, items):
    meta = [i for i in items if i.path.name == "test_meta.py"]
    items[:] = [i for i in items if i.path.name != "test_meta.py"] + meta
    for item in items:
        for mark in item.iter_markers("proves"):
            for name in mark.args:
                DECLARED.setdefault(name, []).append(item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or report.outcome != "passed":
        for mark in item.iter_markers("proves"):
            for name in mark.args:
                RESULTS.setdefault(name, []).append(report.outcome)


@pytest.fixture(scope="session")
def proof_registry():
    return SimpleNamespace(declared=DECLARED, results=RESULTS)
