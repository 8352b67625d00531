"""Fixtures of the code-generation tests (helpers in ``kernels_common``)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import napkin_cat as nc

sys.path.insert(0, str(Path(__file__).parent))
from kernels_common import derived  # noqa: E402


@pytest.fixture(scope="session")
def algorithms():
    """The library's derived algorithms planned at ragged sizes: name → plan."""
    return {name: nc.plan(d, sizes) for name, (d, sizes) in derived().items()}
