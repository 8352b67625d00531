"""``nc.derive(f, sizes=..., hardware=gpu)`` where the smaller memories the time search tries (2^10 values up) hold no
algorithm: it times the structures of the memories that do, from the smallest that works (issue 37 item 5: the
transformer block's attention renames its keys' axis ``n → m``, and a rename cannot be cut along the axis it
renames, so its kernel holds a whole row; the time search used to fail on 1024 values before timing anything).

Second routes: the smallest memory is the renamed row's length (a rename ``h n → h m`` holds ``n`` values of one
head: the maths), and the derived algorithm computes ``exp`` renamed (numpy).
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.library.sizing import Sized, given_sizes
from napkin_cat.search.derivation import derive as derive_transfers
from napkin_cat.syntax.builder import Builder


def exp_renamed():
    """``exp`` of ``h × n``, its row axis renamed ``n → m``."""
    k = Sized(given_sizes(n=None, h=None, m=None))
    b = Builder(k.types("h n"))
    (x,) = b.inputs
    return b.build(b(k.rename("h n -> h m"), b(k.elementwise("exp", "h n"), x)))


@pytest.mark.parametrize("n,h", [(1536, 4), (1280, 3)])
def test_time_search_starts_at_the_smallest_memory_that_works(n, h):
    f = exp_renamed()
    sizes = {"n": n, "h": h}
    with pytest.raises(nc.errors.MemoryLimitError) as e:
        derive_transfers(f, memory=[1024], sizes=sizes)
    assert e.value.smallest == n                       # one head's whole row: the rename is not cut along n
    r = nc.derive(f, sizes=sizes, hardware="h100-sxm5")
    assert r.prediction.time > 0
    assert r.optimum.exact_sizes and all(v == 1 for v in r.optimum.exact_sizes.values())   # a head a block
    x = np.random.default_rng(n).standard_normal((h, n)).astype(np.float32)
    tiles = {str(k): v for k, v in r.optimum.exact_sizes.items()}
    assert np.allclose(nc.evaluate(r.diagram, x, sizes=tiles), np.exp(x), rtol=1e-5)
