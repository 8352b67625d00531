"""Rewrite rules as values, one driver, and replayable traces.

A :class:`Rule` is a named value: a :class:`~napkin_cat.match.Pattern`
(left-hand side), a right-hand side builder ``rhs(match) -> Diagram`` of the
hole's type, side ``conditions`` as data (:class:`Condition`), a proof
:class:`Obligation` and a ``doc`` (``lhs → rhs`` and the paper citation).
Rules compose into a :class:`RuleSet` with ``+``; :func:`rewrite` is the one
driver; every step is recorded in a :class:`Trace` (rule, match, before,
after) that can be replayed, checked by ``equivalent`` and drawn.

>>> import napkin_cat as nc
>>> from napkin_cat.match import Pattern, kind
>>> def drop(m):
...     return nc.Id(m.dom)
>>> identity = Rule("drop_identity", Pattern({"f": kind("id")}), drop,
...                 conditions=(Condition("same_type", lambda m: m.dom == m.cod,
...                                       "the identity box must not broadcast"),),
...                 doc="id(x) → x")
>>> d = nc.elementwise("id", "q") >> nc.elementwise("exp", "q")
>>> r = rewrite(d, RuleSet([identity]))
>>> [b.name for b in r.diagram.boxes], len(r.trace)
(['exp'], 1)
>>> r.trace.replay(d) == r.diagram and bool(r.trace.check())
True
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Callable


from napkin_cat.errors import RewriteError
from napkin_cat.match import Match, Pattern, find
from napkin_cat.netlist import Netlist, to_netlist
from napkin_cat.obligation import (Obligation, ObligationError, Proof, bind_tiles,  # noqa: F401
                                   random_sizes, shape_of)


# ---------------------------------------------------------------------- side conditions
@dataclass(frozen=True)
class Condition:
    """A named side condition ``test(match)``: True/None passes; False or a string (why) fails."""

    name: str
    test: Callable
    message: str = ""

    def describe(self) -> str:
        return f"{self.name}: {self.message}" if self.message else self.name

    def failure(self, m: Match) -> str | None:
        """None when the condition holds on ``m``, else the reason it fails."""
        got = self.test(m)
        if isinstance(got, str):
            return self.message + (f" ({got})" if got else "")
        return None if got is None or got else self.message


# ---------------------------------------------------------------------- rules
@dataclass(frozen=True)
class Rule:
    """A rewrite rule (see module docstring).  ``oriented=False`` marks an equation that the
    fixpoint strategy does not use (it would loop); ``params`` are fixed by :meth:`using`."""

    name: str
    pattern: Pattern
    rhs: Callable
    conditions: tuple = ()
    obligation: "Obligation | None" = None
    doc: str = ""
    oriented: bool = True
    params: tuple = ()

    def __post_init__(self):
        if self.doc:  # help(rule) shows its lhs → rhs and citation
            object.__setattr__(self, "__doc__", self.doc)

    def using(self, **params) -> "Rule":
        """The same rule with parameters (e.g. an axis name) visible to conditions and rhs."""
        return replace(self, params=tuple(sorted({**dict(self.params), **params}.items())))

    def candidates(self, source) -> list:
        """Matches of the pattern, side conditions not yet checked."""
        return find(self.pattern, source, rule=self.name, params=dict(self.params))

    def failure(self, m: Match) -> tuple | None:
        """The first failing condition and why, or None."""
        for c in self.conditions:
            why = c.failure(m)
            if why is not None:
                return c, why
        return None

    def matches(self, source) -> list:
        """All matches where every side condition holds."""
        return [m for m in self.candidates(source) if self.failure(m) is None]

    def check(self, m: Match) -> None:
        """Raise :class:`RewriteError` naming the first side condition that fails on ``m``."""
        failed = self.failure(m)
        if failed is not None:
            c, why = failed
            raise RewriteError(f"rule {self.name!r} cannot rewrite at {m.describe()}: "
                               f"condition {c.name!r} fails: {why}")

    def apply(self, diagram, match: Match | None = None):
        """Rewrite ``diagram`` at ``match`` (default: the first legal match)."""
        if match is None:
            cands = self.candidates(diagram)
            if not cands:
                raise RewriteError(f"rule {self.name!r} does not match: the diagram has no sub-diagram "
                                   f"of the form {self.pattern.describe()}")
            legal = [m for m in cands if self.failure(m) is None]
            match = legal[0] if legal else cands[0]
        elif match.diagram is not diagram and match.diagram != diagram:
            raise RewriteError(f"rule {self.name!r}: the match {match.describe()} was found in another "
                               "diagram; find matches with rule.matches(diagram) on this one")
        return self.fill(match).diagram

    def fill(self, match: Match) -> Netlist:
        """Check the side conditions and splice the right-hand side into the match's netlist."""
        self.check(match)
        return match.fill(self.rhs(match))

    __call__ = apply

    def __repr__(self):
        return f"Rule({self.name!r}: {self.doc.splitlines()[0] if self.doc else self.pattern.describe()})"


