"""Causal attention's backward derived with its masked tiles skipped (issue 23).

The mask ``x ≤ q`` is a closed value (:mod:`napkin_cat.rewriting.closed`: made from positions, no input), so
each kernel that reads it computes it (kernel formation absorbs it; the search folds it into its readers) instead
of loading positions from level 0; then every stream of the backward finds the mask in its own trip and skips the
tiles where it is never true (:mod:`napkin_cat.algorithms.skipping`), as the forward's does.

At q = x = 256, d = 32, M = 2^13 the derived causal backward moves 253,440 values against 365,824 for the
unmasked backward's derivation (``nc.derive(nc.grad(nc.library.attention()), 2**13, sizes=...)``), a ratio of
0.69 (before skipping: 379,136, 1.02: positions loaded, no tile skipped; with each copy of the mask tested alone,
269,440, 0.74: a kernel computing dK and dV in one stream, each from its own copy, then skipped nothing, so the
search kept them apart, five streams where there are four); at q = x = 4096, d = 128, M = 2^16, 78,667,776
against 148,393,984, 0.53, as the forward's 0.53 (``NAPKIN_SLOW=1``).  The test derives both (the
denominator too: a typed-in one goes stale as the search improves), and counts what the derived causal plan moves
at its own tiles, skipped tiles left out, against its H.

The default tests derive the causal backward and the unmasked one (:func:`backward_io.unsaved`) once each; the sweep
at 4096 and the sliding window's linear H (two derivations) run with ``NAPKIN_SLOW=1``.
"""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost.numeric import at
from napkin_cat.rewriting.netlist import to_netlist
from napkin_cat.search.blocks import OpGraph
from napkin_cat.syntax.flat import layers
from rewrites.partition import kernel_formation

from backward_io import LARGE, SIZES, compulsory, counted, unsaved
from level0 import intermediates

M = 2 ** 13
slow = pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="derivations at q = x = 4096 or two sizes: "
                          "set NAPKIN_SLOW=1")


def streams(d):
    for _, b in layers(d):
        if isinstance(b, nc.Region) and type(b).__name__ == "Stream":
            yield b
        elif hasattr(b, "arg"):
            yield from streams(b.arg)


# ---------------------------------------------------------------------- the mechanism, without a search
def test_the_search_folds_the_mask_into_the_operations_that_read_it():
    g = nc.grad(nc.library.causal_attention())
    net = to_netlist(g)
    plain, folded = OpGraph(net), OpGraph(net, fold=True)
    names = [folded.name(i) for i in range(len(folded))]
    assert "pos" not in names and "≤" not in names and names.count("where") == 2
    assert len(plain) - len(folded) == 3                          # two positions and the comparison
    where = names.index("where")
    block = folded.subdiagram(1 << where | folded.preds[where])
    assert [b.name for b in block.boxes].count("pos") == 2        # computed inside, not an input
    assert not [a for a in block.dom.inside if a.dtype.family == "int"]


def test_kernel_formation_computes_a_closed_value_it_alone_reads():
    att = nc.library.causal_attention(q=6, x=5, d=3)
    (m,) = [m for m in kernel_formation.matches(att) if m.node("f").name == "where"]
    after = kernel_formation.apply(att, m)
    (kernel,) = [b for b in after.boxes if isinstance(b, nc.Kernel)]
    assert [b.name for b in kernel.arg.boxes if b.name in ("pos", "≤")] == ["pos", "pos", "≤"]
    assert nc.cost(after).H[1] == 2 * 6 * 5                       # the scores in, the masked scores out: no positions
    assert nc.equivalent(att, after)


# ---------------------------------------------------------------------- the derivation
@pytest.fixture(scope="module")
def derived():
    return nc.derive(nc.grad(nc.library.causal_attention()), M, sizes=SIZES)


def test_no_position_goes_through_level_0(derived):
    """Only the statistics L and D (one value per query row) go between the kernels."""
    assert sorted(tuple(a.names) for a in intermediates(derived.diagram)) == [("q",), ("q",)]


def computed(d, out=None) -> list:
    """The names of the primitive boxes ``d`` computes, inside its regions too."""
    out = [] if out is None else out
    for _, b in layers(d):
        if hasattr(b, "arg"):
            computed(b.arg, out)
        elif getattr(b, "data", None) is not None and b.data.kind not in ("load", "save"):
            out.append(b.name)
    return out


