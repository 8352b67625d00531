"""``device_ring_gathered`` (issue 37): the all-gather of a value computed on the shards made a ring.  Its obligation
checks the rewrite numerically (numpy on one device, ragged shards, P = 2 … 4, plain and causal self-attention from
its projections) and its cost claim against a ring simulated step by step; a mutant whose ring folds V's slices as
K's is caught."""
from __future__ import annotations

from dataclasses import replace

import pytest

import napkin_cat as nc
from napkin_cat.algorithms.devices import Shard
from napkin_cat.algorithms.partitions import single
from napkin_cat.errors import ObligationError
from napkin_cat.syntax.flat import from_layers
from napkin_cat.syntax.wiring import trace_values
from rewrites.ring_gathered import device_ring_gathered

proves = pytest.mark.proves


@proves("device_ring_gathered")
def test_device_ring_gathered_is_sound():
    proof = device_ring_gathered.obligation.discharge(device_ring_gathered, trials=6)
    assert proof.rewrites >= 6 and proof.cost_checked


def swap_travellers(d):
    """``d`` with its ring's first two travelling inputs (K's and V's slices) exchanged inside its device region."""
    (k,) = [b for b in d.boxes if isinstance(b, Shard)]
    ops, dom, cod = trace_values(k.arg)
    bld = nc.Builder(k.arg.dom)
    wires = dict(zip(dom, bld.inputs))
    for box, ins, outs in ops:
        args = [wires[v] for v in ins]
        if getattr(box, "region", None) == "ring":
            s = box.streamed()
            args[s[0]], args[s[1]] = args[s[1]], args[s[0]]
        made = bld(single(box), *args)
        wires.update(zip(outs, made if isinstance(made, tuple) else (made,)))
    region = Shard(bld.build(*(wires[v] for v in cod)), k.dom, k.cod, dict(k.params))
    items = [(layer.boxes_or_types[0], region if layer.boxes_or_types[1] is k else layer.boxes_or_types[1],
              layer.boxes_or_types[2]) for layer in d.inside]
    return from_layers(d.dom, d.cod, items)


def test_a_ring_folding_v_as_k_fails_its_obligation():
    bad = replace(device_ring_gathered, rhs=lambda m: swap_travellers(device_ring_gathered.rhs(m)))
    with pytest.raises((ObligationError, nc.NapkinError)):
        bad.obligation.discharge(bad, trials=4)


def test_the_renamed_record_survives_serialisation_and_a_renaming():
    """The region's record of the keys' axis as a renamed shard of the tokens (``renamed``: m cut as n) is read back
    by ``nc.loads`` and follows a renaming of the tokens' axis: the function is unchanged (numpy, one device)."""
    import numpy as np
    from napkin_cat.search.devices import device_forms
    from napkin_cat.syntax.relabel import rename_axis
    from rewrites.ring_gathered import self_attention_from_projections
    f = self_attention_from_projections(causal=True)
    d = {g.label: g for g in device_forms(f, 3)}["shard n: ring m (computed)"].diagram
    xs = [np.random.default_rng(1).normal(size=s) for s in [(8, 3), (3, 2), (3, 2), (3, 2)]]
    s = np.einsum("nd,md->nm", xs[0] @ xs[1], xs[0] @ xs[2]) / np.sqrt(2)
    s[np.triu_indices(8, 1)] = -np.inf
    expected = np.exp(s - s.max(1, keepdims=True)) / np.exp(s - s.max(1, keepdims=True)).sum(1, keepdims=True) \
        @ (xs[0] @ xs[3])
    assert nc.loads(nc.dumps(d)) == d
    for g in (d, nc.loads(nc.dumps(d)), rename_axis(d, "n", "t", nc.symbol("n"))):
        assert np.allclose(nc.evaluate(g, *xs), expected)
