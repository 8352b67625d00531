"""A trace replays whatever the rule (issue 31, family 1): a step records its match's whole identity (position and
choice among the candidates there), and a rule fixed at a parameter no longer offers the other choices."""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.rewriting import Trace
from napkin_cat.rewriting.registry import rulebook

BOOK = rulebook()
ISSUE_STEPS = ["stream_decomposition", "group_split_join", "softmax_to_logsumexp", "recompute"]


def issue_program():
    """The issue's program: v6 = softmax(sum(v0)), with dead values v3, v4, v5 (j = 5, int = 8)."""
    sizes = {"j": 5, "int": 8}
    b = nc.Builder(nc.types("j int", sizes=sizes) @ nc.types("j int", sizes=sizes))
    v0, v1 = b.inputs
    v2 = b(nc.reduce("sum", "j int -> j", sizes=sizes), v0)
    b(nc.einsum("j int, j int -> int j", sizes=sizes), v0, v1)
    b(nc.einsum("j, j int -> int", sizes=sizes), v2, v0)
    b(nc.reduce("max", "j int -> j", sizes=sizes), v1)
    return b.build(b(nc.softmax("j", over="j", sizes={"j": 5}), v2))


def choosing(last: int):
    """A picker: the first legal match of each rule of ISSUE_STEPS, but the ``last``-th one of the last rule."""
    done = []

    def pick(net, options):
        if len(done) == len(ISSUE_STEPS):
            return None
        name = ISSUE_STEPS[len(done)]
        mine = [o for o in options if o[0].name == name]
        done.append(name)
        return mine[last if len(done) == len(ISSUE_STEPS) else 0]
    return pick


def test_the_issue_reproducer_replays_at_every_choice_of_recompute():
    d = issue_program()
    first = nc.rewrite(d, BOOK.rules, ISSUE_STEPS)
    net = first.trace.steps[-1].before_net
    offered = BOOK.rules["recompute"].matches(net)
    at_the_copy = {}
    for m in offered:
        at_the_copy.setdefault(m.key, []).append(m.params["consumer"])
    assert max(len(v) for v in at_the_copy.values()) >= 2     # the choice the old trace lost: one key, many consumers
    made = set()
    for k, m in enumerate(offered):
        r = nc.rewrite(d, BOOK.rules, choosing(k))
        assert [s.rule for s in r.trace] == ISSUE_STEPS
        assert dict(r.trace.steps[-1].params) == m.params
        assert r.trace.replay(d) == r.diagram
        assert nc.isomorphic(Trace.loads(r.trace.dumps()).replay(d), r.diagram)
        made.add(nc.dumps(r.diagram))
    assert len(made) == len(offered)      # each choice is a different rewrite: replaying another would be caught


def test_a_parameter_fixed_by_using_is_not_offered_again():
    b = nc.Builder(nc.types("q d, x d, x e, q e"))
    Q, K, V, W = b.inputs
    T = b(nc.einsum("q d, x d -> q x"), Q, K)
    f = b.build(b(nc.einsum("q x, x e -> q e"), T, V), b(nc.einsum("q x, q e -> x e"), T, W))
    rule = BOOK.rules["recompute"]
    assert sorted(m.params["consumer"] for m in rule.matches(f)) == [0, 1]
    for j in (0, 1):
        (m,) = rule.using(consumer=j).matches(f)
        assert m.params["consumer"] == j
        assert rule.using(consumer=j).apply(f) == rule.apply(f, m)
    assert rule.using(consumer=0).apply(f) != rule.using(consumer=1).apply(f)
    (bad,) = rule.using(consumer=7).candidates(f)     # a forced choice outside the offer: its condition says why
    with pytest.raises(nc.RewriteError, match="port 7 of the copy is not read by a box"):
        rule.fill(bad)


def test_relocate_finds_the_identity_or_names_what_is_missing():
    d = issue_program()
    rule = BOOK.rules["stream_decomposition"]
    for m in rule.matches(d):
        assert rule.relocate(d, *m.identity).identity == m.identity
    with pytest.raises(nc.RewriteError, match=r"no candidate at f=#999"):
        rule.relocate(d, (("f", 999),))
