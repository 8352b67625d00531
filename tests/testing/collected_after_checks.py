"""Run by ``tests/test_lazy.py`` after pytest collected ``napkin_cat/testing/checks.py`` for its
doctests in the same process (not collected by the suite itself: its name is not ``test_*``).  One module object per
submodule, the one ``sys.modules`` holds: the ``Failure`` a check raises is the one a test catches, and a patch of
``checks.RUNNERS`` reaches ``run_checks``."""
import sys

import napkin_cat.testing as testing


def test_each_public_name_lives_in_the_module_sys_modules_holds():
    for name in testing.__all__:
        found = getattr(testing, name)
        home = sys.modules[found.__module__ if callable(found) else f"napkin_cat.testing.{testing.PUBLIC[name]}"]
        assert getattr(home, name) is found, name
    assert not isinstance(testing.programs, type(sys)) and testing.programs.__module__ == "napkin_cat.testing.programs"


def test_a_patch_of_the_runners_reaches_run_checks_and_its_failure_is_the_one_sys_modules_holds(monkeypatch):
    checks = sys.modules["napkin_cat.testing.checks"]
    monkeypatch.setitem(checks.RUNNERS, "json", lambda p, seed: (_ for _ in ()).throw(KeyError("probe")))
    (failure,) = testing.run_checks(testing.random_program(2), checks=("json",))
    assert failure.message == "KeyError: 'probe'"
    assert type(failure) is checks.Failure is testing.Failure
