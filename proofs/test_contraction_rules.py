"""Discharge the contraction-order rules (``rewrites/contraction.py``).

Numerically against numpy's ``einsum`` on the unrewritten chain (a route independent of the
rules and of ``nc.evaluate``), symbolically with sympy, their FLOPs claims against closed forms,
every refusal by name, the derivations they exist for (linear attention, matrix chains), and a
fuzzer over random contraction data-flows.  Each test is marked ``@pytest.mark.proves(<rule>)``.
"""
from __future__ import annotations

import numpy as np
import pytest
import sympy
from hypothesis import given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.rewriting import Trace, as_ruleset, random_sizes, rewrite, shape_of
from napkin_cat.rewriting.registry import rulebook
from napkin_cat.search.forms import prepared_forms
from napkin_cat.syntax.weave import weave_box
from rewrites import ALL_RULES, CONTRACTION, SIMPLIFY
from rewrites.contraction import (CHAIN, SOLE_USE, contracted_axis_renaming, contraction_merge,
                                  contraction_reassociation, contraction_split, flops_claim)
from rewrites.contraction_instances import (capture_instance, chain_instance, random_contraction_diagram,
                                            random_einsum)
from rewrites.normal_form import box_like
from rewrites.sum_product import Term, loop_nest_flops, sum_product_associativity

proves = pytest.mark.proves
SEEDS = st.integers(0, 2 ** 32 - 1)
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


# ---------------------------------------------------------------------- an independent reference
def contractions(diagram) -> list:
    """The contraction nodes of a diagram, in order."""
    return [n for n in nc.engine.to_netlist(diagram).nodes.values() if n.kind == "box" and n.spec.kind == "contract"]


def numpy_chain(diagram, xs):
    """Evaluate a diagram made only of contractions with ``np.einsum``, node by node (no napkin_cat)."""
    net = nc.engine.to_netlist(diagram)
    values = {}
    letters = {}

    def sub(arr):
        return "".join(letters.setdefault(n, LETTERS[len(letters)]) for n in arr.names)

    def value(src):
        return xs[src[1]] if src[0] == "in" else values[src]
    for nid, node in net.nodes.items():
        assert node.kind in ("box", "copy", "discard"), f"not a contraction chain: {node}"
        if node.kind == "discard":
            continue
        args = [value(s) for s in net.producers(nid)]
        if node.kind == "copy":
            values.update({(nid, p): args[0] for p in range(len(node.cod))})
            continue
        spec = ",".join(sub(a) for a in node.dom) + "->" + sub(node.cod[0])
        values[(nid, 0)] = np.einsum(spec, *args)
    return [value(net.wires[w].src) for w in net.outputs]


def _random_inputs(rng, diagram):
    sizes = random_sizes(rng, diagram, 1, 4)
    return sizes, [rng.normal(size=shape_of(a, sizes)) for a in diagram.dom.inside]


def _agrees_with_numpy(lhs, rhs, rng):
    sizes, xs = _random_inputs(rng, lhs)
    (want,) = numpy_chain(lhs, xs)
    got = nc.evaluate(rhs, *xs, sizes=sizes)
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9), f"differs by {np.max(np.abs(got - want))} at {sizes}"


# ---------------------------------------------------------------------- numerically, every order
@proves("contraction_split")
@settings(max_examples=20, deadline=None)
@given(seed=SEEDS, n=st.integers(2, 5))
def test_split_in_every_legal_order_is_the_einsum(seed, n):
    rng = np.random.default_rng(seed)
    lhs = random_einsum(rng, n)
    ms = contraction_split.matches(lhs)
    assert ms or n == 2, "three operands or more always have a first pair to contract"
    for m in ms:
        rhs = contraction_split.apply(lhs, m)
        assert len(contractions(rhs)) == 2
        _agrees_with_numpy(lhs, rhs, rng)
        contraction_split.obligation.cost(lhs, rhs, m)


@proves("contraction_merge", "contraction_reassociation")
@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_merge_and_every_reassociation_are_the_chain(seed):
    rng = np.random.default_rng(seed)
    lhs = chain_instance(rng, wrapped=False)
    merged = contraction_merge.apply(lhs)
    assert len(contractions(merged)) == 1
    _agrees_with_numpy(lhs, merged, rng)
    contraction_merge.obligation.cost(lhs, merged, contraction_merge.matches(lhs)[0])
    orders = contraction_reassociation.matches(lhs)
    assert orders, "a chain of three operands or more has another order"
    for m in orders:
        rhs = contraction_reassociation.apply(lhs, m)
        _agrees_with_numpy(lhs, rhs, rng)
        contraction_reassociation.obligation.cost(lhs, rhs, m)


