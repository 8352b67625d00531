"""The suite's work units weighed from a run's durations, for the order the root ``conftest.py`` hands them out in.

    python -m pytest -q --durations=0 > run.txt       # a cold run of the whole suite, as .ci/run makes it
    python .ci/weights.py run.txt "<commit, date, what ran>" > .ci/weights.json

Each ``X.XXs setup|call|teardown <nodeid>`` line of pytest's ``--durations`` report is added to the work unit its
test belongs to (``conftest.unit_of``: a file, or a folder or case the scheduling keeps together or apart); the
JSON holds the seconds per unit and the mean seconds per test over the run (what a unit not weighed yet, a new file,
is counted at per test).  The weights order the units only: a stale weight moves a unit in the queue, never a result.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conftest import unit_of  # noqa: E402  (the root conftest: the one definition of a work unit)

LINE = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*)$")
SUMMARY = re.compile(r"(\d+) passed")


def weights(text: str) -> dict:
    """``{unit: seconds}`` of a ``--durations`` report (rounded to 0.1 s) and the mean seconds per test."""
    seconds: dict = {}
    for line in text.splitlines():
        m = LINE.match(line.strip())
        if m:
            unit = unit_of(m.group(3))
            seconds[unit] = seconds.get(unit, 0.0) + float(m.group(1))
    if not seconds:
        raise SystemExit("no `X.XXs call <test>` lines: run pytest with --durations=0")
    found = SUMMARY.findall(text)
    tests = int(found[-1]) if found else None
    if not tests:
        raise SystemExit("no `N passed` summary: give the whole report of one run")
    return {"units": {u: round(s, 1) for u, s in sorted(seconds.items(), key=lambda kv: -kv[1])},
            "per_test": round(sum(seconds.values()) / tests, 4)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        raise SystemExit(__doc__)
    out = {"measured": argv[1], **weights(Path(argv[0]).read_text(encoding="utf-8"))}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
