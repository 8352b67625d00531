"""The derived backward of attention under a mask from data skips by the data's block mask (issue 33 item 3).

``nc.grad(document_attention(lse=True), saved=True)`` derived has FlashAttention-2's two kernels: dQ (grid q, stream
x) and dK with dV (grid x, stream q), each recomputing the mask once per product it masks (P for dV, dS for dQ and
dK).  The copies are one value (:func:`~napkin_cat.algorithms.skipping.equal_values`), so each stream carries a
skip test by the data's block mask: its C kernel skips the none trips and runs the full ones without the mask.
Checked against the backward written from its definition in numpy (a second route), at ragged tiles; tables that
lie show what the kernel does with each state; the runner's counts against the cost functor and the density.

The document ∧ causal mask (all three states at once) is derived once in CI at small sizes (the diagram is
symbolic: planned at the test's sizes and tiles); the document mask alone and more tilings with NAPKIN_SLOW.
"""
import os

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.blockmask import FULL, NONE, PARTIAL, BlockMask
from napkin_cat.plan.blocks import block_tables
from napkin_cat.plan.ir import StreamLoop, walk

N, D = 48, 4
slow = pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="a second derivation, more tilings: "
                          "NAPKIN_SLOW=1")


def _derived(causal: bool):
    g = nc.grad(nc.library.document_attention(causal=causal, lse=True), wrt=[0, 1, 2], saved=True, aux=1)
    return nc.derive(g, 2 ** 8, sizes={"q": 32, "x": 32, "d": 4}).diagram


@pytest.fixture(scope="module")
def causal_docs():
    return _derived(True)


def _documents(rng, n, low, high):
    lengths = []
    while sum(lengths) < n:
        lengths.append(int(rng.integers(low, high)))
    return np.repeat(np.arange(len(lengths)), lengths)[:n].astype(np.int32)


def _allowed(seg, causal):
    i, j = np.arange(len(seg))[:, None], np.arange(len(seg))[None, :]
    return (seg[:, None] == seg[None, :]) & ((j <= i) if causal else True)


def _forward(Q, K, V, allowed):
    """O and L = logsumexp_x(QKᵀ/√d) under ``allowed``, from the definition (every row has its own key)."""
    S = np.where(allowed, Q @ K.T / np.sqrt(D), -np.inf)
    L = np.log(np.exp(S - S.max(1, keepdims=True)).sum(1)) + S.max(1)
    return np.exp(S - L[:, None]) @ V, L


def _backward(Q, K, V, O, L, dO, allowed):
    """The saved backward from its definition: P = exp(where(allowed, S) − L), dV = Pᵀ dO, dS = P ∘ (dO Vᵀ − D) with
    D = rowsum(dO ∘ O), dQ = dS K/√d, dK = dSᵀ Q/√d."""
    P = np.exp(np.where(allowed, Q @ K.T / np.sqrt(D), -np.inf) - L[:, None])
    dS = P * (dO @ V.T - (dO * O).sum(1, keepdims=True))
    return dS @ K / np.sqrt(D), dS.T @ Q / np.sqrt(D), P.T @ dO


def _data(seed, causal, low=3, high=12, lengths=None):
    rng = np.random.default_rng(seed)
    seg = _documents(rng, N, low, high) if lengths is None else np.repeat(np.arange(len(lengths)), lengths).astype(
        np.int32)
    allowed = _allowed(seg, causal)
    Q, K, V, dO = (rng.normal(size=(N, D)) for _ in range(4))
    O, L = _forward(Q, K, V, allowed)
    return seg, allowed, (Q, K, V, seg, seg, O, L, dO)


def _plan(diagram, tiles):
    g_q, s_x, g_x, s_q = tiles
    return nc.plan(diagram, {"q": N, "x": N, "d": D, "g_q": g_q, "s_x": s_x, "g_x": g_x, "s_q": s_q})


def _boxes(table, tiles):
    """Each entry of a table → its (rows, columns) of the q×x mask, by the test's own arithmetic: dQ's stream over x
    (tiles g_q × s_x) is indexed (i_q, i_x), dK and dV's over q (tiles s_q × g_x) (i_x, i_q)."""
    g_q, s_x, g_x, s_q = tiles
    (q, x), order = ((g_q, s_x), (0, 1)) if table.loop.axis == "x" else ((s_q, g_x), (1, 0))
    out = {}
    for at in np.ndindex(*table.shape):
        i, j = at[order[0]], at[order[1]]
        out[at] = (slice(i * q, min(N, (i + 1) * q)), slice(j * x, min(N, (j + 1) * x)))
    return out


def _check_tables(kernel, xs, allowed, tiles):
    """The tables a run derives: each block's any and all of ``allowed`` (numpy), in both streams."""
    tables = kernel.block_arguments(xs, "data")
    found = list(kernel.printer.block_tables.values())
    assert sorted(t.loop.axis for t in found) == ["q", "x"]          # dQ's stream and dK, dV's: both skip
    for t, states in zip(found, tables, strict=True):
        for at, (rows, cols) in _boxes(t, tiles).items():
            block = allowed[rows, cols]
            assert states[at] == (FULL if block.all() else PARTIAL if block.any() else NONE), (t.loop.axis, at)
    return found, tables


#: (g_q, s_x, g_x, s_q): ragged tiles (13, 11, 7, 5 divide nothing), and even ones
TILINGS = [(13, 11, 7, 5), (8, 8, 8, 8)]


