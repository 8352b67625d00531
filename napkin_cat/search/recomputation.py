"""Recomputed forms of a function (issue 22, item 4): what the rule book's ``recompute`` role makes of the
prepared forms, for the kernel splits to weigh (:mod:`.space`).

* **one or two recomputations** (breadth first): a consumer's own copy of a value read in several places;
* **recomputed throughout**: the values read several times written through their statistics (the role's other
  rules: SoftMax through its log-sum-exp), then every value no input carries recomputed for each consumer that
  computes with it; its kernel splits keep an operation read by one operation in its reader's kernel (a
  recomputed copy is made where it is used), which keeps their down-sets few.

Only a value that no input of the function carries all the axes of is recomputed (an outer product of the
inputs, q×x from q×d and x×d: what recomputation saves is writing it and reading it back), and only for a
consumer that computes with it.  A recomputed form wins a tie in H only with fewer FLOPs (``select``).

>>> import napkin_cat as nc
>>> from napkin_cat.search.forms import prepared_forms
>>> from napkin_cat.rewriting.registry import rulebook
>>> full = [f for f in prepared_forms(nc.grad(nc.library.attention()), rulebook()) if f.units]
>>> [(f.prepared[0], f.prepared.count("recompute")) for f in full]
[('softmax_to_logsumexp', 5)]
"""
from __future__ import annotations

from napkin_cat.cost.iocost import cost as cost_of
from napkin_cat.rewriting.isomorphism import isomorphic
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.rewriting.trace import Step
from napkin_cat.syntax.adapter import Diagram


def _computes(m) -> bool:
    """The served consumer and another one compute with the value (a reader of its shape alone, such as an
    accumulator's initial state, needs no copy of its own)."""
    def arithmetic(end):
        node = m.net.nodes[end[0]]
        return node.kind == "box" and any(cost_of(Diagram.id(node.box.dom).then(node.box)).flops.values())
    ends = m.net.consumers(m.nodes["k"])
    readers = [j for j, end in enumerate(ends) if end[0] not in ("in", "out") and arithmetic(end)]
    return m.params["consumer"] in readers and len(readers) >= 2


def _apply(form, rule, m, net):
    after = rule.fill(m)
    step = Step.of(rule, m, net, after)
    g = type(form)(after.diagram, form.steps + (step,), form.prepared + (rule.name,), form.share,
                   fold=form.fold, join=form.join, once=form.once)
    g.recomputed = form.recomputed + len(g.graph) - len(form.graph)
    return g


def _read_twice(m) -> bool:
    """A value the match makes is read by several operations (a statistic rule serves a recomputation only
    there: a value read once is made where it is read anyway)."""
    for w in m.output_wires:
        dst = m.net.wires[w].dst[0]
        if dst not in ("in", "out") and m.net.nodes[dst].kind == "copy":
            if sum(1 for e in m.net.consumers(dst) if e[0] not in ("in", "out")) >= 2:
                return True
    return False


def _from_inputs(net, end) -> bool:
    """The wire end ``end`` (a producer endpoint) is a function input, possibly through copies."""
    while end[0] not in ("in", "out") and net.nodes[end[0]].kind == "copy":
        end = net.producers(end[0])[0]
    return end[0] == "in"


def made_from_inputs(diagram) -> list:
    """The axis sets that an operation on the function's inputs makes and none of its operands carries (an outer
    product of the inputs: q×x from Q: q×d and K: x×d).  An input of such a shape (a bias over the scores) does
    not make the value cheap to move: recomputing it reads that input, storing it writes it too.

    >>> import napkin_cat as nc
    >>> [sorted(s) for s in made_from_inputs(nc.library.attention())]
    [['q', 'x']]
    """
    net, out = to_netlist(diagram), []
    for nid, node in net.nodes.items():
        if node.kind != "box":
            continue
        ends = net.producers(nid)
        axes = [set(net.wires[w].array.names) for w in net.ins[nid]]
        for w in net.outs[nid]:
            made = set(net.wires[w].array.names)
            if ends and all(_from_inputs(net, e) for e in ends) and not any(made <= a for a in axes) \
                    and made not in out:
                out.append(made)
    return out


