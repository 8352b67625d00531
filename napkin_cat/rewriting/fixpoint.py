"""The fixpoint of a rule set, incremental: a scan is repeated only where what it read has changed.

The fixpoint strategy (:func:`~napkin_cat.rewriting.driver.rewrite`) applies, until none applies, the first legal
match of the first rule that has one.  A full rescan (:func:`rescan_fixpoint`, the specification) scans every rule
before the one that applies again after each step, though a step changes a few nodes of a function of thousands.

:func:`fixpoint` makes the same steps at the same matches.  Each scan runs on a *watched* view of the netlist
(:class:`Watch`): its tables (nodes, wires, ports, order keys, kinds, inputs and outputs) record the keys a scan
reads, and a whole table read (iterated, its length taken) is recorded as such.  What a scan found is remembered
with what it read: a node test's verdict on one node, and that a rule has no legal match.  A step's change is the
set of keys whose entries differ between the netlist before and after it (the splice keeps every other entry as it
was); each remembered result that read a changed key, or read a changed table whole, is forgotten, and so is each
rule's verdict that used a forgotten node test.  A result is a function of what it read (rules, node tests and side
conditions are functions of the netlist), so a remembered one is what a rescan would find::

    [(s.rule, s.key, s.params) for s in fixpoint(net, rules)[1]] == [... for s in rescan_fixpoint(net, rules)[1]]

>>> import napkin_cat as nc
>>> from napkin_cat.rewriting.match import Pattern, kind
>>> from napkin_cat.rewriting.netlist import to_netlist
>>> drop = nc.Rule("drop_identity", Pattern({"f": kind("id")}), lambda m: nc.Id(m.dom), doc="id(x) → x")
>>> d = nc.elementwise("id", "q") >> nc.elementwise("exp", "q") >> nc.elementwise("id", "q")
>>> net, steps = fixpoint(to_netlist(d), [drop], 10)
>>> [n.name for n in net.nodes.values()], [s.rule for s in steps]
(['exp'], ['drop_identity', 'drop_identity'])
"""
from __future__ import annotations

from dataclasses import replace

from napkin_cat.errors import RewriteError
from napkin_cat.rewriting.netlist import Netlist
from napkin_cat.rewriting.trace import Step

#: the key recorded when a scan reads a table whole
WHOLE = object()
_MISSING = object()
#: the tables a scan reads, by the attribute of :class:`~napkin_cat.rewriting.netlist.Netlist` that holds them
TABLES = ("nodes", "wires", "ins", "outs", "position", "by_kind")


class _Watched(dict):
    """A table of a watched netlist: each key read is added to ``seen`` (``WHOLE`` for a whole read)."""

    __slots__ = ("seen",)

    def __init__(self, data, seen):
        super().__init__(data)
        self.seen = seen

    def __getitem__(self, k):
        self.seen.add(k)
        return dict.__getitem__(self, k)

    def get(self, k, default=None):
        self.seen.add(k)
        return dict.get(self, k, default)

    def __contains__(self, k):
        self.seen.add(k)
        return dict.__contains__(self, k)

    def _whole(self):
        self.seen.add(WHOLE)

    def __iter__(self):
        self._whole()
        return dict.__iter__(self)

    def __len__(self):
        self._whole()
        return dict.__len__(self)

    def keys(self):
        self._whole()
        return dict.keys(self)

    def values(self):
        self._whole()
        return dict.values(self)

    def items(self):
        self._whole()
        return dict.items(self)


class _WatchedSeq(tuple):
    """The inputs or outputs of a watched netlist: any read is a whole read."""

    def __new__(cls, data, seen):
        out = super().__new__(cls, data)
        out.seen = seen
        return out

    def __getitem__(self, k):
        self.seen.add(WHOLE)
        return tuple.__getitem__(self, k)

    def __iter__(self):
        self.seen.add(WHOLE)
        return tuple.__iter__(self)

    def __len__(self):
        self.seen.add(WHOLE)
        return tuple.__len__(self)

    def __contains__(self, k):
        self.seen.add(WHOLE)
        return tuple.__contains__(self, k)

    def index(self, *a):
        self.seen.add(WHOLE)
        return tuple.index(self, *a)


class _View(Netlist):
    """A netlist whose tables record what is read (see :class:`Watch`); its layout and order are whole reads."""

    @property
    def diagram(self):
        for seen in self.watch.seen.values():
            seen.add(WHOLE)
        return self.watch.net.diagram

    @property
    def order(self):
        self.watch.seen["nodes"].add(WHOLE)
        return self.watch.net.order


