"""The C kernel reads the data's block mask: a none trip skipped, a full one run without its mask (numpy, the maths)."""
import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.blockmask import FULL, NONE, PARTIAL, BlockMask
from napkin_cat.errors import BlockMaskError, ShapeError
from napkin_cat.plan.blocks import block_tables

N, D = 96, 8
#: (g_q, s_x): even tiles, tall and thin ones, ragged ones (13 and 11 divide nothing), one Grid tile of all queries
TILINGS = [(16, 16), (32, 8), (13, 11), (96, 7)]


def _documents(rng, n, low=3, high=30):
    lengths = []
    while sum(lengths) < n:
        lengths.append(int(rng.integers(low, high)))
    return np.repeat(np.arange(len(lengths)), lengths)[:n].astype(np.int32)


def _reference(Q, K, V, allowed):
    """Masked attention from its definition, in float64; a row with no allowed key is 0/0 (NaN)."""
    Q, K, V = (x.astype(np.float64) for x in (Q, K, V))
    S = np.where(allowed, Q @ K.T / np.sqrt(Q.shape[1]), -np.inf)
    with np.errstate(invalid="ignore"):
        P = np.exp(S - S.max(axis=1, keepdims=True))
        return (P / P.sum(axis=1, keepdims=True)) @ V


def _kernel(g, s):
    flash = nc.group(nc.stream(nc.kernel(nc.library.document_attention()), "x", "s_x"), "q", "g_q")
    p = nc.plan(flash, {"q": N, "x": N, "d": D, "g_q": g, "s_x": s})
    return p, nc.codegen.c(p)


