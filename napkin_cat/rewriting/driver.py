"""The one driver: apply a rule set to a fixpoint, as a named list, or by a picker.

Work happens on netlists; diagrams are laid out on demand.  Every step is recorded
in the :class:`~napkin_cat.rewriting.trace.Trace` of the returned
:class:`~napkin_cat.rewriting.trace.Derivation`.

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.match import Pattern, kind
>>> drop = nc.Rule("drop_identity", Pattern({"f": kind("id")}), lambda m: nc.Id(m.dom), doc="id(x) → x")
>>> d = nc.elementwise("id", "q") >> nc.elementwise("id", "q") >> nc.elementwise("exp", "q")
>>> r = rewrite(d, [drop])
>>> [b.name for b in r.diagram.boxes], len(r.trace)
(['exp'], 2)
"""
from __future__ import annotations

from napkin_cat.errors import ArgumentError, RewriteError
from napkin_cat.rewriting.fixpoint import fixpoint
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.rules import as_ruleset
from napkin_cat.rewriting.trace import Derivation, Step, Trace


def rewrite(diagram, rules, strategy="fixpoint", *, max_steps: int = 1000) -> Derivation:
    """Apply ``rules`` to ``diagram``; return a :class:`Derivation`.

    ``strategy``: ``"fixpoint"`` (first legal match of the first oriented rule that
    applies, until none applies; RewriteError after ``max_steps``; each rule scanned again only where
    what it read changed, :func:`~napkin_cat.rewriting.fixpoint.fixpoint`), a list of rule
    names (each applied once, in order, at its first legal match), or a callable
    ``pick(netlist, options) -> (rule, match) | None`` over the legal
    ``(rule, match)`` options (stops at None or after ``max_steps``; ``netlist.diagram``
    is the current diagram).  Work happens on netlists; diagrams are laid out on demand.
    Any other ``strategy`` (a word other than ``"fixpoint"``) is an :class:`~napkin_cat.errors.ArgumentError`.
    """
    if (isinstance(strategy, str) and strategy != "fixpoint") or not (
            isinstance(strategy, (str, list, tuple)) or callable(strategy)):
        named = f"; to apply the rule {strategy!r} once, strategy=[{strategy!r}]" if isinstance(strategy, str) else ""
        raise ArgumentError(f"strategy {strategy!r} is none of 'fixpoint', a list of rule names, or a callable "
                           f"pick(netlist, options){named}")
    rules = as_ruleset(rules)
    net, steps = to_netlist(diagram), []

    def step(rule, m):
        nonlocal net
        after = rule.fill(m)
        steps.append(Step.of(rule, m, net, after))
        net = after

    if isinstance(strategy, str) and strategy == "fixpoint":     # scans repeated only where a step changed
        net, steps = fixpoint(net, rules, max_steps)
    elif callable(strategy):
        while len(steps) < max_steps:
            options = [(r, m) for r in rules for m in r.matches(net)]
            picked = strategy(net, options) if options else None
            if picked is None:
                break
            step(*picked)
    else:
        for k, name in enumerate(strategy):
            rule = rules[name]
            cands = rule.candidates(net)
            legal = [m for m in cands if rule.failure(m) is None]
            if not legal:
                if cands:
                    rule.check(cands[0])
                raise RewriteError(f"step {k}: rule {name!r} does not match ({rule.pattern.describe()})")
            step(rule, legal[0])
    return Derivation(diagram, net.diagram, Trace(tuple(steps), rules))
