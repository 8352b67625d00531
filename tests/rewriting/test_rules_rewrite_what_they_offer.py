"""A rule whose ``matches`` offers a match must rewrite it, to the same function, in a step that replays (issue 25,
family 4; issue 31, families 1 and 2): every rule of the registered rule book (iterated, none named) on

* its obligation's own instances, as drawn and woven over a fresh axis at every input and output position, with a
  walk of the driver's steps from one of them (:mod:`napkin_cat.testing.offers`, seeded; its coverage asserted);
* random programs (the project's generator as a hypothesis strategy), as functions, as one kernel and unfused, and
  with partition rules along every axis."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings

import napkin_cat as nc
from napkin_cat.errors import CheckFailed
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet, Step, Trace
from napkin_cat.rewriting.match import Pattern, kind
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting import registry
from napkin_cat.rewriting.registry import Rulebook, rulebook
from napkin_cat.testing import Program, programs, random_program, run_checks
from napkin_cat.testing.rule_walk import check_rules
from napkin_cat.testing.offers import offers, woven

BOOK = rulebook()
PARTITIONS = {BOOK.roles.get("stream"), BOOK.roles.get("group"), BOOK.roles.get("sweep")}
SEED = 20240611
#: floors of the rule fuzz's coverage, per rule (measured at SEED: every rule offered ≥ 3 matches, ≥ 1 checked on
#: a woven instance, at ≥ 3 weave positions, ≥ 1 walk step; 464 matches checked and kept in all, at 34 positions;
#: divide_after_contraction is the thinnest: it declines a numerator woven in another order than its quotient)
FLOORS = {"offered": 3, "woven": 1, "positions": 3, "walked": 1}


def _axes(d):
    return sorted({n for arr in (*d.dom.inside, *d.cod.inside) for n in arr.names})


# ---------------------------------------------------------------------- the issue's reproducer (family 2)
def issue_program():
    """Inputs ``threads u, threads m u, threads``; a SoftMax over threads woven over m (input at −2, output last);
    then ``min`` of it with itself."""
    sizes = {"threads": 2, "u": 3, "m": 3}
    b = nc.Builder(nc.types("threads u, threads m u, threads", sizes=sizes))
    _, x, _ = b.inputs
    sub = nc.softmax("threads u", over="threads", beta=0.25, threads=2, u=3)
    y = b(nc.weave(sub, "m", inputs={0: -2}, position=-1, m=3), x)
    return b.build(b(nc.elementwise("min", "threads u m, threads u m -> threads u m", sizes=sizes), y, y))


def test_the_issue_reproducer_rewrites_what_softmax_statistics_pass_offers():
    d = issue_program()
    rule = BOOK.rules["softmax_statistics_pass"]
    (m,) = rule.matches(d)
    assert [a.names for a in (*m.dom.inside, *m.cod.inside)] == [("threads", "m", "u"), ("threads", "u", "m")]
    after = rule.apply(d, m)
    assert nc.equivalent(d, after)
    x = np.random.default_rng(0).normal(size=(2, 3, 3))
    z = 0.25 * x - (0.25 * x).max(axis=0)               # softmax over threads (axis 0) of each (m, u) row
    want = np.transpose(np.exp(z) / np.exp(z).sum(axis=0), (0, 2, 1))   # written threads u m
    got = nc.evaluate(after, np.zeros((2, 3)), x, np.zeros(2))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_every_rule_offers_on_the_issue_program_only_what_it_rewrites():
    d = issue_program()
    for rule in BOOK.rules:
        for m in rule.matches(d):
            net = to_netlist(d)
            after = rule.fill(rule.relocate(net, *m.identity))
            assert Trace((Step.of(rule, m, net, after),), BOOK.rules).replay(d) == after.diagram
            assert nc.equivalent(d, after.diagram), (rule.name, m.describe())


# ---------------------------------------------------------------------- the fuzz over every rule, woven
@pytest.fixture(scope="module")
def coverage():
    return offers(BOOK, instances=2, seed=SEED)


def test_every_rule_offers_only_what_it_rewrites_and_every_step_replays(coverage):
    print("\n" + coverage.table())
    assert coverage.rules == tuple(BOOK.rules.names)       # the registry's rules, every one
    coverage.require(**FLOORS)                              # no offence; every rule exercised above its floor
    assert sum(coverage.checked.values()) >= 400
    assert sum(coverage.kept.values()) >= 400               # equivalence certified (a finite output compared)
    every = set().union(*coverage.positions.values())
    assert {("out", p) for p in (-2, -1, 0, 1)} <= every and {("in", 0, p) for p in (0, 1, 2)} <= every


def test_woven_covers_every_input_and_output_position():
    f = nc.einsum("q d, x d -> q x")
    made = woven(f, "h", np.random.default_rng(0))
    ins = {(i, w[1].get(i)) for w in made for i in (0, 1)}
    assert ins == {(i, p) for i in (0, 1) for p in (0, 1, 2, None)}       # None: the input is copied
    assert {w[2] for w in made} == {-3, -2, -1, 0, 1, 2}
    for d, where, position in made:
        assert d.cod.inside[0].names[position] == "h"
        assert all(d.dom.inside[i].names[p] == "h" for i, p in where.items())


# ---------------------------------------------------------------------- the fuzz's checks can fail
_made = itertools.count()


def _exp_instance(rng):
    return nc.elementwise("exp", "a b") >> nc.elementwise("neg", "a b")


def _order_blind(m):
    """exp → exp written in its input's order (the wrong type where a weave puts an axis elsewhere in the output)."""
    names = " ".join(m.dom.inside[0].names)
    return nc.elementwise("exp", names, sizes={a.name: a.size for a in m.dom.inside[0].axes})