def _blocks(g, s):
    """The trips' boxes, by the test's own arithmetic: (rows, columns) per (i_q, i_x)."""
    return {(i, j): (slice(i * g, min(N, (i + 1) * g)), slice(j * s, min(N, (j + 1) * s)))
            for i in range(-(-N // g)) for j in range(-(-N // s))}


@pytest.mark.parametrize("g,s", TILINGS)
def test_the_kernel_skips_empty_blocks_and_equals_the_maths(g, s):
    rng = np.random.default_rng(g * 100 + s)
    seg = _documents(rng, N)
    allowed = seg[:, None] == seg[None, :]
    Q, K, V = (rng.normal(size=(N, D)).astype(np.float32) for _ in range(3))
    p, k = _kernel(g, s)
    bm = nc.block_mask(nc.library.document_mask(q=N, x=N), seg, seg)
    (table,) = block_tables(k.printer.plan)
    states = table.states(bm)
    for (i, j), (rows, cols) in _blocks(g, s).items():       # the table: each block's any and all, by numpy
        block = allowed[rows, cols]
        assert states[i, j] == (FULL if block.all() else PARTIAL if block.any() else NONE), (i, j)
    assert ({NONE, FULL} if g < 32 else {PARTIAL}) <= set(states.ravel().tolist())
    out = k(Q, K, V, seg, seg, block_mask=bm)
    np.testing.assert_allclose(out, _reference(Q, K, V, allowed), rtol=2e-4, atol=2e-5)
    _, masked = p.run(Q, K, V, seg, seg, block_mask=bm)       # the runner at the same tiles skips the none trips
    _, dense = p.run(Q, K, V, seg, seg)
    per_trip = 2 * s * D + s      # K and V slices and the keys' ids
    skipped = int(np.count_nonzero(states == NONE))
    if N % s == 0:
        assert dense.transfers[1] - masked.transfers[1] == skipped * per_trip


def _raw(k, arrays, tables):
    """The compiled function called with ``tables`` as they are (what the kernel does with them, unchecked)."""
    xs = [np.ascontiguousarray(x, dtype=k.held_dtype(n)) for n, x in zip(k.plan.inputs, k.check(arrays))]
    (shape,) = k.shapes()[1]
    y = np.empty(shape, k.held_dtype(k.plan.outputs[0]))
    with k.workspaces.held() as work:   # the kernel's level-0 workspace, as its __call__ passes it
        k.function()(*[x.ctypes.data for x in xs], y.ctypes.data, *work, *[t.ctypes.data for t in tables], 1)
    return y


@pytest.mark.parametrize("g,s", [(16, 16), (13, 11)])
def test_the_kernel_does_what_the_table_says_and_refuses_tables_that_lie(g, s):
    """Tables that do not describe the data: the kernel refuses them (BlockMaskError); called raw, a block marked
    none contributes nothing (its pairs as if masked), a block marked full is not masked (its pairs as if allowed):
    what the kernel does with a table, not only what is right."""
    rng = np.random.default_rng(7)
    seg = _documents(rng, N)
    allowed = seg[:, None] == seg[None, :]
    Q, K, V = (rng.normal(size=(N, D)).astype(np.float32) for _ in range(3))
    _, k = _kernel(g, s)
    (table,) = block_tables(k.printer.plan)
    states = table.states(BlockMask.of(allowed, "q x"))
    boxes = _blocks(g, s)
    partial = [b for b in zip(*np.nonzero(states == PARTIAL))]
    live = [b for b in zip(*np.nonzero(states != NONE))]
    lied = states.copy()
    want = allowed.copy()
    for b in partial[::2]:                      # every other partial block said to be full: its mask not made
        lied[b] = FULL
        want[boxes[b]] = True
    for b in live[1::3]:                        # and some live blocks said to be none: skipped
        lied[b] = NONE
        want[boxes[b]] = False
    assert (want != allowed).any()
    with np.errstate(invalid="ignore"):
        out = _raw(k, (Q, K, V, seg, seg), [lied])
        np.testing.assert_allclose(out, _reference(Q, K, V, want), rtol=2e-4, atol=2e-5)
    with pytest.raises(BlockMaskError, match=r"at block i_q = \d+, i_x = \d+ it says (full|none), the mask on the "
                                             r"data is (partial|full)"):
        k(Q, K, V, seg, seg, blocks=[lied])
    np.testing.assert_allclose(k(Q, K, V, seg, seg, blocks=[states]), _reference(Q, K, V, allowed),
                               rtol=2e-4, atol=2e-5)
    with pytest.raises(ShapeError, match=r"must have shape \(\d+, \d+\)"):
        k(Q, K, V, seg, seg, blocks=[lied[:1]])


def _document_and(other):
    """Attention within documents and ``other`` (a mask diagram from positions): ids[q] = ids[x] ∧ other."""
    doc = nc.library.document_mask()
    b = nc.Builder(doc.dom)
    same = b(doc, *b.inputs)
    return nc.library.masked_attention(b.build(b(nc.logical("and", "q x, q x -> q x"), same, b(other))))


#: masks of data ∧ positions, with their definitions in numpy: the block mask must be of the whole of each
COMBINED = {
    "document-causal": (lambda: nc.library.document_attention(causal=True), lambda i, j: j <= i),
    "document-window": (lambda: _document_and(nc.library.window_mask(24)),
                        lambda i, j: abs(i - j) <= 24),
}


@pytest.mark.parametrize("name", sorted(COMBINED))
@pytest.mark.parametrize("g,s", [(16, 16), (13, 11), (32, 8)])
def test_the_tables_are_of_the_whole_mask_positions_included(name, g, s):
    """The tables a kernel reads are derived from the whole condition its stream drops on a full trip (ids and
    positions): each block's any/all of the definition, and the kernel equals numpy.  A block mask of the ids alone
    (FULL on blocks the positions cut) is refused; one equal to the whole mask's is accepted."""
    attention, positions = COMBINED[name]
    rng = np.random.default_rng(g * 31 + s)
    seg = _documents(rng, N, 20, 70)
    i, j = np.arange(N)[:, None], np.arange(N)[None, :]
    allowed = (seg[:, None] == seg[None, :]) & positions(i, j)
    Q, K, V = (rng.normal(size=(N, D)).astype(np.float32) for _ in range(3))
    flash = nc.group(nc.stream(nc.kernel(attention()), "x", "s_x"), "q", "g_q")
    p = nc.plan(flash, {"q": N, "x": N, "d": D, "g_q": g, "s_x": s})
    k = nc.codegen.c(p)
    bm = k.block_mask(Q, K, V, seg, seg)
    (states,) = k.block_arguments((Q, K, V, seg, seg), bm)
    for (a, b), (rows, cols) in _blocks(g, s).items():       # the table: each block's any and all, by numpy
        block = allowed[rows, cols]
        assert states[a, b] == (FULL if block.all() else PARTIAL if block.any() else NONE), (a, b)
    assert ({NONE, PARTIAL, FULL} if g <= 16 else {NONE, PARTIAL}) <= set(states.ravel().tolist())
    want = _reference(Q, K, V, allowed)
    np.testing.assert_allclose(k(Q, K, V, seg, seg, block_mask=bm), want, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(k(Q, K, V, seg, seg, block_mask="data"), want, rtol=2e-4, atol=2e-5)
    ids_only = nc.block_mask(nc.library.document_mask(q=N, x=N), seg, seg)
    with pytest.raises(BlockMaskError, match="positions included"):
        k(Q, K, V, seg, seg, block_mask=ids_only)
    with pytest.raises(BlockMaskError, match="positions included"):
        p.run(Q, K, V, seg, seg, block_mask=ids_only)
    np.testing.assert_allclose(k(Q, K, V, seg, seg, block_mask=BlockMask.of(allowed, "q x")), want,
                               rtol=2e-4, atol=2e-5)
    other = np.roll(seg, 5)                                   # the derived block mask of other data: checked, refused
    with pytest.raises(BlockMaskError):
        k(Q, K, V, other, other, block_mask=bm)


def test_a_kernel_without_a_mask_from_data_refuses_a_block_mask():
    p = nc.plan(nc.group(nc.stream(nc.kernel(nc.library.causal_attention()), "x", "s_x"), "q", "g_q"),
                {"q": 16, "x": 16, "d": 4, "g_q": 8, "s_x": 8})
    k = nc.codegen.c(p)
    xs = [np.zeros((16, 4), np.float32)] * 3
    with pytest.raises(ShapeError, match="no stream of this kernel's plan has a mask read from data"):
        k(*xs, block_mask=BlockMask.of(np.ones((16, 16), bool), "q x"))


@pytest.mark.parametrize("g,s", [(16, 16), (13, 11)])
def test_a_mask_made_by_an_earlier_kernel_is_derived_by_running_it(g, s):
    """The mask made by a kernel of its own (a q×x bool array in global memory) and loaded by attention's stream,
    as ``nc.torch.flex_attention``'s derived plan does: the table is derived by running that kernel (the
    condition's program holds it whole), each block's any/all of the ids by numpy; the kernel and the runner at
    the same tiles equal the maths, and the runner skips exactly the none trips."""
    rng = np.random.default_rng(g * 7 + s)
    seg = _documents(rng, N)
    allowed = seg[:, None] == seg[None, :]
    Q, K, V = (rng.normal(size=(N, D)).astype(np.float32) for _ in range(3))
    mask = nc.library.document_mask(q=N, x=N)
    attention = nc.library.masked_attention(nc.Id(mask.cod), None, q=N, x=N, d=D)
    flash = nc.group(nc.stream(nc.kernel(attention), "x", "s_x"), "q", "g_q")
    p = nc.plan((nc.Id(flash.dom[:3]) @ nc.kernel(mask)) >> flash, {"g_q": g, "s_x": s})
    k = nc.codegen.c(p)
    (states,) = k.block_arguments((Q, K, V, seg, seg), "data")
    for (a, b), (rows, cols) in _blocks(g, s).items():
        block = allowed[rows, cols]
        assert states[a, b] == (FULL if block.all() else PARTIAL if block.any() else NONE), (a, b)
    assert {NONE, FULL} <= set(states.ravel().tolist())
    want = _reference(Q, K, V, allowed)
    np.testing.assert_allclose(k(Q, K, V, seg, seg, block_mask="data"), want, rtol=2e-4, atol=2e-5)
    out, masked = p.run(Q, K, V, seg, seg, block_mask="data")
    _, dense = p.run(Q, K, V, seg, seg)
    np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-5)
    skipped = int(np.count_nonzero(states == NONE))
    if N % s == 0:          # each skipped trip would load K's and V's slices and the mask's tile
        assert dense.transfers[1] - masked.transfers[1] == skipped * (2 * s * D + g * s)