class Watch:
    """What the scans of one fixpoint found, with what each read (see the module docstring)."""

    def __init__(self):
        self.memo: dict = {}          # key -> remembered result
        self.readers: dict = {}       # (table, key) -> the memo keys whose result read it
        self.users: dict = {}         # a node test's memo key -> the rules' memo keys that used it
        self.net = None
        self.view = None
        self.seen: dict = {}
        self.used: set | None = None  # the node tests the current rule scan used

    # ------------------------------------------------------------------ the view
    def look(self, net: Netlist) -> Netlist:
        """The watched view of ``net`` (its tables copied once per netlist)."""
        if net is self.net:
            return self.view
        self.net = net
        self.seen = {t: set() for t in (*TABLES, "inputs", "outputs")}
        view = _View(net.dom, net.cod, _Watched(net.nodes, self.seen["nodes"]),
                     _Watched(net.wires, self.seen["wires"]), _Watched(net.ins, self.seen["ins"]),
                     _Watched(net.outs, self.seen["outs"]), _WatchedSeq(net.inputs, self.seen["inputs"]),
                     _WatchedSeq(net.outputs, self.seen["outputs"]), None)
        view.__dict__["position"] = _Watched(net.position, self.seen["position"])
        view.__dict__["by_kind"] = _Watched(net.by_kind, self.seen["by_kind"])
        view.__dict__["watch"] = self
        view.__dict__["test_memo"] = self
        self.view = view
        return view

    def _fresh_reads(self) -> dict:
        old = self.seen
        self.seen = {t: set() for t in old}
        self._point(self.seen)
        return old

    def _point(self, seen: dict):
        v = self.view
        for t in TABLES:
            table = v.__dict__[t] if t in ("position", "by_kind") else getattr(v, t)
            table.seen = seen[t]
        v.inputs.seen, v.outputs.seen = seen["inputs"], seen["outputs"]

    def _remember(self, key, result, seen: dict):
        self.memo[key] = result
        for table, keys in seen.items():
            for k in keys:
                self.readers.setdefault((table, k), []).append(key)

    # ------------------------------------------------------------------ node tests (match._candidates asks)
    def tested(self, test, pool, net) -> set:
        """The nodes of ``pool`` that ``test`` accepts in the watched ``net``, remembered node by node."""
        memo, out, nodes = self.memo, set(), dict.__getitem__
        used = self.used
        for nid in pool:
            key = (id(test), nid)
            got = memo.get(key, _MISSING)
            if got is _MISSING:
                outer = self._fresh_reads()
                try:
                    self.seen["nodes"].add(nid)
                    got = bool(test(net, nodes(net.nodes, nid)))
                    self._remember(key, got, self.seen)
                finally:
                    self._restore(outer)
            if used is not None:
                used.add(key)
            if got:
                out.add(nid)
        return out

    def _restore(self, outer: dict):
        self.seen = outer
        self._point(outer)

    # ------------------------------------------------------------------ rules
    def first(self, k, rule, net):
        """The first legal match of ``rule`` (the ``k``-th) in ``net`` (a match of ``net``), or None; a rule
        remembered without one is not scanned again until what it read changes."""
        key = ("rule", k)
        if key in self.memo:
            return None
        view = self.look(net)
        outer = self._fresh_reads()
        self.used = set()
        try:
            m = next((c for c in rule.candidates(view) if rule.failure(c) is None), None)
            if m is None:
                self._remember(key, True, self.seen)
                for t in self.used:
                    self.users.setdefault(t, []).append(key)
        finally:
            self.used = None
            self._restore(outer)
        return None if m is None else replace(m, net=net)

    # ------------------------------------------------------------------ a step's change
    def step(self, before: Netlist, after: Netlist):
        """Forget what read an entry that differs between ``before`` and ``after``."""
        for t in TABLES:
            a, b = getattr(before, t), getattr(after, t)
            if t == "by_kind":       # made again for each netlist: its lists compared by value
                changed = {k for k, v in a.items() if b.get(k) != v}
            else:                   # a splice keeps the entries it does not change: compared by identity
                changed = {k for k, v in a.items() if b.get(k, _MISSING) is not v}
            changed.update(k for k in b if k not in a)
            if changed:
                self._forget((t, WHOLE))
            for k in changed:
                self._forget((t, k))
        for t in ("inputs", "outputs"):
            if getattr(before, t) != getattr(after, t):
                self._forget((t, WHOLE))

    def _forget(self, read):
        for key in self.readers.pop(read, ()):
            if self.memo.pop(key, _MISSING) is not _MISSING:
                for user in self.users.pop(key, ()):
                    self.memo.pop(user, None)


def fixpoint(net: Netlist, rules, max_steps: int) -> tuple:
    """``(netlist, steps)``: the oriented ``rules`` applied to ``net`` (the first legal match of the first rule that
    has one) until none applies, each scan repeated only where what it read changed (module docstring);
    RewriteError after ``max_steps``."""
    active = [r for r in rules if r.oriented]
    watch, steps = Watch(), []
    while True:
        for k, rule in enumerate(active):
            m = watch.first(k, rule, net)
            if m is not None:
                break
        else:
            return net, steps
        if len(steps) >= max_steps:
            raise RewriteError(f"no fixpoint after {max_steps} steps (rule {rule.name!r} still "
                               f"applies at {m.describe()}); the ruleset may not terminate")
        after = rule.fill(m)
        steps.append(Step.of(rule, m, net, after))
        watch.step(net, after)
        net = after


def rescan_fixpoint(net: Netlist, rules, max_steps: int) -> tuple:
    """:func:`fixpoint` by a rescan of every rule after each step: its specification."""
    active = [r for r in rules if r.oriented]
    steps = []
    while True:
        for rule in active:     # its first legal match (the side conditions checked up to it, not past)
            m = next((c for c in rule.candidates(net) if rule.failure(c) is None), None)
            if m is not None:
                break
        else:
            return net, steps
        if len(steps) >= max_steps:
            raise RewriteError(f"no fixpoint after {max_steps} steps (rule {rule.name!r} still "
                               f"applies at {m.describe()}); the ruleset may not terminate")
        after = rule.fill(m)
        steps.append(Step.of(rule, m, net, after))
        net = after