@proves("contracted_axis_renaming", "contraction_merge")
@settings(max_examples=15, deadline=None)
@given(seed=SEEDS)
def test_renaming_a_captured_axis_lets_the_chain_merge(seed):
    rng = np.random.default_rng(seed)
    lhs = capture_instance(rng, wrapped=False)
    (cand,) = contraction_merge.candidates(lhs)
    failed, why = contraction_merge.failure(cand)
    assert failed.name == "no_capture" and "summed by the first contraction" in why
    inner, outer = Term.of(cand.node("c1")), Term.of(cand.node("c2"))
    (captured,) = set(inner.summed) & {n for a in (*outer.operands, outer.output) for n in a.names}
    (at_c1,) = [m for m in contracted_axis_renaming.matches(lhs) if m.nodes["c"] == cand.nodes["c1"]
                and m.params["axis"] == captured]
    d = contracted_axis_renaming.apply(lhs, at_c1)
    assert nc.cost(d).flops == nc.cost(lhs).flops
    merged = contraction_merge.apply(d)
    _agrees_with_numpy(lhs, merged, rng)


@proves("contraction_merge")
def test_the_obligation_catches_a_merge_that_ignores_capture():
    """Without ``no_capture`` the merge conflates two indices: the obligation must find it unsound."""
    careless = nc.Rule("careless_merge", CHAIN, contraction_merge.rhs, conditions=(SOLE_USE,),
                       obligation=nc.engine.Obligation(lambda rng: capture_instance(rng, wrapped=False)), doc="a → b")
    with pytest.raises(nc.ObligationError, match="careless_merge.*unsound"):
        careless.obligation.discharge(careless, trials=6)


@proves("contraction_merge")
def test_the_cost_claim_can_fail():
    """Claiming that a merge leaves the FLOPs unchanged (or costs the sum of its parts) is false."""
    lhs = linear_attention(relu, "left")
    m = contraction_merge.matches(lhs)[0]
    merged = contraction_merge.apply(lhs, m)
    q, x, d, e = (nc.symbol(n) for n in "qxde")
    assert sympy.expand(nc.cost(merged).flops["tensor"] - 3 * q * x * d * e) == 0
    with pytest.raises(AssertionError, match="tensor FLOPs: the cost functor gives"):
        flops_claim(lambda m: ((), ()))(lhs, merged, m)
    contraction_merge.obligation.cost(lhs, merged, m)


# ---------------------------------------------------------------------- symbolically
@proves("contraction_merge", "contraction_split", "contraction_reassociation", "contracted_axis_renaming")
def test_sum_product_associativity_on_symbolic_arrays():
    sum_product_associativity()
    A, B, C = (sympy.Matrix(r, c, lambda i, j, s=s: sympy.Symbol(f"{s}{i}{j}")) for s, r, c in
               (("a", 2, 3), ("b", 3, 2), ("c", 2, 2)))
    triple = sympy.Matrix(2, 2, lambda i, m: sum(A[i, j] * B[j, k] * C[k, m] for j in range(3) for k in range(2)))
    assert sympy.expand((A * B) * C - A * (B * C)) == sympy.zeros(2, 2)
    assert sympy.expand((A * B) * C - triple) == sympy.zeros(2, 2)


# ---------------------------------------------------------------------- derivations
def linear_attention(phi, order: str, v: str = "x e", **sizes):
    """``(φ(Q) φ(K)ᵀ) V`` (order "left") or ``φ(Q) (φ(K)ᵀ V)`` ("right"); V: ``v``."""
    out = " ".join(n for n in v.split() if n != "x")
    b = nc.Builder(nc.types(f"q d, x d, {v}", **sizes))
    Q, K, V = b.inputs
    fq, fk = phi(b, Q), phi(b, K)
    if order == "left":
        S = b(nc.einsum("q d, x d -> q x", **_only(sizes, "q x d")), fq, fk)
        return b.build(b(nc.einsum(f"q x, {v} -> q {out}", **_only(sizes, f"q x {v}")), S, V))
    KV = b(nc.einsum(f"x d, {v} -> d {out}", **_only(sizes, f"x d {v}")), fk, V)
    return b.build(b(nc.einsum(f"q d, d {out} -> q {out}", **_only(sizes, f"q d {out}")), fq, KV))


