"""Recomputation: a consumer recomputes a value from its inputs (or small saved statistics) instead of reading
the one value every consumer shares (issue 22, item 4).

=============  ==============================================================================================
rule           lhs → rhs
=============  ==============================================================================================
``recompute``  A ; f ; copy(→ c₁, …, cₙ)  →  A ; (f ; copy(→ others))  ⊗  (R ; f′ → c_j)   for one consumer c_j
=============  ==============================================================================================

``A`` is everything ``f`` depends on (its ancestors, up to the function's inputs); ``R`` the part of it
recomputed for ``c_j``: the boxes reached backwards from ``f`` through values that are not *statistics*.  A
statistic is a value whose axes are a strict subset of ``f``'s output's (a log-sum-exp per row beside a row ×
column matrix) or an input of the function: ``R`` reads those once computed, the rest it computes again.  Once
the copies are separate, a kernel split may put ``R ; f′`` in ``c_j``'s kernel: the large value no longer goes
to a slower level and back; the kernel reads what ``R`` reads (the inputs, the statistics) instead.

The law is the copy law of a markov category (paper §2): every box is a deterministic function, so
``f ; copy = copy ; (f ⊗ f)``, applied to each box of ``R`` (the copies of its inputs are the copies a
Builder makes).  Cost claim: on the function (no kernels yet) no transfer changes, and the FLOPs grow by
exactly those of ``R ; f′``, pipeline by pipeline (the search weighs them against the transfers saved: ties
in ``H`` go to fewer FLOPs; with a hardware model, by predicted time).

>>> import napkin_cat as nc
>>> b = nc.Builder(nc.types("q d, x d, x e, q e"))
>>> Q, K, V, W = b.inputs
>>> T = b(nc.einsum("q d, x d -> q x"), Q, K)
>>> f = b.build(b(nc.einsum("q x, x e -> q e"), T, V), b(nc.einsum("q x, q e -> x e"), T, W))
>>> [m.params["consumer"] for m in recompute.matches(f)]
[0, 1]
>>> g = recompute.using(consumer=1).apply(f)
>>> [b.name for b in g.boxes if b.name == "·"].__len__(), bool(nc.equivalent(f, g))
(4, True)
>>> nc.cost(g).flops["tensor"] - nc.cost(f).flops["tensor"]
2*d*q*x
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import INPUT, OUTPUT, Pattern, where
from napkin_cat.syntax.adapter import Diagram


def _copied_box(net, n) -> bool:
    """A primitive box with one output, read by a copy node (several readers)."""
    if n.kind != "box" or len(n.cod) != 1:
        return False
    (end,) = net.consumers(n.id)
    return end[0] not in (INPUT, OUTPUT) and net.nodes[end[0]].kind == "copy"


COPIED_BOX = where("box whose one output is read in several places", _copied_box, nodes=("box",))


def ancestors(net, nid) -> list:
    """The nodes ``nid`` depends on, in the netlist's (topological) order."""
    seen, todo = set(), list(net.predecessors[nid])
    while todo:
        k = todo.pop()
        if k not in seen:
            seen.add(k)
            todo += net.predecessors[k]
    return [k for k in net.nodes if k in seen]


def _absorb(net, nodes):
    f = nodes["f"]
    (end,) = net.consumers(f)
    found = {"k": end[0]}
    for i, k in enumerate(ancestors(net, f)):
        if net.nodes[k].kind not in ("box", "copy"):
            return None          # a region or a discard upstream: not a function of plain boxes
        found[f"a{i}"] = k
    return found


def _readers(m) -> list:
    """The copy node's output ports that a box reads (the consumers a recomputed copy can serve)."""
    return [j for j, end in enumerate(m.net.consumers(m.nodes["k"])) if end[0] not in (INPUT, OUTPUT)]


def _choices(m):
    return [{"consumer": j} for j in _readers(m)]


def _statistic(arr, big) -> bool:
    return set(arr.names) < set(big.names)


def recomputed(m) -> list:
    """The node ids of ``R ; f``: ``f`` and the boxes reached from it backwards through values that are not
    statistics (module docstring), in topological order."""
    net, f = m.net, m.nodes["f"]
    big = m.node("f").cod[0]
    keep, todo = {f}, [f]
    while todo:
        k = todo.pop()
        for w in net.ins[k]:
            src = net.wires[w].src[0]
            while src not in (INPUT, OUTPUT) and net.nodes[src].kind == "copy":
                src = net.wires[net.ins[src][0]].src[0]
            if src in (INPUT, OUTPUT) or src in keep or _statistic(net.wires[w].array, big):
                continue
            keep.add(src)
            todo.append(src)
    return [k for k in net.nodes if k in keep]


def _source(net, w):
    """The wire's value: through copy nodes to the box port or input that makes it."""
    src = net.wires[w].src
    while src[0] not in (INPUT, OUTPUT) and net.nodes[src[0]].kind == "copy":
        w = net.ins[src[0]][0]
        src = net.wires[w].src
    return src


