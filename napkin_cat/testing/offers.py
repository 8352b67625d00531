"""A rule performs what it offers, and every step replays: a fuzz over a rule book's rules (issue 31).

For every rule of a rule book (its rules iterated: none is named here), on random left-hand sides drawn by the
rule's own proof obligation, each as drawn and woven over a fresh axis at every input position (or copied)
and every output position (:func:`woven`):

* ``offered``: the matches ``rule.matches`` offers, with the rule's parameters (an axis of the diagram drawn at
  random, for a rule playing a partition role of the book: ``stream``, ``sweep``, ``nest``, ``group``,
  ``split``; each order of the shards, for the ``ring``), of which ``checked``: up to ``per_form`` drawn at
  random in each diagram;
* ``rewritten``: ``rule.fill`` rewrites each (an offered match that raises is an offence);
* ``kept``: ``nc.equivalent`` (one trial) finds the rewrite computes the same (where the left-hand side has a
  finite output to compare);
* ``replayed``: the step, recorded as the driver records it (:meth:`~napkin_cat.rewriting.trace.Step.of`),
  replays (:meth:`~napkin_cat.rewriting.trace.Trace.replay`) to the same netlist from the left-hand side; so
  does a walk of several steps of the rule made by the driver (spliced netlists), and its JSON.

:func:`offers` returns a :class:`Coverage`: the counts per rule, the weave positions (``("in", port,
position)``, ``("out", position)``) at which a rule offered a match, and the offences, each with a standalone
reproducer; :meth:`Coverage.require` fails when there is an offence or a rule was exercised below a floor.

>>> from napkin_cat.rewriting.registry import rulebook
>>> c = offers(rulebook(), instances=1, only=("softmax_to_logsumexp",))
>>> c.offences, c.offered["softmax_to_logsumexp"] == c.replayed["softmax_to_logsumexp"] > 2
([], True)
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

import numpy as np

from napkin_cat.algorithms.orders import ORDERS
from napkin_cat.errors import CheckFailed, NapkinError
from napkin_cat.io.serial import dumps
from napkin_cat.rewriting.driver import rewrite
from napkin_cat.rewriting.isomorphism import isomorphic
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.trace import Step, Trace
from napkin_cat.semantics.equivalent import equivalent
from napkin_cat.syntax.weave import weave

#: the roles of a rule book whose rules take ``axis=`` (and ``size=``): each axis is a parameter to try
AXIS_ROLES = ("stream", "sweep", "nest", "group", "split")
#: the roles of a rule book whose rules take ``order=``, one of :data:`~napkin_cat.algorithms.orders.ORDERS` (the
#: ring: the order of its region's shards): each order is a parameter to try
ORDER_ROLES = ("ring",)
#: the counts :class:`Coverage` keeps per rule
COUNTS = ("offered", "checked", "rewritten", "kept", "replayed", "woven", "walked")


@dataclass(frozen=True)
class Offence:
    """A rule that offered a match it cannot rewrite, changed the function, or made a step that does not
    replay: what happened, and a script that shows it alone."""

    rule: str
    what: str
    message: str
    reproducer: str

    def __str__(self):
        return f"rule {self.rule!r} {self.what}: {self.message}\n--- reproducer ---\n{self.reproducer}"


@dataclass
class Coverage:
    """What :func:`offers` exercised, per rule (see the module docstring), and the offences found."""

    offered: collections.Counter = field(default_factory=collections.Counter)
    checked: collections.Counter = field(default_factory=collections.Counter)
    rewritten: collections.Counter = field(default_factory=collections.Counter)
    kept: collections.Counter = field(default_factory=collections.Counter)
    replayed: collections.Counter = field(default_factory=collections.Counter)
    woven: collections.Counter = field(default_factory=collections.Counter)
    walked: collections.Counter = field(default_factory=collections.Counter)
    positions: dict = field(default_factory=lambda: collections.defaultdict(set))
    offences: list = field(default_factory=list)
    rules: tuple = ()

    def table(self) -> str:
        """One line per rule: its counts and how many weave positions it offered matches at."""
        rows = [f"{'rule':32s} " + " ".join(f"{c:>9s}" for c in COUNTS) + "  positions"]
        for r in self.rules:
            rows.append(f"{r:32s} " + " ".join(f"{getattr(self, c)[r]:9d}" for c in COUNTS) +
                        f"  {len(self.positions[r]):9d}")
        return "\n".join(rows)

    def require(self, *, offered: int = 1, woven: int = 1, positions: int = 1, walked: int = 1) -> None:
        """Raise :class:`~napkin_cat.errors.CheckFailed` on an offence, or where a rule offered fewer than
        ``offered`` matches, fewer than ``woven`` on woven instances, at fewer than ``positions`` weave
        positions, or made fewer than ``walked`` steps in walks; every offered match must have been
        rewritten and replayed."""
        if self.offences:
            raise CheckFailed(f"{len(self.offences)} offence(s); the first:\n{self.offences[0]}",
                              self.offences[0].reproducer)
        low = [f"{r}: {what} {got} < {floor}" for r in self.rules
               for what, got, floor in (("offered", self.offered[r], offered), ("woven", self.woven[r], woven),
                                        ("positions", len(self.positions[r]), positions),
                                        ("walked", self.walked[r], walked))
               if got < floor]
        low += [f"{r}: {self.checked[r]} checked but {getattr(self, c)[r]} {c}" for r in self.rules
                for c in ("rewritten", "replayed") if getattr(self, c)[r] != self.checked[r]]
        if low:
            raise CheckFailed("the rule fuzz's coverage is below its floor:\n  " + "\n  ".join(low) +
                              "\n" + self.table(), "")


def woven(diagram, axis: str, rng, size: int = 3) -> list:
    """``[(diagram woven, {input: position}, output position)]``: ``diagram`` mapped over a new ``axis`` so that
    each input takes the axis at each of its positions (``0 … rank``) or is copied (left out of ``inputs``), and
    the outputs at each position that every box accepts (``-rank-1 … rank``: a negative one counts from the end
    of each box's output, whatever its rank), in as few weaves as cover them all (each port's positions in an
    order of its own, drawn at random, so that an input and the outputs take the axis at other places)."""
    ranks = [len(a.axes) for a in diagram.dom.inside]
    top = max((len(a.axes) for a in diagram.cod.inside), default=0) + 1
    outs = []
    for p in range(-top - 1, top + 1):
        try:
            weave(diagram, axis, inputs={i: 0 for i in range(len(ranks))}, position=p, sizes={axis: size})
        except NapkinError:
            continue
        outs.append(p)
    if not outs:
        return []
    k = max([len(outs)] + [n + 2 for n in ranks])
    seqs = [np.resize(rng.permutation(n + 2), k) for n in ranks]      # position n + 1: the input is copied
    at = np.resize(rng.permutation(len(outs)), k)
    made = []
    for v in range(k):
        ins = {i: int(seq[v]) for i, seq in enumerate(seqs) if seq[v] <= ranks[i]}
        out = outs[int(at[v])]
        try:
            made.append((weave(diagram, axis, inputs=ins, position=out, sizes={axis: size}), ins, out))
        except NapkinError:
            continue
    return made


def _fresh_axis(diagram) -> str:
    used = {n for arr in (*diagram.dom.inside, *diagram.cod.inside) for n in arr.names}
    return next(f"w{k}" for k in range(len(used) + 1) if f"w{k}" not in used)


def _axes(diagram) -> list:
    seen = []
    for arr in (*diagram.dom.inside, *diagram.cod.inside):
        seen += [n for n in arr.names if n not in seen]
    return seen


def _variants(rule, book, diagram, rng) -> list:
    """The rule, and where it plays a partition role of the book, the rule at an axis of ``diagram`` drawn at
    random (its default axis is the first it can partition); where it plays the ring, the rule in each order
    instead (:func:`in_every_order`)."""
    roles = {book.roles.get(r) for r in AXIS_ROLES}
    if rule.name not in roles:
        return in_every_order(rule, book.roles) or [rule]
    axes = _axes(diagram)
    return [rule] + [rule.using(axis=a, size=f"t_{a}") for a in rng.permutation(axes)[:1]]


def in_every_order(rule, roles: dict) -> list:
    """``rule`` at each order of :data:`~napkin_cat.algorithms.orders.ORDERS` where it plays a role of ``roles`` (a
    rule book's) that takes ``order=`` (:data:`ORDER_ROLES`), else none: the variants a walk offers instead of the
    rule as it is (which is the rule at the order of the region it rewrites: one of them).

    >>> from napkin_cat.rewriting.registry import rulebook
    >>> book = rulebook()
    >>> ring, stream = book.role("ring"), book.role("stream")
    >>> [r.params for r in in_every_order(ring, book.roles)], in_every_order(stream, book.roles)
    ([(('order', 'contiguous'),), (('order', 'zigzag'),)], [])
    """
    if rule.name not in {roles.get(r) for r in ORDER_ROLES}:
        return []
    return [rule.using(order=o) for o in ORDERS]


def _report(cover, book, rule, what: str, error, before, *lines) -> None:
    """Record an offence of ``rule``: ``error`` (an exception or a message) and a script that shows it alone
    (``before`` read back from JSON, the book's rule as ``rule``, then ``lines``)."""
    message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    head = ["import numpy as np", "import napkin_cat as nc", "from napkin_cat.rewriting import Step, Trace, to_netlist",
            "from napkin_cat.rewriting.registry import rulebook", f"book = rulebook({book.name!r})",
            f"before = nc.loads({dumps(before)!r})", f"rule = book.rules[{rule.name!r}]"]
    cover.offences.append(Offence(rule.name, what, message, "\n".join(head + list(lines))))


def _one(rule, book, d, cover, rng, seed, where, per_form):
    """Up to ``per_form`` of the matches ``rule`` offers in ``d`` (drawn at random): rewritten, kept, each step
    replayed; returns how many were offered."""
    net = to_netlist(d)
    try:
        offered = rule.matches(net)
    except Exception as e:
        _report(cover, book, rule, "raised while matching", e, d, f"print(rule.using(**{dict(rule.params)!r})"
                ".matches(before))")
        return 0
    cover.offered[rule.name] += len(offered)
    finite = None
    evaluations, held = {}, [d]   # d evaluated once per trial; the rewrites are held while their outputs are kept
    for k in rng.permutation(len(offered))[:per_form]:
        k, m = int(k), offered[int(k)]
        cover.checked[rule.name] += 1
        if where is not None:
            cover.woven[rule.name] += 1
            ins, out = where
            cover.positions[rule.name].update({("in", i, p) for i, p in ins.items()} | {("out", out)})
        found = f"match = rule.relocate(before, {m.key!r}, {m.choice!r})"
        try:
            after = rule.fill(m)
        except Exception as e:
            _report(cover, book, rule, f"offered a match at {m.describe()} it cannot rewrite", e, d, found,
                    "print(rule.fill(match).diagram)")
            continue
        cover.rewritten[rule.name] += 1
        try:     # replay compares each step's netlist with the recorded one (node ids, boxes, wires)
            Trace((Step.of(rule, m, net, after),), book.rules).replay(d)
            cover.replayed[rule.name] += 1
        except Exception as e:
            _report(cover, book, rule, f"made a step at {m.describe()} that does not replay", e, d, found,
                    "step = Step.of(rule, match, to_netlist(before), rule.fill(match))",
                    "print(Trace((step,), book.rules).replay(before))")
            continue
        if finite is None:
            finite = bool(equivalent(d, d, trials=1, seed=seed, evaluations=evaluations))
        held.append(after.diagram)
        try:
            verdict = equivalent(d, after.diagram, trials=1, seed=seed, evaluations=evaluations) if finite else True
            why = "" if verdict else verdict.message
        except Exception as e:     # the rewrite does not even run
            verdict, why = False, f"{type(e).__name__}: {e}"
        if verdict:
            cover.kept[rule.name] += bool(finite)
        else:
            _report(cover, book, rule, f"changed the function at {m.describe()}", why, d, found,
                    f"print(nc.equivalent(before, rule.fill(match).diagram, trials=1, seed={seed}))")
    return len(offered)


def _walk(rule, book, d, cover, seed: list, steps: int):
    """A walk of up to ``steps`` random offered matches of ``rule`` made by the driver (picks drawn from
    ``seed``); its trace, and its JSON, replay to the walk's end."""
    rng = np.random.default_rng(seed)

    def pick(net, options):
        return options[int(rng.integers(len(options)))] if options else None
    try:
        r = rewrite(d, [rule], pick, max_steps=steps)
    except Exception as e:
        _report(cover, book, rule, f"raised in a walk of up to {steps} steps", e, d,
                f"rng = np.random.default_rng({seed!r})",
                f"nc.rewrite(before, [rule], lambda net, o: o[int(rng.integers(len(o)))] if o else None, "
                f"max_steps={steps})")
        return
    if not r.trace.steps:
        return
    try:     # in memory, each step's netlist is compared; from JSON, the end with the stored diagram
        r.trace.replay(d)
        if not isomorphic(Trace.loads(r.trace.dumps(), rules=book.rules).replay(d), r.diagram):
            raise NapkinError("the walk replayed from its JSON does not end at the walk's end")
    except Exception as e:
        _report(cover, book, rule, f"made a walk of {len(r.trace)} steps that does not replay", e, d,
                f"print(Trace.loads({r.trace.dumps()!r}, rules=book.rules).replay(before))")
        return
    cover.walked[rule.name] += len(r.trace)


def offers(book, *, instances: int = 2, seed: int = 0, per_form: int = 2, walk: int = 3, only=None) -> Coverage:
    """Exercise every rule of ``book`` (or those named in ``only``) on ``instances`` left-hand sides its
    obligation draws, as drawn and woven at every position (up to ``per_form`` of the matches offered in each,
    drawn at random), and on a walk of up to ``walk`` steps from one of them; see the module docstring."""
    names = tuple(r.name for r in book.rules if only is None or r.name in only)
    cover = Coverage(rules=names)
    for j, rule in enumerate(book.rules):
        if rule.name not in names:
            continue
        if rule.obligation is None:
            cover.offences.append(Offence(rule.name, "has no obligation", "nothing draws its left-hand sides",
                                          "(give the rule an Obligation whose instances are its left-hand sides)"))
            continue
        offering = []
        for t in range(instances):
            rng = np.random.default_rng([seed, j, t])
            lhs = rule.obligation.instances(rng)
            forms = [(lhs, None)] + [(w, (ins, out)) for w, ins, out in woven(lhs, _fresh_axis(lhs), rng)]
            for d, where in forms:
                made = [_one(r, book, d, cover, rng, seed + t, where, per_form) for r in _variants(rule, book, d, rng)]
                if sum(made):
                    offering.append(d)
        if offering:      # one walk per rule, from a diagram where it offered a match
            _walk(rule, book, offering[int(rng.integers(len(offering)))], cover, [seed, j, instances], walk)
    return cover


__all__ = ["offers", "woven", "Coverage", "Offence", "AXIS_ROLES"]
