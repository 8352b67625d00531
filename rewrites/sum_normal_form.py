"""Sums move toward the inputs: a sum is a one-operand contraction, summed as early as its axes allow.

A sum ``Σ_A X`` is the contraction of one operand (its loop nest costs ``Π(all axes)`` general FLOPs either way,
:func:`rewrites.sum_product.loop_nest_flops`), so sum-product associativity (:mod:`rewrites.sum_product`) moves it
through the contractions: summing a contraction's output is summing inside it, and an axis that one operand alone
names (its *own* axis, summed) can be summed out of that operand before the product.  Both shrink the work:
``Σ_x Σ_d Q[q,d] K[x,d]`` is ``2qxd`` FLOPs, ``Σ_d Q[q,d] (Σ_x K[x,d])`` is ``xd + 2qd`` (the denominator of
linear attention).  The first two rules are the normal form's (role ``normalise``); the third recomputes, so the
search prices it (role ``prepare``).

=============================  ================================================================================
rule                           lhs → rhs
=============================  ================================================================================
``sum_of_contraction``         Σ_A C(X…)  →  C′(X…) summing A too            (the sum reads the contraction alone)
                               mean_A C(X…)  →  (1/|A|) · C′(X…)             (a mean is a scaled sum)
``own_axes_first``             C(…, Xᵢ, …)  →  C′(…, Σ_{own(i)} Xᵢ, …)      (each operand's own summed axes first)
``contraction_into_readers``   C₁(A…) read by contractions, sums, means R₁ … Rₖ  →  each Rⱼ(…, A…, …) in normal form
=============================  ================================================================================

Termination: a sum moves only toward the inputs.  Both rules keep every summed axis occurrence (an axis summed at
a contraction or a sum), moved and never made: ``own_axes_first`` hands an operand's own axes to a new sum on that
operand, ``sum_of_contraction`` hands a sum's (or a mean's) axes to the contraction it reads and removes the sum
(leaves a scale for the mean: it makes no sum, and removes a mean, which only ``mean_of_sum`` makes, shrinking the
netlist).  Each step moves some occurrences one node up the data flow and none down, and no rule of the normal
form makes a contraction or a sum on a contraction's output, so a fixpoint is reached within (summed occurrences
+ 1) × (nodes and wires) steps; the search bounds the driver by the axes on the netlist's wires (at least the
summed occurrences) + 1, times its nodes and wires + 1.

>>> import napkin_cat as nc
>>> den = nc.einsum("q d, x d -> q")                     # Σ_x Σ_d Q[q,d] K[x,d]
>>> r = own_axes_first.apply(den)
>>> [b.name for b in r.boxes], nc.cost(den).flops, nc.cost(r).flops
(['sum', '·'], {'tensor': 2*d*q*x}, {'general': d*x, 'tensor': 2*d*q})
>>> rows = nc.einsum("q d, x d -> q x") >> nc.reduce("sum", "q x -> q")
>>> nc.isomorphic(sum_of_contraction.apply(rows), den)
True
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.rewriting import OUTPUT, Condition, Obligation, Rule, RuleSet
from napkin_cat.rewriting.match import Pattern, kind
from rewrites.contraction import flops_claim
from rewrites.contraction_instances import random_einsum, random_names
from rewrites.normal_form_boxes import box_like, factor, measure, with_factor
from rewrites.sum_product import Term, axis_names, loop_nest_flops, one_format, sum_product_associativity

REDUCERS = ("contract", "reduce_sum", "reduce_mean")    # a sum: a contraction of one operand; a mean: a scaled sum


# ---------------------------------------------------------------------- an operand's own axes first
def own_axes(term: Term, port: int) -> tuple:
    """The axes operand ``port`` sums that neither the output nor another operand names."""
    others = set(term.output.names) | set(axis_names(x for j, x in enumerate(term.operands) if j != port))
    return tuple(n for n in term.operands[port].names if n not in others)


def own_sums_first(term: Term) -> tuple:
    """``(sums, outer)``: ``sums`` maps a port to the one-operand Term that sums its operand's own axes, ``outer``
    the contraction of what remains (each sum's result at its operand's port).  A single operand keeps its sums:
    it is a sum already."""
    sums = {}
    if len(term.operands) < 2:
        return sums, term
    for port in range(len(term.operands)):
        if own_axes(term, port):
            sums[port], term = term.split((port,))
    return sums, term


def build_summed_first(b, wires, term: Term):
    """Build ``term`` in the builder ``b`` on ``wires``, each operand's own axes summed first (a ``reduce_sum``
    box, as a user writes the sum); return the output wire."""
    sums, outer = own_sums_first(term)
    wires = list(wires)
    for port, s in sums.items():
        wires[port] = b(box_like("reduce_sum", list(s.operands), s.output), wires[port])
    return b(outer.box(), *wires)


def summed_first_terms(term: Term) -> tuple:
    """The terms :func:`build_summed_first` builds: the sums, then the outer contraction."""
    sums, outer = own_sums_first(term)
    return (*sums.values(), outer)


def _has_own_axes(m):
    term = Term.of(m.node("c"))
    return bool(own_sums_first(term)[0]) or "no operand sums an axis that the others and the output do not name"


def _own_first_rhs(m):
    b, ins = m.wiring()
    term = Term.of(m.node("c"))
    return m.finish(b, {("c", 0): build_summed_first(b, [ins[("c", j)] for j in range(len(term.operands))], term)})


def own_axes_instance(rng):
    """A contraction of 2-4 operands (random axes, some shared, batch axes maybe) where one or two operands
    name axes of their own that are summed (one may sum all of its axes: a scalar)."""
    n = int(rng.integers(2, 5))
    shared = random_names(rng, int(rng.integers(1, 4)))
    own = random_names(rng, 3, avoid=shared)
    ops = [[a for a in shared if rng.random() < 0.6] for _ in range(n)]
    for a in shared:
        if sum(a in o for o in ops) < 2:
            for j in rng.choice(n, size=2, replace=False):
                if a not in ops[int(j)]:
                    ops[int(j)].append(a)
    lonely = [int(j) for j in rng.choice(n, size=int(rng.integers(1, 3)), replace=False)]
    for k, j in enumerate(lonely):
        ops[j] = ([] if rng.random() < 0.15 else ops[j]) + own[k:k + 1 + int(rng.integers(2))]
    out = [a for a in shared if rng.random() < 0.5] or shared[:1]
    sizes = {a: int(rng.integers(1, 5)) for a in shared + own if rng.random() < 0.5}
    used = {a for o in ops for a in o}
    sig = ", ".join(" ".join(rng.permutation(o)) or "()" for o in ops) + " -> " + " ".join(rng.permutation(out))
    return nc.einsum(sig, **{a: s for a, s in sizes.items() if a in used})


def _own_first_terms(m) -> tuple:
    term = Term.of(m.node("c"))
    return (term,), summed_first_terms(term)


own_axes_first = Rule(
    "own_axes_first",
    Pattern({"c": kind("contract")}),
    _own_first_rhs,
    conditions=(Condition("own_axes", _has_own_axes,
                          "an operand must sum an axis that no other operand and not the output names"),
                Condition("weaves_carried", lambda m: Term.of(m.node("c")).carried(),
                          "every output axis must be carried by an operand (a broadcast weave has no index)"),
                Condition("same_format", lambda m: one_format(Term.of(m.node("c"))),
                          "operands and output must have one level and dtype")),
    obligation=Obligation(own_axes_instance, cost=flops_claim(_own_first_terms),
                          symbolic=(sum_product_associativity,), rtol=1e-9, atol=1e-9),
    doc="""C(…, Xᵢ, …) → C′(…, Σ_{own(i)} Xᵢ, …): an axis that one operand alone names, summed, is summed out of
    that operand before the product (for every such operand).

    Sum-product associativity with S = {i} (:meth:`Term.split`): Σ_u Xᵢ Π_R X = Σ_{u₂} (Σ_{u₁} Xᵢ) Π_R X, u₁ the
    own axes.  Cost: the loop nest over every axis becomes a sum over Xᵢ's and a nest without u₁
    (``2qxd → xd + 2qd``); no transfer changes.""")


# ---------------------------------------------------------------------- a sum of a contraction's output
def _sum_merged(m) -> Term:
    return Term(Term.of(m.node("c")).operands, m.node("s").cod[0])


def _sum_terms(m) -> tuple:
    return (Term.of(m.node("c")), Term.of(m.node("s"))), (_sum_merged(m),)


def _sum_rhs(m):
    b, ins = m.wiring()
    y = b(_sum_merged(m).box(), *(ins[("c", j)] for j in range(len(m.node("c").dom))))
    return m.finish(b, {("s", 0): with_factor(b, m.node("s"), y)})


def sum_of_contraction_instance(rng):
    """A random contraction of 1-4 operands whose output is summed (or averaged) over some of its axes (maybe
    all)."""
    c = random_einsum(rng, int(rng.integers(1, 5)))
    y = c.cod.inside[0]
    kept = [a for a in y.axes if rng.random() < 0.5]
    if len(kept) == len(y.axes):
        kept = kept[1:]
    order = [kept[int(i)] for i in rng.permutation(len(kept))]
    return c >> box_like("reduce_mean" if rng.random() < 0.4 else "reduce_sum", [y], y.replace(axes=tuple(order)))


def _sum_carried(m):
    return _sum_merged(m).carried()


def _folds_and_keeps_flops(lhs, rhs, m):
    """The claim: :func:`~rewrites.normal_form_boxes.measure` decreases, the loop nests of the contraction and the
    sum are the merged one's (by the axis sizes), a mean's factor one scale of the output more; no transfer moves."""
    assert measure(rhs) < measure(lhs), f"the measure {measure(lhs)} became {measure(rhs)}"
    (c, s), (merged,) = _sum_terms(m)
    out = sympy.Mul(*(a.size for a in merged.output.axes))
    scale = {"general": out} if factor(m.node("s")) != 1 else {}
    before, after = nc.cost(lhs), nc.cost(rhs)
    for p in set(before.flops) | set(after.flops):
        want = before.flops.get(p, 0) - sum(loop_nest_flops(t).get(p, 0) for t in (c, s)) \
            + loop_nest_flops(merged).get(p, 0) + scale.get(p, 0)
        assert sympy.simplify(after.flops.get(p, 0) - want) == 0, f"{p} FLOPs: {after.flops.get(p, 0)}, not {want}"
    for lv in set(before.H) | set(after.H):
        assert sympy.simplify(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed"


sum_of_contraction = Rule(
    "sum_of_contraction",
    Pattern({"c": kind("contract"), "s": kind("reduce_sum", "reduce_mean")}, [("c", 0, "s", 0)]),
    _sum_rhs,
    conditions=(Condition("weaves_carried", _sum_carried,
                          "every output axis must be carried by an operand (a broadcast weave has no index)"),
                Condition("same_format", lambda m: one_format(*_sum_terms(m)[0]),
                          "the contraction and the sum must have one level and dtype")),
    obligation=Obligation(sum_of_contraction_instance, cost=_folds_and_keeps_flops,
                          symbolic=(sum_product_associativity,), rtol=1e-9, atol=1e-9),
    doc="""Σ_A C(X…) → C′(X…), C′ summing A too: a sum reading a contraction alone is summed inside it; a mean
    too, as the scaled sum it is: mean_A C(X…) → (1/|A|) · C′(X…) (:func:`~rewrites.normal_form_boxes.factor`).

    Sum-product associativity read right to left, the sum a contraction of one operand.  Cost: one loop nest
    over the same axes, without the sum's (``n·Π + Π(out) → n·Π``), plus the mean's scale of the output (``Π``
    of the output axes); no transfer changes.""")


# ---------------------------------------------------------------------- a contraction into each of its readers
def _is_reducer(net, nid) -> bool:
    return nid != OUTPUT and net.nodes[nid].kind == "box" and net.nodes[nid].spec.kind in REDUCERS


def _readers(net, nodes):
    """The copy of ``c1``'s output and its readers that are contractions or sums (each reading it once, none reading
    another's result)."""
    (c1,) = nodes.values()
    (end,) = net.consumers(c1)
    if end[0] == OUTPUT or net.nodes[end[0]].kind != "copy":
        return None
    readers = [e[0] for e in net.consumers(end[0]) if _is_reducer(net, e[0])]
    if not readers or len(set(readers)) != len(readers):
        return None
    if any(src[0] in readers for r in readers for src in net.producers(r)):
        return None         # a reader of another reader's result: its operands are not all the match's inputs
    return {"k": end[0], **{f"r{j}": r for j, r in enumerate(readers)}}