def _recomputed_throughout(form, rule, statistics, carried, cap: int = 24):
    """``form`` with the values read several times written through their statistics (the ``recompute`` role's
    other rules, to a fixpoint) and every value no input carries recomputed for each consumer that computes with
    it (up to ``cap`` steps); its kernel splits keep each operation read by one operation in its reader's kernel (a
    recomputed copy is made where it is used).  None if nothing is recomputed."""
    g = form
    for r in statistics:
        for _ in range(cap):
            net = to_netlist(g.diagram)
            ms = [m for m in r.matches(net) if _read_twice(m)]
            if not ms:
                break
            h = _apply(g, r, ms[0], net)
            h.recomputed = g.recomputed
            g = h
    done = 0
    while done < cap:
        net = to_netlist(g.diagram)
        ms = [m for m in rule.matches(net) if not any(set(m.node("f").cod[0].names) <= c for c in carried)
              and _computes(m)]
        if not ms:
            break
        g = _apply(g, rule, ms[0], net)
        done += 1
    if not done:
        return None
    g.units = True
    return g


def _read(form, read: dict):
    """``to_netlist(form.diagram)``, read once per form (``read``: the call's, by the form's id; its forms live
    through the call)."""
    found = read.get(id(form))
    if found is None:
        found = read[id(form)] = to_netlist(form.diagram)
    return found


def recomputed_forms(forms, book, depth: int = 2, limit: int = 6) -> list:
    """What the rule playing ``recompute`` makes of the prepared forms: a consumer's own copy of a value read in
    several places (breadth first, up to ``depth`` recomputations of a form and ``limit`` forms in all,
    isomorphic ones once), so that a kernel split may recompute it in the consumer's kernel instead of writing
    it to level 0.  Such a form wins a tie in H only with fewer FLOPs (:func:`select`).

    Only a value no input of the function carries all the axes of is recomputed (an outer product of the
    inputs, q×x from q×d and x×d: writing it and reading it back is what recomputation saves; a value of an
    input's shape costs no more to move than its input does).  This keeps the forms few on large diagrams."""
    if "recompute" not in book.roles:
        return []
    rules = book.role("recompute")
    rules = (rules,) if not isinstance(rules, tuple) else rules
    rule, statistics, out = rules[-1], rules[:-1], []
    carried = [set(a.names) for a in forms[0].diagram.dom.inside]
    made = made_from_inputs(forms[0].diagram)
    full = _recomputed_throughout(forms[0], rule, statistics, [c for c in carried if c not in made])
    if full is not None:
        out.append(full)
    queue = [(f, 0) for f in forms]
    read = {}   # id(form) -> the netlist read off its diagram (as isomorphic reads it), once per form
    while queue and len(out) < limit:
        f, k = queue.pop(0)
        if k >= depth:
            continue
        net = _read(f, read)
        for m in rule.matches(net):
            if any(set(m.node("f").cod[0].names) <= c for c in carried) or not _computes(m):
                continue
            after = rule.fill(m)
            new = to_netlist(after.diagram)    # (isomorphic(d, e) reads to_netlist(d) and to_netlist(e))
            if any(isomorphic(new, _read(g, read)) for g in (*forms, *out)):
                continue
            step = Step.of(rule, m, net, after)
            g = type(f)(new, f.steps + (step,), f.prepared + (rule.name,), f.share, fold=f.fold, join=f.join,
                        once=f.once)   # (made from the netlist read off ``after.diagram``: its diagram is that one)
            read[id(g)] = new
            g.recomputed = f.recomputed + len(g.graph) - len(f.graph)
            out.append(g)
            queue.append((g, k + 1))
            if len(out) >= limit:
                break
    return out


__all__ = ["recomputed_forms"]