def _restless(m):
    """exp → exp read through an axis renamed to a name it invents each time it is filled (from a counter, not
    from the diagram): the same function, never the same step twice."""
    arr = m.dom.inside[0]
    names, sizes = list(arr.names), {a.name: a.size for a in arr.axes}
    fresh = f"t{next(_made)}"
    there = " ".join([fresh] + names[1:])
    away = nc.renaming(f"{' '.join(names)} -> {there}", sizes=sizes)
    back = nc.renaming(f"{there} -> {' '.join(names)}", sizes={fresh: arr.axes[0].size, **sizes})
    return away >> back >> nc.elementwise("exp", f"{' '.join(names)} -> {' '.join(m.cod.inside[0].names)}",
                                          sizes=sizes)


def _book(rhs):
    rule = Rule("exp_again", Pattern({"e": kind("exp")}), rhs,
                conditions=(Condition("no_id_yet", lambda m: True, ""),), obligation=Obligation(_exp_instance),
                oriented=False)
    return Rulebook("broken", RuleSet((rule,)), {})


def test_the_rule_fuzz_catches_a_rule_offering_what_it_cannot_rewrite(monkeypatch):
    book = _book(_order_blind)
    c = offers(book, instances=1)
    assert {o.what.split(" at ")[0] for o in c.offences} == {"offered a match", "raised in a walk of up to 3 steps"}
    assert "both sides of a rule must have the same type" in c.offences[0].message
    with pytest.raises(CheckFailed, match="offence"):
        c.require()
    monkeypatch.setitem(registry.BOOKS, book.name, book)          # the reproducer names the book
    with pytest.raises(nc.RewriteError, match="both sides of a rule must have the same type"):
        exec(compile(c.offences[0].reproducer, "<reproducer>", "exec"), {})


def test_the_rule_fuzz_catches_a_step_that_does_not_replay(monkeypatch):
    book = _book(_restless)
    c = offers(book, instances=1)
    what = {o.what.split(" at ")[0] for o in c.offences}
    assert what >= {"made a step", "made a walk of 3 steps that does not replay"}
    assert "did not reproduce the recorded diagram" in c.offences[0].message
    monkeypatch.setitem(registry.BOOKS, book.name, book)
    with pytest.raises(nc.RewriteError, match="did not reproduce the recorded diagram"):
        exec(compile(c.offences[0].reproducer, "<reproducer>", "exec"), {})


def test_the_rule_fuzz_fails_below_its_floor(coverage):
    with pytest.raises(CheckFailed, match="below its floor"):
        coverage.require(offered=10 ** 6)


def test_the_program_check_catches_a_step_that_does_not_replay():
    """check_rules (the random-program fuzz's) replays its walk's trace: a rule that is not the same step twice
    fails it."""
    source = "diagram = nc.elementwise('exp', 'a b')"
    p = Program(nc.elementwise("exp", "a b"), {"a": 2, "b": 3}, source, reference=np.exp, call="exp")
    with pytest.raises(CheckFailed, match=r"the walk's trace \(\['exp_again'.*\]\) does not replay"):
        check_rules(p, book=_book(_restless))
    assert not run_checks(random_program(21), checks=("rules",))        # the paper's book replays on a program


# ---------------------------------------------------------------------- random programs, every rule
@settings(max_examples=25, deadline=None)
@given(programs(n_ops=4))
def test_every_offered_match_rewrites_to_the_same_function(p):
    certifiable = bool(nc.equivalent(p.diagram, p.diagram, sizes=p.sizes))
    offered = 0
    for d in (p.diagram, nc.kernel(p.diagram), nc.unfused(p.diagram)):
        net = to_netlist(d)
        for rule in BOOK.rules.rules:
            variants = [rule] + ([rule.using(axis=a, size="t") for a in _axes(d)] if rule.name in PARTITIONS else [])
            for r in variants:
                for m in r.matches(net):
                    after = r.fill(m)       # raises if an offered match does not rewrite
                    offered += 1
                    if offered % 4 == 0:    # replay and equivalence on a share (the CI fuzz walks further)
                        Trace((Step.of(r, m, net, after),), BOOK.rules).replay(d)
                        if certifiable:
                            assert nc.equivalent(d, after.diagram, sizes=p.sizes), (r.name, m.describe(), p.source)
    assert offered >= 1 or "identity" in p.shapes    # kernel formation is offered wherever an operation is
