"""Every device form the search offers is one the cluster's time model can time (issue 31's "rules that offer only
what they rewrite", on issue 37's device forms): ``device_forms`` offers a form only where its rules made it, and
``time_form`` then times it or refuses it for the cluster's reasons alone (its memory, the inputs' layout), never
because the form cannot be costed, run as one device's programs, or given an algorithm.

Found refused at timing though offered (main at 8dc11ae): the MLP's ``shard n: ring f`` (its ring's trip made one
kernel with the residual and the bias after the fold inside it: "'add' runs after the fold along 'f' inside a region
nested in the stream"), the block's ``shard f: …`` forms (a rename between kernels, a view, timed as a program: "no
operation to derive"), and the block's sequence-parallel ring of K and V (a renamed cut axis left at ``n/P``; run on
gloo in tests/distributed/test_scattered_ring.py).  A form timed is checked to have a positive time and memory.
"""
from __future__ import annotations

import pytest

import napkin_cat as nc
from napkin_cat.hardware.clustered import time_form
from napkin_cat.search.devices import device_forms

#: the refusals that are the cluster's to make: a form too large for a device, or reading its inputs otherwise
CLUSTER_REASONS = ("memory:", "layout:")


def untimed(f, P, sizes, keep=lambda label: True):
    c = nc.hardware.cluster("h100-sxm5", devices=P, link="nvlink4")
    cache, out, offered = {}, [], 0
    for form in device_forms(f, P):
        if form.refused is not None or not keep(form.label):
            continue
        offered += 1
        r = time_form(form, c, sizes, compute="transfers", cache=cache)
        if r.refused is not None and not r.refused.startswith(CLUSTER_REASONS):
            out.append((form.label, r.refused))
        elif r.refused is None:
            assert r.time > 0 and r.memory > 0
    return offered, out


@pytest.mark.parametrize("P, sizes", [(4, {"n": 32, "i": 32, "f": 64, "o": 32}),
                                      (3, {"n": 10, "i": 6, "f": 7, "o": 5})])
def test_the_rings_offered_for_the_mlp_are_timed(P, sizes):
    offered, refused = untimed(nc.library.mlp(), P, sizes, keep=lambda label: "ring" in label)
    assert offered >= 2                 # ring f, contiguous and zigzag (main: both refused at timing)
    assert refused == []


def test_a_form_whose_outside_holds_a_view_is_timed():
    """The block's tensor-parallel MLP: attention outside the region, its K/V rename a view (no program)."""
    sizes = {"n": 16, "e": 16, "h": 2, "d": 8, "f": 32}
    offered, refused = untimed(nc.library.transformer_block(), 2, sizes,
                               keep=lambda label: label == "shard f: all-reduce")
    assert offered == 1
    assert refused == []
