"""An index along a dimension of size 1 is the number 0, known when the mods are traced (issue 33): with one head,
FlexAttention's ``h`` is 0 everywhere, so ``h == 0`` is true and ``(h == 0) & (x <= q)`` is the causal mask of
positions, closed (no input): the derived forward skips the tiles it never allows, as for ``x <= q`` alone.  Before,
the index was a scalar input: the comparison read data, the conjunction was a mask from data, and a size-1 batch
added an input ``R`` to every op.

Second routes: O and L against ``torch.nn.attention.flex_attention`` on the same mods; the trips the forward plan's
stream runs (its ``when`` at every trip) against numpy's count of the blocks the causal mask touches at the plan's
tiles; the folded masks against torch evaluating the mod on the index tensors.

Mutation caught: ``position_of`` (``torch/exported.py``) giving the size-1 index as a scalar input again
(``t.constant(0, INT32)``): the diagram has a fourth input and its comparison is not closed."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
flex = pytest.importorskip("torch.nn.attention.flex_attention")

import napkin_cat as nc  # noqa: E402
from napkin_cat.rewriting.closed import closed  # noqa: E402
from napkin_cat.rewriting.netlist import to_netlist  # noqa: E402
from napkin_cat.syntax.indices import COMPARISONS  # noqa: E402
from tests.torch.test_op_skips import trips  # noqa: E402

N, D = 32, 4
G = torch.Generator().manual_seed(5)


def translated(mask_mod):
    """The diagram ``nc.torch.flex_attention`` derives for ``mask_mod`` on one batch and one head (not derived)."""
    qkv = tuple(torch.randn(1, 1, N, D, dtype=torch.float64, generator=G) for _ in range(3))
    traced = nc.torch.flex.trace(None, mask_mod, 0.5, qkv, nc.torch.flex.captured(None, mask_mod), 256, None)
    return traced.translated.diagram


def comparisons(diagram) -> tuple:
    """How many comparison boxes ``diagram`` has, and how many of them are closed (read no input)."""
    net = to_netlist(diagram)
    ids = [n for n, node in net.nodes.items() if node.kind == "box" and node.spec.kind in COMPARISONS]
    return len(ids), len(set(ids) & closed(net))


def test_a_size_1_index_is_a_known_number_not_an_input():
    d = translated(lambda b, h, q, x: (h == 0) & (x <= q))
    assert [a.names for a in d.dom.inside] == [("q", "d"), ("x", "d"), ("x", "e")]     # Q, K, V: nothing else
    assert comparisons(d) == (1, 1)                                                     # x ≤ q, closed


@pytest.mark.parametrize("mod, boxes", [
    (lambda b, h, q, x: ((b + h) < 1) | (x <= q), 0),       # 0 + 0 < 1 is true: every key, no mask at all
    (lambda b, h, q, x: (h * 3 - 1 < b) & (x <= q), 1),     # −1 < 0 is true: causal alone
])
def test_known_numbers_fold_and_the_mask_keeps_what_torch_says(mod, boxes):
    d = translated(mod)
    assert len(d.dom) == 3 and comparisons(d) == (boxes, boxes)
    zero = torch.zeros((), dtype=torch.int64)
    i, j = torch.arange(N)[:, None], torch.arange(N)[None, :]
    allowed = mod(zero, zero, i, j).expand(N, N).numpy()
    assert allowed.all() == (boxes == 0) and (allowed == (j <= i).numpy()).all() == (boxes == 1)


@pytest.mark.filterwarnings("ignore")
def test_one_head_causal_through_h_skips_the_tiles_causal_skips():
    """``(h == 0) & (x <= q)`` with one head: FlexAttention's outputs, and the blocks the causal mask skips
    skipped (the conjunction is decided on a tile by interval arithmetic: no block table, no mask from data)."""
    torch.set_num_threads(1)
    mask_mod = lambda b, h, q, x: (h == 0) & (x <= q)  # noqa: E731
    q, k, v = (torch.randn(1, 1, N, D, dtype=torch.float64, generator=G) for _ in range(3))
    before = set(nc.torch.flex.TRACES.entries)
    O, L = nc.torch.flex_attention(q, k, v, mask_mod=mask_mod, return_lse=True, memory=256)
    (key,) = set(nc.torch.flex.TRACES.entries) - before
    block = flex.create_block_mask(mask_mod, 1, 1, N, N, device="cpu")
    O2, L2 = flex.flex_attention(q, k, v, block_mask=block, return_lse=True)
    assert torch.allclose(O, O2, rtol=0, atol=1e-12) and torch.allclose(L, L2, rtol=0, atol=1e-12)
    (kernel,) = nc.torch.flex.TRACES.entries[key].op.forward.kernels.values()
    assert not kernel.printer.block_tables                  # nothing read from data
    allowed = np.arange(N)[None, :] <= np.arange(N)[:, None]
    streams = trips(kernel.plan)
    assert streams
    for tiles, run, full in streams:
        cut = [allowed[a:a + tiles["q"], b:b + tiles["x"]] for a in range(0, N, tiles["q"])
               for b in range(0, N, tiles["x"])]
        assert (run, full) == (sum(c.any() for c in cut), sum(c.all() for c in cut))
        assert run < len(cut)                               # the blocks above the diagonal are skipped
