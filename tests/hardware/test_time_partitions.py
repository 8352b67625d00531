"""The time search partitions a kernel that has no legal tiles as the fastest of its block's partitions that has,
not only as the transfer search chose (issue 37 item 5: the transformer block's output projection
``h n d, h d e → n e`` streamed along ``d`` keeps all heads on chip, over the H100's limits at its least legal tiles;
streamed along ``h`` it fits, and moves as much, so the transfer search never offered it).

Second routes: a table of times given by hand (the choice is the least legal one, a legal partition of the transfer
search's kept), the trace replayed to the algorithm made, numpy's einsum, and the derived time against the kernel's.
"""
from __future__ import annotations

import numpy as np

import napkin_cat as nc
from napkin_cat.hardware.model import load
from napkin_cat.hardware.predict import environment
from napkin_cat.hardware.timed import legal_partitions, structure_timings
from napkin_cat.search.derivation import derive as derive_transfers

PROJECTION = "h n d, h d e -> n e"


def stream_of(kernel) -> str:
    """The axis a partitioned kernel streams (``v.diagram``'s only Stream), or ``-``."""
    found = []

    def visit(d):
        for box in d.boxes:
            if type(box).__name__ == "Stream":
                found.append(box.axis)
            if hasattr(box, "arg"):
                visit(box.arg)
    visit(kernel)
    return found[0] if found else "-"


def test_a_kernel_without_legal_tiles_takes_the_fastest_partition_its_block_has():
    r = derive_transfers(nc.einsum(PROJECTION), memory=[2 ** 12], sizes={"h": 4, "n": 64, "d": 32, "e": 64})
    regime = r.regimes[0]
    assert regime.variant.kernels[0].stream == "d"
    table = {"d": 3.0, "h": 2.0, "n": 1.0, "e": None}       # seconds by the streamed axis; None: no legal tiles
    assert legal_partitions(regime, lambda k: table[stream_of(k)], {}) is None     # its own is legal: kept
    table.update(d=None)
    made = legal_partitions(regime, lambda k: table[stream_of(k)], {})
    assert made.variant.kernels[0].stream == "n" and made.variant.kernels[0].sliced      # the sweep along n
    assert made.trace.replay(r.start) == made.diagram
    table.update(n=None, h=None)                          # none legal: nothing to choose
    assert legal_partitions(regime, lambda k: table[stream_of(k)], {}) is None
    table.update(h=7.0)
    assert legal_partitions(regime, lambda k: table[stream_of(k)], {}).variant.kernels[0].stream == "h"


def test_the_output_projection_streams_heads_where_the_d_stream_does_not_fit():
    sizes = {"h": 32, "n": 64, "d": 128, "e": 512}
    gpu, env = load("h100-sxm5"), environment(sizes)
    r = derive_transfers(nc.einsum(PROJECTION), memory=[2 ** k for k in range(10, 17)], sizes=sizes)
    assert {g.variant.kernels[0].stream for g in r.regimes} == {"d"}    # transfers never offer the head stream

    def seconds(kernel):
        try:
            rows = structure_timings(kernel, gpu, env, overlap="sequential", ceilings={}, level=1, largest=256,
                                     launch=4e-6)
        except nc.errors.NapkinError:
            return None
        return rows[0][0] if rows else None
    made = legal_partitions(r.regimes[-1], seconds, {})
    assert made is not None and made.variant.kernels[0].stream == "h"
    assert made.trace.replay(r.start) == made.diagram
    own = r.regimes[-1].alternatives.options(0)[0]
    by_d, by_h = seconds(own.diagram), seconds(made.diagram)
    assert by_h is not None and by_d is None
    assert nc.derive(nc.einsum(PROJECTION), sizes=sizes, hardware=gpu).prediction.time <= float(by_h)
    rng = np.random.default_rng(3)
    A, W = rng.standard_normal((4, 8, 16)), rng.standard_normal((4, 16, 8))      # h n d, h d e at small sizes
    tiles = {"g_e": 4, "g_n": 4, "s_h": 1}
    assert np.allclose(nc.evaluate(made.diagram, A, W, sizes=tiles), np.einsum("hnd,hde->ne", A, W))