def _rhs(m):
    net = m.net
    b, ins = m.wiring()
    value = {}                                   # (node id, port) of a box → builder wire

    def first(w):
        """The builder wire of the hole's value on netlist wire ``w`` (a hole input, through copies, or a box's)."""
        src = _source(net, w)
        return ins[_entry(m, w)] if src[0] == INPUT else value[src]

    inside = set(m.nodes.values())
    for nid in (k for k in net.nodes if k in inside and net.nodes[k].kind == "box"):
        box = net.nodes[nid].box
        got = b(Diagram.id(box.dom).then(box), *(first(w) for w in net.ins[nid]))
        value.update({(nid, p): w for p, w in enumerate(got if isinstance(got, tuple) else (got,))})
    again = {}
    for nid in recomputed(m):                     # R ; f′: reads statistics and inputs from the first run
        box = net.nodes[nid].box
        args = [again[s] if (s := _source(net, w)) in again else first(w) for w in net.ins[nid]]
        got = b(Diagram.id(box.dom).then(box), *args)
        again.update({(nid, p): w for p, w in enumerate(got if isinstance(got, tuple) else (got,))})
    f, j = m.nodes["f"], m.params["consumer"]
    outs = {}
    for (var, port), w in zip(m.outputs, m.output_wires):
        outs[(var, port)] = again[(f, 0)] if m.nodes[var] == m.nodes["k"] and port == j else first(w)
    return m.finish(b, outs)


def _entry(m, w):
    """The hole's input port that wire ``w``'s value enters by (through copies inside the hole)."""
    for var_port, iw in zip(m.inputs, m.input_wires):
        if iw == w:
            return var_port
    net = m.net
    src = net.wires[w].src
    return _entry(m, net.ins[src[0]][0])


def _serves_a_box(m):
    j = m.params.get("consumer")
    if j is None:
        return "give consumer= (an output port of the copy that a box reads)"
    if j not in _readers(m):
        return f"port {j} of the copy is not read by a box (readers: {_readers(m)})"
    return True


# ---------------------------------------------------------------------- the obligation
def _instance(rng):
    """A value read by two or three consumers: a product, a map of one, or a row-normalised map (with a
    per-row statistic, which the recomputation reads instead of recomputing)."""
    b = nc.Builder(nc.types("q d, x d, x e, q e"))
    Q, K, V, W = b.inputs
    T = b(nc.einsum("q d, x d -> q x"), Q, K)
    kind = int(rng.integers(3))
    if kind >= 1:
        T = b(nc.elementwise(str(rng.choice(["exp", "tanh", "relu"])), "q x"), T)
    if kind == 2:
        z = b(nc.reduce("sum", "q x -> q"), T)
        T = b(nc.elementwise("sub", "q x, q -> q x"), T, z)
    outs = [b(nc.einsum("q x, x e -> q e"), T, V), b(nc.einsum("q x, q e -> x e"), T, W)]
    if rng.integers(2):
        outs.append(b(nc.reduce("max", "q x -> q"), T))
    return b.build(*outs)


def _cost(lhs, rhs, m):
    before, after = nc.cost(lhs), nc.cost(rhs)
    net = m.net
    extra = {}
    for nid in recomputed(m):
        box = net.nodes[nid].box
        for pipe, v in nc.cost(Diagram.id(box.dom).then(box)).flops.items():
            extra[pipe] = extra.get(pipe, 0) + v
    for pipe in set(before.flops) | set(after.flops) | set(extra):
        got = sympy.expand(after.flops.get(pipe, 0) - before.flops.get(pipe, 0))
        assert sympy.expand(got - extra.get(pipe, 0)) == 0, f"{pipe} FLOPs grow by {got}, claimed {extra.get(pipe)}"
    for lv in set(before.H) | set(after.H):
        assert sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed on the function"


recompute = Rule(
    "recompute",
    Pattern({"f": COPIED_BOX}, absorb=_absorb),
    _rhs,
    conditions=(Condition("consumer", _serves_a_box, "the recomputed copy must serve a box reading the value"),),
    obligation=Obligation(_instance, cost=_cost),
    doc="""A ; f ; copy(→ c₁ … cₙ) → A ; f ; copy(→ others) ⊗ R ; f′ → c_j: one consumer gets its own copy of
    f's value, recomputed from the function's inputs and the statistics of A (values over fewer axes).

    The copy law of a markov category (paper §2): boxes are deterministic, f ; copy = copy ; (f ⊗ f), for
    each box of R.  Cost claim: the FLOPs grow by those of R ; f′; no transfer changes on the function.""",
    oriented=False,
    choices=_choices,
)

RULES = RuleSet((recompute,))

__all__ = ["recompute", "recomputed", "RULES"]
