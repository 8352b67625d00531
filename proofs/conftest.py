"""The proof registry: a test marked ``@pytest.mark.proves("rule")`` discharges that rule's obligation.

This plugin records, per rule name, every ``proves`` test of this folder that RAN in the session
and its outcome (parametrised tests included: ``pytest.param(..., marks=proves(name))``).  A test
counts as a proof only when its call passed and no phase failed; a skipped, xfailed, xpassed or
deselected test proves nothing.  ``test_meta.py`` is moved to the end of the session and demands,
for every rule of the registered rule book (``napkin_cat.rewriting.registry.rulebook()``), at least
one passing proof and no failing one.

When no ``proves`` test is selected in the session (``pytest proofs/test_meta.py`` alone), the
meta-test runs the other files of this folder in a child pytest process and judges the record
that process writes (the environment variable ``NAPKIN_PROOF_RECORD`` names the JSON file): it
never passes on declarations alone.
"""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

RECORD = pytest.StashKey[dict]()     # rule name -> {node id: 'passed' | 'skipped' | 'failed'}
SELECTED = pytest.StashKey[bool]()   # did the session select any proves test?
RECORD_ENV = "NAPKIN_PROOF_RECORD"
_RANK = {"passed": 0, "skipped": 1, "failed": 2}  # a failure or skip in any phase outranks a pass


def pytest_configure(config):
    config.addinivalue_line("markers", "proves(name, ...): the test discharges the proof obligation of rule `name`")
    config.stash[RECORD] = {}
    config.stash[SELECTED] = False


def proved_rules(item) -> list:
    return [name for mark in item.iter_markers("proves") for name in mark.args]


def pytest_collection_modifyitems(session, config, items):
    meta = [i for i in items if i.path.name == "test_meta.py"]
    items[:] = [i for i in items if i.path.name != "test_meta.py"] + meta


def pytest_collection_finish(session):
    session.config.stash[SELECTED] = any(proved_rules(item) for item in session.items)


def _outcome(report) -> str:
    if report.failed:
        return "failed"
    if report.skipped or hasattr(report, "wasxfail"):
        return "skipped"
    return "passed"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    names = proved_rules(item)
    outcome = _outcome(report)
    if names and (report.when == "call" or outcome != "passed"):
        record = item.config.stash[RECORD]
        for name in names:
            runs = record.setdefault(name, {})
            before = runs.get(item.nodeid, "passed")
            runs[item.nodeid] = max(before, outcome, key=_RANK.__getitem__)
    return report


def pytest_sessionfinish(session):
    path = os.environ.get(RECORD_ENV)
    if path:
        with open(path, "w") as f:
            json.dump(session.config.stash[RECORD], f, indent=1, sort_keys=True)


@pytest.fixture(scope="session")
def proof_registry(request):
    """The session's record (filled as the proofs run) and whether any proof was selected."""
    config = request.config
    return SimpleNamespace(record=config.stash[RECORD], selected=config.stash[SELECTED],
                           rootdir=config.rootpath)
