"""The ring of a computed value as a rule (issue 37): the all-gather of what each device computes on its shard, read
by a part that streams the gathered axis, made a ring.

=========================  ========================================================================================
rule                       lhs → rhs
=========================  ========================================================================================
``device_ring_gathered``   Shard_{a,P}(E ; all-gather_g(v) ; ρ_{g↦b} ; F ; H)
                           →  Shard_{a,P}(E ; ρ_{g↦b}(v) ; Ring_{b,P}(F[b ↦ b/P]) ; H)
                           v computed on each device's shard by E; F the boxes that read what the gathered values
                           make along b (streamable along b); H the rest; ρ any renames of the gathered value
=========================  ========================================================================================

Ring attention inside a transformer block: each device projects K and V from its own tokens, and instead of
all-gathering them (``device_fusion``'s gather, after the compute) the slices travel round the devices while
attention folds them (:mod:`napkin_cat.algorithms.ring_gathered`).  The link moves what the gather moved,
``(P − 1)·|v|/P`` each way per gathered value, overlapped with the trips; a device holds one incoming slice, not
``v`` whole.  Oriented by its user (``device_ring_gathered.using(axis="m")``: the axis the part reads, or the
gathered one; without it the first such gather's).

>>> import napkin_cat as nc
>>> from rewrites.devices import tensor_parallel
>>> d = device_ring_gathered.apply(tensor_parallel(self_attention_from_projections(), "n", 2).diagram)
>>> (k,) = [b for b in d.boxes if isinstance(b, nc.Shard)]
>>> [b.region for b in k.arg.boxes if isinstance(b, nc.Region)]
['ring']
"""
from __future__ import annotations

import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.ring_gathered import ring_gathered
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost.numeric import at
from napkin_cat.errors import DeviceError, RewriteError
from napkin_cat.rewriting import Condition, Obligation, Rule
from napkin_cat.rewriting.match import Pattern
from napkin_cat.syntax.relabel import rename_axis
from napkin_cat.syntax.sizes import symbols_of
from rewrites.device_matching import DEVICES, as_diagram, built_by, legal_when, same_type
from rewrites.devices import random_inputs, tensor_parallel
from rewrites.generation import device_generation
from rewrites.ring import simulate_ring


def _ringed(m):
    k = m.box("k")
    try:
        made = ring_gathered(as_diagram(k), m.params.get("axis"))
    except DeviceError as e:
        raise RewriteError(str(e)) from None
    return same_type(made, k.dom, k.cod, k.name)


def self_attention_from_projections(causal: bool = False, **sizes):
    """``softmax(Q Kᵀ) V`` over tokens ``n`` with ``Q, K, V = X W_q, X W_k, X W_v`` (keys on a renamed token axis
    ``m``; ``causal``: a causal mask from the positions), a program whose K and V a partition of the tokens computes
    on the devices' shards."""
    n = sizes.get("n", nc.symbol("n"))
    b = nc.Builder(nc.types("n e, e d, e d, e d", **sizes))
    X, Wq, Wk, Wv = b.inputs
    K, V = (b(nc.renaming("n d -> m d", **{k: v for k, v in sizes.items() if k in "nd"}),
              b(nc.einsum("n e, e d -> n d", **sizes), X, W)) for W in (Wk, Wv))
    Q = b(nc.einsum("n e, e d -> n d", **sizes), X, Wq)
    lib = nc.library.causal_attention if causal else nc.library.attention
    att = lib(**{k: v for k, v in sizes.items() if k == "d"})
    att = rename_axis(rename_axis(att, "q", "n", n), "x", "m", n)
    return b.build(b(att, Q, K, V))


def _instance(rng):
    """Self-attention from its projections (plain or causal) sharded on the tokens, K and V all-gathered: at random
    sizes (ragged shards), P of 2 … 4 (the region's contiguous order: the partition's)."""
    P = int(rng.integers(2, 5))
    s = {"n": int(rng.integers(4 * P, 6 * P + 3)), "e": int(rng.integers(2, 6)), "d": int(rng.integers(2, 5))}
    f = self_attention_from_projections(causal=bool(rng.integers(2)), **s)
    return generated(tensor_parallel(f, "n", P).diagram)


def generated(d):
    """``d`` with each box of no input that feeds a device region alone moved inside it (``device_generation``, to
    a fixpoint): the keys' positions each device computes, so a ring computes each trip's own."""
    while True:
        try:
            d = device_generation.apply(d)
        except RewriteError:
            return d


def _cost(lhs, rhs, m):
    """Per device at the instance's sizes: the link counts of a ring simulated step by step (the gathered values'
    slices, cut as the region cuts them), the same values received as the all-gather's before, the same FLOPs where
    no mask skips a fold (no more where one does)."""
    (region,) = [b for b in rhs.boxes if isinstance(b, nc.Shard)]
    (r,) = [b for b in region.arg.boxes if getattr(b, "region", None) == "ring"]
    rng = np.random.default_rng(len(str(lhs)))
    P = int(region.devices)
    sizes = {str(x): int(rng.integers(P, 3 * P + 2)) for x in symbols_of(lhs, params=True)}
    before, after = at(lhs, sizes), at(rhs, sizes)
    env = {nc.symbol(n): v for n, v in sizes.items()}

    def value(e):
        return int(sympy.sympify(e).subs(env))
    extents = [len(c) for c in np.array_split(np.arange(value(r.full_size())), P)]
    rows = [int(np.prod([value(x.size) for x in a.axes if x.name != r.axis])) for a in r.dom.inside
            if r.axis in a.names]
    sent, received, messages, _ = simulate_ring(extents, rows)
    assert after.link.sent == sent and after.link.received == received, \
        f"sent {after.link.sent} vs {sent}, received {after.link.received} vs {received}"
    assert after.link.messages == messages, f"messages {after.link.messages} vs {messages}"
    assert after.link.received == before.link.received, f"{after.link.received} vs the gather's {before.link.received}"
    if schedule_of(r).masks is not None:       # a mask from positions: the folds it never allows are skipped
        assert after.flops.get("tensor") <= before.flops.get("tensor"), f"{after.flops} vs {before.flops}"
    else:
        assert after.flops.get("tensor") == before.flops.get("tensor"), f"{after.flops} vs {before.flops}"


device_ring_gathered = Rule(
    "device_ring_gathered",
    Pattern({"k": DEVICES}),
    built_by(_ringed),
    conditions=(Condition("streamed", legal_when(_ringed),
                          "a value computed on the shards is all-gathered and read by a part that streams its axis"),),
    obligation=Obligation(_instance, inputs=random_inputs, cost=_cost),
    doc="""Shard_{a,P}(E ; all-gather_g(v) ; ρ ; F ; H) → Shard_{a,P}(E ; ρ(v) ; Ring_{b,P}(F[b ↦ b/P]) ; H).

    The stream theorem one level up for a value the devices compute: each device's slice of v (computed by E on its
    shard) travels round the devices, trip t on device p folding slice (p − t) mod P, F's reducers carried across
    the trips.  Cost claim, per device at ragged shards: the link counts of a ring simulated step by step, the same
    values received as the all-gather's, the contractions' FLOPs unchanged.""",
    oriented=False,
)

__all__ = ["device_ring_gathered", "self_attention_from_projections"]
