"""The device level as rules (issue 37, item 2): partitions over devices and the collectives they need.

=====================  ============================================================================================
rule                   lhs → rhs
=====================  ============================================================================================
``device_partition``   F (woven over a) → Shard_{a,P}(F[a ↦ a/P])       every box that sees a is woven over it;
                                                                        inputs without a replicated
``device_reduction``   R (reduces a by a monoid ⊕) → Shard_{a,P}(R[a ↦ a/P] ; all-reduce_⊕)
                                                                        each device's partial, merged by the reducer's
                                                                        own merge (sum: add, max: max)
``device_fusion``      Shard_{a,P}(F) ; Shard_{a,P}(G) → Shard_{a,P}(F ; [all-gather] ; G)
                                                                        an output of F sharded where G reads it whole
                                                                        is all-gathered; G may be any level-0 box or
                                                                        region, run on every device (replicated)
``device_gather``      Shard_{a,P}(F) → Shard_{a,P; b}(all-gather_b(x) ; F)
                                                                        a replicated input x carrying b arrives
                                                                        sharded along b and is all-gathered
=====================  ============================================================================================

They are equations a user (or a search) orients by choosing the axis and the devices
(``rule.using(axis="h", devices=P)``; without devices,
:data:`~rewrites.device_matching.DEVICES_BY_DEFAULT`); no strategy applies them on its
own (they are not oriented).  From ``relu(x W₁) W₂`` sharded on the
hidden axis they derive Megatron's column- then row-parallel MLP with one all-reduce (:func:`tensor_parallel`); from
a program whose sharded values some box reads whole, the all-gathers it needs.

>>> import napkin_cat as nc
>>> up = nc.einsum("n d, d h -> n h") >> nc.elementwise("relu", "n h")
>>> mlp = up @ nc.Id("h e") >> nc.einsum("n h, h e -> n e")
>>> r = tensor_parallel(mlp, "h", devices=4)
>>> [b.name for b in r.diagram.boxes[0].arg.boxes]
['·', 'relu', '·', 'all-reduce']
"""
from __future__ import annotations


import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.devices import Shard, device_region
from napkin_cat.algorithms.partitions import relabel_axis
from napkin_cat.cost.iocost import numel
from napkin_cat.cost.numeric import at
from napkin_cat.errors import NapkinError, RewriteError
from napkin_cat.rewriting import Condition, Obligation, Rule, RuleSet, rewrite
from napkin_cat.rewriting.match import Pattern, where
from napkin_cat.rewriting.obligation import shape_of
from napkin_cat.syntax.collectives import shard_size
from napkin_cat.syntax.sizes import symbols_of
from napkin_cat.syntax.primitive import kind_of
from rewrites.device_matching import (DEVICES, LEVEL0, as_diagram, built_by, device_node,
                                      devices_of, legal_when, level0_node, same_type, sharded)


# ---------------------------------------------------------------------- device_partition
def _partition_axis(m):
    box = m.box("k")
    axis = m.params.get("axis")
    if axis is not None:
        return axis
    for a in box.cod.inside:
        for name in a.names:
            try:
                sharded(box, name, devices_of(m))
                return name
            except NapkinError:
                continue
    raise RewriteError(f"{box.name}: no output axis it is woven over can be sharded")


def _partitioned(m):
    return sharded(m.box("k"), _partition_axis(m), devices_of(m))


# ---------------------------------------------------------------------- device_reduction
def _reduced_axes(box) -> list:
    outs = {n for a in box.cod.inside for n in a.names}
    return [n for a in box.dom.inside for n in a.names if n not in outs and n not in box.data.weave_names]