def _only(sizes, names):
    return {k: s for k, s in sizes.items() if k in names.split()}


def _map(name, w):
    return nc.elementwise(name, " ".join(w.array.names), **{a.name: a.size for a in w.array.axes})


def relu(b, w):
    return b(_map("relu", w), w)


def elu_plus_one(b, w):
    """elu(x) + 1 = relu(x) + exp(−relu(−x)) (Katharopoulos et al.'s feature map), from library maps."""
    neg = b(_map("neg", w), b(_map("relu", w), b(_map("neg", w), w)))
    return b(_map("add", w), b(_map("relu", w), w), b(_map("exp", w), neg))


def derivations(start, rules, depth: int) -> list:
    """Every ``(diagram, trace)`` reachable in 1..``depth`` legal rewrites (breadth first, through the driver)."""
    rules = as_ruleset(rules)
    found, frontier = [], [(start, ())]
    for _ in range(depth):
        nxt = []
        for d, steps in frontier:
            for rule in rules:
                for m in rule.matches(d):
                    r = rewrite(d, rules, _once(rule, m))
                    nxt.append((r.diagram, steps + r.trace.steps))
        found += nxt
        frontier = nxt
    return [(d, Trace(steps, rules)) for d, steps in found]


def _once(rule, m):
    """A driver strategy that takes the one step ``(rule, m)`` (found again among the options) and stops."""
    done = []

    def pick(net, options):
        if done:
            return None
        done.append(True)
        return next((r, o) for r, o in options if r.name == rule.name and o.key == m.key and o.params == m.params)
    return pick


def total_flops(d):
    return sum(nc.cost(d).flops.values())


@proves("contraction_reassociation")
def test_the_rule_book_reassociates_linear_attention():
    """(φ(Q) φ(K)ᵀ) V → φ(Q) (φ(K)ᵀ V) by the rules of ALL_RULES alone, within two steps."""
    left, right = linear_attention(relu, "left"), linear_attention(relu, "right")
    hits = [(d, t) for d, t in derivations(left, ALL_RULES, 2) if nc.isomorphic(d, right)]
    assert hits, "no derivation of at most two steps of ALL_RULES reaches φ(Q) (φ(K)ᵀ V)"
    d, trace = hits[0]
    assert nc.equivalent(left, d) and trace.replay(left) == d
    q, x, dd, e = (nc.symbol(n) for n in "qxde")
    assert sympy.expand(nc.cost(left).flops["tensor"] - (2 * q * x * dd + 2 * q * x * e)) == 0
    assert sympy.expand(nc.cost(d).flops["tensor"] - (2 * x * dd * e + 2 * q * dd * e)) == 0


def cheapest(start, rules, depth: int):
    """The reachable ``(diagram, trace)`` with the fewest FLOPs at concrete sizes (a tiny search)."""
    return min(derivations(start, rules, depth), key=lambda dt: total_flops(dt[0]))


@proves("contracted_axis_renaming", "contraction_reassociation")
@pytest.mark.parametrize("phi", [relu, elu_plus_one], ids=["relu", "elu+1"])
def test_linear_attention_with_one_feature_axis_needs_alpha_then_reassociation(phi):
    """V: x d (the library's names): merging would capture d; rename it, then reassociate."""
    q, x, dd = 32, 48, 4
    left = linear_attention(phi, "left", v="x d", q=q, x=x, d=dd)
    with pytest.raises(nc.RewriteError, match="no_capture.*axis 'd' is summed by the first contraction"):
        contraction_merge.apply(left)
    d, trace = cheapest(left, CONTRACTION, 2)
    assert [s.rule for s in trace] == ["contracted_axis_renaming", "contraction_reassociation"]
    assert nc.equivalent(left, d, scale=0.5)
    assert Trace.loads(trace.dumps(), CONTRACTION).replay(left) == d  # the chosen order replays from JSON
    assert nc.cost(left).flops["tensor"] == 2 * q * x * dd + 2 * q * x * dd
    assert nc.cost(d).flops["tensor"] == 2 * x * dd * dd + 2 * q * dd * dd


