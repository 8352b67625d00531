"""The random-program fuzz (issue 25): every check of the library on programs of the project's own generator
(:mod:`napkin_cat.testing.programs`), with a fixed seed in CI and on 20 times as many with ``--fuzz-long``
(or ``NAPKIN_FUZZ_LONG=1``; ``NAPKIN_FUZZ_SCALE=<factor>`` for any factor).

The cheap checks (evaluate against the numpy reference, JSON round trips, costs finite and whole, a mutant
told apart) run on thousands of programs; the rule walks, plans and their counts, C kernels and ``derive`` on
slices of them (the whole fuzz stays within about 40 s of CI).  A failure prints a standalone reproducer.
"""
from __future__ import annotations

import collections
import os

import pytest

from napkin_cat.testing import random_program, run_checks

SEED = 20240611
#: programs per check in CI (the cheap checks on the most): the fuzz's size
SIZES = {"evaluate": 2000, "json": 1000, "cost": 800, "mutant": 600, "rules": 100, "plan": 200, "c": 12,
         "derive": 25}


@pytest.fixture(scope="module")
def scale(request) -> int:
    if os.environ.get("NAPKIN_FUZZ_SCALE"):
        return int(os.environ["NAPKIN_FUZZ_SCALE"])
    return 20 if request.config.getoption("--fuzz-long") or os.environ.get("NAPKIN_FUZZ_LONG") else 1


_PROGRAMS: dict = {}


def program(k: int):
    """The fuzz's k-th program (each drawn once per session)."""
    if k not in _PROGRAMS:
        _PROGRAMS[k] = random_program(SEED + k)
    return _PROGRAMS[k]


def fuzz(check: str, n: int) -> tuple[list, collections.Counter]:
    """``(failures, shapes covered)`` of ``check`` on ``n`` programs; programs are spread over the whole range for
    the sparse checks, so that each check sees other programs too."""
    total = max(SIZES.values())
    stride = max(1, total // n) if n < total else 1
    failures, shapes = [], collections.Counter()
    for j in range(n):
        p = program(j * stride)
        shapes.update(p.shapes)
        failures += run_checks(p, checks=(check,))
    return failures, shapes


@pytest.mark.parametrize("check", list(SIZES))
def test_every_check_holds_on_random_programs(check, scale):
    n = SIZES[check] * scale
    failures, shapes = fuzz(check, n)
    print(f"\nfuzz {check}: {n} programs, {len(failures)} failure(s); shapes: {dict(sorted(shapes.items()))}")
    if failures:
        pytest.fail(f"{len(failures)} failure(s) of check {check!r} on {n} programs; the first:\n\n" +
                    "\n\n".join(str(f) for f in failures[:2]))
    if check == "evaluate":     # the generator covers the shapes the issue lists
        assert {"dead values", "several outputs", "size-1 axis", "weave", "contract", "reduce", "softmax",
                "rename", "split", "binary", "symbolic", "concrete", "mixed"} <= set(shapes)
