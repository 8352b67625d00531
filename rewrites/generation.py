"""A box with no input computed on every device (issue 37): positions made inside the device region that reads them.

=====================  ============================================================================================
rule                   lhs → rhs
=====================  ============================================================================================
``device_generation``  G ; Shard_{a,P}(F) → Shard_{a,P}(G ; F)          G has no input (positions, a constant) and
                                                                        feeds the region alone, which reads it whole
=====================  ============================================================================================

The partition (:mod:`rewrites.devices`) leaves outside a region every box not woven over its axis; the positions of
the keys in causal attention are one, read whole by every device as data.  Inside, each device computes them, and a
ring of the keys (:mod:`rewrites.ring`) streams them with its trips: a mask of positions is then decided per device
and step (its skipped folds not counted by the cost, the zigzag order balancing them).

>>> import napkin_cat as nc
>>> from rewrites.devices import tensor_parallel
>>> base = tensor_parallel(nc.library.causal_attention(), "q", 2).diagram
>>> [b.name for b in base.boxes if b.name == "pos"], [b.name for b in device_generation.apply(base).boxes][-1:]
(['pos'], ['Shard(axis=q, size=q/2, devices=2)'])
"""
from __future__ import annotations

import sympy

import napkin_cat as nc
from napkin_cat.algorithms.devices import device_region
from napkin_cat.errors import RewriteError
from napkin_cat.rewriting import Condition, Obligation, Rule
from napkin_cat.rewriting.match import Pattern, where
from napkin_cat.syntax.primitive import kind_of
from rewrites.device_matching import DEVICES, as_diagram, built_by, legal_when, same_type
from rewrites.devices import random_inputs, tensor_parallel
def _generator(net, n) -> bool:
    """A level-0 primitive box with no input (positions, a constant): each device can compute it itself."""
    box = n.box
    return n.kind == "box" and not n.dom and bool(n.cod) and all(a.level == 0 for a in n.cod) \
        and not isinstance(box, nc.Region) and kind_of(box.data.kind).collective is None


GENERATOR = where("box at level 0 with no input", _generator)


def _generated(m):
    """A box with no input (``a``) feeding only the device region ``b``, moved inside it: every device computes it
    (its positions are then the region's: a position of the region's axis or of a ring's is each device's own)."""
    net, a, b = m.net, m.box("a"), m.box("b")
    if any(v == "a" for v, _ in m.outputs):
        raise RewriteError(f"{a.name} is read outside {b.name} too: moved inside, its value would be the region's "
                           "output")
    sharded = b.sharded("dom")
    bld = nc.Builder(nc.Ty(*(b.arg.dom.inside[p] for _, p in m.inputs)))
    wires = dict(zip(m.inputs, bld.inputs))
    made = bld(as_diagram(a))
    made = made if isinstance(made, tuple) else (made,)
    args = []
    for j, w in enumerate(net.ins[m.nodes["b"]]):
        src = net.wires[w].src
        if src[0] != m.nodes["a"]:
            args.append(wires[("b", j)])
        elif sharded[j] is not None:
            raise RewriteError(f"{b.name} reads input {j} sharded along {sharded[j]!r}; {a.name} makes it whole")
        else:
            args.append(made[src[1]])
    outb = bld(b.arg, *args)
    outb = outb if isinstance(outb, tuple) else (outb,)
    body = bld.build(*(outb[p] for _, p in m.outputs))
    also = {x: f for x, (_, f) in b.sharded_axes().items() if x != b.axis}
    moved = same_type(device_region(body, b.axis, b.devices, b.full_size(), also=also, order=b.order,
                                    sharded_in=tuple(sharded[p] for _, p in m.inputs),
                                    sharded_out=tuple(b.sharded("cod")[p] for _, p in m.outputs)), m.dom, m.cod,
                      f"{a.name} ; {b.name}")
    return m.filled(moved)


# ---------------------------------------------------------------------- obligation
def _generation_instance(rng):
    """A device region fed by a box with no input: causal attention (with its log-sum-exp or not) partitioned on the
    queries by the other rules (the positions of the keys left outside, read whole by the region)."""
    s = {k: int(rng.integers(4, 9)) for k in ("q", "x", "d")}
    P = int(rng.integers(2, 4))
    f = nc.library.causal_attention(q=max(s["q"], P), x=s["x"], d=s["d"], lse=bool(rng.integers(2)))
    return tensor_parallel(f, "q", P).diagram


def _generation_cost(lhs, rhs, m):
    """Nothing more over the link (the box's value was whole on every device and is computed there now), and each
    device's FLOPs those of the region and the box."""
    before, after = nc.cost(lhs), nc.cost(rhs)
    for name in ("sent", "received", "messages"):
        assert sympy.simplify(getattr(after.link, name) - getattr(before.link, name)) == 0, \
            f"{name}: {getattr(after.link, name)} vs {getattr(before.link, name)}"
    for kind in set(before.flops) | set(after.flops):
        assert sympy.simplify(after.flops.get(kind, 0) - before.flops.get(kind, 0)) == 0, f"{kind} FLOPs"


device_generation = Rule(
    "device_generation",
    Pattern({"a": GENERATOR, "b": DEVICES}, edges=[("a", None, "b", None)]),
    built_by(_generated),
    conditions=(Condition("read by the region alone", legal_when(_generated),
                          "the box feeds the region alone, which reads its value whole"),),
    obligation=Obligation(_generation_instance, inputs=random_inputs, cost=_generation_cost),
    doc="""G (no input) ; Shard_{a,P}(F) → Shard_{a,P}(G ; F): a box with no input (positions, a constant) feeding
    only the region is computed on every device.

    Its value was replicated (whole on every device); now each device makes it, so a position it computes is the
    device's own, inside a ring the trip's: a mask from positions is decided per device and step (the folds a causal
    mask skips are skipped, the zigzag order balances them).  Cost claim: nothing more over the link, the same FLOPs
    per device.""",
    oriented=False,
)


__all__ = ["device_generation", "GENERATOR"]