def _reduction(m):
    box = m.box("k")
    if isinstance(box, nc.Region):
        raise RewriteError(f"{box.name} is a region: a reduction over devices reduces one primitive box")
    acc = kind_of(box.data.kind).accumulator
    if acc is None or acc.merge is None:
        raise RewriteError(f"{box.name!r} ({box.data.kind}) has no accumulator with a merge: its partial results "
                           f"cannot be merged across devices")
    axes = list(dict.fromkeys(_reduced_axes(box)))
    axis = m.params.get("axis", axes[0] if axes else None)
    if axis not in axes:
        raise RewriteError(f"{box.name!r} reduces {axes or 'no axis'}, not {axis!r}")
    P = devices_of(m)
    full = next(a.axis(axis).size for a in box.dom.inside if axis in a.names)
    size = shard_size(full, P if not isinstance(P, str) else nc.symbol(P))
    local = relabel_axis(as_diagram(box), axis, size, full=full)
    reduce = None
    for a in box.cod.inside:
        ar = nc.all_reduce(" ".join(a.names) or "()", devices=P, merge=acc.merge, level=a.level, dtype=a.dtype,
                           sizes={x.name: x.size for x in a.axes})
        reduce = ar if reduce is None else reduce @ ar
    ins = tuple(axis if axis in a.names else None for a in box.dom.inside)     # each output all-reduced: replicated
    return same_type(device_region(local >> reduce, axis, P, full, sharded_in=ins, sharded_out=(None,) * len(box.cod)),
                     box.dom, box.cod, box.name)


# ---------------------------------------------------------------------- device_fusion
def _fused(m):
    net, a, b = m.net, m.box("a"), m.box("b")
    plain = not isinstance(b, Shard)
    if not plain and (b.axis, b.devices) != (a.axis, a.devices):
        raise RewriteError(f"{a.name} and {b.name} shard different axes or run on different devices")
    if not plain and b.order != a.order:
        raise RewriteError(f"{a.name} holds its shards in the {a.order} order, {b.name} in the {b.order} order: a "
                           f"device's shard of one is not its shard of the other (one region has one order)")
    g_dom = list(b.dom.inside) if plain else list(b.arg.dom.inside)
    b_sharded = (None,) * len(b.dom) if plain else b.sharded("dom")
    a_sharded = a.sharded("cod")
    inner_dom = [(a.arg.dom.inside[p] if v == "a" else g_dom[p]) for v, p in m.inputs]
    bld = nc.Builder(nc.Ty(*inner_dom))
    wires = dict(zip(m.inputs, bld.inputs))
    outa = bld(a.arg, *[wires[("a", p)] for p in range(len(a.dom))])
    outa = outa if isinstance(outa, tuple) else (outa,)
    args = []
    for j, w in enumerate(net.ins[m.nodes["b"]]):
        src = net.wires[w].src
        if src[0] != m.nodes["a"]:
            args.append(wires[("b", j)])
            continue
        value, made_sharded = outa[src[1]], a_sharded[src[1]]
        if made_sharded is not None and b_sharded[j] is None:   # sharded where the reader needs it whole: gathered
            whole = g_dom[j]
            value = bld(nc.all_gather(" ".join(whole.names), axis=made_sharded, devices=a.devices, level=whole.level,
                                      dtype=whole.dtype, sizes={x.name: x.size for x in whole.axes}), value)
        elif b_sharded[j] != made_sharded:
            raise RewriteError(f"{b.name} reads input {j} sharded along {b_sharded[j]!r}, which {a.name} makes "
                               f"{'whole' if made_sharded is None else 'sharded along ' + repr(made_sharded)}")
        args.append(value)
    inside_b = as_diagram(b) if plain else b.arg
    outb = bld(inside_b, *args)
    outb = outb if isinstance(outb, tuple) else (outb,)
    value = {("a", p): outa[p] for p in range(len(outa))}
    value.update({("b", p): outb[p] for p in range(len(outb))})
    body = bld.build(*(value[port] for port in m.outputs))
    also = {x: f for x, (_, f) in a.sharded_axes().items() if x != a.axis}
    cuts = {("a", "dom"): a.sharded("dom"), ("a", "cod"): a_sharded, ("b", "dom"): b_sharded,
            ("b", "cod"): (None,) * len(b.cod) if plain else b.sharded("cod")}    # a plain G runs on every device
    fused = same_type(device_region(body, a.axis, a.devices, a.full_size(), also=also, order=a.order,
                                    sharded_in=tuple(cuts[v, "dom"][p] for v, p in m.inputs),
                                    sharded_out=tuple(cuts[v, "cod"][p] for v, p in m.outputs)), m.dom, m.cod,
                       f"{a.name} ; {b.name}")
    return m.filled(fused)


