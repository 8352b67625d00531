"""``nc.derive(f, sizes=..., hardware=gpu)`` where the smaller memories the time search tries (2^10 values up) hold no
algorithm: it times the structures of the memories that do, from the smallest that works (issue 37 item 5: the time
search used to fail on 1024 values before timing anything).  A running sum along a row (a kind declared here) keeps
the whole row in its kernel: the row is its item-level core, and its output carries it (no group of it, no stream).

Second routes: the smallest memory is the row's length (the maths: one row of one head), and the derived algorithm
computes numpy's cumulative sum.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.search.derivation import derive as derive_transfers


def _cumsum_check(core):
    if len(core.inputs) != 1 or len(core.inputs[0]) != 1 or core.inputs != core.outputs:
        raise nc.SignatureError(f"cumsum: the item signature is Rᵃ → Rᵃ, got {core.inputs} → {core.outputs}")


def running_sums():
    """The running sum of ``h × n`` along ``n``."""
    nc.declare("cumsum", lambda xs, core: [np.cumsum(xs[0], axis=-1)],
               flops=lambda core: {"general": core.inputs[0][0].size}, check=_cumsum_check)
    return nc.apply("cumsum", "h n -> h n", core="n")


@pytest.mark.parametrize("n,h", [(1536, 4), (1280, 3)])
def test_time_search_starts_at_the_smallest_memory_that_works(n, h, scratch_kinds):
    f = running_sums()
    sizes = {"n": n, "h": h}
    with pytest.raises(nc.errors.MemoryLimitError) as e:
        derive_transfers(f, memory=[1024], sizes=sizes)
    assert e.value.smallest == n                       # one head's whole row
    r = nc.derive(f, sizes=sizes, hardware="h100-sxm5")
    assert r.prediction.time > 0
    assert r.optimum.exact_sizes and all(v == 1 for v in r.optimum.exact_sizes.values())   # a head a block
    x = np.random.default_rng(n).standard_normal((h, n)).astype(np.float32)
    tiles = {str(k): v for k, v in r.optimum.exact_sizes.items()}
    assert np.allclose(nc.evaluate(r.diagram, x, sizes=tiles), np.cumsum(x, axis=1), rtol=1e-4, atol=1e-4)
