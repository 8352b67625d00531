"""The ``rules`` check of a program: a random walk of rule applications, every offered match rewritten.

At each step of the walk every rule of the book (each ring in every order of its shards, each partition along a
random axis with a fresh tile name) offers its matches in the step's netlist, read afresh from its diagram; up to
``per_rule`` of them must rewrite and be found again by their identity (:func:`relocates`), one is taken at random,
and the walk's trace must replay (:func:`walk_replays`).  The law::

    nc.equivalent(start, end of the walk)      (else the first step that changed the function, by bisection)

A failure is a :class:`~napkin_cat.errors.CheckFailed` with the lines that repeat the step alone
(:func:`step_script`); :func:`napkin_cat.testing.checks.run_checks` runs it as ``"rules"``.

>>> from napkin_cat.testing.programs import random_program
>>> sorted(set(check_rules(random_program(1), steps=2)))
['applied', 'equivalent', 'walked']
"""
from __future__ import annotations

import numpy as np

import napkin_cat as nc
from napkin_cat.errors import CheckFailed, NapkinError
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.rewriting.trace import Step, Trace
from napkin_cat.testing.offers import ORDER_ROLES, in_every_order
from napkin_cat.testing.programs import Program


def axis_names(diagram) -> list:
    """The axis names of ``diagram``'s inputs and outputs, in order of first appearance."""
    seen = []
    for arr in (*diagram.dom.inside, *diagram.cod.inside):
        seen += [n for n in arr.names if n not in seen]
    return seen


def step_script(before, rule, params, key, seed) -> str:
    """A standalone script that replays one rewrite step (``rule`` at the match ``key``, ``params``) on ``before`` and
    prints whether it kept the meaning.
    """
    return "\n".join([
        "from napkin_cat.rewriting.registry import rulebook",
        f"before = nc.loads({nc_dumps(before)!r})",
        f"rule = rulebook().rules[{rule!r}]",
        f"match = rule.relocate(before, {key!r}, {tuple(params)!r})",
        "after = rule.apply(before, match)",
        f"print(nc.equivalent(before, after, seed={seed}))"])


def nc_dumps(d) -> str:
    """``d`` as the JSON a reproducer script embeds (``nc.dumps``)."""
    return nc.dumps(d)


def relocates(book, net, rule, m, seed: int):
    """The book's rule of ``rule``'s name finds ``m`` again by its identity (position and choice), as
    :meth:`Trace.replay` does at each step (the walk's whole trace is replayed by :func:`walk_replays`, and
    :mod:`.offers` replays each offered step of every rule); else :class:`CheckFailed` with the step alone."""
    try:
        again = book.rules[rule.name].relocate(net, *m.identity)
        if again.nodes != m.nodes or again.params != m.params:
            raise CheckFailed(f"found {again.describe()} with {again.params}, not the offered match")
    except Exception as e:
        raise CheckFailed(f"rule {rule.name!r} at {m.describe()} made a step that does not replay: "
                          f"{type(e).__name__}: {e}",
                          step_script(net.diagram, rule.name, m.choice, m.key, seed)) from e


def walk_replays(book, start, walk):
    """The walk's trace (each step recorded as the driver records it) replays from ``start`` to its end."""
    trace = Trace(tuple(Step.of(r, m, net, after) for net, r, m, after in walk), book.rules)
    try:
        trace.replay(start)
    except Exception as e:
        raise CheckFailed(f"the walk's trace ({[s.rule for s in trace]}) does not replay: {type(e).__name__}: {e}",
                          "from napkin_cat.rewriting import Trace\n"
                          f"print(Trace.loads({trace.dumps()!r}).replay(diagram))") from e


def check_rules(p: Program, seed: int = 0, steps: int = 6, per_rule: int = 2, book=None):
    """A walk of ``steps`` random legal rule applications; at every step every rule's offered matches (up to
    ``per_rule`` of them) must rewrite and be found again by its identity; the walk's trace must replay, and its end
    must be equivalent to its start (the first step that changes the function is found by bisection and printed
    alone).  Each step's netlist is read afresh from its diagram, so a reproducer's match is found in
    ``nc.loads`` of that diagram."""
    book = rulebook() if book is None else book
    rng = np.random.default_rng([seed, p.seed])
    roles = book.roles
    partition = {roles.get("stream"), roles.get("group"), roles.get("sweep")}
    net, walk = to_netlist(p.diagram), []
    names = axis_names(p.diagram)
    for k in range(steps):
        offered = []
        for rule in book.rules.rules:
            variants = in_every_order(rule, roles) or [rule]     # the ring in each order of its shards
            if rule.name in partition and names:
                variants.append(rule.using(axis=str(rng.choice(names)), size=f"t{k}_{len(offered)}"))
            for r in variants:
                try:
                    ms = r.matches(net)
                except NapkinError:
                    raise
                except Exception as e:
                    raise CheckFailed(f"rule {r.name!r}: matches() raised {type(e).__name__}: {e}", "\n".join([
                        "from napkin_cat.rewriting.registry import rulebook",
                        f"before = nc.loads({nc_dumps(net.diagram)!r})",
                        f"rule = rulebook().rules[{r.name!r}]" + (f".using(**{dict(r.params)!r})" if r.params else ""),
                        "print(rule.matches(before))"])) from e
                for i in rng.permutation(len(ms))[:per_rule]:
                    m = ms[int(i)]
                    try:
                        after = r.fill(m)
                    except Exception as e:
                        raise CheckFailed(f"rule {r.name!r} offered a match at {m.describe()} and then raised "
                                          f"{type(e).__name__}: {e}",
                                          step_script(net.diagram, r.name, m.choice, m.key, seed)) from e
                    relocates(book, net, r, m, seed)
                    offered.append((r, m, after))
        if not offered:
            break
        r, m, after = offered[int(rng.integers(len(offered)))]
        walk.append((net, r, m, after))
        net = to_netlist(after.diagram)
    if not walk:
        return ("no match",)
    walk_replays(book, p.diagram, walk)
    applied = ("applied",) * len(walk)     # one count per rule application, one per ring in the order it chose
    rings = {roles.get(role) for role in ORDER_ROLES}
    applied += tuple(f"ring {dict(m.params)['order']}" for _, r, m, _ in walk
                     if r.name in rings and "order" in m.params)
    if nc.equivalent(p.diagram, walk[-1][3].diagram, seed=seed):
        return ("walked", "equivalent") + applied
    if not nc.equivalent(p.diagram, p.diagram, seed=seed):
        return ("walked", "nothing finite") + applied   # the outputs are never finite: nothing is certified
    lo, hi = 0, len(walk) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if nc.equivalent(p.diagram, walk[mid][3].diagram, seed=seed):
            lo = mid + 1
        else:
            hi = mid
    before, r, m, after = walk[lo]
    verdict = nc.equivalent(before.diagram, after.diagram, seed=seed)
    raise CheckFailed(f"step {lo} of the walk, rule {r.name!r} at {m.describe()}, changed the function: {verdict}",
                      step_script(before.diagram, r.name, m.choice, m.key, seed))


__all__ = ["check_rules", "relocates", "walk_replays", "step_script", "axis_names", "nc_dumps"]
