"""Bring results files written before schema 2 up to it, from the data they hold: nothing is re-measured.

    python benchmarks/gpu/relabel.py [RESULTS.json ...]     (default: every results/*.json; schema 2 files are left)

Schema 1 (``run.py`` up to issue 31) timed the model's k fastest tile assignments and called the fastest "ours".
What the files themselves show decides each new label:

* the first candidate is what ``nc.derive(hardware=)`` returned: ``run.py`` then took the candidates from
  ``r.timings`` in order, and ``derive_for_time`` returned ``timings[0]`` (both at the commits that wrote the
  files); it becomes ``"pick": "derived"``, the others ``"pick": "autotune"`` (every candidate of these files
  has the row's variant: checked here, refused otherwise);
* the row's ``speedup`` was the *fastest candidate's* ratio to torch's fastest path: renamed
  ``best_of_k_vs_fastest``;
* what was not recorded says so: the commit measured, whether the tree was clean, the driver, the clocks, each
  time's spread (schema 1 kept the median only), the baselines' errors, and a correctness tolerance (schema 1
  timed every candidate and recorded its error after);
* ``provenance.committed_in``: the commit that added the file (from git): the tree measured is at most that
  one, which is what ``report.py`` marks staleness against.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NOT_RECORDED = "not recorded"
#: how schema 1 timed (benchmarks/gpu/measure.py at the commits that wrote those files)
SCHEMA_1_TIMING = ("triton.testing.do_bench(warmup=25, rep=100, return_mode='median'): the median only; the CUDA "
                   "reference backend: the median of five of seven launches; the spread not recorded")


def committed_in(path: Path) -> str:
    """The commit that first added ``path`` (the oldest of ``git log --diff-filter=A``)."""
    run = subprocess.run(["git", "-C", str(ROOT), "log", "--diff-filter=A", "--format=%H", "--",
                          str(path.resolve().relative_to(ROOT))], capture_output=True, text=True, timeout=60)
    shas = run.stdout.split()
    if run.returncode != 0 or not shas:
        raise SystemExit(f"{path}: no commit added this file (git log --diff-filter=A found none): commit it first")
    return shas[-1]


def relabelled(result: dict, *, added_in: str) -> dict:
    """``result`` (schema 1) in schema 2 (see the module docstring); raises if its candidates are not all of the
    row's structure, where "the first is the derived pick" would not follow from the data."""
    out = {"schema": 2}
    for key, value in result.items():
        out[key] = value
        if key == "dry_run":
            out["provenance"] = {"commit": NOT_RECORDED, "dirty": NOT_RECORDED, "committed_in": added_in,
                                 "driver": NOT_RECORDED, "clocks": NOT_RECORDED, "clocks_after": NOT_RECORDED}
        if key == "versions":
            out["tolerance"] = (f"{NOT_RECORDED}: no correctness gate before timing (every candidate was timed, "
                                "then its error recorded)")
            out["timing"] = SCHEMA_1_TIMING
    for row in out["rows"]:
        if "failed" in row:
            continue
        for i, c in enumerate(row["candidates"]):
            if c["variant"] != row["variant"]:
                raise SystemExit(f"{label(row)}: candidate {i} is of another structure ({c['variant']}), so which "
                                 "one derive returned does not follow from the data; relabel it by hand")
            c["pick"] = "derived" if i == 0 else "autotune"
            c["spread"] = NOT_RECORDED
        for b in row.get("baselines", ()):
            b.setdefault("error", NOT_RECORDED)
        if "speedup" in row:
            row["best_of_k_vs_fastest"] = row.pop("speedup")
    return out


def label(row) -> str:
    return f"{row['kind']} {row.get('N', '')} {row.get('d', '')}".strip()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="*")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.results] or sorted((HERE / "results").glob("*.json"))
    for p in paths:
        result = json.loads(p.read_text())
        if result.get("schema") == 2:
            print(f"{p.name}: schema 2 already")
            continue
        p.write_text(json.dumps(relabelled(result, added_in=committed_in(p)), indent=1))
        print(f"{p.name}: relabelled (schema 1 → 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
