"""Building the winner linear in the program (issue 35, match-35).

* the lazy matcher's first legal match is the listed matcher's first, and it builds no match past it;
* the heap of fusion steps (:class:`~napkin_cat.search.fusion_order.FusionQueue`) pops, step after step, the match
  the sorted list of every legal fusion puts first (a second route: the full list, stably sorted);
* a derive of a chain of maps checks convexity and builds boundaries a number of times linear in the chain
  (counted, never timed), and its trace replays.
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.rewriting import match as matching
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search.construct import Maker, boxes
from napkin_cat.search.fusion_order import FusionQueue
from napkin_cat.testing.programs import random_program

BOOK = rulebook()


def maps(n):
    """n elementwise maps on an a × b array beside a pass-through input added at the end."""
    b = nc.Builder(nc.types("a b, a b"))
    x, y = b.inputs
    for i in range(n):
        x = b(nc.elementwise(["exp", "tanh", "neg", "relu"][i % 4], "a b"), x)
    return b.build(b(nc.elementwise("add", "a b, a b -> a b"), x, y))


def kernels(diagram):
    """A maker whose every primitive is its own kernel (the rule playing ``kernel``), and those kernels."""
    mk, rule, mine = Maker(to_netlist(diagram)), BOOK.role("kernel").using(level=1), set()
    while (m := next((c for c in rule.lazy_candidates(mk.net) if rule.failure(c) is None), None)) is not None:
        new, _ = mk.apply(rule, m)
        mine |= {n for n in new if mk.net.nodes[n].kind == "region"}
    return mk, mine


def counting(monkeypatch):
    calls = {"is_convex": 0, "_boundary": 0}
    for name in calls:
        real = getattr(matching, name)

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)
        monkeypatch.setattr(matching, name, counted)
    return calls


PROGRAMS = [random_program(s, n_ops=n) for s, n in ((1, 5), (4, 7), (6, 7), (7, 6), (12, 7), (19, 5))] + \
    [random_program(s, n_ops=6, readers=3) for s in (5, 8)]


@pytest.mark.parametrize("p", PROGRAMS, ids=[p.call for p in PROGRAMS])
def test_the_lazy_first_is_the_lists_first_and_builds_nothing_past_it(p, monkeypatch):
    net = to_netlist(p.diagram)
    calls = counting(monkeypatch)
    checked = 0
    for rule in (BOOK.rules[name] for name in BOOK.rules.names):
        listed = rule.candidates(net)
        legal = [k for k, m in enumerate(listed) if rule.failure(m) is None]
        calls["_boundary"] = 0
        first = next((m for m in rule.lazy_candidates(net) if rule.failure(m) is None), None)
        if not legal:
            assert first is None, rule.name
            continue
        checked += 1
        assert first.identity == listed[legal[0]].identity, rule.name
        # no match built past the first legal one (one boundary per placing, a placing has ≥ 1 candidate)
        assert calls["_boundary"] <= legal[0] + 1, rule.name
    assert checked >= 1


def heap_against_sorted(diagram):
    """Fuse a block of every kernel both ways; the steps, which must be the same."""
    mk, mine = kernels(diagram)
    fuse = BOOK.role("fuse")
    queue, steps = FusionQueue(fuse, mk.net, mine, boxes), []
    while len(mine) > 1:
        listed = [m for m in fuse.candidates(mk.net, mine) if m.nodes["k1"] in mine and m.nodes["k2"] in mine
                  and fuse.failure(m) is None]
        want = sorted(listed, key=boxes)[0] if listed else None
        got = queue.pop(mk.net)
        assert (got is None) == (want is None)
        if got is None:
            break
        assert got.identity == want.identity, len(steps)
        steps.append(got.identity)
        before = mk.net
        new, gone = mk.apply(fuse, got)
        mine = (mine - gone) | {n for n in new if mk.net.nodes[n].kind == "region"}
        queue.update(before, mk.net, mine)
    return steps


@pytest.mark.parametrize("p", PROGRAMS, ids=[p.call for p in PROGRAMS])
def test_the_heap_pops_the_sorted_lists_first_on_random_programs(p):
    heap_against_sorted(p.diagram)


def test_the_heap_pops_the_sorted_lists_first_on_a_chain():
    assert len(heap_against_sorted(maps(24))) == 24      # 25 kernels fused into one


def derive_counts(n, monkeypatch):
    calls = counting(monkeypatch)
    f = maps(n)
    r = nc.derive(f, memory=2048, sizes={"a": 24, "b": 20})
    assert nc.isomorphic(r.trace.replay(f), r.diagram)
    return dict(calls)


def test_a_chains_derive_matches_linear_in_its_length(monkeypatch):
    small, large = derive_counts(25, monkeypatch), derive_counts(100, monkeypatch)
    for name in small:
        # four times the maps: at most about four times the calls (a quadratic matcher makes ~16×)
        assert large[name] - small[name] <= 5 * small[name], (name, small, large)
