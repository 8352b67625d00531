"""The suite's scheduling over pytest-xdist's workers (the root ``conftest.py``): the units it hands out first, and
those it keeps together, name files and folders that exist, so that a renamed or deleted test file does not leave a
long file to xdist's order (most tests first) and the run's tail unnoticed; and its queue puts them in front, in their
order, whatever order xdist fills it in."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

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
    queue = scheduling.FirstQueue()
    for scope in [others[0], first[3], first[-1], others[1], first[0], first[1], first[2]]:
        queue[scope] = {scope: False}
    assert list(queue) == [first[0], first[1], first[2], first[3], first[-1], *others]
