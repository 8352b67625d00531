"""A mask read from data is counted by its density: ``rho[…]`` in the symbolic cost, stated in ``Cost.assumptions``.

The second route is the runner: given the data's block mask it runs only the trips whose block the data allows,
so the symbolic cost with ``rho`` = (running blocks / blocks the positions allow, counted here in numpy from the
data) must equal its counts.  The tiles divide the axes and the stream's slice divides the group's tile, so the
blocks are not ragged and the symbolic count is exact (bound 0): the test asserts equality.
"""
import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.errors import ArgumentError


def _documents(rng, n, low=8, high=72):
    lengths = []
    while sum(lengths) < n:
        lengths.append(int(rng.integers(low, high)))
    return np.repeat(np.arange(len(lengths)), lengths)[:n].astype(np.int32)


def _flash(causal):
    return nc.group(nc.stream(nc.kernel(nc.library.document_attention(causal=causal)), "x", "s_x"), "q", "g_q")


def _blocks(allowed, by_position, g, s):
    """(blocks with an allowed pair, blocks the positions allow), counted block by block."""
    n = allowed.shape[0]
    pairs = [(i, j) for i in range(0, n, g) for j in range(0, n, s)]
    return (sum(bool(allowed[i:i + g, j:j + s].any()) for i, j in pairs),
            sum(bool(by_position[i:i + g, j:j + s].any()) for i, j in pairs))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n, g, s", [(256, 32, 32), (256, 64, 16), (384, 48, 16)])
def test_symbolic_cost_at_the_datas_density_is_what_the_run_counts(causal, n, g, s):
    rng = np.random.default_rng(n + g + s)
    ids, d = _documents(rng, n), 8
    positions = np.arange(n)
    by_position = positions[None, :] <= positions[:, None] if causal else np.ones((n, n), bool)
    allowed = (ids[:, None] == ids[None, :]) & by_position
    live, possible = _blocks(allowed, by_position, g, s)
    rho = sympy.Rational(live, possible)
    assert rho < sympy.Rational(3, 4)                   # the data matter: far from dense

    c = nc.cost(_flash(causal))
    (assumed,) = c.assumptions
    assert assumed.value is None and str(assumed.symbol).startswith("rho[")
    sizes = {"q": n, "x": n, "d": d, "g_q": g, "s_x": s}
    at = {nc.symbol(k): v for k, v in sizes.items()} | {assumed.symbol: rho}

    bm = nc.block_mask(nc.library.document_mask(q=n, x=n), ids, ids) if not causal else None
    p = nc.plan(_flash(causal), sizes)
    Q, K, V = (rng.normal(size=(n, d)) for _ in range(3))
    if causal:
        bm = nc.codegen.c(p).block_mask(*(a.astype(np.float32) for a in (Q, K, V)), ids, ids)
    _, run = p.run(Q, K, V, ids, ids, block_mask=bm)
    assert c.H[1].subs(at) == run.transfers[1]
    assert c.flops["tensor"].subs(at) == run.flops["tensor"]
    assert c.H[1].subs(at) < c.H[1].subs(at | {assumed.symbol: 1})


def test_one_symbol_per_condition_and_a_cost_at_sizes_says_it_assumes_dense():
    plain, causal = nc.cost(_flash(False)), nc.cost(_flash(True))
    assert plain.assumptions[0].symbol != causal.assumptions[0].symbol
    assert nc.cost(nc.group(nc.stream(nc.kernel(nc.library.attention()), "x", "s_x"), "q", "g_q")).assumptions == ()
    sizes = {"q": 64, "x": 64, "d": 4, "g_q": 16, "s_x": 16}
    dense = nc.cost(_flash(False), sizes=sizes)
    assert [a.value for a in dense.assumptions] == [1] and "dense" in str(dense.assumptions[0])
    quarter = nc.cost(_flash(False), sizes=sizes, density=0.25)
    assert [a.value for a in quarter.assumptions] == [sympy.Rational(1, 4)]
    assert quarter.H[1] == plain.H[1].subs({nc.symbol(k): v for k, v in sizes.items()}
                                           | {plain.assumptions[0].symbol: sympy.Rational(1, 4)})
    ids = np.repeat(np.arange(4), 16).astype(np.int32)
    bm = nc.block_mask(nc.library.document_mask(q=64, x=64), ids, ids)
    exact = nc.cost(_flash(False), sizes=sizes, block_mask=bm)
    assert exact.assumptions == ()                      # the block mask decides every trip: nothing is assumed


def test_derive_binds_the_density_and_says_so():
    f, sizes = nc.library.document_attention(), {"q": 256, "x": 256, "d": 16}
    dense, quarter = (nc.derive(f, memory=2 ** 12, sizes=sizes, density=rho) for rho in (1, 0.25))
    assert [a.value for a in dense.assumptions] == [1]
    assert [a.value for a in quarter.assumptions] == [sympy.Rational(1, 4)]
    assert quarter.H < dense.H
    # at the tiles it chose, the transfers are the algorithm's at that density, counted at sizes
    assert quarter.H == nc.cost(quarter.diagram, sizes=dict(quarter.optimum.sizes), density=0.25).H[1]
    assert dense.H == nc.cost(dense.diagram, sizes=dict(dense.optimum.sizes)).H[1]


@pytest.mark.parametrize("bad", [1.5, -0.25, "dense"])
def test_a_density_is_a_fraction(bad):
    with pytest.raises(ArgumentError, match="a density is the fraction of a stream's trips that run"):
        nc.cost(_flash(False), density=bad)
    with pytest.raises(ArgumentError, match="density=: a density"):
        nc.derive(nc.library.document_attention(), memory=2 ** 12, sizes={"q": 64, "x": 64, "d": 4}, density=bad)


def test_a_block_mask_and_a_density_are_not_given_together():
    ids = np.repeat(np.arange(4), 16).astype(np.int32)
    bm = nc.block_mask(nc.library.document_mask(q=64, x=64), ids, ids)
    with pytest.raises(ArgumentError, match="give block_mask= or density=, not both"):
        nc.cost(_flash(False), sizes={"q": 64, "x": 64, "d": 4, "g_q": 16, "s_x": 16}, block_mask=bm, density=0.5)
