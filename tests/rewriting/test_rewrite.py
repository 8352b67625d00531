"""The rewrite engine: matching, side conditions, the driver, traces, and a fuzzer."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.match import ANY_BOX, Pattern, find, kind, peel_weave
from napkin_cat.rewriting import isomorphic
from napkin_cat.rewriting import Condition, Obligation, ObligationError, Rule, RuleSet, Trace, rewrite
from rewrites import (ALL_RULES, SIMPLIFY, copy_discard, divide_after_contraction, remove_identity,
                      save_load_elimination, softmax_contraction_to_unscaled, unscaled_softmax)
from rewrites.basic import random_diagram

SAVE_LOAD = Pattern({"s": kind("save"), "l": kind("load")}, [("s", 0, "l", 0)])


def level1(sig):
    return nc.types(sig, level=1).inside[0]


def round_trip(arr):
    return nc.transfer("save", arr) >> nc.transfer("load", arr.replace(level=0))


# ---------------------------------------------------------------------- matching
def test_match_across_unrelated_boxes_and_swaps():
    a, b = level1("q d"), level1("x")
    sw = nc.Diagram.swap(nc.Ty(a.replace(level=0)), nc.Ty(b))
    d = (nc.transfer("save", a) @ nc.elementwise("exp", "x", level=1)) >> sw \
        >> (nc.elementwise("tanh", "x", level=1) @ nc.transfer("load", a.replace(level=0)))
    (m,) = find(SAVE_LOAD, d)
    assert m.dom == nc.Ty(a) and m.cod == nc.Ty(a)
    out = save_load_elimination.apply(d, m)
    assert [b.name for b in out.boxes if b.name in ("save", "load")] == []
    assert nc.equivalent(d, out)


def test_matches_must_be_convex():
    """f → g directly and f → h → g: replacing {f, g} would need a cycle through h."""
    b = nc.Builder(nc.types("q"))
    (X,) = b.inputs
    F = b(nc.elementwise("exp", "q"), X)
    H = b(nc.elementwise("tanh", "q"), F)
    d = b.build(b(nc.elementwise("add", "q"), F, H))
    p = Pattern({"f": kind("exp"), "g": kind("add")}, [("f", 0, "g", None)])
    assert find(p, d) == []
    p2 = Pattern({"f": kind("tanh"), "g": kind("add")}, [("f", 0, "g", None)])
    assert len(find(p2, d)) == 1


def test_matches_must_be_exact():
    """A pattern with one wire f → g does not match boxes joined by two wires."""
    d = nc.split("q", along="q", parts=(2, 2), q=4) >> nc.elementwise("add", "q", q=2)
    one = Pattern({"f": kind("split"), "g": kind("add")}, [("f", None, "g", None)])
    two = Pattern({"f": kind("split"), "g": kind("add")}, [("f", 0, "g", 0), ("f", 1, "g", 1)])
    assert find(one, d) == [] and len(find(two, d)) == 1


def test_port_constraints():
    b = nc.Builder(nc.types("q, q"))
    X, Y = b.inputs
    d = b.build(b(nc.elementwise("sub", "q"), b(nc.elementwise("exp", "q"), X), Y))
    into0 = Pattern({"f": kind("exp"), "g": kind("sub")}, [("f", 0, "g", 0)])
    into1 = Pattern({"f": kind("exp"), "g": kind("sub")}, [("f", 0, "g", 1)])
    assert len(find(into0, d)) == 1 and find(into1, d) == []
    (m,) = find(into0, d)
    assert m.inputs == (("f", 0), ("g", 1)) and m.outputs == (("g", 0),)


def test_pattern_errors():
    with pytest.raises(RewriteError, match="not a pattern node"):
        Pattern({"f": ANY_BOX}, [("f", 0, "g", 0)])
    with pytest.raises(RewriteError, match="distinct variable names"):
        Pattern([("f", ANY_BOX), ("f", ANY_BOX)])


def test_peel_weave_errors():
    box = nc.elementwise("exp", "q").boxes[0]
    with pytest.raises(RewriteError, match="not weaved over 'x'"):
        peel_weave(box, "x")


# ---------------------------------------------------------------------- rules and their errors
def test_a_failed_side_condition_names_itself():
    b = nc.Builder(nc.types("q x, q, x d"))
    N, Z, V = b.inputs
    Y = b(nc.elementwise("div", "q x, q -> q x"), N, Z)
    d = b.build(b(nc.einsum("q x, x d -> d"), Y, V))  # q is summed away: /z cannot move
    assert divide_after_contraction.candidates(d) and not divide_after_contraction.matches(d)
    with pytest.raises(RewriteError, match="condition 'divisor_survives' fails"):
        divide_after_contraction.apply(d)
    s = nc.Builder(nc.types("q x, x d"))
    S, V = s.inputs
    d2 = s.build(s(nc.einsum("q x, x d -> d"), s(nc.softmax("q x", over="x"), S), V))
    with pytest.raises(RewriteError, match="normaliser_survives"):
        softmax_contraction_to_unscaled.apply(d2)


def test_no_match_and_foreign_match():
    with pytest.raises(RewriteError, match="does not match"):
        copy_discard.apply(nc.elementwise("exp", "q"))
    d = round_trip(level1("q"))
    other = round_trip(level1("x"))
    (m,) = save_load_elimination.matches(other)
    with pytest.raises(RewriteError, match="another diagram"):
        save_load_elimination.apply(d, m)


def test_a_rule_whose_sides_differ_in_type():
    wrong = Rule("exp_to_sum", Pattern({"f": kind("exp")}), lambda m: nc.reduce("sum", "q x -> q"))
    with pytest.raises(RewriteError, match="same type"):
        wrong.apply(nc.elementwise("exp", "q x"))


def test_rhs_must_give_every_output():
    def rhs(m):
        b, ins = m.wiring()
        return m.finish(b, {})
    forgetful = Rule("forgetful", Pattern({"f": kind("exp")}), rhs)
    with pytest.raises(RewriteError, match="no wire for boundary output"):
        forgetful.apply(nc.elementwise("exp", "q"))


def test_an_unsound_rule_is_caught_with_a_counterexample(capsys):
    unsound = Rule(
        "softmax_contraction_without_z", softmax_contraction_to_unscaled.pattern,
        lambda m: nc.Builder(m.dom) and _no_division(m),
        obligation=Obligation(softmax_contraction_to_unscaled.obligation.instances),
        doc="SoftMax(x) · v → exp(x) · v   (forgets /z: unsound)")
    with pytest.raises(ObligationError, match=r"unsound: counterexample .* differs by up to .* at sizes") as e:
        unsound.obligation.discharge(unsound)
    print(e.value)  # the counterexample, as a user sees it
    ce = e.value.counterexample
    assert ce["max_error"] > 1e-3 and set(ce["sizes"]) and "match" in ce
    assert "sizes" in capsys.readouterr().out


def _no_division(m):
    b, ins = m.wiring()
    x = m.vars["scores"]
    e = b(nc.elementwise("exp", " ".join(x.names), **{a.name: a.size for a in x.axes}), ins[("s", 0)])
    c = m.box("c")
    o = b(c, *(e if p == m.vars["port"] else ins[("c", p)] for p in range(len(c.dom))))
    return m.finish(b, {("c", 0): o})


def test_obligation_without_a_match_is_an_error():
    rule = Rule("r", Pattern({"f": kind("exp")}), lambda m: nc.Id(m.dom),
                obligation=Obligation(lambda rng: nc.elementwise("tanh", "q")))
    with pytest.raises(ObligationError, match="no legal match"):
        rule.obligation.discharge(rule, trials=1)


def test_rule_parameters():
    only_x = Rule("id_on", Pattern({"f": kind("id")}), lambda m: nc.Id(m.dom),
                  conditions=(Condition("named_axis", lambda m: m.params["axis"] in m.dom.inside[0].names,
                                        "the identity must carry the chosen axis"),))
    d = nc.elementwise("id", "q") @ nc.elementwise("id", "x")
    assert len(only_x.using(axis="x").matches(d)) == 1
    assert only_x.using(axis="x").apply(d) == nc.elementwise("id", "q") @ nc.Id("x")


# ---------------------------------------------------------------------- rulesets and the driver
def test_rulesets_compose():
    rs = RuleSet([copy_discard]) + remove_identity + RuleSet([save_load_elimination])
    assert rs.names == ["copy_discard", "remove_identity", "save_load_elimination"]
    assert "copy_discard" in rs and rs["remove_identity"] is remove_identity
    with pytest.raises(RewriteError, match="appear twice"):
        rs + copy_discard
    with pytest.raises(RewriteError, match="no rule named"):
        rs["nope"]


def test_strategies():
    d = nc.elementwise("id", "q") >> nc.elementwise("exp", "q") >> nc.elementwise("id", "q")
    assert len(rewrite(d, SIMPLIFY).trace) == 2
    named = rewrite(d, SIMPLIFY, ["remove_identity"])
    assert len(named.trace) == 1 and len(named.diagram.boxes) == 2
    with pytest.raises(RewriteError, match="step 2: rule 'remove_identity' does not match"):
        rewrite(d, SIMPLIFY, ["remove_identity"] * 3)
    last = rewrite(d, SIMPLIFY, lambda diagram, options: options[-1])
    assert last.diagram == nc.elementwise("exp", "q")


def test_a_nonterminating_ruleset_stops_with_an_error():
    exp_again = lambda m: nc.elementwise("exp", " ".join(m.dom.inside[0].names))  # noqa: E731
    looping = Rule("loop", Pattern({"f": kind("exp")}), exp_again)
    d = nc.weave(nc.elementwise("exp", "x") >> nc.elementwise("tanh", "x"), "h")
    with pytest.raises(RewriteError, match="no fixpoint after 5 steps"):
        rewrite(d, [looping], max_steps=5)
    equation = Rule("exp_equation", looping.pattern, exp_again, oriented=False)
    assert rewrite(d, [equation]).trace.steps == ()  # an equation is not oriented


# ---------------------------------------------------------------------- traces
def test_trace_replay_check_dumps_loads(tmp_path):
    att = nc.library.multi_head_attention()
    r = unscaled_softmax(att)
    assert r.start is att and len(r.trace) >= 4
    assert r.trace.replay(att) == r.diagram
    assert r.trace.check()
    text = r.trace.dumps()
    assert json.loads(text)["steps"][0]["rule"] == "softmax_to_auxiliary"
    back = Trace.loads(text, ALL_RULES)
    assert [s.rule for s in back] == [s.rule for s in r.trace]
    assert back.replay(att) == r.diagram
    assert back.check() and back.steps[0].before == att  # diagrams stored by napkin_cat.io.serial
    path = r.trace.draw(str(tmp_path / "trace.png"))
    assert (tmp_path / "trace.png").stat().st_size > 1000 and path.endswith("trace.png")
    with pytest.raises(RewriteError, match="not a napkin_cat trace"):
        Trace.loads("{}")


def test_a_loaded_trace_replays_with_the_librarys_rules_by_default():
    """Trace.loads without rules= resolves rule names in the registered rule book."""
    from napkin_cat.rewriting.registry import rulebook
    att = nc.library.attention()
    r = unscaled_softmax(att)
    back = Trace.loads(r.trace.dumps())
    assert back.rules is rulebook().rules
    assert back.replay(att) == r.diagram
    mine = RuleSet((remove_identity,))
    assert Trace.loads(r.trace.dumps(), rules=mine).rules is mine


def test_replay_detects_a_changed_start():
    r = rewrite(nc.elementwise("id", "q"), SIMPLIFY)
    with pytest.raises(RewriteError, match="no longer matches"):
        r.trace.replay(nc.elementwise("exp", "q"))


def test_trace_check_reports_the_bad_step():
    bad = Rule("exp_is_tanh", Pattern({"f": kind("exp")}), lambda m: nc.elementwise("tanh", "q"))
    r = rewrite(nc.elementwise("exp", "q"), [bad])
    with pytest.raises(RewriteError, match="step 0 .*exp_is_tanh.* changed the function"):
        r.trace.check()


def test_trace_check_evaluates_a_diagram_two_steps_share_once(monkeypatch):
    """A step's ``after`` is the next step's ``before``: at the same trial sizes and inputs it is evaluated once
    (three steps of an untiled diagram: four diagrams, four evaluations, not six); a bad later step is still caught."""
    import sys
    equivalence = sys.modules["napkin_cat.semantics.equivalent"]
    seen, real = [], equivalence.evaluate
    monkeypatch.setattr(equivalence, "evaluate", lambda d, *xs, **kw: seen.append(d) or real(d, *xs, **kw))
    twice = Rule("exp_to_exp_id", Pattern({"f": kind("exp")}),
                 lambda m: nc.elementwise("exp", "q") >> nc.elementwise("id", "q"))
    d = nc.elementwise("exp", "q") >> nc.elementwise("tanh", "q")
    r = rewrite(d, [twice], lambda diagram, options: options[0], max_steps=3)
    assert len(r.trace) == 3 and r.trace.check(trials=1)
    assert len(seen) == 4 and len({id(x) for x in seen}) == 4
    bad = Rule("tanh_is_exp", Pattern({"f": kind("tanh")}), lambda m: nc.elementwise("exp", "q"))
    broken = rewrite(r.diagram, [bad])
    steps = Trace(r.trace.steps + broken.trace.steps, r.trace.rules)
    with pytest.raises(RewriteError, match="step 3 .*tanh_is_exp.* changed the function"):
        steps.check(trials=1)


def test_isomorphic_is_exported():
    assert nc.isomorphic is isomorphic


# ---------------------------------------------------------------------- fuzzing
FUZZ = {"rewrites": 0, "derivations": 0, "rules": {}}


@settings(max_examples=120, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2 ** 32 - 1), n_ops=st.integers(5, 14), fixpoint=st.booleans())
def test_fuzz_rewrites_preserve_the_function(seed, n_ops, fixpoint):
    """Random diagrams, random legal (rule, match) choices; every step must keep the function."""
    rng = np.random.default_rng(seed)
    d = random_diagram(rng, n_ops)
    if fixpoint:
        r = rewrite(d, ALL_RULES)
        assert not any(rule.matches(r.diagram) for rule in ALL_RULES if rule.oriented)
    else:
        def pick(diagram, options):  # a random rule among those that apply, then a random match
            names = sorted({rule.name for rule, _ in options})
            name = names[int(rng.integers(len(names)))]
            mine = [o for o in options if o[0].name == name]
            return mine[int(rng.integers(len(mine)))]
        r = rewrite(d, ALL_RULES, pick, max_steps=int(rng.integers(10, 40)))
    if r.trace.steps:
        assert r.trace.check(trials=1, seed=seed)
    assert nc.equivalent(d, r.diagram, trials=1, seed=seed + 1)
    FUZZ["rewrites"] += len(r.trace)
    FUZZ["derivations"] += 1
    for s in r.trace:
        FUZZ["rules"][s.rule] = FUZZ["rules"].get(s.rule, 0) + 1


def test_fuzz_count(capsys):
    if not FUZZ["derivations"]:  # run alone (e.g. with -k): run the fuzzer here first
        test_fuzz_rewrites_preserve_the_function()
    with capsys.disabled():
        print(f"\nrewrite fuzz: {FUZZ['rewrites']} rewrites in {FUZZ['derivations']} derivations, "
              f"all equivalence-preserving; per rule: {dict(sorted(FUZZ['rules'].items()))}")
    # 120 derivations make 1,756 rewrites (every rule below at least 11 times; 180 made 2,711 for 8 CPU-seconds more,
    # issue 31): the floor fails a generator or a rule book that stops offering rewrites
    assert FUZZ["rewrites"] >= 1500
    # the generator builds level-1 data-flow with transfers; the partition and sharing rules (which act on
    # level-0 functions and kernels, or split concrete axes) are fuzzed in tests/test_derive.py and by nc.derive on
    # random functions (tests/search); it makes no contraction chains, which proofs/test_contraction_rules.py fuzzes,
    # and no mean centred, squared and averaged (a variance), which proofs/test_normalisers.py fuzzes over LayerNorms,
    # nor an operation written by hand (a SoftMax, x · x), which proofs/test_normal_form.py fuzzes, nor sums moved
    # through contractions, which proofs/test_sum_normal_form.py fuzzes, nor a log SoftMax or a gather, which
    # proofs/test_log_probability.py fuzzes, nor a SoftMax read by a gather (proofs/test_gathered_probability.py),
    # nor scales moved through reductions (proofs/test_scale_normal_form.py)
    # nor a variance written E[x²] − E[x]² (proofs/test_variance_normal_form.py), nor a program over devices (the
    # device rules apply only given devices=: proofs/test_devices.py), nor blocks in a row that name an axis alike
    # (axes_apart: proofs/test_axes_apart.py)
    from rewrites import (APART, COMPUTE_ONCE, CONTRACTION, DECOMPOSE, DEVICES, GATHERED, INNER, LOG_FORM,
                          NORMAL_FORM, PARTITION, SHARING, SIBLINGS, SPLITS)
    from rewrites.scale_normal_form import RULES as SCALES
    from rewrites.sum_normal_form import RULES as SUMS
    from rewrites.variance_normal_form import RULES as VARIANCE
    assert set(FUZZ["rules"]) >= {r.name for r in ALL_RULES} - {r.name for r in PARTITION + INNER + SHARING + SIBLINGS
                                                                 + DECOMPOSE + CONTRACTION + SPLITS + NORMAL_FORM
                                                                 + LOG_FORM + GATHERED + SUMS + SCALES + VARIANCE
                                                                 + DEVICES
                                                                 + COMPUTE_ONCE + APART} \
        - {"centred_statistics_pass"}


def test_replay_of_chained_derivations_with_parameters():
    """Traces glued from several rewrite() calls replay: positions are relative to each start."""
    only = Rule("id_on", Pattern({"f": kind("id")}), lambda m: nc.Id(m.dom),
                conditions=(Condition("named_axis", lambda m: m.params["axis"] in m.dom.inside[0].names,
                                      "the identity must carry the chosen axis"),))
    d = nc.elementwise("id", "q") @ nc.elementwise("id", "x") >> nc.elementwise("exp", "q") @ nc.Id("x")
    r1 = rewrite(d, [only.using(axis="x")])
    r2 = rewrite(r1.diagram, [only.using(axis="q")])
    glued = Trace(r1.trace.steps + r2.trace.steps, RuleSet([only]))
    assert [s.fresh for s in glued] == [True, True]
    assert [dict(s.params) for s in glued] == [{"axis": "x"}, {"axis": "q"}]
    assert glued.replay(d) == r2.diagram
    assert Trace.loads(glued.dumps(), [only]).replay(d) == r2.diagram


def test_group_split_join_does_not_split_the_axis_a_position_numbers():
    """Split in two, a position over ``i`` would number its second part from 0 again (found by the fuzz drawing
    masks: ``floordiv_by(position)`` compared and applied by ``where`` changed by 0.43); the rule does not offer it,
    and a position over another axis still splits."""
    from napkin_cat.rewriting.netlist import to_netlist
    from rewrites import group_split_join
    d = nc.position("i", i=8)
    assert group_split_join.matches(to_netlist(d)) == []
    with pytest.raises(nc.RewriteError, match="numbers 'i'"):
        group_split_join.apply(d)
    mask = nc.compare("le", "i, j -> i j", i=8, j=6)
    b = nc.Builder(nc.types("j", sizes={"j": 6}, dtype="int32"))
    (J,) = b.inputs
    both = b.build(b(mask, b(nc.position("i", i=8)), J))
    assert group_split_join.matches(to_netlist(both))
    for m in group_split_join.matches(to_netlist(both)):
        assert nc.equivalent(both, group_split_join.fill(m).diagram)
