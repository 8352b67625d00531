"""Structural rules: the laws of a markov category (paper §2).

=========================  =====================================================
rule                       lhs → rhs
=========================  =====================================================
``copy_discard``           copyₙ ; (… ⊗ discard ⊗ …) → copyₙ₋₁ (copy₂ ; discard → id)
``delete_pure_box``        f ; discard^⊗ → discard^⊗ on f's inputs
``remove_identity``        id-box (dom = cod) → the identity wire
``common_value``           f(x) ⊗ f(x) → copy ∘ f(x)   (one value computed once)
=========================  =====================================================

Weave functoriality, ``weave_h(f ; g) = weave_h(f) ; weave_h(g)``, is not a rule: the
constructor ``nc.weave`` builds both sides equal (tests/syntax/test_laws.py checks it, as
diagrams and as functions), so a rule for it would rewrite nothing.

>>> import napkin_cat as nc
>>> d = nc.Diagram.copy(nc.types("q"), 2) >> nc.Id("q") @ nc.Diagram.copy(nc.types("q"), 0)
>>> copy_discard.apply(d) == nc.Id("q")
True
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting.closed import readers, source
from napkin_cat.rewriting.match import Pattern, feeds_only, kind, structural, where
from napkin_cat.rewriting.netlist import INPUT, OUTPUT
from napkin_cat.syntax.primitive import kind_of
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet, rewrite, to_netlist

AXES = ("a", "b", "c", "d")
UNARY = ("tanh", "neg", "relu", "sigmoid", "square", "id")


def random_type(rng, names=AXES, level: int = 0):
    """A random array type over 1-3 of ``names`` (symbolic sizes)."""
    k = int(rng.integers(1, min(3, len(names)) + 1))
    picked = [str(n) for n in rng.permutation(list(names))[:k]]
    return nc.types(" ".join(picked), level=level).inside[0]


def _sig(arr) -> str:
    return " ".join(arr.names) or "()"   # () is an array without axes


def _unary(rng, arr):
    name = UNARY[int(rng.integers(len(UNARY)))]
    return nc.elementwise(name, _sig(arr), level=arr.level, dtype=arr.dtype,
                          sizes={a.name: a.size for a in arr.axes})


# ---------------------------------------------------------------------- copy law
def _copy_discard_rhs(m):
    return nc.Diagram.copy(m.dom, len(m.outputs)) if len(m.outputs) > 1 else nc.Id(m.dom)


def _copy_discard_instance(rng):
    arr = random_type(rng)
    t = nc.Ty(arr)
    n = int(rng.integers(2, 5))
    j = int(rng.integers(n))
    tails = [_unary(rng, arr) for _ in range(n)]
    tails[j] = nc.Diagram.copy(t, 0)
    layer = tails[0]
    for f in tails[1:]:
        layer = layer @ f
    return nc.Diagram.copy(t, n) >> layer


copy_discard = Rule(
    "copy_discard",
    Pattern({"c": structural("copy"), "k": structural("discard")}, [("c", None, "k", 0)]),
    _copy_discard_rhs,
    obligation=Obligation(_copy_discard_instance),
    doc="""copyₙ(x) with one copy discarded → copyₙ₋₁(x); copy₂ ; (id ⊗ discard) → id.

    The counit law of the copy comonoid (paper §2: copy and discard come free
    with tuples of arrays; a markov category).""")


# ---------------------------------------------------------------------- deletion
def _discards_of(net, nodes):
    (nid,) = nodes.values()
    return {f"discard{k}": end[0] for k, end in enumerate(net.consumers(nid))}


def _delete_rhs(m):
    return nc.Diagram.copy(m.dom, 0)


def _delete_instance(rng):
    arr = random_type(rng)
    x, y = nc.Ty(arr), nc.Ty(random_type(rng, names=AXES[2:] + ("e",)))
    b = nc.Builder(x @ y)
    X, Y = b.inputs
    keep = b(_unary(rng, arr), X)
    dead = b(nc.einsum(f"{_sig(arr)}, {_sig(y.inside[0])} -> {_sig(arr)}"), X, Y)
    if rng.integers(2):
        dead = b(_unary(rng, arr), dead)
    return b.build(keep)


delete_pure_box = Rule(
    "delete_pure_box",
    Pattern({"f": feeds_only(structural("discard"), "box whose outputs are all discarded")},
            absorb=_discards_of),
    _delete_rhs,
    conditions=(Condition("pure", lambda m: m.node("f").kind in ("box", "region"),
                          "only a box or region (a deterministic function) may be deleted"),),
    obligation=Obligation(_delete_instance),
    doc="""f ; (discard ⊗ … ⊗ discard) → discard ⊗ … ⊗ discard (on f's inputs).

    Deletion: every box is a deterministic (pure) function, so discarding all
    of its outputs is discarding its inputs (markov categories, paper §2).""")


# ---------------------------------------------------------------------- identity boxes
def _identity_instance(rng):
    arr = random_type(rng)
    f = _unary(rng, arr)
    ident = nc.elementwise("id", _sig(arr))
    return (ident >> f) if rng.integers(2) else (f >> ident)


remove_identity = Rule(
    "remove_identity",
    Pattern({"f": kind("id")}),
    lambda m: nc.Id(m.dom),
    conditions=(Condition("not_a_broadcast", lambda m: m.dom == m.cod,
                          "the 'id' box must map an array to itself (a broadcast 'id' adds an axis)"),),
    obligation=Obligation(_identity_instance),
    doc="""id-box(x) → x, when its input and output arrays agree.

    The elementwise identity is the identity wire (paper §2); a broadcast is
    an 'id' box weaved over an axis its input lacks and is not removed.""")


# ---------------------------------------------------------------------- one value computed once
#: the kinds a value is not merged across: a transfer moves a value between levels (two loads of one value are two
#: transfers the cost counts; ``shared_load`` is the rule that loads once, inside a kernel)
TRANSFERS = ("load", "save")


def computes(net, nid):
    """What box ``nid`` computes, as a key two boxes computing one value share: its label (name, kind, parameters,
    weaves, the arrays on its ports: axes, orders, number formats, levels) and the values it reads, port by port
    (each value's producer seen through copies); None for what is not merged (a copy, a region, a transfer).

    The ports are compared in order (``x − y`` and ``y − x`` are two values), but for a kind whose record says it
    commutes (:attr:`~napkin_cat.syntax.primitive.Kind.commutative`: ``add``, ``mul``) reading one array type at
    every port, where its values are compared as a set of reads (``x + y`` and ``y + x`` are one value; a broadcast
    ``x + b`` written ``b + x`` has another signature and is left).  Every box is deterministic (paper §2: a markov
    category's boxes; the library declares no kind that draws random numbers or acts on anything but its outputs),
    so two boxes with one key compute one value."""
    node = net.nodes[nid]
    if node.kind != "box" or node.spec.kind in TRANSFERS:
        return None
    reads = tuple(source(net, w) for w in net.ins[nid])
    if kind_of(node.spec.kind).commutative and len(set(node.dom)) == 1:
        reads = tuple(sorted(reads, key=str))
    return node.label, reads


def _later_twin(net, nid, key=computes):
    """The first box after ``nid`` (in the netlist's order) with its ``key``, or None: looked for among the readers
    of ``nid``'s first value (through copies), or among the boxes reading nothing where ``nid`` reads nothing."""
    mine = key(net, nid)
    if mine is None:
        return None
    if net.ins[nid]:
        node, port = source(net, net.ins[nid][0])
        wire = net.inputs[port] if node == INPUT else net.outs[node][port]
        near = {v for v, _ in readers(net, wire) if v != OUTPUT}
    else:
        near = {v for v in net.nodes if not net.ins[v]}
    pos = net.position
    later = sorted((v for v in near if pos[v] > pos[nid] and key(net, v) == mine), key=pos.get)
    return later[0] if later else None


def twins(key=computes) -> Pattern:
    """The pattern of two boxes with one ``key`` (:func:`computes`): ``f`` and its first later twin ``g``."""
    return Pattern({"f": where("a box computed again later", lambda net, n: _later_twin(net, n.id, key) is not None,
                               nodes=("box",))},
                   absorb=lambda net, nodes: {"g": _later_twin(net, nodes["f"], key)})


def _common_rhs(m):
    b, ins = m.wiring()
    ys = b(m.box("f"), *(ins[("f", p)] for p in range(len(m.node("f").dom))))
    ys = ys if isinstance(ys, tuple) else (ys,)
    return m.finish(b, {(v, j): ys[j] for v, j in m.outputs})    # g's inputs are discarded


def _operands(rng):
    arr = random_type(rng)
    return arr, _sig(arr)


def common_value_instance(rng):
    """One value computed twice from the same inputs (read through copies, the second after other work), the two
    read by different readers or as two outputs: a map of one or two operands (``x − y``: the ports in order), a
    scale, a reduction over random axes, a contraction, a SoftMax; a *decoy* at times, of the same kind and arrays
    but another parameter (another scale or β) or its operands the other way round (``y − x``)."""
    arr, sig = _operands(rng)
    names = list(arr.names)
    other = [str(n) for n in rng.permutation([n for n in ("e", "f") if n not in names])][:1]
    b = nc.Builder(nc.types(f"{sig}, {sig}, {' '.join(names[-1:] + other)}"))
    X, Y, W = b.inputs
    family = int(rng.integers(6))
    keep = [n for n in names if rng.random() < 0.5] or names[:1]
    if family == 0:
        box = _unary(rng, arr)
        make, decoy = (lambda: b(box, X)), None
    elif family == 1:
        box = nc.elementwise("sub", f"{sig}, {sig} -> {sig}")
        make, decoy = (lambda: b(box, X, Y)), (lambda: b(box, Y, X))
    elif family == 2:
        c = [0.5, 3, -2][int(rng.integers(3))]
        make = (lambda: b(nc.elementwise("scale", sig, const=c), X))
        decoy = (lambda: b(nc.elementwise("scale", sig, const=c + 1), X))
    elif family == 3:
        red = ["sum", "mean", "max"][int(rng.integers(3))]
        out = " ".join([str(n) for n in rng.permutation(keep)] if len(keep) < len(names) else keep[:-1]) or "()"
        make = (lambda: b(nc.reduce(red, f"{sig} -> {out}"), X))
        decoy = None
    elif family == 4:
        spec = f"{sig}, {' '.join(names[-1:] + other)} -> {' '.join(names[:-1] + other)}"
        make, decoy = (lambda: b(nc.einsum(spec), X, W)), None
    else:
        beta = [1, 0.5, 2][int(rng.integers(3))]
        make = (lambda: b(nc.softmax(sig, over=names[-1], beta=beta), X))
        decoy = (lambda: b(nc.softmax(sig, over=names[-1], beta=2 * beta + 1), X))
    first = make()
    between = b(nc.elementwise("exp", sig), X)
    second = make()
    outs = [first, second, between] if rng.random() < 0.5 else [first, b(_unary(rng, second.array), second)]
    if decoy is not None and rng.random() < 0.6:
        outs.append(decoy())
    return b.build(*outs)


def boxes(diagram) -> int:
    """The primitive boxes of a diagram (its netlist's box nodes)."""
    return sum(1 for n in to_netlist(diagram).nodes.values() if n.kind == "box")


def one_box_fewer(lhs, rhs, m):
    """The termination claim: with the copy law's removal of the discards it leaves on ``g``'s inputs
    (``copy_discard``), the rewrite removes exactly one box; no transfer moves on the function."""
    cleaned = rewrite(rhs, RuleSet((copy_discard,)), "fixpoint", max_steps=4 * len(m.node("g").dom) + 4).diagram
    assert boxes(cleaned) == boxes(lhs) - 1, f"{boxes(lhs)} boxes became {boxes(cleaned)}"
    before, after = nc.cost(lhs), nc.cost(cleaned)
    for lv in set(before.H) | set(after.H):
        assert sympy.expand(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed on the function"


common_value = Rule(
    "common_value",
    twins(),
    _common_rhs,
    obligation=Obligation(common_value_instance, cost=one_box_fewer, rtol=0, atol=0),
    doc="""f(x) ⊗ f(x) → copy ∘ f(x): two boxes computing one value are one box whose value is copied.

    Two boxes of one kind, parameters and signature (axes, orders, number formats, levels) reading the same values
    (through copies) at the same ports: a box is a deterministic function, and copy is natural for those (paper §2,
    a markov category: ``f ; copy = copy ; (f ⊗ f)``).  The second box's reads are left to discards, which the copy
    law removes.  Transfers are not merged (:data:`TRANSFERS`), nor regions; the operands of a kind whose record
    says it commutes are read in either order (:func:`computes`).  Equal exactly, in floating point too: the one box
    computes what each computed.""")


RULES = RuleSet((copy_discard, delete_pure_box, remove_identity, common_value))


# ---------------------------------------------------------------------- random diagrams (fuzzing)
_FUZZ_TYPES = ("q x", "x d", "q d", "q")


def random_diagram(rng, n_ops: int = 10, *, level: int = 1):
    """A random diagram of ``n_ops`` primitive applications on level-``level`` arrays.

    Built from elementwise maps, SoftMax, contractions (and SoftMax-contractions),
    reductions, divisions, Save/Load round trips and identity boxes; unused wires are discarded and
    reused ones copied (by the Builder), so every structural rule has prey.

    >>> import numpy as np
    >>> d = random_diagram(np.random.default_rng(0), 6)
    >>> len(d.dom) >= 2 and len(d.cod) >= 1
    True
    """
    t = {s: nc.types(s, level=level).inside[0] for s in _FUZZ_TYPES}
    dom = [t["q x"], t["x d"]] + [t[s] for s in rng.choice(_FUZZ_TYPES, int(rng.integers(0, 3)))]
    b = nc.Builder(nc.Ty(*dom))
    pool, saved = list(b.inputs), []

    def pick(sig):
        """A wire of that type: the newest one half of the time (so chains form), else any."""
        ws = [w for w in pool if w.array == t[sig]]
        if not ws:
            return None
        return ws[-1] if rng.random() < 0.5 else ws[int(rng.integers(len(ws)))]

    def op(name, sig, *args, **kw):
        return b(name if not isinstance(name, str) else nc.elementwise(name, sig, level=level, **kw), *args)

    for _ in range(n_ops):
        choice = int(rng.integers(9))
        sig = _FUZZ_TYPES[int(rng.integers(len(_FUZZ_TYPES)))]
        w = pick(sig)
        if w is None:
            continue
        if choice == 0:
            w = op(UNARY[int(rng.integers(len(UNARY)))], sig, w)
        elif choice == 1:
            w = op(["add", "mul"][int(rng.integers(2))], sig, w, pick(sig))
        elif choice == 2 and pick("q x"):
            w = b(nc.softmax("q x", over="x", level=level), pick("q x"))
        elif choice == 3 and pick("q x") and pick("x d"):
            w = b(nc.einsum("q x, x d -> q d", level=level), pick("q x"), pick("x d"))
        elif choice == 4 and pick("q x"):
            w = b(nc.reduce(["sum", "max"][int(rng.integers(2))], "q x -> q", level=level), pick("q x"))
        elif choice == 5 and pick("q x") and pick("q"):
            z = op("sigmoid", "q", pick("q"))
            w = b(nc.elementwise("div", "q x, q -> q x", level=level), pick("q x"), z)
        elif choice == 6 and level > 0:
            up = b(nc.transfer("save", w.array), w)
            if rng.integers(3):
                w = b(nc.transfer("load", up.array), up)
            else:
                saved.append(up)
                continue
        elif choice == 7:
            w = op("id", sig, w)
        elif pick("q x") and pick("x d"):  # SoftMax-contraction, the heart of attention
            p = b(nc.softmax("q x", over="x", level=level), pick("q x"))
            w = b(nc.einsum("q x, x d -> q d", level=level), p, pick("x d"))
        else:
            continue
        pool.append(w)
    k = int(rng.integers(1, 3))
    outs = list(dict.fromkeys([pool[-1]] + [pool[int(i)] for i in rng.integers(len(pool), size=k)]))
    return b.build(*(outs + saved[:2]))
