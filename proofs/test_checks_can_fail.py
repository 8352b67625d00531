"""The checks of proofs/ can fail: each is shown failing on a planted bug.

A check that cannot fail tells a reader something false.  Here the meta-test is run
in an inner pytest session (``pytester``) on copies of the proofs files, once with
the registered rule book intact and once with one rule replaced by a mutant of the
same name (its right-hand side drops the SoftMax's inverse temperature β = 1/√d);
the symbolic Table 4 check and the group partition's cost claim are run on wrong
right-hand sides.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.rewriting import registry
from napkin_cat.rewriting.registry import Rulebook, rulebook
from rewrites import copy_discard, group_partition, softmax_contraction_to_unscaled, softmax_to_auxiliary
from rewrites.softmax_identities import table4_identity

pytest_plugins = ["pytester"]

HERE = Path(__file__).parent
META = "test_every_rule_has_a_passing_proof"


def _without_the_scale(rule):
    """A copy of ``rule`` (same name) whose right-hand side forgets the SoftMax's β."""
    return replace(rule, rhs=lambda m: rule.rhs(replace(m, vars={**m.vars, "beta": 1})))


class PlantBook:
    """A pytest plugin: the session sees ``rules`` as the registered default rule book."""

    def __init__(self, rules):
        self.rules = nc.RuleSet(tuple(rules))
        self.saved = None

    def pytest_configure(self, config):
        books = registry.rulebooks()  # entry points loaded, so that ours is not overridden
        self.saved = books["paper"]
        registry.BOOKS["paper"] = Rulebook("paper", self.rules, dict(self.saved.derivations))

    def pytest_unconfigure(self, config):
        registry.BOOKS["paper"] = self.saved


def inner_session(pytester, *args, rules=None):
    """Run the real proofs files (copied) in an inner session; return the run's result."""
    for name in ("conftest.py", "test_meta.py", "test_rules.py"):
        (pytester.path / name).write_text((HERE / name).read_text())
    pytester.makeini("[pytest]\naddopts = --import-mode=importlib -p no:cacheprovider\n")
    plugins = [PlantBook(rules)] if rules is not None else []
    before = rulebook()
    result = pytester.runpytest_inprocess(*args, plugins=plugins)
    assert rulebook() is before, "the inner session did not restore the registered rule book"
    return result


def meta_report(result) -> str:
    """The meta-test's assertion message in an inner run (empty when it passed)."""
    text = result.stdout.str()
    m = re.search(rf"_+ {META} _+\n(.*?)(?:\n_{{5,}} |\n=+ short test summary)", text, re.S)
    if not m:
        return ""
    lines = [line[1:].strip() for line in m.group(1).splitlines() if line.startswith("E ")]
    start = next((k for k, line in enumerate(lines) if "rules without a passing proof" in line), len(lines))
    end = next((k for k, line in enumerate(lines) if k > start and line.startswith("assert ")), len(lines))
    return "\n".join(lines[start:end])


def test_a_rule_whose_proofs_did_not_run_is_not_proved(pytester):
    """Deselect the parametrised proof: the rules it alone proves (kernel_formation, …) lose their proof."""
    result = inner_session(pytester, "-k", "not obligation_holds_on_random_instances and not symbolic_checks "
                                           "and not rewrites_something and not random_variants")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1, result.stdout.str()[-3000:]
    report = meta_report(result)
    assert "kernel_formation" in report and "no test marked proves('kernel_formation') passed" in report
    assert "softmax_contraction_to_unscaled" not in report  # it has other proofs, and they passed


def test_a_planted_bug_fails_that_rules_proofs_and_the_meta_test(pytester):
    """Drop 1/√d in a copy of softmax_contraction_to_unscaled: its proofs and the meta-test fail for it alone."""
    mutant = _without_the_scale(softmax_contraction_to_unscaled)
    book = [softmax_to_auxiliary, mutant, copy_discard]
    selection = ("-k", f"obligation_holds_on_random_instances or {META}")

    intact = inner_session(pytester, *selection, rules=[softmax_to_auxiliary, softmax_contraction_to_unscaled,
                                                        copy_discard])
    intact.assert_outcomes(passed=4)

    planted = inner_session(pytester, *selection, rules=book)
    planted.assert_outcomes(passed=2, failed=2)
    text = planted.stdout.str()
    assert re.search(r"FAILED .*test_obligation_holds_on_random_instances\[softmax_contraction_to_unscaled\]",
                     text)
    assert "is unsound: counterexample" in text
    report = meta_report(planted)
    assert "softmax_contraction_to_unscaled: its proofs failed" in report
    assert "softmax_to_auxiliary" not in report and "copy_discard" not in report


