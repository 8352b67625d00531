"""The ring of a computed value on a cluster (issue 37, ``device_ring_gathered``): ``nc.derive`` times it beside the
all-gather form it comes from and chooses by the model.  Self-attention whose K and V are projected from each
device's tokens, on four H100 over PCIe 5: the ring moves what the all-gather moves (the same link seconds, from
the cost's traffic), overlapped with its trips (none exposed) where the all-gather's runs after the compute; it holds
one incoming slice, not K and V whole (less memory, by the slices' bytes); on a device too small for the gather,
the ring still fits and the choice is the fastest form that does."""
from __future__ import annotations

import dataclasses

import napkin_cat as nc
from rewrites.ring_gathered import self_attention_from_projections

RING, GATHER = "shard n: ring m (computed)", "shard n: all-gather n ×2"


def test_the_ring_of_projected_keys_moves_what_the_gather_moves_overlapped_in_less_memory():
    c = nc.hardware.cluster("h100-sxm5", devices=4, link="pcie5")
    f, sizes = self_attention_from_projections(), {"n": 1024, "e": 32, "d": 16}
    r = nc.derive(f, sizes=sizes, hardware=c, compute="transfers")
    rows = {row.label: row for row in r.candidates}
    ring, gather = rows[RING], rows[GATHER]
    assert ring.time is not None and gather.time is not None
    (moving,) = [p for p in ring.prediction.phases if p.label == "ring"]
    (after,) = [p for p in gather.prediction.phases if p.label == "collectives"]
    assert moving.link == after.link > 0 and moving.exposed == 0 and after.exposed == after.link
    # K and V whole (2 · n · d values, fp32) against a quarter each and one incoming quarter each
    n, d, P = sizes["n"], sizes["d"], 4
    assert gather.memory - ring.memory >= 4 * 2 * d * (n - 2 * n // P) * 0.99
    tight = nc.hardware.Cluster(dataclasses.replace(c.gpu, gmem=(gather.memory + ring.memory) // 2), 4, c.link)
    chosen = nc.derive(f, sizes=sizes, hardware=tight, compute="transfers")
    tight_rows = {row.label: row for row in chosen.candidates}
    assert tight_rows[GATHER].refused.startswith("memory") and tight_rows[RING].time == ring.time
    fitting = [row for row in chosen.candidates if row.time is not None]
    assert chosen.label == min(fitting, key=lambda row: row.time).label