@dataclass(frozen=True)
class RuleSet:
    """An ordered set of rules with distinct names; ``+`` concatenates."""

    rules: tuple = ()

    def __post_init__(self):
        rules = tuple(self.rules.rules if isinstance(self.rules, RuleSet) else self.rules)
        names = [r.name for r in rules]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise RewriteError(f"a ruleset holds each rule once; {dup} appear twice")
        object.__setattr__(self, "rules", rules)

    def __add__(self, other):
        other = other.rules if isinstance(other, RuleSet) else (other,) if isinstance(other, Rule) \
            else tuple(other)
        return RuleSet(self.rules + other)

    def __radd__(self, other):
        return as_ruleset(other) + self

    def __iter__(self):
        return iter(self.rules)

    def __len__(self):
        return len(self.rules)

    def __contains__(self, name):
        return any(r.name == (name.name if isinstance(name, Rule) else name) for r in self.rules)

    def __getitem__(self, name: str) -> Rule:
        for r in self.rules:
            if r.name == name:
                return r
        raise RewriteError(f"no rule named {name!r}; the ruleset has {self.names}")

    @property
    def names(self) -> list:
        return [r.name for r in self.rules]

    def __repr__(self):
        return f"RuleSet({self.names})"


def as_ruleset(rules) -> RuleSet:
    if isinstance(rules, RuleSet):
        return rules
    if isinstance(rules, Rule):
        return RuleSet((rules,))
    return RuleSet(tuple(rules))


# ---------------------------------------------------------------------- the driver
@dataclass(frozen=True)
class Step:
    """One rewrite: the rule's name, the match position and description, before and after.

    The driver records netlists; ``before``/``after`` lay them out as diagrams on demand.
    """

    rule: str
    key: tuple
    description: str
    before_net: Netlist | None = None
    after_net: Netlist | None = None
    stored: tuple = ()  # (before, after) diagrams read back by Trace.loads
    fresh: bool = True  # the step's netlist was read from a diagram (a new rewrite() call)
    params: tuple = ()  # the rule's parameters (see Rule.using)

    @property
    def before(self):
        if self.stored:
            return self.stored[0]
        return self.before_net.diagram if self.before_net is not None else None

    @property
    def after(self):
        if self.stored:
            return self.stored[1]
        return self.after_net.diagram if self.after_net is not None else None


def _jsonable(value):
    """A rule parameter as JSON: numbers, strings and booleans as they are, anything else as str."""
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)


def _serial():
    try:
        from napkin_cat import serial
    except ImportError:
        return None
    return serial if hasattr(serial, "dumps") and hasattr(serial, "loads") else None


@dataclass(frozen=True)
class Trace:
    """The steps of a derivation; ``rules`` resolves rule names when replaying."""

    steps: tuple = ()
    rules: RuleSet = field(default_factory=RuleSet)

    def __len__(self):
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def replay(self, start, rules=None):
        """Re-apply every step from ``start`` (same rule, same match position); return the result."""
        from napkin_cat.netlist import isomorphic
        rules = as_ruleset(rules) if rules is not None else self.rules
        net = None
        for k, step in enumerate(self.steps):
            if net is None or step.fresh:  # match positions are relative to a freshly read netlist
                net = to_netlist(start if net is None else net.diagram)
            rule = rules[step.rule]
            if step.params:
                rule = rule.using(**dict(step.params))
            key = tuple(map(tuple, step.key))
            found = [m for m in rule.candidates(net) if m.key == key]
            if not found:
                raise RewriteError(f"replay step {k}: rule {step.rule!r} no longer matches at "
                                   f"{step.description}")
            net = rule.fill(found[0])
            if step.after_net is not None and not net.same_as(step.after_net):
                raise RewriteError(f"replay step {k} ({step.rule}) did not reproduce the recorded diagram")
        if self.steps and self.steps[-1].stored and not isomorphic(net, self.steps[-1].stored[1]):
            raise RewriteError("replay did not reproduce the recorded final diagram")
        return start if net is None else net.diagram

    def check(self, **equivalent_options):
        """Check every step with ``equivalent(before, after)``; return the last verdict."""
        from napkin_cat.evaluate import Equivalence, equivalent
        verdict = Equivalence(True)
        for k, step in enumerate(self.steps):
            if step.before is None or step.after is None:
                raise RewriteError("this trace holds no diagrams (loaded without napkin_cat.serial): "
                                   "replay it from its start diagram first")
            verdict = equivalent(step.before, step.after, **equivalent_options)
            if not verdict:
                raise RewriteError(f"step {k} (rule {step.rule!r} at {step.description}) changed the "
                                   f"function: {verdict.message}")
        return verdict

    def dumps(self) -> str:
        """JSON: rule names and match positions, plus the diagrams when napkin_cat.serial exists."""
        serial = _serial()
        out = []
        for s in self.steps:
            item = {"rule": s.rule, "key": [list(p) for p in s.key], "description": s.description,
                    "fresh": s.fresh, "params": [[k, _jsonable(v)] for k, v in s.params]}
            if serial is not None and s.before is not None:
                item["before"], item["after"] = serial.dumps(s.before), serial.dumps(s.after)
            out.append(item)
        return json.dumps({"napkin_cat_trace": 1, "steps": out})

    @classmethod
    def loads(cls, text: str, rules=None) -> "Trace":
        try:
            data = json.loads(text)
            items = data["steps"]
            serial = _serial()
            steps = tuple(Step(i["rule"], tuple(tuple(p) for p in i["key"]), i["description"],
                               stored=(serial.loads(i["before"]), serial.loads(i["after"]))
                               if serial and "before" in i else (), fresh=bool(i.get("fresh", k == 0)),
                               params=tuple((str(a), b) for a, b in i.get("params", ())))
                          for k, i in enumerate(items))
        except (KeyError, TypeError, ValueError) as e:
            raise RewriteError(f"not a napkin_cat trace: {e}") from None
        return cls(steps, as_ruleset(rules) if rules is not None else RuleSet())

    def draw(self, path: str):
        """A strip of equations, one panel per step (``napkin_cat.draw`` if present)."""
        return _draw_trace(self, path)

    def __repr__(self):
        return f"Trace({[s.rule for s in self.steps]})"