@proves("contraction_reassociation")
def test_multi_head_linear_attention_reassociates_per_head():
    left, right = (nc.weave(linear_attention(relu, o, q=64, x=64, d=4, e=4), "h") for o in ("left", "right"))
    (d, trace), = [(d, t) for d, t in derivations(left, [contraction_reassociation], 1) if nc.isomorphic(d, right)]
    assert nc.equivalent(left, d, sizes={"h": 3})
    h = nc.symbol("h")
    assert sympy.expand(nc.cost(left).flops["tensor"] - h * (2 * 64 * 64 * 4 * 2)) == 0
    assert sympy.expand(nc.cost(d).flops["tensor"] - h * (2 * 64 * 4 * 4 * 2)) == 0


@proves("contraction_reassociation", "contraction_merge", "contraction_split")
@pytest.mark.parametrize("sizes", [dict(a=64, b=2, c=64, d=2), dict(a=2, b=64, c=2, d=64)])
def test_matrix_chain_takes_the_cheaper_association(sizes):
    """(A B) C → A (B C) exactly when 2bcd + 2abd < 2abc + 2acd; merge ; split reaches it too."""
    a, b, c, d = (sizes[n] for n in "abcd")
    left = nc.einsum("a b, b c -> a c", **_only(sizes, "a b c")) @ nc.Id(nc.types("c d", c=c, d=d)) \
        >> nc.einsum("a c, c d -> a d", **_only(sizes, "a c d"))
    right = nc.Id(nc.types("a b", a=a, b=b)) @ nc.einsum("b c, c d -> b d", **_only(sizes, "b c d")) \
        >> nc.einsum("a b, b d -> a d", **_only(sizes, "a b d"))
    orders = derivations(left, [contraction_reassociation], 1)
    best, _ = min(orders, key=lambda dt: total_flops(dt[0]))
    flops = {"left": 2 * a * b * c + 2 * a * c * d, "right": 2 * b * c * d + 2 * a * b * d}
    assert nc.cost(left).flops == {"tensor": flops["left"]}
    if flops["right"] < flops["left"]:
        assert nc.isomorphic(best, right) and nc.cost(best).flops == {"tensor": flops["right"]}
    else:  # no other order beats (A B) C: the search would keep it
        assert all(total_flops(o) >= flops["left"] for o, _ in orders)
    two = [t for dd, t in derivations(left, [contraction_merge, contraction_split], 2) if nc.isomorphic(dd, right)]
    assert [s.rule for s in two[0]] == ["contraction_merge", "contraction_split"]
    assert nc.equivalent(left, best)


# ---------------------------------------------------------------------- the choices a search sees
@proves("contraction_split")
@pytest.mark.parametrize("sig, legal", [("a b, b c, c d -> a d", ["0 1", "0 2", "1 2"]),
                                        ("a b z, b c, c d -> a d", ["0", "0 1", "0 2", "1 2"])])
def test_split_enumerates_exactly_the_orders_that_do_work(sig, legal):
    assert [m.params["first"] for m in contraction_split.matches(nc.einsum(sig))] == legal


# ---------------------------------------------------------------------- refusals, by name
def _chain_through_copy():
    b = nc.Builder(nc.types("q d, x d, x e"))
    Q, K, V = b.inputs
    S = b(nc.einsum("q d, x d -> q x"), Q, K)
    return b.build(b(nc.einsum("q x, x e -> q e"), S, V), b(nc.elementwise("exp", "q x"), S))


@proves("contraction_merge", "contraction_reassociation")
def test_merge_refuses_an_intermediate_used_twice():
    with pytest.raises(nc.RewriteError, match=r"sole_use.*q×x has 2 uses:") as e:
        contraction_merge.apply(_chain_through_copy())
    assert "'exp'" in str(e.value) and "'·'" in str(e.value)
    assert not contraction_reassociation.matches(_chain_through_copy())


