"""A submodule of ``napkin_cat.testing`` is executed once per process, also when pytest collects it by its path.

``pytest napkin_cat/testing/checks.py tests/testing/test_programs.py`` failed three tests (``Failure`` is not
``Failure``; a patch of ``checks.RUNNERS`` did not reach ``run_checks``): with ``--import-mode=importlib`` pytest
imports the package first, whose ``__init__`` imported ``checks`` then, and executes ``checks.py`` again as the module
it collects, which replaces the first copy in ``sys.modules``.  The package now imports its submodules on first use
(PEP 562), as ``nc.torch`` does (:mod:`tests.torch.test_collected_once`).

Second route: a fresh pytest process that collects ``checks.py`` for its doctests first (collecting is what executed it
twice; its doctests are deselected) and then runs :mod:`tests.testing.collected_after_checks`, which checks each public
name against ``sys.modules`` and patches ``RUNNERS`` in the module ``sys.modules`` holds.

Mutation caught: ``napkin_cat/testing/__init__.py`` importing its submodules eagerly again (``from
napkin_cat.testing.checks import CHECKS, Failure, run_checks`` at module level): both tests of the probe fail."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_module_collected_first_and_a_test_after_it_share_one_module():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                           "--doctest-modules", "napkin_cat/testing/checks.py",
                           "tests/testing/collected_after_checks.py", "-k", "collected_after_checks"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout and "deselected" in done.stdout   # the probe's two; checks.py's doctests