# ---------------------------------------------------------------------- device_gather
def _gathered_axis(m):
    k = m.box("k")
    return m.params.get("axis") or next((n for a, cut in zip(k.dom.inside, k.sharded("dom")) if cut is None
                                         for n in a.names if n != k.axis), None)


def _gathered(m):
    k = m.box("k")
    axis = m.params.get("axis") or next((n for a, cut in zip(k.dom.inside, k.sharded("dom")) if cut is None
                                         for n in a.names if n != k.axis), None)
    if axis is None or axis == k.axis:
        raise RewriteError(f"{k.name}: no replicated input carries an axis other than {k.axis!r} (the one it shards) "
                           f"to arrive sharded along; got axis={axis!r}")
    picked = [i for i, (a, cut) in enumerate(zip(k.dom.inside, k.sharded("dom"))) if cut is None and axis in a.names]
    if not picked:
        raise RewriteError(f"{k.name} has no replicated input that carries {axis!r}")
    full = k.dom.inside[picked[0]].axis(axis).size
    P = k.devices
    bld = nc.Builder(nc.Ty(*[a.replace(axes=tuple(x.relabel(shard_size(full, P)) if x.name == axis else x
                                                  for x in a.axes)) if i in picked else a
                             for i, a in enumerate(k.arg.dom.inside)]))
    wires = [bld(nc.all_gather(" ".join(a.names), axis=axis, devices=P, level=a.level, dtype=a.dtype,
                               sizes={x.name: x.size for x in a.axes}), w) if i in picked else w
             for i, (a, w) in enumerate(zip(k.arg.dom.inside, bld.inputs))]
    made = bld(k.arg, *wires)
    inside = bld.build(*(made if isinstance(made, tuple) else (made,)))
    also = {a: f for a, (_, f) in k.sharded_axes().items() if a != k.axis}
    ins = tuple(axis if i in picked else cut for i, cut in enumerate(k.sharded("dom")))
    return same_type(device_region(inside, k.axis, P, k.full_size(), also={**also, axis: full}, sharded_in=ins,
                                   sharded_out=k.sharded("cod"), order=k.order), k.dom, k.cod, k.name)


# ---------------------------------------------------------------------- obligations
def _sized(rng, lo=4):
    return {k: int(rng.integers(lo, lo + 5)) for k in ("q", "x", "d", "n", "h", "e", "k")}


def _partition_instance(rng):
    """A woven program at concrete sizes: attention (3 boxes), a streamed and grouped kernel, a matmul chain."""
    s = _sized(rng)
    algos = [lambda: nc.library.attention(q=s["q"], x=s["x"], d=s["d"]),
             lambda: nc.group(nc.stream(nc.library.attention(q=s["q"], x=s["x"], d=s["d"]), "x", 2), "q", 2),
             lambda: nc.einsum("n k, k h -> n h", n=s["n"], k=s["k"], h=s["h"])
             >> nc.elementwise("exp", "n h", n=s["n"], h=s["h"]),
             lambda: nc.reduce("sum", "n h -> n", n=s["n"], h=s["h"])]
    return algos[int(rng.integers(len(algos)))]()


def _concrete(diagram, P, rng) -> dict:
    """Sizes for every symbol of ``diagram`` (a varied instance may be symbolic): each at least ``P``."""
    return {str(x): int(rng.integers(P, 3 * P + 2)) for x in symbols_of(diagram, params=True)}


