"""Contraction order: merging, splitting and reassociating einsums (associativity of the sum-product).

Sum-product associativity (:mod:`rewrites.sum_product`): for operands ``S ⊔ R`` of one contraction,
``Σ_u Π_S X · Π_R X = Σ_{u₂} (Σ_{u₁} Π_S X) · Π_R X``, the intermediate keeping an axis of ``S`` iff
the output or ``R`` names it.  Read right to left it is merging, left to right splitting; splitting
another way after merging is reassociation (``(φ(Q) φ(K)ᵀ) V → φ(Q) (φ(K)ᵀ V)``, linear attention;
``(A B) C → A (B C)``, matrix chains).

===============================  =====================================================================
rule                             lhs → rhs
===============================  =====================================================================
``contraction_merge``            C₂(…, C₁(A…), …) → C(…, A…, …)      one multi-operand contraction
``contraction_split``            C(X…) → C₂(…, C₁(X_S), …)           the operands S go first (a choice)
``contraction_reassociation``    C₂(…, C₁(A…), …) → C₂′(…, C₁′(X_S), …)  split ∘ merge, S ≠ A…
``contracted_axis_renaming``     C(…, X[a], …) → C(…, rename_{a→a′}(X), …)   a summed (α-conversion)
===============================  =====================================================================

The choices (which operands go first; which summed axis to rename) are enumerated as matches of
their own (``Rule.choices``), so ``rule.matches(d)`` lists every legal order; ``rule.using(first="0 2")``
fixes one.  Nothing reads an axis name: which axes survive, are summed or are captured follows
from the arrays on the wires.  Only the merge is oriented (each step removes a contraction, so
it terminates): the fixpoint driver normalises a contraction network into multi-operand
contractions, from which a search splits in the cheapest order.

Cost: each rule's claim states the exact FLOPs of its rewritten side from the axis sizes, each
contraction costed as one loop nest (:func:`rewrites.sum_product.loop_nest_flops`, what the cost
functor counts): a merge is *not* free, ``(A B) C`` at 2abc + 2acd becomes 3abcd.

>>> import napkin_cat as nc
>>> b = nc.Builder(nc.types("q d, x d, x e"))
>>> Q, K, V = b.inputs
>>> phi = lambda w: b(nc.elementwise("relu", " ".join(w.array.names)), w)
>>> left = b.build(b(nc.einsum("q x, x e -> q e"), b(nc.einsum("q d, x d -> q x"), phi(Q), phi(K)), V))
>>> [m.params["first"] for m in contraction_reassociation.matches(left)]
['0 2', '1 2']
>>> right = contraction_reassociation.using(first="1 2").apply(left)
>>> [" ".join(" ".join(a.names) for a in bx.dom.inside) for bx in right.boxes if bx.name == "·"]
['x d x e', 'q d d e']
>>> bool(nc.equivalent(left, right)), nc.cost(right).flops["tensor"]
(True, 2*d*e*q + 2*d*e*x)
"""
from __future__ import annotations

from itertools import combinations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import OUTPUT, Condition, Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import Pattern, kind
from rewrites.contraction_instances import capture_instance, chain_instance, contraction_instance
from rewrites.sum_product import Term, loop_nest_flops, one_format, sum_product_associativity

CONTRACTION = kind("contract")


def _two_step(b, wires, term: Term, first: tuple):
    """Build ``C₂(…, C₁(wires[first]), …)`` in the builder ``b``; return the output wire."""
    inner, outer = term.split(first)
    t = b(inner.box(), *(wires[i] for i in first))
    rest = [w for j, w in enumerate(wires) if j not in first]
    k = sum(1 for j in range(first[0]) if j not in first)
    return b(outer.box(), *rest[:k], t, *rest[k:])


# ---------------------------------------------------------------------- choices
def parse_choice(text, n: int) -> tuple | str:
    """``"0 2"`` → ``(0, 2)``: the operand ports that go first; a string says why it is illegal."""
    try:
        ports = tuple(sorted({int(p) for p in str(text).replace(",", " ").split()}))
    except ValueError:
        return f"first={text!r} is not a list of operand ports such as '0 2'"
    if not ports or len(ports) >= n or ports[0] < 0 or ports[-1] >= n:
        return f"first={text!r} must name some but not all of the operand ports 0..{n - 1}"
    return ports


def _groupings(n: int, forced=None) -> list:
    if forced is not None or n < 2:  # a forced choice, or none to make (the conditions say why)
        return [{}]
    return [{"first": " ".join(map(str, s))} for k in range(1, n) for s in combinations(range(n), k)]


