"""Rewrite rules as values: a pattern, a right-hand side, side conditions, a proof obligation.

A :class:`Rule` is a named value: a :class:`~napkin_cat.rewriting.match.Pattern`
(left-hand side), a right-hand side builder ``rhs(match) -> Diagram`` of the hole's
type, side ``conditions`` as data (:class:`Condition`), a proof
:class:`~napkin_cat.rewriting.obligation.Obligation` and a ``doc`` (``lhs → rhs`` and
the paper citation).  Rules compose into a :class:`RuleSet` with ``+``; the one driver
that applies them is :func:`napkin_cat.rewriting.driver.rewrite`.

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.match import Pattern, kind
>>> drop = Rule("drop_identity", Pattern({"f": kind("id")}), lambda m: nc.Id(m.dom),
...             conditions=(Condition("same_type", lambda m: m.dom == m.cod,
...                                   "the identity box must not broadcast"),), doc="id(x) → x")
>>> d = nc.elementwise("id", "q") >> nc.elementwise("exp", "q")
>>> [b.name for b in drop.apply(d).boxes]
['exp']
>>> (RuleSet([drop]) + drop)
Traceback (most recent call last):
...
napkin_cat.errors.RewriteError: a ruleset holds each rule once; ['drop_identity'] appear twice
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.match import Match, Pattern, lazy_find
from napkin_cat.rewriting.netlist import Netlist, to_netlist
from napkin_cat.rewriting.obligation import Obligation


# ---------------------------------------------------------------------- side conditions
@dataclass(frozen=True)
class Condition:
    """A named side condition ``test(match)``: True/None passes; False or a string (why) fails.  ``local``: the
    test reads the match's :attr:`~napkin_cat.rewriting.match.Match.hole` alone (as a local rule's right-hand
    side, :attr:`Rule.local`), so :meth:`Rule.failure` given a record ``made`` tests equal holes once."""

    name: str
    test: Callable
    message: str = ""
    local: bool = False

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
    fixpoint strategy does not use (it would loop); ``params`` are fixed by :meth:`using`;
    ``choices(match) -> [params]`` makes one candidate per choice the rule leaves open (which
    operands go first, which axis), so a search sees each choice as a match of its own.  ``local``: the
    right-hand side reads the match's :attr:`~napkin_cat.rewriting.match.Match.hole` alone (its boxes, the wires
    between them, the order of its boundary ports, the parameters; nothing of the netlist around it), so
    :meth:`fill` given a record ``made`` rewrites equal holes to one replacement, built once."""

    name: str
    pattern: Pattern
    rhs: Callable
    conditions: tuple = ()
    obligation: Obligation | None = None
    doc: str = ""
    oriented: bool = True
    params: tuple = ()
    choices: Callable | None = None
    local: bool = False

    def __post_init__(self):
        if self.doc:  # help(rule) shows its lhs → rhs and citation
            object.__setattr__(self, "__doc__", self.doc)

    def using(self, **params) -> "Rule":
        """The same rule with parameters (e.g. an axis name) visible to conditions and rhs."""
        return replace(self, params=tuple(sorted({**dict(self.params), **params}.items())))

    def candidates(self, source, within=None) -> list:
        """Matches of the pattern (one per open choice), side conditions not yet checked; ``within`` (node ids)
        keeps the pattern's nodes among those.

        A parameter fixed by :meth:`using` is not open: it overrides what ``choices`` offers for it, and the
        choices that then coincide are one candidate.  So every candidate has its own
        :attr:`~napkin_cat.rewriting.match.Match.identity`, and the rule fixed at a candidate's parameters
        offers that candidate alone at its position (what a replay relies on)."""
        return list(self.lazy_candidates(source, within))

    def lazy_candidates(self, source, within=None):
        """:meth:`candidates` one at a time, in the same order (each found when asked for: a caller that takes the
        first legal one builds no match past it)."""
        found = lazy_find(self.pattern, source, rule=self.name, params=dict(self.params), within=within)
        if self.choices is None:
            yield from found
            return
        fixed = dict(self.params)
        for m in found:
            seen = []
            for c in self.choices(m):
                params = {**m.params, **c, **fixed}
                if params not in seen:
                    seen.append(params)
                    yield replace(m, params=params)

    def relocate(self, source, key: tuple, choice: tuple = ()) -> Match:
        """The candidate of :attr:`~napkin_cat.rewriting.match.Match.identity` ``(key, choice)`` in ``source``
        (the match a trace recorded, found again); RewriteError if there is none.

        >>> import napkin_cat as nc
        >>> from napkin_cat.rewriting.match import Pattern, kind
        >>> e, i = nc.elementwise("exp", "q"), nc.elementwise("id", "q")
        >>> ids = Rule("ids", Pattern({"f": kind("exp")}), lambda m: e >> i if m.params["then_id"] else e,
        ...            choices=lambda m: [{"then_id": False}, {"then_id": True}])    # exp → exp, or exp ; id
        >>> second = ids.matches(e)[1]
        >>> ids.relocate(e, *second.identity).params, [m.params for m in ids.using(then_id=True).matches(e)]
        ({'then_id': True}, [{'then_id': True}])
        >>> [b.name for b in ids.fill(ids.relocate(e, *second.identity)).diagram.boxes]
        ['exp', 'id']
        """
        rule = self.using(**dict(choice)) if choice else self
        key = tuple(map(tuple, key))
        for m in rule.lazy_candidates(source, within={n for _, n in key}):
            if m.key == key and m.choice == rule.params:
                return m
        where = ", ".join(f"{v}=#{n}" for v, n in key)
        raise RewriteError(f"rule {self.name!r} has no candidate at {where}" +
                           (f" with {dict(choice)}" if choice else "") + " in this diagram")

    def failure(self, m: Match, made: dict | None = None) -> tuple | None:
        """The first failing condition and why, or None; remembered on the match for this rule (a match is a value
        of its netlist, and a search checks a match's conditions before it fills it, which checks them again).
        ``made`` (a caller's record, as :meth:`fill`'s): a :attr:`Condition.local` condition's verdict on each hole
        it has tested."""
        seen = m.__dict__.get("_failure")
        if seen is not None and seen[0] is self:
            return seen[1]
        found = None
        for c in self.conditions:
            if made is not None and c.local:
                key = ("condition", c.name, c.test, c.message, m.hole)
                why = made[key] = made[key] if key in made else c.failure(m)
            else:
                why = c.failure(m)
            if why is not None:
                found = c, why
                break
        m.__dict__["_failure"] = (self, found)   # the rule held: its id is not reused while remembered
        return found

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

    def fill(self, match: Match, made: dict | None = None) -> Netlist:
        """Check the side conditions and splice the right-hand side into the match's netlist.

        ``made`` (a caller's record, for one rule book): where the rule is :attr:`local`, the replacement (and its
        netlist) of each hole it has built, so a hole met again is filled by what was built for it::

            rule.fill(m, made) == rule.fill(m)      # (same_as), for a local rule, whatever made holds
        """
        self.check(match)
        if made is None or not self.local:
            return match.fill(self.rhs(match))
        key = (self.name, self.rhs, match.hole)
        found = made.get(key)
        if found is None:
            rhs = self.rhs(match)
            found = made[key] = (rhs, to_netlist(rhs))
        return match.fill(*found)

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
    """``rules`` as a :class:`RuleSet`: one, a rule alone, or an iterable of rules."""
    if isinstance(rules, RuleSet):
        return rules
    if isinstance(rules, Rule):
        return RuleSet((rules,))
    return RuleSet(tuple(rules))