def _strip_dropping_every_transfer(kernel_box):
    """The function inside a kernel as ``rewrites.kernels.strip`` made it before issue 31: every Load and Save
    dropped, also a woven one that moves its axes (a kernel woven at other positions in its inputs than in its
    outputs), whose permutation is then lost."""
    from napkin_cat.syntax.flat import from_layers
    from napkin_cat.syntax.relabel import map_box
    to0 = lambda a: a.replace(level=0)  # noqa: E731
    items = [(nc.Ty(*map(to0, left.inside)), map_box(box, to0, lambda n: n), nc.Ty(*map(to0, right.inside)))
             for left, box, right in (layer.boxes_or_types[:3] for layer in kernel_box.arg.inside)
             if getattr(getattr(box, "data", None), "kind", None) not in ("load", "save")]
    return from_layers(nc.Ty(*map(to0, kernel_box.dom.inside)), nc.Ty(*map(to0, kernel_box.cod.inside)), items)


def test_a_bug_only_woven_instances_show_fails_the_variants_alone(pytester, monkeypatch):
    """Kernel fusion that drops a woven kernel's permuting Load: right on every instance of its generator, wrong on
    the random variants (a kernel woven at other positions in its inputs than in its outputs), where the diagram it
    builds is refused as ill typed (``from_layers``: the layer after the dropped Load sits on wires in another axis
    order)."""
    monkeypatch.setattr("rewrites.kernels.strip", _strip_dropping_every_transfer)
    result = inner_session(pytester, "-k", "kernel_fusion and (random_instances or random_variants)")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert re.search(r"FAILED .*test_obligation_holds_on_random_variants_of_its_instances\[kernel_fusion\]", text)
    assert re.search(r"offered matches its rewrite could not perform on \d+ of \d+ variants: seed \d+: "
                     r"CompositionError: layer \d+ \(box .*\) is placed on wires", text)


# ---------------------------------------------------------------------- Table 4, symbolically
def test_the_table4_check_fails_on_a_wrong_rescaling():
    table4_identity()  # the rule's right-hand side and Table 4's SoftMax₁ pass
    with pytest.raises(AssertionError, match="softmax of the concatenation"):
        table4_identity(rhs=lambda s, mu, delta, z, z_prev: (s, mu, delta * z_prev, z))  # forgot /z
    with pytest.raises(AssertionError, match="rebased prior sum"):
        table4_identity(rhs=lambda s, mu, delta, z, z_prev: ([x / z for x in s], mu, delta, z))  # forgot ·z′
    from rewrites.softmax_identities import unscaled_step

    def inverted(x, beta, mu_prev, z_prev):  # δ = exp(μ − μ′) instead of exp(μ′ − μ)
        s, mu, delta, z = unscaled_step(x, beta, mu_prev, z_prev)
        return s, mu, 1 / delta, z - delta * z_prev + z_prev / delta
    with pytest.raises(AssertionError, match="softmax of the concatenation"):
        table4_identity(step=inverted)


# ---------------------------------------------------------------------- group partition, its cost claim
def _hidden_round_trip(diagram):
    """The Grid with a Load ; Save of every output added inside it: same function, more transfers."""
    (grid,) = diagram.boxes
    trips = [nc.transfer("load", a) >> nc.transfer("save", a.replace(level=1)) for a in grid.arg.cod.inside]
    extra = trips[0]
    for t in trips[1:]:
        extra = extra @ t
    inside = grid.arg >> extra
    return nc.Diagram.id(grid.dom).then(type(grid).rebuild(inside, grid.dom, grid.cod, grid.params))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_group_cost_claim_fails_on_a_hidden_round_trip(seed):
    obligation = group_partition.obligation  # the rule's own instances and cost claim, through its public record
    lhs = obligation.instances(np.random.default_rng(seed))
    (m,) = group_partition.matches(lhs)[:1]
    rhs = group_partition.apply(lhs, m)
    obligation.cost(lhs, rhs, m)
    bad = _hidden_round_trip(rhs)
    assert nc.equivalent(rhs, bad)  # a transfer is an identity: only the cost tells them apart
    with pytest.raises(AssertionError, match="group partition moves"):
        obligation.cost(lhs, bad, m)


def test_the_meta_test_run_alone_runs_the_proofs_in_a_child_session(pytester):
    """``pytest proofs/test_meta.py``: no proof is selected, so it runs this folder's proofs itself."""
    for name in ("conftest.py", "test_meta.py"):
        (pytester.path / name).write_text((HERE / name).read_text())
    pytester.makeini("[pytest]\naddopts = --import-mode=importlib -p no:cacheprovider\n")
    pytester.makepyfile(test_one_proof='''
        import pytest

        from rewrites import copy_discard

        @pytest.mark.proves("copy_discard")
        def test_copy_discard_is_proved_here():
            assert copy_discard.obligation.check_instance(copy_discard, 0)["rewrites"] >= 1
        ''')
    result = pytester.runpytest_inprocess("test_meta.py", "-k", META)
    result.assert_outcomes(failed=1)
    report = meta_report(result)
    assert "in a child session" in report and "kernel_formation" in report
    assert "copy_discard" not in report