def _partition_cost(lhs, rhs, m):
    """Per device: the FLOPs and transfers of the node run on device 0's shard (the largest), no link traffic, and
    each device's level-0 memory the node's at that device's shard; counted on the node written without a device
    region at each shard's size."""
    box = m.box("k")
    axis, P = _partition_axis(m), devices_of(m)
    (shard,) = [b for b in rhs.boxes if isinstance(b, Shard) and b.axis == axis and b.dom == box.dom] or [None]
    assert shard is not None, "no device region around the node"
    one = as_diagram(shard)
    sizes = _concrete(one, P, np.random.default_rng(P))
    full = shard.full_size()
    n_full = int(sympy.sympify(full).subs({nc.symbol(k): v for k, v in sizes.items()}))
    cuts = [len(c) for c in np.array_split(np.arange(n_full), P)]
    c = at(one, sizes)
    per = []
    for n in cuts:        # an idle device (more devices than values) holds and computes nothing
        mine = relabel_axis(as_diagram(box), axis, n, full=full) if n else None
        per.append(at(mine, nc.Sizes(sizes).restrict(mine)) if n else None)
    assert c.flops == per[0].flops and c.H == per[0].H, f"per device {c.flops}, {c.H}; device 0's {per[0].flops}"
    held = tuple(p.M[0] if p is not None else 0 for p in per)
    assert c.link.held == held, f"held {c.link.held}, {held}"
    assert set(c.link.H) == {0}


def _reduction_instance(rng):
    s = _sized(rng)
    algos = [lambda: nc.einsum("n h, h e -> n e", n=s["n"], h=s["h"], e=s["e"]),
             lambda: nc.reduce("sum", "n h -> n", n=s["n"], h=s["h"]),
             lambda: nc.reduce("max", "n h -> n", n=s["n"], h=s["h"]),
             lambda: nc.elementwise("exp", "n h", n=s["n"], h=s["h"]) >> nc.reduce("sum", "n h -> n", n=s["n"],
                                                                                    h=s["h"])]
    return algos[int(rng.integers(len(algos)))]()


def _reduction_cost(lhs, rhs, m):
    """Symbolically per device: the box's FLOPs / P and ``2 (P − 1)/P`` times its output sent and received (one
    all-reduce), ``2 (P − 1)`` messages."""
    box = m.box("k")
    P = sympy.Symbol("P", positive=True, integer=True)
    axis = m.params.get("axis") or _reduced_axes(box)[0]
    built = _reduction(type(m)(m.net, m.nodes, m.inputs, m.input_wires, m.outputs, m.output_wires, {},
                               {**m.params, "devices": P, "axis": axis}, m.rule))
    c, whole = nc.cost(built), nc.cost(as_diagram(box))
    out = sum((numel(a) for a in box.cod.inside), sympy.Integer(0))
    assert sympy.simplify(c.link.sent - 2 * (P - 1) * out / P) == 0, f"sent {c.link.sent}"
    assert sympy.simplify(c.link.received - c.link.sent) == 0
    assert sympy.expand(c.link.messages - 2 * (P - 1) * len(box.cod)) == 0
    for p, f in whole.flops.items():
        assert sympy.simplify(c.flops[p] - f / P) == 0 or p == "general", f"{p}: {c.flops[p]} vs {f}/P"


def _fusion_instance(rng):
    """Two or three device regions in a row (a woven map after a sharded matmul, a replicated box reading a
    sharded value), built by the other two rules; two maps sharded in the zigzag order (their fusion keeps it)."""
    s = _sized(rng)
    P = int(rng.integers(2, 4))
    n, h, e = s["n"], s["h"], s["e"]
    chains = [lambda: nc.einsum("n d, d h -> n h", n=n, h=h, d=s["d"]) >> nc.elementwise("relu", "n h", n=n, h=h),
              lambda: nc.einsum("n d, d h -> n h", n=n, h=h, d=s["d"]) >> nc.reduce("sum", "n h -> n", n=n, h=h),
              lambda: nc.elementwise("exp", "n h", n=n, h=h) @ nc.Id("h e", h=h, e=e)
              >> nc.einsum("n h, h e -> n e", n=n, h=h, e=e),
              lambda: nc.einsum("n d, d h -> n h", n=n, h=h, d=s["d"]) >> nc.softmax("n h", over="h", n=n, h=h)]
    k = int(rng.integers(len(chains) + 1))
    if k == len(chains):
        z = max(n, 2 * P)
        return nc.shard(nc.elementwise("exp", "n h", n=z, h=h), "n", P, order="zigzag") \
            >> nc.shard(nc.softmax("n h", over="h", n=z, h=h), "n", P, order="zigzag")
    rules = [device_partition.using(axis="h", devices=P)] + [device_reduction.using(axis="h", devices=P)] * (k == 2)
    return rewrite(chains[k](), rules, _first).diagram