@proves("contraction_merge", "contraction_split")
def test_a_broadcast_weave_is_not_carried():
    def broadcast(sig):  # a contraction weaved over h with no input carrying h: constant along h
        return weave_box(nc.einsum(sig).boxes[0], nc.Axis("h"), {}, 0)
    with pytest.raises(nc.RewriteError, match="weaves_carried.*output axis 'h'"):
        contraction_merge.apply(_then(broadcast("a b -> a"), "h a, a c -> h c", "a c"))
    three = broadcast("a b, b c, c d -> a d")
    with pytest.raises(nc.RewriteError, match="weaves_carried.*output axis 'h'"):
        contraction_split.using(first="0 1").apply(three)


def _then(first, sig, other):
    b = nc.Builder(first.dom @ nc.types(other))
    *xs, y = b.inputs
    return b.build(b(nc.einsum(sig), b(first, *xs), y))


@proves("contraction_merge", "contraction_split")
def test_mixed_formats_are_refused():
    half = nc.apply("contract", "q d, x d -> q x", dtype=nc.FP16, out_dtype=nc.FP32)
    with pytest.raises(nc.RewriteError, match="same_format.*fp16.*fp32|same_format.*fp32.*fp16"):
        contraction_merge.apply(_then(half, "q x, x e -> q e", "x e"))
    with pytest.raises(nc.RewriteError, match="same_format"):
        contraction_split.using(first="0 1").apply(nc.apply("contract", "a b, b c, c d -> a d", out_level=1))


@proves("contraction_split", "contraction_reassociation")
def test_illegal_choices_are_named():
    three = nc.einsum("a b, b c, c d -> a d")
    with pytest.raises(nc.RewriteError, match="two_operands"):
        contraction_split.apply(nc.einsum("a b -> a"))
    with pytest.raises(nc.RewriteError, match="choice.*must name some but not all of the operand ports 0..2"):
        contraction_split.using(first="0 1 2").apply(three)
    with pytest.raises(nc.RewriteError, match="choice.*not a list of operand ports"):
        contraction_split.using(first="left").apply(three)
    with pytest.raises(nc.RewriteError, match="choice.*operand 1 alone sums no axis"):
        contraction_split.using(first="1").apply(three)
    left = linear_attention(relu, "left")
    with pytest.raises(nc.RewriteError, match="choice.*the order the diagram already has"):
        contraction_reassociation.using(first="0 1").apply(left)


@proves("contracted_axis_renaming")
def test_renaming_refuses_a_kept_axis_or_a_used_name():
    mm = nc.einsum("a b, b c -> a c")
    assert contracted_axis_renaming.matches(mm) == []  # b is used nowhere else: nothing to free
    with pytest.raises(nc.RewriteError, match="summed_and_fresh.*axis 'a' is not summed"):
        contracted_axis_renaming.using(axis="a").apply(mm)
    with pytest.raises(nc.RewriteError, match="summed_and_fresh.*new name 'c' is already an axis"):
        contracted_axis_renaming.using(axis="b", to="c").apply(mm)
    renamed = contracted_axis_renaming.using(axis="b").apply(mm)
    assert [b.name for b in renamed.boxes].count("rename") == 2 and nc.equivalent(mm, renamed)


def test_loop_nest_flops_is_the_cost_functor_on_one_box():
    """The formula the claims use agrees with the cost functor on single boxes of every shape."""
    for sig in ("a b, b c -> a c", "a b, b c, c d -> a d", "a, b -> a b", "a b -> a", "a b -> b a"):
        box = nc.einsum(sig)
        assert loop_nest_flops(Term.of(contractions(box)[0])) == {k: v for k, v in nc.cost(box).flops.items() if v}


# ---------------------------------------------------------------------- fuzz
FUZZ = {"rewrites": 0, "rules": {}}


