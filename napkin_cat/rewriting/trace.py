"""Traces: the steps of a derivation, replayable, checkable, serialisable and drawable.

Every rewrite records a :class:`Step` (rule, match position, before, after); a
:class:`Trace` replays the steps from the start diagram, checks each with
``equivalent``, writes JSON (with the diagrams, through the codec the io layer
registers) and draws a strip of equations (through the drawer the render layer
registers).

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.match import Pattern, kind
>>> drop = nc.Rule("drop_identity", Pattern({"f": kind("id")}), lambda m: nc.Id(m.dom), doc="id(x) → x")
>>> d = nc.elementwise("id", "q") >> nc.elementwise("exp", "q")
>>> r = nc.rewrite(d, [drop])
>>> r.trace, r.trace.replay(d) == r.diagram, bool(r.trace.check())
(Trace(['drop_identity']), True, True)
>>> Trace.loads(r.trace.dumps(), rules=[drop]).replay(d) == r.diagram
True
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.isomorphism import isomorphic
from napkin_cat.rewriting.netlist import Netlist, to_netlist
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.rewriting.rules import RuleSet, as_ruleset
from napkin_cat.semantics.equivalent import Equivalence, equivalent

#: the most steps of a trace read back: fifty times the search's derivation of attention's gradient (84 steps);
#: every step holds two diagrams to rebuild
MAX_STEPS = 4096
#: the most characters of a trace read back: sixteen times that derivation's (7.8 MB)
MAX_TRACE_CHARS = 1 << 27

#: Filled by the layers above: ``"codec"`` (napkin_cat.io: ``dumps``/``loads`` of diagrams, so that a
#: trace carries its diagrams) and ``"drawer"`` (napkin_cat.render: ``draw_trace(trace, path)``).
HOOKS: dict = {}


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
    params: tuple = ()  # the match's parameters: the rule's (Rule.using) and its choice (Match.choice)

    @classmethod
    def of(cls, rule, match, before: Netlist, after: Netlist) -> "Step":
        """The step that rewrote ``before`` into ``after`` at ``match``, recording the match's whole
        :attr:`~napkin_cat.rewriting.match.Match.identity` (its position and its choice among the candidates
        there: which consumer, which operands first, the names it invents), so that it replays whatever the
        rule.  ``fresh`` when ``before`` was read from a diagram (node ids are then those a fresh read gives)."""
        return cls(rule.name, match.key, match.describe(), before, after, fresh=before.source is not None,
                   params=match.choice)

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


@dataclass(frozen=True)
class Trace:
    """The steps of a derivation; ``rules`` resolves rule names when replaying (a loaded trace's
    default: the registered rule book's rules)."""

    steps: tuple = ()
    rules: RuleSet = field(default_factory=RuleSet)

    def __len__(self):
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def replay(self, start, rules=None):
        """Re-apply every step from ``start`` (same rule, at the match of the same identity: position and
        choice); return the result.  RewriteError where a step no longer matches or makes another diagram."""
        rules = as_ruleset(rules) if rules is not None else self.rules
        net = None
        for k, step in enumerate(self.steps):
            if net is None or step.fresh:  # match positions are relative to a freshly read netlist
                net = to_netlist(start if net is None else net.diagram)
            rule = rules[step.rule]
            try:
                found = rule.relocate(net, step.key, step.params)
            except RewriteError:
                raise RewriteError(f"replay step {k}: rule {step.rule!r} no longer matches at "
                                   f"{step.description}" + (f" with {dict(step.params)}" if step.params else "")
                                   ) from None
            net = rule.fill(found)
            if step.after_net is not None and not net.same_as(step.after_net):
                raise RewriteError(f"replay step {k} ({step.rule}) did not reproduce the recorded diagram")
        if self.steps and self.steps[-1].stored and not isomorphic(net, self.steps[-1].stored[1]):
            raise RewriteError("replay did not reproduce the recorded final diagram")
        return start if net is None else net.diagram

    def check(self, **equivalent_options):
        """Check every step with ``equivalent(before, after)``; return the last verdict.  A step's ``after`` is
        the next step's ``before``: evaluated once where the two comparisons draw the same sizes and inputs."""
        verdict = Equivalence(True)
        evaluations: dict = {}           # the steps' diagrams are held by the trace while it lives
        for k, step in enumerate(self.steps):
            if step.before is None or step.after is None:
                raise RewriteError("this trace holds no diagrams (loaded without napkin_cat.io.serial): "
                                   "replay it from its start diagram first")
            verdict = equivalent(step.before, step.after, evaluations=evaluations, **equivalent_options)
            if not verdict:
                raise RewriteError(f"step {k} (rule {step.rule!r} at {step.description}) changed the "
                                   f"function: {verdict.message}")
        return verdict

    def dumps(self, *, diagrams: bool = True) -> str:
        """JSON: rule names and match positions, plus each step's diagrams when napkin_cat.io.serial exists and
        ``diagrams`` (without them the trace still replays, in a fraction of the characters)."""
        serial = HOOKS.get("codec") if diagrams else None
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
        """Read a trace written by :meth:`dumps`.  Its rule names resolve in ``rules``; by default in
        the registered rule book's (``registry.rulebook()``: the paper's library, ``rewrites``).

        >>> import napkin_cat as nc
        >>> from napkin_cat.rewriting.registry import rulebook
        >>> r = rulebook().derivations["unscaled_softmax"](nc.library.attention())
        >>> Trace.loads(r.trace.dumps()).replay(nc.library.attention()) == r.diagram
        True
        """
        if isinstance(text, (str, bytes, bytearray)) and len(text) > MAX_TRACE_CHARS:
            raise RewriteError(f"a trace of {len(text)} characters: this reader takes at most {MAX_TRACE_CHARS}")
        try:
            data = json.loads(text)
            items = data["steps"]
            if len(items) > MAX_STEPS:
                raise RewriteError(f"a trace of {len(items)} steps: this reader takes at most {MAX_STEPS}")
            serial = HOOKS.get("codec")
            steps = tuple(Step(i["rule"], tuple(tuple(p) for p in i["key"]), i["description"],
                               stored=(serial.loads(i["before"]), serial.loads(i["after"]))
                               if serial and "before" in i else (), fresh=bool(i.get("fresh", k == 0)),
                               params=tuple((str(a), b) for a, b in i.get("params", ())))
                          for k, i in enumerate(items))
        except (KeyError, TypeError, ValueError) as e:
            raise RewriteError(f"not a napkin_cat trace: {e}") from None
        return cls(steps, as_ruleset(rules) if rules is not None else rulebook().rules)

    def draw(self, path: str):
        """A strip of equations, one row per step (drawn by the render layer's registered drawer)."""
        drawer = HOOKS.get("drawer")
        if drawer is None:
            raise RewriteError("no trace drawer is registered: import napkin_cat (its render layer draws traces)")
        return drawer(self, path)

    def __repr__(self):
        return f"Trace({[s.rule for s in self.steps]})"


@dataclass(frozen=True)
class Derivation:
    """The result of :func:`rewrite`: the final ``diagram`` and the ``trace`` from ``start``."""

    start: object
    diagram: object
    trace: Trace
