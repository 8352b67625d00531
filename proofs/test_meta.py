"""The meta-test: every rule of the registered rule book has a passing proof that ran.

``conftest.py`` records, per rule name, the tests marked ``@pytest.mark.proves(name)`` (in any
file of this folder, parametrised ones included) that ran in this session and their outcomes, and
moves this file to the end of the session.  A rule is proved when (1) it carries a proof
obligation, (2) at least one of its proofs ran and passed, (3) none failed, and (4) its doc states
``lhs → rhs``.  Run alone (no proof selected), this file runs the proofs in a child session first.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import napkin_cat as nc
import rewrites
from napkin_cat.rewriting import Obligation, Rule, isomorphic
from napkin_cat.rewriting.match import Pattern, kind
from napkin_cat.rewriting.registry import rulebook

HERE = Path(__file__).parent
RECORD_ENV = "NAPKIN_PROOF_RECORD"  # read by conftest.py's pytest_sessionfinish


def proofs_in_a_child_session(rootdir: Path, folder: Path = HERE) -> dict:
    """Run this folder's proofs (all files but this one) in a child pytest; return its record."""
    roots = {str(Path(nc.__file__).parents[1]), str(Path(rewrites.__file__).parents[1])}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "record.json"
        env = {**os.environ, RECORD_ENV: str(out),
               "PYTHONPATH": os.pathsep.join([*sorted(roots), os.environ.get("PYTHONPATH", "")])}
        serial = ["-n", "0"] if importlib.util.find_spec("xdist") else []    # the record is this process's
        proc = subprocess.run([sys.executable, "-m", "pytest", str(folder), "--ignore", str(folder / "test_meta.py"),
                               "-q", "-p", "no:cacheprovider", *serial], cwd=rootdir, env=env, capture_output=True,
                              text=True, timeout=900)
        if not out.exists():
            raise AssertionError(f"the child proof session wrote no record (exit {proc.returncode}):\n"
                                 f"{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
        return json.loads(out.read_text())


@pytest.fixture(scope="module")
def proofs(proof_registry):
    """``(record, where)``: this session's record, or a child session's when no proof ran here."""
    if proof_registry.selected:
        return proof_registry.record, "in this session"
    return proofs_in_a_child_session(proof_registry.rootdir), "in a child session (none was selected in this one)"


def unproved(rules, record: dict, where: str = "in this session") -> dict:
    """Rule name → why it is not proved (empty when every rule is); ``record``: name → {test: outcome}."""
    why = {}
    for rule in rules:
        runs = record.get(rule.name, {})
        failed = sorted(t for t, o in runs.items() if o == "failed")
        if rule.obligation is None:
            why[rule.name] = "it has no proof obligation"
        elif failed:
            why[rule.name] = f"its proofs failed: {failed}"
        elif "passed" not in runs.values():
            ran = f"outcomes {sorted(runs.items())}" if runs else "none ran"
            why[rule.name] = f"no test marked proves({rule.name!r}) passed {where} ({ran})"
        elif "→" not in rule.doc:
            why[rule.name] = "its doc does not state lhs → rhs"
    return why


def test_every_rule_has_a_passing_proof(proofs):
    record, where = proofs
    missing = unproved(rulebook().rules, record, where)
    assert not missing, "rules without a passing proof:\n" + "\n".join(f"  {k}: {v}" for k, v in missing.items())


def test_every_proof_names_a_rule(proofs):
    """A ``proves`` mark with a misspelt name would prove nothing and say it does."""
    record, where = proofs
    known = {r.name for r in rulebook().rules}
    stray = {name: sorted(runs) for name, runs in record.items() if name not in known}
    assert not stray, f"proves(...) marks naming no rule of the rule book ({where}): {stray}"


def test_every_rule_rewrites_something():
    """A rule whose right-hand side is its left-hand side proves nothing: some instance must change."""
    idle = []
    for rule in rulebook().rules:
        if rule.obligation is None:
            continue  # test_every_rule_has_a_passing_proof names it
        changed = False
        for seed in range(6):
            lhs = rule.obligation.instances(np.random.default_rng(seed))
            if any(not isomorphic(lhs, rule.apply(lhs, m)) for m in rule.matches(lhs)[:2]):
                changed = True
                break
        if not changed:
            idle.append(rule.name)
    assert not idle, f"rules that return their input on every instance: {idle}"


def test_the_meta_test_names_what_is_missing():
    lonely = Rule("lonely", Pattern({"f": kind("exp")}), lambda m: nc.Id(m.dom), doc="exp → id")
    assert "no proof obligation" in unproved([lonely], {"lonely": {"t": "passed"}})["lonely"]
    claimed = Rule("claimed", lonely.pattern, lonely.rhs, doc="exp → id",
                   obligation=Obligation(lambda rng: nc.elementwise("exp", "q")))
    assert "none ran" in unproved([claimed], {})["claimed"]
    assert "passed in this session (outcomes [('t', 'skipped')])" in unproved(
        [claimed], {"claimed": {"t": "skipped"}})["claimed"]
    assert "failed: ['u']" in unproved([claimed], {"claimed": {"t": "passed", "u": "failed"}})["claimed"]
    assert unproved([claimed], {"claimed": {"t": "passed"}}) == {}
    undocumented = Rule("undocumented", lonely.pattern, lonely.rhs, doc="exp to id", obligation=claimed.obligation)
    assert "lhs → rhs" in unproved([undocumented], {"undocumented": {"t": "passed"}})["undocumented"]
    with pytest.raises(nc.RewriteError, match="unsound"):
        claimed.obligation.discharge(claimed, trials=2)