def _reader_vars(m) -> list:
    return sorted((v for v in m.nodes if v.startswith("r")), key=lambda v: int(v[1:]))


def _port(m, var) -> int:
    return next(p for p, src in enumerate(m.net.producers(m.nodes[var])) if src[0] == m.nodes["k"])


def _merged_into(m, var) -> Term:
    return Term.of(m.node(var)).merge(_port(m, var), Term.of(m.node("c1")))   # a mean's sum (its factor after)


def _kept(m) -> list:
    """The copy's boundary outputs: readers of ``c1`` that are neither contractions, sums nor means."""
    return [p for p in m.outputs if p[0] == "k"]


def _into_readers_rhs(m):
    b, ins = m.wiring()
    c1 = Term.of(m.node("c1"))
    a = [ins[("c1", j)] for j in range(len(c1.operands))]
    outs = {}
    for var in _reader_vars(m):
        port, reader = _port(m, var), m.node(var)
        rest = [ins[(var, j)] for j in range(len(reader.dom)) if j != port]
        outs[(var, 0)] = with_factor(b, reader, build_summed_first(b, rest[:port] + a + rest[port:],
                                                                   _merged_into(m, var)))
    if _kept(m):
        y = b(c1.box(), *a)
        outs.update({p: y for p in _kept(m)})
    return m.finish(b, outs)