def _does_work(term: Term, first: tuple) -> bool | str:
    """The first contraction multiplies two operands or sums an axis (else it only relabels)."""
    inner, _ = term.split(first)
    if len(first) >= 2 or inner.summed:
        return True
    return f"operand {first[0]} alone sums no axis: the first contraction would only copy it"


# ---------------------------------------------------------------------- the chain C₁ → C₂
def _chain_nodes(net, nodes):
    """Absorb the contraction fed by ``c1`` (through a copy, kept so that its other uses are named)."""
    (c1,) = nodes.values()
    (end,) = net.consumers(c1)
    if end[0] == OUTPUT:
        return None
    node = net.nodes[end[0]]
    if node.kind == "box" and node.spec.kind == "contract":
        return {"c2": end[0]}
    if node.kind == "copy":
        for e in net.consumers(end[0]):
            if e[0] != OUTPUT and net.nodes[e[0]].kind == "box" and net.nodes[e[0]].spec.kind == "contract":
                return {"k": end[0], "c2": e[0]}
    return None


CHAIN = Pattern({"c1": CONTRACTION}, absorb=_chain_nodes)


def _chain(m) -> tuple:
    """``(C₁, C₂, port)``: the two terms and the port of ``C₂`` that ``C₁`` feeds."""
    c1, c2 = m.nodes["c1"], m.nodes["c2"]
    feed = m.nodes.get("k", c1)
    port = next(p for p, src in enumerate(m.net.producers(c2)) if src[0] == feed)
    return Term.of(m.node("c1")), Term.of(m.node("c2")), port


def _merged(m) -> Term:
    inner, outer, port = _chain(m)
    return outer.merge(port, inner)


def _sole_use(m):
    if "k" not in m.nodes:
        return True
    ends = m.net.consumers(m.nodes["k"])
    users = ["the diagram's output" if e[0] == OUTPUT else f"{m.net.nodes[e[0]].name!r} (#{e[0]}) port {e[1]}"
             for e in ends]
    return f"{m.node('c1').cod[0]} has {len(ends)} uses: {', '.join(users)}"


def _no_capture(m):
    inner, outer, port = _chain(m)
    for a in inner.summed:
        for j, arr in enumerate(outer.operands):
            if j != port and a in arr.names:
                return f"axis {a!r} is summed by the first contraction and named by operand {j} ({arr}) of the second"
        if a in outer.output.names:
            return f"axis {a!r} is summed by the first contraction and named by the output {outer.output}"
    return True


def _carried_both(m):
    inner, outer, _ = _chain(m)
    ok = inner.carried()
    return outer.carried() if ok is True else ok


SOLE_USE = Condition("sole_use", _sole_use,
                     "the intermediate must feed only the second contraction, once (else it is needed twice)")
NO_CAPTURE = Condition("no_capture", _no_capture,
                       "an axis summed by the first contraction must not be named by the second's other operands "
                       "or output (merged, it would be one index summed once); rename it first "
                       "(contracted_axis_renaming)")
CHAIN_CARRIED = Condition("weaves_carried", _carried_both,
                          "every output axis must be carried by an operand (a broadcast weave has no index to merge)")
CHAIN_FORMAT = Condition("same_format", lambda m: one_format(*_chain(m)[:2]),
                         "every array of both contractions must have one level and dtype")


# ---------------------------------------------------------------------- merging
def _merge_rhs(m):
    b, ins = m.wiring()
    _, outer, port = _chain(m)
    wires = [ins[("c2", j)] for j in range(port)] + [ins[p] for p in m.inputs if p[0] == "c1"] \
        + [ins[("c2", j)] for j in range(port + 1, len(outer.operands))]
    return m.finish(b, {("c2", 0): b(_merged(m).box(), *wires)})


def _merge_flops(m) -> tuple:
    inner, outer, _ = _chain(m)
    return (inner, outer), (_merged(m),)


# ---------------------------------------------------------------------- splitting
def _split_choice(m):
    term = Term.of(m.node("c"))
    return parse_choice(m.params.get("first"), len(term.operands))


def _split_legal(m):
    term, first = Term.of(m.node("c")), _split_choice(m)
    return first if isinstance(first, str) else _does_work(term, first)


def _split_rhs(m):
    b, ins = m.wiring()
    term = Term.of(m.node("c"))
    return m.finish(b, {("c", 0): _two_step(b, [ins[("c", j)] for j in range(len(term.operands))],
                                            term, _split_choice(m))})


