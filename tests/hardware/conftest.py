"""The hardware tests' shared fixture: attention in each variant's dtypes, derived once a session
(:mod:`typed_attention`, on the path)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))   # the tests here import typed_attention

from typed_attention import VARIANTS, derived, typed_attention  # noqa: E402


@pytest.fixture(scope="session")
def variant():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = derived(typed_attention(*VARIANTS[name]))
        return cache[name]
    return get