def _into_readers_terms(m) -> tuple:
    c1 = Term.of(m.node("c1"))
    removed = tuple(Term.of(m.node(v)) for v in _reader_vars(m)) + (() if _kept(m) else (c1,))
    return removed, tuple(t for v in _reader_vars(m) for t in summed_first_terms(_merged_into(m, v)))


def _into_readers_claim(lhs, rhs, m):
    """The claim: the removed loop nests' FLOPs are replaced by the new ones' (:func:`loop_nest_flops`, per
    pipeline), plus a scale of each mean reader's output (``Π`` of its output axes); no transfer moves."""
    removed, added = _into_readers_terms(m)
    scales = sum((sympy.Mul(*(a.size for a in m.node(v).cod[0].axes)) for v in _reader_vars(m)
                  if factor(m.node(v)) != 1), sympy.Integer(0))
    before, after = nc.cost(lhs), nc.cost(rhs)
    for p in set(before.flops) | set(after.flops) | {"tensor"}:
        want = before.flops.get(p, 0) - sum(loop_nest_flops(t).get(p, 0) for t in removed) \
            + sum(loop_nest_flops(t).get(p, 0) for t in added) + (scales if p == "general" else 0)
        got = after.flops.get(p, 0)
        assert sympy.simplify(got - want) == 0, f"{p} FLOPs: the cost functor gives {got}, the axis sizes {want}"
    for lv in set(before.H) | set(after.H):
        assert sympy.simplify(before.H.get(lv, 0) - after.H.get(lv, 0)) == 0, f"H[{lv}] changed"


