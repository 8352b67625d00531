"""A submodule of ``nc.distributed`` is executed once per process, also when pytest collects it by its path, and
``nc.distributed.run`` stays the function (the fix of ``nc.torch``'s, for this package: :mod:`napkin_cat.lazy`).

Before, ``napkin_cat/distributed/__init__.py`` imported its submodules eagerly and the launcher's module was named
``run``, as the function: ``pytest --doctest-modules napkin_cat/distributed/run.py <a test>`` executed ``run.py``
twice (once by the package, once as the collected module) and put the module on the package in place of the
function, so ``nc.distributed.run(...)`` raised "'module' object is not callable".  The package now imports its
submodules on first use (PEP 562) and the launcher is :mod:`napkin_cat.distributed.launch`.

The fresh pytest process that collects ``launch.py`` first and then runs
:mod:`tests.distributed.collected_after_doctest` (each public name against the module ``sys.modules`` holds;
``nc.distributed.run`` callable) is ``tests/test_lazy.py``'s, one process for the three packages that import their
submodules on first use (:mod:`napkin_cat.lazy`).  Here, in this process: the function stays the package's after the
launcher's module is imported."""
from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")


def test_run_is_the_function_after_the_launcher_module_is_imported():
    import importlib

    import napkin_cat as nc
    launch = importlib.import_module("napkin_cat.distributed.launch")
    assert nc.distributed.run is launch.run and callable(nc.distributed.run)
    assert nc.distributed.launch is launch
