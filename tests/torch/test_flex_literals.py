"""A Python number in a mod is a constant of the diagram, not data (issue 33): ``q − x ≤ 3`` or ``x − q < w`` (a
literal, or an int the closure captures) is a mask of positions, so its comparison is closed
(:mod:`napkin_cat.rewriting.closed`: it reads no input), the derived forward skips the tiles it never allows and runs
those it allows whole without it; a captured 0-d *tensor* stays an input (data: it may change between calls).

Second routes: the trips the forward plan's stream runs (its ``when`` evaluated at every trip) against numpy's count
of the blocks the mask touches at the plan's tiles; O and L against ``torch.nn.attention.flex_attention``.

Mutation caught: the old path, a number given to the diagram as a scalar input (``scalar`` in ``torch/aten.py``
calling ``t.constant(value, like.dtype)`` without ``like``): the comparison reads an input, is not closed, and the
stream runs every block."""
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

N, D = 64, 4
WIDTH = 5                                                    # a Python int the closure captures
G = torch.Generator().manual_seed(3)
#: a literal (3) and a captured int (WIDTH) in one mask, an uneven band −WIDTH < q − x ≤ 3: each comparison's number
#: matters, and one derivation checks both (a mask's derivation is most of this file's time: 5.6 CPU s for this one,
#: 5.0 + 6.1 for the literal's and the captured int's masks apart)
MASK = (lambda b, h, q, x: (q - x <= 3) & (x - q < WIDTH), lambda i, j: (i - j <= 3) & (j - i < WIDTH))


def run(mask_mod):
    """O, L and the trace of ``nc.torch.flex_attention`` under ``mask_mod``, and FlexAttention's O, L."""
    torch.set_num_threads(1)
    q, k, v = (torch.randn(1, 1, N, D, dtype=torch.float64, generator=G) for _ in range(3))
    before = set(nc.torch.flex.TRACES.entries)
    O, L = nc.torch.flex_attention(q, k, v, mask_mod=mask_mod, return_lse=True, memory=256)
    (key,) = set(nc.torch.flex.TRACES.entries) - before
    block = flex.create_block_mask(mask_mod, 1, 1, N, N, device="cpu")
    O2, L2 = flex.flex_attention(q, k, v, block_mask=block, return_lse=True)
    return (O, L), (O2, L2), nc.torch.flex.TRACES.entries[key]


def comparisons(diagram) -> tuple:
    """The comparison boxes of ``diagram``'s netlist: how many, and how many of them are closed."""
    net = to_netlist(diagram)
    ids = [n for n, node in net.nodes.items() if node.kind == "box" and node.spec.kind in COMPARISONS]
    return len(ids), len(set(ids) & closed(net))


def blocks(allowed, tiles: dict) -> tuple:
    """Numpy's count of the (query tile, key tile) blocks in which the mask allows some pair, and every pair."""
    cut = [allowed[a:a + tiles["q"], b:b + tiles["x"]] for a in range(0, N, tiles["q"])
           for b in range(0, N, tiles["x"])]
    return sum(bool(c.any()) for c in cut), sum(bool(c.all()) for c in cut), len(cut)


@pytest.mark.filterwarnings("ignore")
def test_a_number_in_a_mask_is_a_closed_constant_and_its_tiles_are_skipped():
    mask_mod, allowed = MASK
    (O, L), (O2, L2), traced = run(mask_mod)
    assert torch.allclose(O, O2, rtol=0, atol=1e-12) and torch.allclose(L, L2, rtol=0, atol=1e-12)
    i, j = np.arange(N)[:, None], np.arange(N)[None, :]
    (kernel,) = traced.op.forward.kernels.values()
    streams = trips(kernel.plan)
    assert streams
    for tiles, run_, full in streams:
        some, every, total = blocks(allowed(i, j), tiles)
        assert (run_, full) == (some, every)
        assert run_ < total                         # tiles skipped
    n, closed_ = comparisons(traced.translated.diagram)
    assert n >= 2 and closed_ == n                  # no comparison reads an input: neither number is a scalar input


def flash_transfers(allowed, g: int, s: int) -> int:
    """FlashAttention's transfers with a mask from positions, counted by numpy from the maths (one head, no batch):
    per query tile of ``g``, Q in (g·d), O and L out (g·d + g); per slice of ``s`` keys in which the mask allows some
    pair with that tile, K and V in (2·s·d).  The slices the mask never allows there are not loaded."""
    total = 0
    for a in range(0, N, g):
        total += g * D + g * D + g
        total += sum(2 * s * D for b in range(0, N, s) if allowed[a:a + g, b:b + s].any())
    return total


@pytest.mark.filterwarnings("ignore")
def test_the_forward_at_memory_256_is_the_h_optimum_of_its_tiles():
    """``memory=`` asks for the least transfers: a band this narrow is loaded key by key (``s_x = 1``: every key a
    query tile loads is one its band allows), and that is the optimum of the structure's tilings, not a search
    artefact (issue 33).  Second route: numpy's count of FlashAttention's loads at every divisor tiling that fits."""
    mask_mod, allowed = MASK
    q, k, v = (torch.randn(1, 1, N, D, dtype=torch.float64, generator=G) for _ in range(3))
    nc.torch.flex_attention(q, k, v, mask_mod=mask_mod, memory=256)          # traced once per process (TRACES)
    (traced,) = [t for key, t in nc.torch.flex.TRACES.entries.items()       # this call's: L not returned (aux)
                 if key[1] is mask_mod and key[4] == 256 and t.op.aux]
    (r,) = traced.op.forward.derivations.values()
    assert str(r.variant).endswith("group q · stream x")
    i, j = np.arange(N)[:, None], np.arange(N)[None, :]
    band = allowed(i, j)
    tiles = {str(k): int(v) for k, v in r.optimum.exact_sizes.items()}
    assert int(r.H) == flash_transfers(band, tiles["g_q"], tiles["s_x"])
    divisors = [2 ** k for k in range(7)]
    fitting = [(g, s) for g in divisors for s in divisors
               if nc.cost(r.diagram, sizes={"g_q": g, "s_x": s}).M[1] <= 256]
    counts = {(g, s): flash_transfers(band, g, s) for g, s in fitting}
    assert int(r.H) == min(counts.values())
    assert tiles["s_x"] == 1 and counts[(tiles["g_q"], 1)] < min(c for (g, s), c in counts.items() if s > 1)


@pytest.mark.filterwarnings("ignore")
def test_a_captured_0d_tensor_stays_an_input():
    width = torch.tensor(WIDTH)
    (O, L), (O2, L2), traced = run(lambda b, h, q, x: (q - x).abs() < width)
    assert torch.allclose(O, O2, rtol=0, atol=1e-12) and torch.allclose(L, L2, rtol=0, atol=1e-12)
    n, closed_ = comparisons(traced.translated.diagram)
    assert n == 1 and closed_ == 0                  # the comparison reads the captured tensor: data
    assert list(traced.sources.values()) and len(traced.program.constants) == 1
