"""A submodule of ``nc.torch`` is executed once per process, also when pytest collects it by its path (issue 31).

``pytest --doctest-modules napkin_cat/torch/flex.py tests/torch/test_flex_literals.py`` failed three tests ("not
enough values to unpack"): with ``--import-mode=importlib`` pytest imports the package ``napkin_cat.torch`` first,
whose ``__init__`` imported ``flex`` then, and executes ``flex.py`` a second time as the module it collects, which
replaces the first in ``sys.modules`` and on the package.  ``nc.torch.flex_attention`` (the first copy's) wrote its
traces in one ``TRACES`` and the tests read the other.  The package now imports its submodules on first use.

Second route: a fresh pytest process that collects ``flex.py`` for its doctests first (collecting is what imported it
twice; its doctests are deselected, as they take seconds) and then runs :mod:`tests.torch.collected_after_doctest`,
which checks each public name of the package against ``sys.modules`` and the cache ``flex_attention`` writes against
the one the package shows.

Mutation caught: ``napkin_cat/torch/__init__.py`` importing its submodules eagerly again (``from
napkin_cat.torch.flex import flex_attention`` at module level): both tests of the probe fail."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_doctest_collected_first_and_a_test_after_it_share_one_module():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                           "--doctest-modules", "napkin_cat/torch/flex.py", "tests/torch/collected_after_doctest.py",
                           "-k", "collected_after_doctest"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 passed, 3 deselected" in done.stdout       # the probe's two tests; flex.py's three doctests collected