@proves("contraction_merge", "contraction_split", "contraction_reassociation", "contracted_axis_renaming")
def test_fuzz_random_contraction_data_flows_stay_equivalent():
    """Random legal (rule, match, choice) steps on random contraction data-flows keep the function,
    and their traces (with the chosen orders) replay; the fixpoint (merging) terminates."""
    rng = np.random.default_rng(2024)
    for k in range(60):
        d = random_contraction_diagram(rng, int(rng.integers(2, 5)))

        def pick(net, options):
            names = sorted({r.name for r, _ in options})
            name = names[int(rng.integers(len(names)))]
            mine = [o for o in options if o[0].name == name]
            return mine[int(rng.integers(len(mine)))]
        r = rewrite(d, CONTRACTION, pick, max_steps=int(rng.integers(3, 9)))
        assert nc.equivalent(d, r.diagram, trials=2, seed=k), r.trace
        assert r.trace.replay(d) == r.diagram
        if k % 4 == 0:
            assert r.trace.check(trials=1, seed=k)
            normal = rewrite(d, CONTRACTION)  # the fixpoint merges every mergeable chain, and stops
            assert not contraction_merge.matches(normal.diagram) and nc.equivalent(d, normal.diagram, trials=1)
        FUZZ["rewrites"] += len(r.trace)
        for s in r.trace:
            FUZZ["rules"][s.rule] = FUZZ["rules"].get(s.rule, 0) + 1
    print(f"\ncontraction fuzz: {FUZZ['rewrites']} rewrites, per rule {dict(sorted(FUZZ['rules'].items()))}")
    assert FUZZ["rewrites"] >= 250 and set(FUZZ["rules"]) == set(CONTRACTION.names)


# ---------------------------------------------------------------------- in the search's normal form
def _shared_contractions(diagram) -> int:
    """Contractions whose result is read in several places (through a copy)."""
    net = nc.engine.to_netlist(diagram)
    return sum(1 for nid, n in net.nodes.items() if n.kind == "box" and n.spec.kind == "contract"
               and any(e[0] in net.nodes and net.nodes[e[0]].kind == "copy" for e in net.consumers(nid)))


def _summed_after(rng, d):
    """``d`` with its output summed over some of its axes (the sum rules of the normal form then move it), and the
    axes summed, by position."""
    y = d.cod.inside[0]
    gone = [j for j in range(len(y.axes)) if rng.random() < 0.4] or [int(rng.integers(len(y.axes)))]
    return d >> box_like("reduce_sum", [y], y.replace(axes=tuple(a for j, a in enumerate(y.axes) if j not in gone))), \
        tuple(gone)


@proves("contraction_merge")
def test_the_normal_form_merges_each_contraction_read_by_one_contraction_alone():
    """contraction_merge playing ``normalise`` beside the sum rules (:func:`~napkin_cat.search.forms.prepared_forms`'
    normal form) on random contraction data-flows (chains, results read twice, clashing names, random output orders:
    weaves at random positions), half of them summed after: the normal form computes what numpy's einsums compute
    node by node, its trace replays, it ends within the search's bound (netlist size + 1) × (axes on the wires + 1),
    a contraction read in several places is still one (merging it would recompute it: contraction_into_readers'
    job), and every chain left is one the merge refuses by a named condition."""
    book = rulebook()
    assert "contraction_merge" in book.roles["normalise"]
    rng = np.random.default_rng(34)
    merges, shared, worst = 0, 0, 0.0
    for k in range(40):
        chain = random_contraction_diagram(rng, int(rng.integers(2, 6)))
        d, gone = _summed_after(rng, chain) if k % 2 else (chain, ())
        normal = prepared_forms(d, book, depth=0)[0]
        assert Trace(normal.steps, book.rules).replay(d) == normal.diagram
        net = nc.engine.to_netlist(d)
        bound = (len(net.nodes) + len(net.wires) + 1) * (sum(len(w.array.axes) for w in net.wires.values()) + 1)
        assert len(normal.steps) <= bound
        worst = max(worst, len(normal.steps) / bound)
        sizes, xs = _random_inputs(rng, d)
        want = numpy_chain(chain, xs)[0].sum(axis=gone)      # numpy's route: the einsums, then the sum
        got = nc.evaluate(normal.diagram, *xs, sizes=sizes)
        assert np.allclose(got, want, rtol=1e-9, atol=1e-9), f"program {k}: differs by {np.max(np.abs(got - want))}"
        before = _shared_contractions(rewrite(d, SIMPLIFY).diagram)
        assert _shared_contractions(normal.diagram) == before, f"program {k}: a contraction read twice was merged"
        for cand in contraction_merge.candidates(normal.diagram):
            failed = contraction_merge.failure(cand)
            assert failed is not None and failed[0].name in {"sole_use", "no_capture", "weaves_carried", "same_format"}
        merges += normal.prepared.count("contraction_merge")
        shared += before
    print(f"\nnormal form: {merges} merges, {shared} contractions read twice kept, steps {worst:.3f} of the bound")
    assert merges >= 20 and shared >= 5