@dataclass(frozen=True)
class Derivation:
    """The result of :func:`rewrite`: the final ``diagram`` and the ``trace`` from ``start``."""

    start: object
    diagram: object
    trace: Trace


def rewrite(diagram, rules, strategy="fixpoint", *, max_steps: int = 1000) -> Derivation:
    """Apply ``rules`` to ``diagram``; return a :class:`Derivation`.

    ``strategy``: ``"fixpoint"`` (first legal match of the first oriented rule that
    applies, until none applies; RewriteError after ``max_steps``), a list of rule
    names (each applied once, in order, at its first legal match), or a callable
    ``pick(netlist, options) -> (rule, match) | None`` over the legal
    ``(rule, match)`` options (stops at None or after ``max_steps``; ``netlist.diagram``
    is the current diagram).  Work happens on netlists; diagrams are laid out on demand.
    """
    rules = as_ruleset(rules)
    net, steps = to_netlist(diagram), []

    def step(rule, m):
        nonlocal net
        after = rule.fill(m)
        steps.append(Step(rule.name, m.key, m.describe(), net, after, fresh=net.source is not None,
                          params=rule.params))
        net = after

    if isinstance(strategy, str) and strategy == "fixpoint":
        active = [r for r in rules if r.oriented]
        while True:
            for rule in active:
                ms = rule.matches(net)
                if ms:
                    break
            else:
                break
            if len(steps) >= max_steps:
                raise RewriteError(f"no fixpoint after {max_steps} steps (rule {rule.name!r} still "
                                   f"applies at {ms[0].describe()}); the ruleset may not terminate")
            step(rule, ms[0])
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


def _draw_trace(trace: Trace, path: str) -> str:
    """One row per step: ``before  =rule⇒  after``; pictures by napkin_cat.draw when available."""
    import importlib
    import os
    import tempfile

    from matplotlib.figure import Figure

    from napkin_cat.adapter import is_structural
    try:
        drawer = getattr(importlib.import_module("napkin_cat.draw"), "draw", None)
    except ImportError:
        drawer = None
    rows = max(len(trace.steps), 1)
    fig = Figure(figsize=(10, 2.6 * rows))
    axes = fig.subplots(rows, 3, squeeze=False, gridspec_kw={"width_ratios": [4, 1, 4]})
    with tempfile.TemporaryDirectory() as tmp:
        for k, step in enumerate(trace.steps or [Step("(no steps)", (), "")]):
            for col, d in ((0, step.before), (2, step.after)):
                ax = axes[k][col]
                ax.axis("off")
                if d is None:
                    continue
                picture = None
                if drawer is not None:
                    try:
                        png = os.path.join(tmp, f"{k}-{col}.png")
                        drawer(d, path=png)
                        from matplotlib.image import imread
                        picture = imread(png)
                    except Exception:  # a drawing backend failure must not lose the trace
                        picture = None
                if picture is not None:
                    ax.imshow(picture)
                else:
                    names = [b.name for b in d.boxes if is_structural(b) is None]
                    ax.text(0.5, 0.5, "\n".join(names[:12] + (["…"] if len(names) > 12 else [])),
                            ha="center", va="center", fontsize=8, family="monospace",
                            bbox={"boxstyle": "round", "fc": "#f4f4f4"})
            ax = axes[k][1]
            ax.axis("off")
            ax.text(0.5, 0.5, f"= {step.rule} ⇒", ha="center", va="center", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    return path
