"""The packages that import their submodules on first use (:mod:`napkin_cat.lazy`): ``nc.torch``, ``nc.distributed``
and ``nc.testing``.  Each public name is the object its submodule defines (read there, a second route), bound on the
package after its first use; a submodule is ``sys.modules``'s; a miss is an ``AttributeError`` naming the public
names; ``dir`` lists ``__all__``.  That ``import napkin_cat`` leaves torch alone is tests/torch/test_compile.py's."""
from __future__ import annotations

import importlib
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

import napkin_cat.lazy as lazy

PACKAGES = ["napkin_cat.testing"] + (["napkin_cat.torch", "napkin_cat.distributed"]
                                     if importlib.util.find_spec("torch") is not None else [])


@pytest.mark.parametrize("name", PACKAGES)
def test_each_public_name_is_its_submodules_and_stays_bound(name):
    package = importlib.import_module(name)
    assert package.__getattr__.__module__ == lazy.__name__          # one helper, not a copy per package
    assert set(package.PUBLIC) == set(package.__all__)
    for public, sub in package.PUBLIC.items():
        got = getattr(package, public)
        assert got is getattr(importlib.import_module(f"{name}.{sub}"), public), public
        assert vars(package)[public] is got, public                # bound: the next use does not ask __getattr__
    assert set(package.__all__) <= set(dir(package))


@pytest.mark.parametrize("name", PACKAGES)
def test_a_submodule_is_imported_on_first_use_and_a_miss_names_the_public_names(name):
    package = importlib.import_module(name)
    sub = sorted(set(package.PUBLIC.values()))[0]
    assert package.__getattr__(sub) is sys.modules[f"{name}.{sub}"]
    with pytest.raises(AttributeError, match=rf"module '{name}' has no attribute 'no_such_name' \(its public "
                                             rf"names: {', '.join(sorted(package.PUBLIC))};"):
        package.no_such_name
    assert not hasattr(package, "__no_such_dunder__")


def test_the_testing_package_keeps_its_strategy_over_the_submodule_of_its_name():
    """``programs`` is both a public name (the hypothesis strategy) and a submodule: importing the submodule does not
    replace the name on the package."""
    import napkin_cat.testing as testing
    module = importlib.import_module("napkin_cat.testing.programs")
    assert sys.modules["napkin_cat.testing.programs"] is module and callable(module.programs)
    assert testing.programs is module.programs


#: per package: the submodule pytest collects first (by its path, for its doctests: collecting is what executed a
#: submodule twice when the package imported its submodules eagerly), then the probe run after it in that process
PROBES = {
    "napkin_cat.testing": ("napkin_cat/testing/checks.py", "tests/testing/collected_after_checks.py"),
    "napkin_cat.torch": ("napkin_cat/torch/flex.py", "tests/torch/collected_after_doctest.py"),
    "napkin_cat.distributed": ("napkin_cat/distributed/launch.py", "tests/distributed/collected_after_doctest.py"),
}


def test_a_submodule_collected_by_its_path_first_is_the_one_its_package_shows():
    """Issue 31: with ``--import-mode=importlib`` pytest imports a package before a submodule it collects by its path,
    and executes the submodule again as the module it collects, which replaces the first copy in ``sys.modules``.
    Imported eagerly by its package,
    ``pytest --doctest-modules napkin_cat/torch/flex.py tests/torch/test_flex_literals.py`` failed three tests
    (``flex_attention`` wrote its traces in one ``TRACES``, the tests read the other);
    ``pytest napkin_cat/testing/checks.py tests/testing/test_programs.py`` three (``Failure`` is not ``Failure``; a
    patch of ``checks.RUNNERS`` did not reach ``run_checks``); ``nc.distributed.run`` became the submodule of that
    name.  Second route: one fresh pytest process that collects each package's submodule for its doctests first (they
    are deselected) and then runs each package's probe (two tests each: every public name is the one the module
    ``sys.modules`` holds defines, and the package's state is that module's), one process for the three packages (a
    process of its own for each cost an interpreter, pytest and the imports of napkin_cat and torch three times).

    Mutation caught: a package importing its submodules eagerly again (``from napkin_cat.torch.flex import
    flex_attention``, ``from napkin_cat.distributed.launch import Run, run, run_on``, ``from napkin_cat.testing.checks
    import CHECKS, Failure, run_checks`` at module level): that package's probe fails."""
    root = pathlib.Path(__file__).resolve().parents[1]
    probes = {name: PROBES[name] for name in PACKAGES}
    collected, probed = zip(*probes.values())
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-n", "0", "-p", "no:cacheprovider",
                           "--doctest-modules", *collected, *probed, "-k", "collected_after"],
                          env=env, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    passed = re.findall(r"^(\S+)::(test_\w+) PASSED", done.stdout, re.M)
    assert sorted({path for path, _ in passed}) == sorted(probed), done.stdout[-3000:]
    assert len(passed) == 2 * len(probed), done.stdout[-3000:]
    deselected = re.findall(r"(\d+) deselected in", done.stdout)      # the submodules' doctests: collected, not run
    assert deselected and int(deselected[-1]) >= (3 if "napkin_cat.torch" in probes else 1), done.stdout[-3000:]
