"""The fuzz of hostile documents (:mod:`napkin_cat.testing.hostile`) over random programs, with its coverage.

12 programs × 12 mutations run in CI (under a second); the bugs of this family found from outside are pinned by
``tests/io/test_hostile_params.py`` and ``tests/algorithms/test_tile_names.py`` (these 144 draws do not happen to
reach them: the family is wide, and this fuzz guards it at large, not each case).  A reader that lets a bare error
escape fails it (``test_the_check_catches_a_reader_that_escapes``).
"""
from __future__ import annotations

from collections import Counter

import pytest

import napkin_cat as nc
from napkin_cat.errors import CheckFailed
from napkin_cat.testing import hostile
from napkin_cat.testing.checks import run_checks
from napkin_cat.testing.programs import random_program

PROGRAMS = range(12)


def test_hostile_documents_are_refused_or_used_never_escape():
    tally = Counter()
    failures = [f for s in PROGRAMS for f in run_checks(random_program(s), checks=("hostile_json",), seed=s,
                                                        tally=tally)]
    assert not failures, "\n\n".join(f.reproducer for f in failures[:3])
    # coverage: every program mutated, and both outcomes reached (a fuzz whose documents all fail to load, or
    # all load, tests half the law)
    assert tally[("hostile_json", "mutated")] == len(PROGRAMS)
    assert tally[("hostile_json", "refused")] >= len(PROGRAMS) // 2 and tally[("hostile_json", "used")] >= 1, tally


def test_the_check_catches_a_reader_that_escapes(monkeypatch):
    def loads(text):
        raise TypeError("unhashable type: 'dict'")
    monkeypatch.setattr(nc, "loads", loads)
    with pytest.raises(CheckFailed, match=r"escaped as TypeError: unhashable type: 'dict'"):
        hostile.check_hostile_json(random_program(0), seed=0, mutations=1)
