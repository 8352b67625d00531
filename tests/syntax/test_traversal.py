"""Every functor moves values through swaps, copies and discards the same way (issue 10, item 15).

The wiring's meaning is written once (``napkin_cat.syntax.wiring.traverse``); here random diagrams
made mostly of wiring (swaps of one or two wires, copies into 1-3 branches, discards) between a few
computing boxes are run through every functor built on it, and each is compared with a numpy
reference assembled step by step while the diagram is drawn (it never goes through napkin_cat):

* ``traverse`` itself is a functor (``>>`` composes folds, ``@`` juxtaposes them);

* ``nc.evaluate`` equals the reference;
* the values view (``trace_values``) replayed box by box equals it;
* the netlist read back (``to_diagram(to_netlist(d))``) evaluates to it and is isomorphic to ``d``;
* weaving over a batch axis equals the reference on each batch item;
* renaming an axis and recolouring to level 1 evaluate to it;
* the JSON round trip gives the same diagram;
* the cost functor's FLOPs are the boxes' FLOPs and its columns the per-layer definition;
* the plan of the unfused diagram computes it, and its runner moves what the cost functor predicts.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import napkin_cat as nc
from napkin_cat.semantics.primitives import run_primitive
from napkin_cat.semantics.env import Env
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.wiring import computes, trace_values, traverse

SIGS = ("q d", "x d", "q x", "d")
SIZES = {"q": 2, "d": 3, "x": 4}
UNARY = {"sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh, "neg": np.negative}
PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _array(sig):
    return nc.types(sig).inside[0]


def _contract(a, b):
    """``a, b -> out``: shared axes summed, unless that leaves nothing (then all kept)."""
    shared = set(a.names) & set(b.names)
    out = [n for n in (*a.names, *b.names) if n not in shared]
    if not out:
        out = list(dict.fromkeys((*a.names, *b.names)))
    return " ".join(out)


@st.composite
def wirings(draw):
    """``(diagram, reference)``: a few wires, then 1-9 steps of swaps, copies, discards and boxes."""
    wires = [_array(s) for s in draw(st.lists(st.sampled_from(SIGS), min_size=1, max_size=3))]
    dom = Ty(*wires)
    steps, fns = [], []
    for _ in range(draw(st.integers(1, 9))):
        n = len(wires)
        choices = ["copy", "unary"] + (["swap", "swap2", "discard", "contract"] if n >= 2 else [])
        what = draw(st.sampled_from(choices))
        width = {"swap": 2, "swap2": 3, "contract": 2}.get(what, 1)
        if width > n:
            what, width = "copy", 1
        i = draw(st.integers(0, n - width))
        here = wires[i:i + width]
        if what == "swap":
            gen, fn = Diagram.swap(Ty(here[0]), Ty(here[1])), lambda v: [v[1], v[0]]
        elif what == "swap2":
            gen, fn = Diagram.swap(Ty(*here[:2]), Ty(here[2])), lambda v: [v[2], v[0], v[1]]
        elif what == "copy":
            k = draw(st.integers(1, 3))
            gen, fn = Diagram.copy(Ty(here[0]), k), (lambda k: lambda v: [v[0]] * k)(k)
        elif what == "discard":
            gen, fn = Diagram.copy(Ty(here[0]), 0), lambda v: []
        elif what == "unary":
            name = draw(st.sampled_from(sorted(UNARY)))
            gen, fn = nc.elementwise(name, " ".join(here[0].names)), (lambda f: lambda v: [f(v[0])])(UNARY[name])
        else:
            a, b = here
            out = _contract(a, b)
            spec = f"{''.join(a.names)},{''.join(b.names)}->{out.replace(' ', '')}"
            gen = nc.einsum(f"{' '.join(a.names)}, {' '.join(b.names)} -> {out}")
            fn = (lambda spec: lambda v: [np.einsum(spec, v[0], v[1])])(spec)
        steps.append(Diagram.id(Ty(*wires[:i])) @ gen @ Diagram.id(Ty(*wires[i + width:])))
        fns.append((i, width, fn))
        wires[i:i + width] = list(gen.cod.inside)
    diagram = Diagram.id(dom).then(*steps)

    def reference(*xs):
        values = list(xs)
        for i, width, fn in fns:
            values[i:i + width] = fn(values[i:i + width])
        return values
    return diagram, reference


def inputs(diagram, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=tuple(SIZES[n] for n in arr.names)) for arr in diagram.dom.inside]


def as_list(y):
    return list(y) if isinstance(y, tuple) else [y]


def same(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a, dtype=float), b, rtol=1e-9, atol=1e-12)


@PROPERTY
@given(wirings())
def test_evaluate_and_the_values_view_agree_with_the_reference(case):
    d, ref = case
    xs = inputs(d)
    want = ref(*xs)
    same(as_list(nc.evaluate(d, *xs)), want)
    ops, dom, cod = trace_values(d)
    assert [b for b, _, _ in ops] == [b for _, b in layers(d) if computes(b)]
    vals = dict(zip(dom, xs))
    for box, ins, outs in ops:
        vals.update(zip(outs, run_primitive(box, [vals[v] for v in ins], Env())))
    same([vals[v] for v in cod], want)


@PROPERTY
@given(wirings())
def test_netlist_read_back_agrees(case):
    d, ref = case
    xs = inputs(d)
    back = nc.engine.to_diagram(nc.engine.to_netlist(d))
    same(as_list(nc.evaluate(back, *xs)), ref(*xs))
    assert nc.isomorphic(back, d)
    assert sum(1 for _, b in layers(back) if computes(b)) == sum(1 for _, b in layers(d) if computes(b))


@PROPERTY
@given(wirings())
def test_weave_agrees_on_every_batch_item(case):
    d, ref = case
    batch = [inputs(d, seed) for seed in range(3)]
    woven = nc.weave(d, "k", position=0)
    got = as_list(nc.evaluate(woven, *[np.stack(xs) for xs in zip(*batch)]))
    for b, xs in enumerate(batch):
        same([y[b] for y in got], ref(*xs))


@PROPERTY
@given(wirings())
def test_rename_and_recolour_agree(case):
    d, ref = case
    xs = inputs(d)
    renamed = nc.rename_axis(d, "d", "c") if "d" in nc.engine.names_of(d) else d   # a missing axis is refused
    same(as_list(nc.evaluate(renamed, *xs)), ref(*xs))
    same(as_list(nc.evaluate(nc.at_level(d, 1), *xs)), ref(*xs))
    assert nc.loads(nc.dumps(d)) == d


@PROPERTY
@given(wirings())
def test_cost_agrees_with_the_boxes_and_the_definition_of_a_column(helpers, case):
    d, _ = case
    c = nc.cost(d)
    flops = {p: int(v.subs({symbol(k): s for k, s in SIZES.items()})) for p, v in c.flops.items() if v != 0}
    want = {p: int(v.subs({symbol(k): s for k, s in SIZES.items()}) if hasattr(v, "subs") else v)
            for p, v in helpers.diagram_flops(d).items()}
    assert flops == {p: v for p, v in want.items() if v}
    assert c.columns == helpers.live_columns(d)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wirings())
def test_plan_of_the_unfused_diagram_agrees(case):
    d, ref = case
    xs = inputs(d)
    algorithm = nc.unfused(d)
    present = {a.name for arr in d.dom.inside for a in arr.axes}
    y, counters = nc.plan(algorithm, {k: v for k, v in SIZES.items() if k in present}).run(*xs)
    same(as_list(y), ref(*xs))
    c = nc.cost(algorithm)
    env = {symbol(k): v for k, v in SIZES.items()}
    assert counters.transfers == {l: int(h.subs(env)) for l, h in c.H.items() if h != 0}
    assert counters.peak == {l: int(m.subs(env)) for l, m in c.M.items() if l > 0}


def _symbolic(step):
    """A box's outputs as terms over its inputs: the value of a wire says how it was computed."""
    return [f"{step.box.name}#{j}({', '.join(step.ins)})" for j in range(len(step.box.cod))]


@PROPERTY
@given(wirings(), st.data())
def test_traverse_is_a_functor(case, data):
    """``traverse(f >> g) = traverse(g) ∘ traverse(f)`` and ``traverse(f @ g) = traverse(f) × traverse(g)``."""
    d, _ = case
    k = data.draw(st.integers(0, len(d.inside)))
    f, g = d[:k], d[k:]
    xs = [f"x{i}" for i in range(len(d.dom))]
    whole = traverse(d, xs, _symbolic)
    assert traverse(g, traverse(f, xs, _symbolic), _symbolic) == whole
    ys = [f"y{i}" for i in range(len(g.dom))]
    assert traverse(d @ g, xs + ys, _symbolic) == whole + traverse(g, ys, _symbolic)