def _no_capture_in_readers(m):
    c1 = Term.of(m.node("c1"))
    for var in _reader_vars(m):
        reader, port = Term.of(m.node(var)), _port(m, var)
        for a in c1.summed:
            named = [str(x) for j, x in enumerate(reader.operands) if j != port and a in x.names]
            if named or a in reader.output.names:
                return f"axis {a!r} is summed by {m.node('c1').name!r} and named by its reader {m.node(var).name!r}"
    return True


def _readers_carried(m):
    for var in _reader_vars(m):
        ok = _merged_into(m, var).carried()
        if ok is not True:
            return ok
    return True


def _readers_format(m):
    return one_format(Term.of(m.node("c1")), *(Term.of(m.node(v)) for v in _reader_vars(m)))


def into_readers_instance(rng):
    """C₁(A…) read by 1-3 contractions, sums and means (some reading other operands too), maybe by a map as well."""
    c1 = random_einsum(rng, int(rng.integers(1, 4)))
    t = c1.cod.inside[0]
    taken = {a.name for box in c1.boxes for arr in (*box.dom.inside, *box.cod.inside) for a in arr.axes}
    fresh = random_names(rng, 3, avoid=taken)
    extra = [t.replace(axes=(nc.Axis(n, int(rng.integers(1, 4))),) + tuple(a for a in t.axes if rng.random() < 0.5))
             for n in fresh]
    b = nc.Builder(nc.Ty(*c1.dom.inside, *extra))
    ins = b.inputs
    T = b(c1, *ins[:len(c1.dom.inside)])
    outs = []
    for j in range(int(rng.integers(2, 4))):
        if rng.random() < 0.4:
            kept = [a for a in t.axes if rng.random() < 0.5]
            kept = kept[1:] if len(kept) == len(t.axes) else kept
            reduction = "reduce_mean" if rng.random() < 0.4 else "reduce_sum"
            outs.append(b(box_like(reduction, [t], t.replace(axes=tuple(kept))), T))
            continue
        other = extra[j]
        names = [a for a in (*other.axes, *t.axes) if rng.random() < 0.5 or a.name in fresh[j:j + 1]]
        out = t.replace(axes=tuple({a.name: a for a in names}.values()))
        pair = (T, ins[len(c1.dom.inside) + j]) if rng.random() < 0.5 else (ins[len(c1.dom.inside) + j], T)
        outs.append(b(Term(tuple(w.array for w in pair), out).box(), *pair))
    if rng.random() < 0.3:
        outs.append(b(box_like("exp", [t], t), T))
    return b.build(*outs)


