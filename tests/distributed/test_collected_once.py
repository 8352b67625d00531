"""A submodule of ``nc.distributed`` is executed once per process, also when pytest collects it by its path, and
``nc.distributed.run`` stays the function (the fix of ``tests/torch/test_collected_once.py``, for this package).

Before, ``napkin_cat/distributed/__init__.py`` imported its submodules eagerly and the launcher's module was named
``run``, as the function: ``pytest --doctest-modules napkin_cat/distributed/run.py <a test>`` executed ``run.py``
twice (once by the package, once as the collected module) and put the module on the package in place of the
function, so ``nc.distributed.run(...)`` raised "'module' object is not callable".  The package now imports its
submodules on first use (PEP 562) and the launcher is :mod:`napkin_cat.distributed.launch`.

Second route: a fresh pytest process that collects ``launch.py`` first and then runs
:mod:`tests.distributed.collected_after_doctest`, which checks each public name against the module ``sys.modules``
holds and that ``nc.distributed.run`` is callable.

Mutation caught: ``napkin_cat/distributed/__init__.py`` importing ``from napkin_cat.distributed.launch import Run,
run, run_on`` at module level again: the probe's first test fails (``Run`` defined by a replaced copy)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_launcher_collected_first_and_a_test_after_it_share_one_module():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                           "--doctest-modules", "napkin_cat/distributed/launch.py",
                           "tests/distributed/collected_after_doctest.py", "-k", "collected_after_doctest"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed" in done.stdout                 # the probe's two tests ran


def test_run_is_the_function_after_the_launcher_module_is_imported():
    import importlib

    import napkin_cat as nc
    launch = importlib.import_module("napkin_cat.distributed.launch")
    assert nc.distributed.run is launch.run and callable(nc.distributed.run)
    assert nc.distributed.launch is launch