def _split_flops(m) -> tuple:
    term = Term.of(m.node("c"))
    return (term,), term.split(_split_choice(m))


def _term_condition(name, test, message):
    return Condition(name, lambda m: test(Term.of(m.node("c"))), message)


# ---------------------------------------------------------------------- reassociation
def _reassociation_choice(m):
    return parse_choice(m.params.get("first"), len(_merged(m).operands))


def _reassociation_legal(m):
    inner, _, port = _chain(m)
    first = _reassociation_choice(m)
    if isinstance(first, str):
        return first
    if first == tuple(range(port, port + len(inner.operands))):
        return f"first={m.params['first']!r} is the order the diagram already has"
    return _does_work(_merged(m), first)


def _reassociation_rhs(m):
    b, ins = m.wiring()
    _, outer, port = _chain(m)
    wires = [ins[("c2", j)] for j in range(port)] + [ins[p] for p in m.inputs if p[0] == "c1"] \
        + [ins[("c2", j)] for j in range(port + 1, len(outer.operands))]
    return m.finish(b, {("c2", 0): _two_step(b, wires, _merged(m), _reassociation_choice(m))})


def _reassociation_flops(m) -> tuple:
    inner, outer, _ = _chain(m)
    return (inner, outer), _merged(m).split(_reassociation_choice(m))


# ---------------------------------------------------------------------- α-conversion
def _used_names(net) -> set:
    return {n for w in net.wires.values() for n in w.array.names}


def fresh_name(name: str, used: set) -> str:
    """``name`` primed until no array uses it: ``d`` → ``d'`` (→ ``d''`` …)."""
    while name in used:
        name += "'"
    return name


def _shadowed(m) -> list:
    """Summed axes of the contraction whose name is also used off its operand wires."""
    c = m.nodes["c"]
    own = set(m.net.ins[c])
    elsewhere = {n for wid, w in m.net.wires.items() if wid not in own for n in w.array.names}
    return [a for a in Term.of(m.node("c")).summed if a in elsewhere]


def _renamings(m) -> list:
    if "axis" in m.params:
        return [{} if "to" in m.params else {"to": fresh_name(m.params["axis"], _used_names(m.net))}]
    used = _used_names(m.net)
    return [{"axis": a, "to": fresh_name(a, used)} for a in _shadowed(m)]


def _renaming_legal(m):
    term, a, to = Term.of(m.node("c")), m.params.get("axis"), m.params.get("to")
    if a not in term.summed:
        return f"axis {a!r} is not summed by the contraction (summed: {list(term.summed)})"
    if not isinstance(to, str) or to in term.axes:
        return f"the new name {to!r} is already an axis of the contraction ({sorted(term.axes)})"
    try:
        nc.Axis(to)
    except nc.AxisError as e:
        return str(e)
    return True


def _renaming_rhs(m):
    b, ins = m.wiring()
    term, a, to = Term.of(m.node("c")), m.params["axis"], m.params["to"]
    wires = []
    for j, arr in enumerate(term.operands):
        w = ins[("c", j)]
        if a in arr.names:
            sig = " ".join(arr.names) + " -> " + " ".join(to if n == a else n for n in arr.names)
            w = b(nc.renaming(sig, level=arr.level, dtype=arr.dtype, sizes={x.name: x.size for x in arr.axes}), w)
        wires.append(w)
    return m.finish(b, {("c", 0): b(term.renamed(a, to).box(), *wires)})


def _renaming_flops(m) -> tuple:
    term = Term.of(m.node("c"))
    return (term,), (term.renamed(m.params["axis"], m.params["to"]),)