@pytest.mark.parametrize("tiles", TILINGS[:1] + [pytest.param(t, marks=slow) for t in TILINGS[1:]])
def test_the_backward_kernel_skips_by_the_tables_and_equals_the_maths(causal_docs, tiles):
    """Both streams of the derived backward read their tables; the C kernel equals numpy's gradient; tables that lie
    (a partial block said full, a live one said none) give the gradient of the mask they describe: a none trip is
    skipped, a full one is not masked, in each stream."""
    seg, allowed, xs = _data(sum(tiles), causal=True, lengths=[30, 18])
    p = _plan(causal_docs, tiles)
    k = nc.codegen.c(p, real="double")
    found, tables = _check_tables(k, xs, allowed, tiles)
    assert all({NONE, PARTIAL, FULL} <= set(t.ravel().tolist()) for t in tables)
    for got, want in zip(k(*xs, block_mask="data"), _backward(*xs[:3], *xs[5:], allowed), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    for lied_stream in range(2):     # each stream's table lies in turn; the other tells the truth
        lied = [t.copy() for t in tables]
        want = allowed.copy()
        boxes = _boxes(found[lied_stream], tiles)
        states = lied[lied_stream]
        for b in [b for b in zip(*np.nonzero(states == PARTIAL))][::2]:
            states[b] = FULL
            want[boxes[b]] = True
        for b in [b for b in zip(*np.nonzero(states != NONE))][1::3]:
            states[b] = NONE
            want[boxes[b]] = False
        got = _raw(k, xs, lied)
        (dq, dk, dv) = _backward(*xs[:3], *xs[5:], want)
        # the lie reaches only the outputs of the lying stream's kernel: dQ in x's, dK and dV in q's
        mine = (got[0],) if found[lied_stream].loop.axis == "x" else got[1:]
        theirs = (dq,) if found[lied_stream].loop.axis == "x" else (dk, dv)
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def _raw(k, arrays, tables):
    """The compiled function called with ``tables`` as they are (what the kernel does with them, unchecked)."""
    xs = [np.ascontiguousarray(x, dtype=k.held_dtype(n)) for n, x in zip(k.plan.inputs, k.check(arrays))]
    ys = [np.empty(s, k.held_dtype(n)) for n, s in zip(k.plan.outputs, k.shapes()[1])]
    with k.workspaces.held() as work:   # the kernel's level-0 workspace, as its __call__ passes it
        k.function()(*[x.ctypes.data for x in xs], *[y.ctypes.data for y in ys], *work,
                     *[t.ctypes.data for t in tables], 1)
    return ys


def test_the_runner_counts_what_the_block_mask_runs(causal_docs):
    """Short documents (density 0.15 at 4 × 4 blocks): the runner skips the none trips of both streams and equals
    the maths; what it moves is the cost functor's count under the same block mask (a second route), its products
    are the live blocks' share of the dense run's (every trip does the same products at even tiles: both streams'
    tables are one block mask, transposed), and it moves about that share."""
    seg, allowed, xs = _data(3, causal=True, low=4, high=10)
    tiles = {"q": N, "x": N, "d": D, "g_q": 4, "s_x": 4, "g_x": 4, "s_q": 4}
    p = nc.plan(causal_docs, tiles)
    bm = BlockMask.of(allowed, "q x")
    out, masked = p.run(*xs, block_mask=bm)
    _, dense = p.run(*xs)
    for got, want in zip(out, _backward(*xs[:3], *xs[5:], allowed), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    density = bm.density({"q": 4, "x": 4})
    for t in block_tables(p):
        assert np.count_nonzero(t.states(bm) != NONE) / t.states(bm).size == pytest.approx(density)
    # without the block mask the causal part still skips by positions (interval arithmetic): the run without it
    # does the causal blocks' products
    causal = BlockMask.of(_allowed(np.zeros(N, np.int32), causal=True), "q x").density({"q": 4, "x": 4})
    share = density / causal
    assert masked.flops["tensor"] == pytest.approx(share * dense.flops["tensor"], rel=1e-12)
    assert nc.cost(causal_docs, sizes=tiles, block_mask=bm).H == masked.transfers
    # each trip skipped beyond the causal ones saves its loads: K, V and the keys' ids in dQ's stream; Q, dO, L, D
    # and the queries' ids in dK and dV's (FlashAttention-2's backward), s = 4 of each row
    skipped = int(round((causal - density) * (N // 4) ** 2))
    per_trip = (2 * 4 * D + 4) + (2 * 4 * D + 3 * 4)
    assert density < 0.2 and dense.transfers[1] - masked.transfers[1] == skipped * per_trip
    print(f"density {density:.3f} (causal alone {causal:.3f}): transfers {masked.transfers[1]} of "
          f"{dense.transfers[1]} ({masked.transfers[1] / dense.transfers[1]:.3f}), tensor FLOPs "
          f"{masked.flops['tensor']} of {dense.flops['tensor']}")


@slow
@pytest.mark.parametrize("tiles", TILINGS)
def test_the_document_backward_alone(tiles):
    """The document mask without positions: a second derivation, the same checks."""
    seg, allowed, xs = _data(sum(tiles) + 1, causal=False, low=8, high=30)
    k = nc.codegen.c(_plan(_derived(False), tiles), real="double")
    _check_tables(k, xs, allowed, tiles)
    for got, want in zip(k(*xs, block_mask="data"), _backward(*xs[:3], *xs[5:], allowed), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_every_stream_of_the_derived_backward_skips_by_the_data(causal_docs):
    """The plan's stream loops: both have a skip test by the data's block mask, whose full trip reads the mask as
    true (not made); each trip makes the mask once, for all its readers (``compute_once``: no copy of it left)."""
    loops = [s for s in walk(_plan(causal_docs, (8, 8, 8, 8)).body) if isinstance(s, StreamLoop)]
    assert len(loops) == 2 and all(s.data is not None and not s.data.copies for s in loops)
    assert all(s.data.conditions <= s.data.made for s in loops)