contraction_into_readers = Rule(
    "contraction_into_readers",
    Pattern({"c1": kind("contract")}, absorb=_readers),
    _into_readers_rhs,
    conditions=(Condition("no_capture", _no_capture_in_readers,
                          "an axis the contraction sums must not be named by a reader's other operands or output "
                          "(rename it first: contracted_axis_renaming)"),
                Condition("weaves_carried", _readers_carried,
                          "every output axis must be carried by an operand (a broadcast weave has no index)"),
                Condition("same_format", _readers_format,
                          "the contraction and its readers must have one level and dtype")),
    obligation=Obligation(into_readers_instance, cost=_into_readers_claim,
                          symbolic=(sum_product_associativity,), rtol=1e-9, atol=1e-9),
    oriented=False,
    doc="""C₁(A…) read by contractions, sums and means R₁ … Rₖ (and maybe others) → each Rⱼ with C₁'s operands in
    place of C₁, its own axes summed first (the normal form), a mean as its sum then 1/|A|
    (:func:`~rewrites.normal_form_boxes.with_factor`); C₁ kept for readers that are none of these.

    Sum-product associativity (contraction_merge at each reader; a sum is a contraction of one operand).  It
    recomputes C₁'s products in each reader, so the search prices it (role ``prepare``): linear attention's
    S = φ(Q)φ(K)ᵀ read by S V and by Σ_x S becomes φ(Q)(φ(K)ᵀV) and φ(Q)(Σ_x φ(K)).  Cost: the readers' loop
    nests replace C₁'s and theirs; no transfer changes.""")


SUM_FORM = RuleSet((sum_of_contraction, own_axes_first))
RULES = SUM_FORM + RuleSet((contraction_into_readers,))

__all__ = ["RULES", "SUM_FORM", "sum_of_contraction", "own_axes_first", "contraction_into_readers",
           "own_axes", "own_sums_first", "build_summed_first", "summed_first_terms"]