def _first(net, options):
    return options[0] if options else None


def _fusion_cost(lhs, rhs, m):
    """The link traffic grows by the all-gathers the fusion inserts and by nothing else: ``(P − 1) n/P`` sent and
    received per device for each sharded value of ``n`` values read whole."""
    a, b = m.box("a"), m.box("b")
    P, sent, received = a.devices, sympy.Integer(0), sympy.Integer(0)
    for j, arr in enumerate(b.dom.inside):
        src = m.net.wires[m.net.ins[m.nodes["b"]][j]].src
        cut = a.sharded("cod")[src[1]] if src[0] == m.nodes["a"] else None
        if isinstance(b, Shard) or cut is None:
            continue
        shard = numel(arr.replace(axes=tuple(x.relabel(shard_size(x.size, P)) if x.name == cut else x
                                             for x in arr.axes)))
        sent, received = sent + (P - 1) * shard, received + numel(arr) - shard      # device 0's (any, where P | a)
    before = nc.cost(lhs).link
    after = nc.cost(rhs).link
    zero = sympy.Integer(0)
    assert sympy.simplify(after.sent - (before.sent if before else zero) - sent) == 0, \
        f"sent {after.sent} vs {before.sent if before else 0} + {sent}"
    assert sympy.simplify(after.received - (before.received if before else zero) - received) == 0


def _gather_instance(rng):
    """A device region sharding one axis whose replicated inputs carry another, ``x``: attention sharded on the
    queries (K, V carry the keys), a matmul sharded on its rows (the weights carry the inner axis ``x``)."""
    s = _sized(rng)
    P = int(rng.integers(2, 4))
    algos = [lambda: nc.shard(nc.library.attention(q=s["q"], x=s["x"], d=s["d"]), "q", P),
             lambda: nc.shard(nc.group(nc.stream(nc.library.attention(q=s["q"], x=s["x"], d=s["d"]), "x", 2), "q", 2),
                              "q", P),
             lambda: nc.shard(nc.einsum("n x, x h -> n h", n=s["n"], x=s["k"], h=s["h"]), "n", P)]
    return algos[int(rng.integers(len(algos)))]()


def _gather_cost(lhs, rhs, m):
    """The link traffic grows by the all-gathers of the inputs that now arrive sharded, ``(P − 1)·n/P`` each way per
    device for an input of ``n`` values (device 0's: ``(P − 1)·⌈·⌉`` sent at ragged sizes), and nothing else."""
    k = m.box("k")
    axis, P = _gathered_axis(m), k.devices
    sent = received = sympy.Integer(0)
    for a, cut in zip(k.dom.inside, k.sharded("dom")):
        if cut is None and axis in a.names:
            shard = numel(a.replace(axes=tuple(x.relabel(shard_size(x.size, P)) if x.name == axis else x
                                               for x in a.axes)))
            sent, received = sent + (P - 1) * shard, received + numel(a) - shard
    before, after = nc.cost(lhs).link, nc.cost(rhs).link
    assert sympy.simplify(after.sent - before.sent - sent) == 0, f"sent {after.sent} vs {before.sent} + {sent}"
    assert sympy.simplify(after.received - before.received - received) == 0


def random_inputs(rng, diagram, sizes):
    return [rng.normal(size=shape_of(a, sizes)) for a in diagram.dom.inside]


device_partition = Rule(
    "device_partition",
    Pattern({"k": LEVEL0}),
    built_by(_partitioned),
    conditions=(Condition("woven", legal_when(_partitioned), "every box that sees the axis is woven over it"),),
    obligation=Obligation(_partition_instance, inputs=random_inputs, cost=_partition_cost),
    doc="""F (woven over a) → Shard_{a,P}(F[a ↦ a/P]): split_a ; (F ⊗ … ⊗ F) ; join_a with one F per device.

    The group partition (paper Fig. weaved_algorithm) one level up: the groups are devices, inputs without the
    axis replicated on each.  Cost claim, counted on F at each shard's size: per device the FLOPs and transfers of
    device 0's shard, nothing over the link, each device's level-0 memory its shard's.""",
    oriented=False,
)