# ---------------------------------------------------------------------- cost claims
def flops_claim(terms_of):
    """The claim: the rewrite replaces the FLOPs of the removed contractions by those of the new
    ones (each costed by :func:`loop_nest_flops` from its axis sizes), per pipeline, and moves no data."""
    def claim(lhs, rhs, m):
        removed, added = terms_of(m)
        before, after = nc.cost(lhs), nc.cost(rhs)
        for p in set(before.flops) | set(after.flops) | {"tensor"}:
            want = before.flops.get(p, 0) - sum(loop_nest_flops(t).get(p, 0) for t in removed) \
                + sum(loop_nest_flops(t).get(p, 0) for t in added)
            got = after.flops.get(p, 0)
            assert sympy.simplify(got - want) == 0, f"{p} FLOPs: the cost functor gives {got}, the axis sizes {want}"
        for lv in set(before.H) | set(after.H):
            assert sympy.simplify(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed"
    return claim


# ---------------------------------------------------------------------- the rules
contraction_merge = Rule(
    "contraction_merge",
    CHAIN,
    _merge_rhs,
    conditions=(SOLE_USE, CHAIN_CARRIED, NO_CAPTURE, CHAIN_FORMAT),
    obligation=Obligation(chain_instance, cost=flops_claim(_merge_flops), symbolic=(sum_product_associativity,)),
    doc="""C₂(…, C₁(A₁ … Aₖ), …) → C(…, A₁ … Aₖ, …): a contraction feeding only another becomes one
    multi-operand contraction (einsum merging).

    Sum-product associativity Σ_{u₂}(Σ_{u₁} Π A) Π B = Σ_{u₁ ∪ u₂} Π A Π B when no axis summed in C₁
    is named in C₂ (paper §2.1: weaved contractions; FLOPs model §2.2).  Cost: the merged
    contraction is one loop nest, n·Π(all axes) FLOPs, not the sum of the two.  It plays ``normalise`` in the
    paper's rule book: a chain of pairs written by hand is one contraction before the search, whose order
    pairwise_contraction then chooses by cost; a contraction read in several places is not merged (``sole_use``:
    that recomputes it, contraction_into_readers' job, which the search prices).""")

contraction_split = Rule(
    "contraction_split",
    Pattern({"c": CONTRACTION}),
    _split_rhs,
    conditions=(
        _term_condition("two_operands", lambda t: len(t.operands) >= 2 or f"{len(t.operands)} operand",
                        "a contraction needs two operands or more to split"),
        Condition("choice", _split_legal, "first= must choose operands for a first contraction that does work"),
        _term_condition("weaves_carried", Term.carried,
                        "every output axis must be carried by an operand (a broadcast weave has no index to split)"),
        _term_condition("same_format", one_format, "operands and output must have one level and dtype")),
    obligation=Obligation(contraction_instance, cost=flops_claim(_split_flops), symbolic=(sum_product_associativity,)),
    oriented=False,
    choices=lambda m: _groupings(len(m.node("c").dom), m.params.get("first")),
    doc="""C(X₁ … Xₙ) → C₂(…, C₁(X_S), …): the operands S (``first="0 2"``, enumerated) are contracted first;
    the intermediate keeps an axis of S iff the output or a remaining operand names it (einsum splitting).

    Sum-product associativity (see the module docstring; paper §2.1).  Cost: the two loop nests'
    FLOPs replace the one's.""")

contraction_reassociation = Rule(
    "contraction_reassociation",
    CHAIN,
    _reassociation_rhs,
    conditions=(SOLE_USE, CHAIN_CARRIED, NO_CAPTURE, CHAIN_FORMAT,
                Condition("choice", _reassociation_legal,
                          "first= must choose another order whose first contraction does work")),
    obligation=Obligation(chain_instance, cost=flops_claim(_reassociation_flops),
                          symbolic=(sum_product_associativity,)),
    oriented=False,
    choices=lambda m: _groupings(len(_merged(m).operands), m.params.get("first")),
    doc="""C₂(…, C₁(A…), …) → C₂′(…, C₁′(X_S), …): contraction_split ∘ contraction_merge in one step, for
    every other order S of the merged operands (``(φ(Q) φ(K)ᵀ) V → φ(Q) (φ(K)ᵀ V)``, ``(A B) C → A (B C)``).

    Sum-product associativity (paper §2.1; linear attention, Katharopoulos et al. 2020).  Cost:
    the FLOPs of the new pair of loop nests replace the old pair's.""")

contracted_axis_renaming = Rule(
    "contracted_axis_renaming",
    Pattern({"c": CONTRACTION}),
    _renaming_rhs,
    conditions=(Condition("summed_and_fresh", _renaming_legal,
                          "axis= must be summed by the contraction and to= a name it does not use"),),
    obligation=Obligation(capture_instance, cost=flops_claim(_renaming_flops)),
    oriented=False,
    choices=_renamings,
    doc="""C(…, X[a], …) → C(…, rename_{a→a′}(X), …) for a summed axis a (α-conversion of a bound index).

    Enumerated for each summed axis whose name is also used off the contraction's operands (the
    fresh name primes it: d → d′), so that a later merge does not capture it.  Renaming is free:
    FLOPs and transfers are unchanged.""")

RULES = RuleSet((contraction_merge, contraction_split, contraction_reassociation, contracted_axis_renaming))
