"""The random-program fuzz (issue 25): every check of the library on programs of the project's own generator
(:mod:`napkin_cat.testing.programs`), with a fixed seed in CI and on 20 times as many with ``--fuzz-long``
(or ``NAPKIN_FUZZ_LONG=1``; ``NAPKIN_FUZZ_SCALE=<factor>`` for any factor).

The cheap checks (evaluate against the numpy reference, JSON round trips, costs finite and whole, a mutant
told apart) run on thousands of programs; the rule walks, plans and their counts, C kernels and ``derive`` on
slices of them (the whole fuzz stays within a minute of CI).  A failure prints a standalone reproducer; the
failures of the families another change fixes (``known.py``) are counted, printed and not failed.
"""
from __future__ import annotations

import collections
import os

import pytest

from napkin_cat.testing import random_program, run_checks

from known import family

SEED = 20240611
#: programs per check in CI (the cheap checks on the most): the fuzz's size
SIZES = {"evaluate": 2000, "json": 2000, "cost": 1000, "mutant": 1000, "rules": 150, "plan": 200, "c": 12,
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


def fuzz(check: str, n: int) -> tuple[list, collections.Counter, collections.Counter]:
    """``(unknown failures, known families, shapes covered)`` of ``check`` on the first ``n`` programs; programs
    are spread over the whole range for the sparse checks, so that each check sees other programs too."""
    total = max(SIZES.values())
    stride = max(1, total // n) if n < total else 1
    unknown, known, shapes = [], collections.Counter(), collections.Counter()
    for j in range(n):
        p = program(j * stride)
        shapes.update(p.shapes)
        for f in run_checks(p, checks=(check,)):
            fam = family(f)
            if fam is None:
                unknown.append(f)
            else:
                known[fam] += 1
    return unknown, known, shapes


@pytest.mark.parametrize("check", list(SIZES))
def test_every_check_holds_on_random_programs(check, scale):
    n = SIZES[check] * scale
    unknown, known, shapes = fuzz(check, n)
    print(f"\nfuzz {check}: {n} programs, {len(unknown)} unknown failure(s), known: {dict(known)}; "
          f"shapes: {dict(sorted(shapes.items()))}")
    if unknown:
        pytest.fail(f"{len(unknown)} failure(s) of check {check!r}; the first:\n\n" +
                    "\n\n".join(str(f) for f in unknown[:2]))
    if check == "evaluate":     # the generator covers the shapes the issue lists
        assert {"dead values", "several outputs", "size-1 axis", "weave", "contract", "reduce", "softmax",
                "rename", "split", "binary", "symbolic", "concrete", "mixed"} <= set(shapes)