device_reduction = Rule(
    "device_reduction",
    Pattern({"k": LEVEL0}),
    built_by(_reduction),
    conditions=(Condition("mergeable", legal_when(_reduction), "the box reduces the axis by a monoid with a merge"),),
    obligation=Obligation(_reduction_instance, inputs=random_inputs, cost=_reduction_cost),
    doc="""R (reducing a by ⊕) → Shard_{a,P}(R[a ↦ a/P] ; all-reduce_⊕): each device's partial, merged.

    A split reduction (FlashDecoding's combine, :mod:`napkin_cat.algorithms.splits`) across devices: the law
    ``R(x₁ ⧺ … ⧺ x_P) = R(x₁) ⊕ … ⊕ R(x_P)``.  Cost claim: per device R's FLOPs / P, and one all-reduce:
    ``2 (P − 1)/P`` times R's output sent and received, ``2 (P − 1)`` messages per output.""",
    oriented=False,
)

device_fusion = Rule(
    "device_fusion",
    Pattern({"a": DEVICES, "b": where("device region, or box or region at level 0",
                                      lambda net, n: device_node(net, n) or level0_node(net, n))},
            edges=[("a", None, "b", None)]),
    built_by(_fused),
    conditions=(Condition("same devices", legal_when(_fused),
                          "one axis and devices; no sharded read of a value made whole"),),
    obligation=Obligation(_fusion_instance, inputs=random_inputs, cost=_fusion_cost),
    doc="""Shard_{a,P}(F) ; Shard_{a,P}(G) → Shard_{a,P}(F ; [all-gather] ; G); G may be any level-0 node (run on every
    device).

    The shards stay on their devices between the two regions; a value F makes sharded and G reads whole is
    all-gathered first.  The fused region keeps the regions' order (:mod:`~napkin_cat.algorithms.orders`); two
    regions in different orders hold different shards on a device, and a region in the zigzag order holds no
    all-gather: neither is offered.  Cost claim: the link traffic grows by exactly those all-gathers'
    ``(P − 1) n/P``.""",
    oriented=False,
)

device_gather = Rule(
    "device_gather",
    Pattern({"k": DEVICES}),
    built_by(_gathered),
    conditions=(Condition("replicated input", legal_when(_gathered),
                          "a replicated input of the region carries the axis"),),
    obligation=Obligation(_gather_instance, inputs=random_inputs, cost=_gather_cost),
    doc="""Shard_{a,P}(F) (an input x replicated, carrying b) → Shard_{a,P; b}(all-gather_b(x) ; F).

    The input arrives sharded along b, shard p on device p (co-sharded with a), and is all-gathered where F reads it
    whole: context parallelism's all-gather of K and V (the queries sharded, the keys and values gathered).  A box
    inside that reads the positions of b (a causal mask's keys) reads them whole, from 0, as the region's record
    says (:class:`~napkin_cat.semantics.devices.OnDevice`).  Not offered on a region in the zigzag order (an
    all-gather joins contiguous shards; its ring travels instead).  Cost
    claim: the link traffic grows by those all-gathers, ``(P − 1)·n/P`` each way per device.""",
    oriented=False,
)

RULES = RuleSet((device_partition, device_reduction, device_fusion, device_gather))


def tensor_parallel(diagram, axis: str, devices, *, max_steps: int = 200):
    """``diagram`` on ``devices`` devices sharded along ``axis`` by the rules: every node woven over the axis
    partitioned, every reduction of it made a partial and an all-reduce, then the device regions fused (a value
    sharded where a box reads it whole all-gathered).  A :class:`~napkin_cat.rewriting.Derivation` (replayable)."""
    rules = [device_partition.using(axis=axis, devices=devices), device_reduction.using(axis=axis, devices=devices),
             device_fusion]
    order = {r.name: k for k, r in enumerate(rules)}

    def pick(net, options):      # partitions and reductions first, then fusions, each at its first match
        return min(options, key=lambda o: order[o[0].name], default=None)
    return rewrite(diagram, rules, pick, max_steps=max_steps)


__all__ = ["RULES", "random_inputs", "device_partition", "device_reduction", "device_fusion", "device_gather",
           "tensor_parallel"]
