"""The op's derived backward skips what its mask never allows, and runs without the mask where it allows every pair
(issue 33 item 8: the causal backward at N = 4,096 looked as slow as the dense one).

``nc.torch.compile`` of masked attention (its log-sum-exp auxiliary, the backward ``nc.grad(..., saved=True)``
derived from the saved O and L) under two masks made from positions: a lagged band ``q − 7 ≤ x ≤ q + 2`` built
here from ``nc.position``, ``shift``, ``compare`` and ``and`` (a mask the issue does not name; in CI), and causal
``x ≤ q`` (with ``NAPKIN_SLOW=1``: each mask derives a forward and a backward, ~6 s on two shared cores).  Each
check has a second route that does not go through the plan's skip tests:

* the trips each backward stream runs, counted from its plan (``when`` evaluated at every trip), equal the number
  of (query tile, key tile) blocks in which numpy's boolean mask allows some pair, and its full trips
  (``full_trips.when``) the blocks in which it allows every pair; both fewer than all blocks;
* the gradients the op's C kernels compute (full trips run without the mask) equal torch's autograd of masked
  attention written here in float64.

Mutations caught: the skip test dropped (``when = true`` in ``plan/expand.py``: the counts become every block),
the full trips taken where the mask is *possibly* true (``.possibly`` for ``.always`` in ``_full_trips``: the
counts, and the gradients on the diagonal blocks, differ).
"""
from __future__ import annotations

import itertools
import math
import os

import numpy as np
import pytest
import sympy

torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402
from napkin_cat.plan.ir import GridLoop, StreamLoop, walk_scoped  # noqa: E402

N, D = 40, 4
MEMORY = 256
LAG, LEAD = 7, 2


def band_mask():
    """``q − LAG ≤ x ≤ q + LEAD``, from positions: an asymmetric band (the diagonal inside, so no row is empty)."""
    b = nc.Builder(nc.Ty())
    q, x = b(nc.position("q")), b(nc.position("x"))
    lo = b(nc.elementwise("shift", "q", const=-LAG, dtype="int32"), q)
    hi = b(nc.elementwise("shift", "q", const=LEAD, dtype="int32"), q)
    return b.build(b(nc.logical("and", "q x, q x -> q x"), b(nc.compare("le", "q, x -> q x"), lo, x),
                     b(nc.compare("le", "x, q -> q x"), x, hi)))


MASKS = {"causal": (nc.library.causal_mask, lambda i, j: j <= i),
         "band": (band_mask, lambda i, j: (i - LAG <= j) & (j <= i + LEAD))}


@pytest.fixture(scope="module", params=["band", pytest.param("causal", marks=pytest.mark.skipif(
    not os.environ.get("NAPKIN_SLOW"), reason="a second pair of derivations (~6 s): NAPKIN_SLOW=1; the band checks the "
    "same mechanism on both sides of its blocks"))])
def compiled(request):
    make, allowed = MASKS[request.param]
    f = nc.library.masked_attention(make(), d=D, lse=True)
    op = nc.torch.compile(f, memory=MEMORY, aux=1, depth=0, name=f"test_skips_{request.param}")
    i, j = np.arange(N)[:, None], np.arange(N)[None, :]
    return op, allowed(i, j)


def reference(Q, K, V, allowed):
    S = (Q @ K.T / math.sqrt(D)).masked_fill(~torch.as_tensor(allowed), float("-inf"))
    return torch.softmax(S, -1) @ V, torch.logsumexp(S, -1)


def blocks(allowed, tiles: dict) -> tuple:
    """Numpy's count of the blocks of ``tiles`` (axis → tile) in which the mask allows some pair, every pair, and
    of all blocks."""
    some = every = total = 0
    for a in range(0, N, tiles["q"]):
        for b in range(0, N, tiles["x"]):
            block = allowed[a:a + tiles["q"], b:b + tiles["x"]]
            some, every, total = some + bool(block.any()), every + bool(block.all()), total + 1
    return some, every, total


def at(e, values: dict):
    """``e`` (a sympy expression) with those of its symbols that ``values`` names given."""
    e = sympy.sympify(e)
    return e.subs({sym: values[str(sym)] for sym in e.free_symbols if str(sym) in values})


def counted(condition, loops, sizes: dict, counts: list) -> int:
    """The assignments of the ``loops``' indices (each in ``range(count)``) at which ``condition`` holds."""
    condition = at(condition, sizes)
    indices = [loop.index for loop in loops]
    test = sympy.lambdify(indices, condition, modules=[{"Min": min, "Max": max, "ceiling": math.ceil}, "math"])
    return sum(bool(test(*values)) for values in itertools.product(*(range(c) for c in counts)))


def trips(plan) -> list:
    """For each stream loop of the plan: its axes' tiles, and the trips it runs and runs full (every assignment of
    its loop indices and those of the Grid loops around it, its ``when`` and ``full_trips.when`` evaluated)."""
    sizes = {str(k): int(v) for k, v in plan.sizes.items()}
    out = []
    for s, scope in walk_scoped(plan.body):
        if not isinstance(s, StreamLoop):
            continue
        loops = [c for c, _ in scope if isinstance(c, GridLoop)] + [s]
        tiles = {loop.axis: int(at(loop.tile, sizes)) for loop in loops}
        counts = [int(sympy.ceiling(at(loop.full, sizes) / tiles[loop.axis])) for loop in loops]
        full = 0 if s.full_trips is None else counted(s.full_trips.when, loops, sizes, counts)
        out.append((tiles, counted(s.when, loops, sizes, counts), full))
    return out


def test_each_backward_stream_runs_the_blocks_its_mask_allows_and_those_it_allows_whole_without_it(compiled):
    op, allowed = compiled
    Q, K, V = (torch.randn(N, D, dtype=torch.float64, requires_grad=True) for _ in range(3))
    O, L = op(Q, K, V)
    (O * torch.randn_like(O)).sum().backward()
    sizes = {"q": N, "x": N}
    kernel = op.napkin.backward.kernel(sizes, torch.float64, torch.device("cpu"))
    streams = trips(kernel.plan)
    assert len(streams) >= 2                            # dQ streams the keys, dK and dV stream the queries
    for tiles, run, full in streams:
        assert set(tiles) == {"q", "x"}
        some, every, total = blocks(allowed, tiles)
        assert (run, full) == (some, every)
        assert every < some < total                     # trips skipped, trips run whole, trips masked
    assert kernel.source.count("the mask is true on every pair: not made") == len(streams)     # a whole loop each


def test_its_gradients_with_the_full_trips_unmasked_equal_torchs(compiled):
    op, allowed = compiled
    rng = torch.Generator().manual_seed(1)
    Q, K, V, dO = (torch.randn(N, D, dtype=torch.float64, generator=rng) for _ in range(4))
    got = [t.detach().requires_grad_() for t in (Q, K, V)]
    want = [t.detach().requires_grad_() for t in (Q, K, V)]
    O, L = op(*got)
    O.backward(dO)
    O2, L2 = reference(*want, allowed)
    O2.backward(dO)
    assert torch.allclose(O, O2, atol=1e-12) and torch.allclose(L, L2, atol=1e-12)
    for a, b in zip(got, want):
        assert torch.allclose(a.grad, b.grad, atol=1e-12)
