"""The meta-test: every rule of ``rewrites.ALL_RULES`` has a passing proof.

A rule is proved when (1) it carries an obligation that discharges here, (2) at
least one test in ``proofs/test_rules.py`` is marked ``@pytest.mark.proves(name)``,
and (3) every such test that ran in this session passed (conftest moves this
file to the end of the session).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import napkin_cat as nc
from napkin_cat.rewriting.match import Pattern, kind
from napkin_cat.rewriting import Obligation, Rule
from rewrites import ALL_RULES

PROOFS = Path(__file__).with_name("test_rules.py")


def declared_proofs(path: Path = PROOFS) -> set:
    """Rule names named by ``proves(...)`` marks in a proofs file (read statically with ast)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "proves") or (isinstance(f, ast.Attribute)
                                                                  and f.attr == "proves"):
                names |= {a.value for a in node.args if isinstance(a, ast.Constant)}
    if "ALL_RULES" in path.read_text() and "proves(r.name)" in path.read_text():
        names |= {r.name for r in ALL_RULES}  # the parametrised test proves every rule
    return names


def unproved(rules, declared: set, results: dict) -> dict:
    """Rule name → why it is not proved (empty when every rule is)."""
    why = {}
    for rule in rules:
        if rule.obligation is None:
            why[rule.name] = "it has no proof obligation"
        elif rule.name not in declared:
            why[rule.name] = "no test in proofs/ is marked proves(%r)" % rule.name
        elif any(o != "passed" for o in results.get(rule.name, ())):
            why[rule.name] = f"its proofs did not all pass: {results[rule.name]}"
        elif "→" not in rule.doc:
            why[rule.name] = "its doc does not state lhs → rhs"
    return why


def test_every_rule_has_a_passing_proof(proof_registry):
    missing = unproved(ALL_RULES, declared_proofs(), proof_registry.results)
    assert not missing, "rules without a passing proof:\n" + "\n".join(f"  {k}: {v}" for k, v in missing.items())


@pytest.mark.parametrize("rule", list(ALL_RULES), ids=lambda r: r.name)
def test_every_obligation_discharges(rule):
    proof = rule.obligation.discharge(rule, seed=1000, trials=4)
    assert proof.rewrites >= 4 and proof.rule == rule.name


def test_the_meta_test_catches_an_unproved_rule():
    lonely = Rule("lonely", Pattern({"f": kind("exp")}), lambda m: nc.Id(m.dom), doc="exp → id")
    assert "no proof obligation" in unproved([lonely], {"lonely"}, {})["lonely"]
    claimed = Rule("claimed", lonely.pattern, lonely.rhs, doc="exp → id",
                   obligation=Obligation(lambda rng: nc.elementwise("exp", "q")))
    assert "marked proves" in unproved([claimed], set(), {})["claimed"]
    assert "did not all pass" in unproved([claimed], {"claimed"}, {"claimed": ["passed", "failed"]})["claimed"]
    with pytest.raises(nc.RewriteError, match="unsound"):
        claimed.obligation.discharge(claimed, trials=2)
