"""The suite's scheduling over pytest-xdist's workers (the root ``conftest.py``): the units it hands out first, and
those it keeps together, name files and folders that exist; its queue puts them in front, in their order, and the
others heaviest first by the weights ``.ci/weights.py`` writes from a run's durations, whatever order xdist fills it
in."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def scheduling(request):
    """The root conftest module as pytest loaded it (not imported a second time: it compiles and sets the collector's
    thresholds as it loads)."""
    path = ROOT / "conftest.py"
    for plugin in request.config.pluginmanager.get_plugins():
        if Path(getattr(plugin, "__file__", "") or "").resolve() == path:
            return plugin
    pytest.fail(f"{path} is not among the loaded plugins")


def _exists(scope: str) -> bool:
    """A scope of the root conftest's lists names a file, a folder, or a prefix of test files (``…/test_x`` for
    ``test_x*.py``), or one case of the notebook test (``…::test_notebook_runs[<stem>]``: the notebook exists)."""
    notebook = re.fullmatch(r"tests/test_notebooks\.py::test_notebook_runs\[(.+)\]", scope)
    if notebook:
        return (ROOT / "notebooks" / f"{notebook.group(1)}.ipynb").is_file()
    if "::" in scope:
        file, _, test = scope.partition("::")
        return (ROOT / file).is_file() and f"def {test}(" in (ROOT / file).read_text()
    path = ROOT / scope
    return path.is_file() or path.is_dir() or any(path.parent.glob(path.name + "*.py"))


def test_every_unit_the_scheduling_names_exists(scheduling):
    names = [*scheduling.FIRST, *scheduling.TOGETHER, *scheduling.APART]
    assert len(set(scheduling.FIRST)) == len(scheduling.FIRST), "a unit listed twice in FIRST"
    missing = [s for s in names if not _exists(s)]
    assert not missing, f"the root conftest's scheduling names units that do not exist: {missing}"


def test_the_queue_hands_out_the_first_units_first_in_their_order(scheduling):
    """xdist fills its queue most tests first; the queue moves the units of FIRST in front, in FIRST's order."""
    if scheduling.LoadFileScheduling is None:
        pytest.skip("pytest-xdist is not installed: nothing is scheduled")
    first = list(scheduling.FIRST)
    others = ["tests/a_test.py", "tests/b_test.py"]
    queue = scheduling.FirstQueue(weights=({}, 1.0))
    for scope in [others[0], first[-1], others[1], *first[:-1]]:
        queue[scope] = {scope: False}
    assert list(queue) == [*first, *others]


def test_the_queue_hands_out_the_other_units_heaviest_first(scheduling):
    """After FIRST, the units by their measured weight, heaviest first; a unit not weighed counts its tests at the
    mean per test (a new file of ten tests at 1 s each weighs 10 s); units of equal weight keep xdist's order."""
    first = scheduling.FIRST[0]
    queue = scheduling.FirstQueue(weights=({"tests/x.py": 5.0, "tests/y.py": 30.0, "tests/w.py": 5.0}, 1.0))
    for scope, tests in [("tests/x.py", 3), ("tests/new.py", 10), ("tests/y.py", 1), (first, 2), ("tests/w.py", 40)]:
        queue[scope] = {f"{scope}::t{i}": False for i in range(tests)}
    assert list(queue) == [first, "tests/y.py", "tests/new.py", "tests/x.py", "tests/w.py"]
    assert queue.popitem(last=False)[0] == first        # (xdist takes the front: FIRST, then the heaviest)
    queue["tests/z.py"] = {"tests/z.py::t": False}      # a unit re-queued (a worker lost) takes its place by rank
    assert list(queue) == ["tests/y.py", "tests/new.py", "tests/x.py", "tests/w.py", "tests/z.py"]


def test_the_committed_weights_load_and_a_missing_file_weighs_units_by_their_tests(scheduling, tmp_path):
    units, per_test = scheduling._weights()
    assert units and all(isinstance(v, float) and v >= 0 for v in units.values()) and per_test > 0
    assert scheduling._weights(tmp_path / "none.json") == ({}, 1.0)


def _weights_script(scheduling, monkeypatch):
    """``.ci/weights.py`` loaded with the root conftest pytest loaded as its ``conftest`` (not executed again)."""
    import sys
    monkeypatch.setitem(sys.modules, "conftest", scheduling)
    return load_script(".ci/weights.py", "ci_weights")


def test_the_weights_script_adds_a_reports_durations_per_unit(scheduling, monkeypatch):
    """Setup, call and teardown of a test add to its unit: its file, the folder kept together (``proofs/``), or the
    notebook case kept apart; the mean per test is the sum over the tests passed."""
    script = _weights_script(scheduling, monkeypatch)
    report = "\n".join([
        "============================= slowest durations =============================",
        "12.50s call     tests/test_notebooks.py::test_notebook_runs[01_tour]",
        "3.25s setup    tests/cost/test_a.py::test_one",
        "1.75s call     tests/cost/test_a.py::test_two[3]",
        "0.50s teardown tests/cost/test_a.py::test_one",
        "2.00s call     proofs/test_rules.py::test_rule[x]",
        "1.00s call     proofs/test_meta.py::test_meta",
        "(12 durations < 0.005s hidden.  Use -vv to show these durations.)",
        "10 passed, 1 skipped in 30.00s"])
    got = script.weights(report)
    assert got["units"] == {"tests/test_notebooks.py::test_notebook_runs[01_tour]": 12.5, "tests/cost/test_a.py": 5.5,
                            "proofs/": 3.0}
    assert got["per_test"] == 2.1
    with pytest.raises(SystemExit, match="durations"):
        script.weights("10 passed in 1.00s")
    with pytest.raises(SystemExit, match="passed"):
        script.weights("1.00s call     tests/x.py::t")