def test_each_kernel_computes_each_value_once(derived):
    """Recomputation gives each consumer of P = exp(S − L) its own copy (of S = Q Kᵀ, of the mask, of P), and the
    join puts dK's and dV's in one kernel; the rule playing ``compute_once`` (``rewrites.compute_once``) merges them
    there: per trip S, the mask and P once, and four products (S, dP = dO Vᵀ, dSᵀ Q, Pᵀ dO).  Without it (the book
    less that role) that kernel computed five products, the mask three times and P twice, and dQ's the mask twice."""
    regions = [b for _, b in layers(derived.diagram) if hasattr(b, "arg")]
    names = [computed(k.arg) for k in regions]
    assert all(n.count("≤") == 1 for n in names)                  # each kernel that reads the mask makes it once
    (both,) = [n for k, n in zip(regions, names) if len(k.cod) == 2]
    assert both.count("·") == 4 and both.count("exp") == 1


def test_every_stream_of_the_backward_skips_masked_tiles(derived):
    found = list(streams(derived.diagram))
    assert len(found) >= 4
    assert all(schedule_of(s).skip is not None and schedule_of(s).skip.axes == {"q", "x"} for s in found)


def test_h_is_what_the_derived_plan_moves_skipping_masked_tiles(derived):
    """The instrumented run of the derived plan at its own sizes and tiles (the runner skips a trip whose mask is
    never true) counts H transfers."""
    assert counted(derived) == {1: derived.H}
    assert derived.H >= compulsory(nc.grad(nc.library.causal_attention()), SIZES)


def test_skipping_makes_the_backward_cheaper_than_the_unmasked_one(derived):
    """Against the unmasked backward derived here at the same sizes and memory."""
    assert derived.H / unsaved().H[M] < 0.75


def test_the_derived_causal_backward_runs_at_ragged_sizes(derived):
    """Its plan at small ragged sizes (q ≠ x, partial tiles): the gradient nc.evaluate gives, counts equal to the
    cost with the skipped trips left out."""
    d = derived.diagram
    tiles = {str(k): 3 for k in derived.optimum.sizes if str(k) not in SIZES}
    sizes = {"q": 7, "x": 5, "d": 4, **tiles}
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=s) for s in ((7, 4), (5, 4), (5, 4), (7, 4))]
    y, counts = nc.plan(d, sizes).run(*xs)
    want = nc.evaluate(nc.grad(nc.library.causal_attention()), *xs)
    for a, b in zip(y, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    assert counts.transfers == at(d, sizes).H


@pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler: C kernel check skipped")
def test_the_c_kernels_of_the_causal_backward_skip_and_compute_the_gradient(derived):
    """The plan's C kernels at the ragged sizes (their arena poisoned: a value read before it is written is NaN):
    each stream of the diagram (dK and dV's one, reading two copies of the mask, too) skips the trips the mask
    never reaches, and the gradient is numpy's (float32)."""
    tiles = {str(k): 3 for k in derived.optimum.sizes if str(k) not in SIZES}
    k = nc.codegen.c(nc.plan(derived.diagram, {"q": 7, "x": 5, "d": 4, **tiles}), poison=True)
    found = list(streams(derived.diagram))
    assert len(found) >= 4 and all(schedule_of(s).skip is not None for s in found)
    # each stream loops over the ranges its mask reaches (codegen/trips.py), no trip tests it
    assert k.source.count(": bounds of ranges") == len(found) and "never true on this trip" not in k.source
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=s) for s in ((7, 4), (5, 4), (5, 4), (7, 4))]
    for a, b in zip(k(*xs), nc.evaluate(nc.grad(nc.library.causal_attention()), *xs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------- at the sizes (slow)
@slow
def test_the_causal_backward_at_4096_moves_about_half_of_the_unmasked_one():
    """At q = x = 4096, d = 128 (docs/gradients-and-time.md) against the unmasked backward derived here at the same
    memories (the forward's ratio: 0.53, tests/search/test_derive_masked.py); the plan at 2^20 moves H."""
    memories = tuple(2 ** k for k in range(14, 21))
    r = nc.derive(nc.grad(nc.library.causal_attention()), list(memories), sizes=LARGE)
    plain = unsaved(memories, large=True)
    assert 0.5 < r.H[2 ** 16] / plain.H[2 ** 16] < 0.56
    floor = compulsory(nc.grad(nc.library.causal_attention()), LARGE)
    for reg in r.regimes:
        assert floor <= reg.H < plain.H[reg.memory], reg.memory
        assert not [a for a in intermediates(reg.diagram) if a.dtype.family == "int"]
    assert counted(r.regimes[-1]) == {1: r.H[2 ** 20]}


@slow
def test_a_sliding_windows_backward_moves_linearly_in_the_sequence():
    h = {n: nc.derive(nc.grad(nc.library.sliding_window_attention(16)), M,
                      sizes={"q": n, "x": n, "d": 32}).H for n in (256, 512)}
    assert h[512] / h[256] == pytest.approx(2, rel=0.05)        # linear (the unmasked backward: quadratic)
