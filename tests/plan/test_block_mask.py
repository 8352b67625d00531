"""A mask read from data skips tiles by the data's block mask: the runner's counts, the cost given it, numpy."""
import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.blockmask import FULL, NONE, PARTIAL, BlockMask
from napkin_cat.errors import ArgumentError, ShapeError

N, D, G, S = 512, 8, 32, 32


def _documents(rng, n, low=8, high=72):
    lengths = []
    while sum(lengths) < n:
        lengths.append(int(rng.integers(low, high)))
    return np.repeat(np.arange(len(lengths)), lengths)[:n].astype(np.int32)


def _reference(Q, K, V, allowed):
    S_ = np.where(allowed, Q @ K.T / np.sqrt(Q.shape[1]), -np.inf)
    with np.errstate(invalid="ignore"):
        P = np.exp(S_ - S_.max(axis=1, keepdims=True))
        return (P / P.sum(axis=1, keepdims=True)) @ V


def _flash():
    return nc.group(nc.stream(nc.kernel(nc.library.document_attention()), "x", "s_x"), "q", "g_q")


def test_block_states_are_the_blocks_any_and_all():
    rng = np.random.default_rng(1)
    mask = rng.random((37, 23)) < 0.05
    mask[:, 7:] |= rng.random((37, 16)) < 0.97
    bm = BlockMask.of(mask, "q x")
    got = bm.states({"q": 5, "x": 4})
    for i in range(0, 37, 5):
        for j in range(0, 23, 4):
            block = mask[i:i + 5, j:j + 4]
            want = FULL if block.all() else PARTIAL if block.any() else NONE
            assert got[i // 5, j // 4] == want, (i, j)
    assert {NONE, PARTIAL, FULL} <= set(got.ravel().tolist())


def test_document_masking_at_a_fifth_moves_and_computes_a_fifth_of_dense():
    rng = np.random.default_rng(0)
    seg = _documents(rng, N)
    Q, K, V = (rng.normal(size=(N, D)) for _ in range(3))
    sizes = {"q": N, "x": N, "d": D, "g_q": G, "s_x": S}
    allowed = seg[:, None] == seg[None, :]
    bm = nc.block_mask(nc.library.document_mask(q=N, x=N), seg, seg)       # the pre-pass on the data
    np.testing.assert_array_equal(bm.counts, BlockMask.of(allowed, "q x").counts)
    p = nc.plan(_flash(), sizes)
    out, masked = p.run(Q, K, V, seg, seg, block_mask=bm)
    dense_out, dense = p.run(Q, K, V, seg, seg)
    np.testing.assert_allclose(out, _reference(Q, K, V, allowed), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dense_out, out, rtol=1e-10, atol=1e-12)
    c = nc.cost(_flash(), sizes=sizes, block_mask=bm)
    assert (c.H, c.flops) == (masked.transfers, masked.flops)            # the cost counts what the run skips
    live = sum(allowed[i:i + G, j:j + S].any() for i in range(0, N, G) for j in range(0, N, S))
    density = live / (N // G) ** 2
    assert 0.15 < density < 0.3
    # per q-tile: Q and its ids loaded, O stored (fixed); per running trip: K, V slices and the key ids
    fixed, per_trip = (N // G) * (2 * G * D + G), 2 * S * D + S
    assert masked.transfers[1] == fixed + live * per_trip
    assert dense.transfers[1] == fixed + (N // G) ** 2 * per_trip
    assert masked.flops["tensor"] == density * dense.flops["tensor"]      # the two products, per running tile


def test_a_row_with_no_allowed_key_keeps_the_librarys_convention():
    """The library's softmax of a row of −∞ is 0/0 (NaN) in ``nc.evaluate``; the skipping run keeps it."""
    rng = np.random.default_rng(2)
    seg_x = np.repeat(np.arange(4), 16).astype(np.int32)
    seg_q = seg_x.copy()
    seg_q[:8] = 9
    Q, K, V = (rng.normal(size=(64, 4)) for _ in range(3))
    p = nc.plan(_flash(), {"q": 64, "x": 64, "d": 4, "g_q": 16, "s_x": 16})
    with np.errstate(invalid="ignore"):
        out, _ = p.run(Q, K, V, seg_q, seg_x, block_mask=BlockMask.of(seg_q[:, None] == seg_x[None, :], "q x"))
        want = nc.evaluate(nc.library.document_attention(), Q, K, V, seg_q, seg_x)
    assert np.isnan(out[:8]).all() and np.isfinite(out[8:]).all()
    np.testing.assert_allclose(out, want, rtol=1e-10)


def test_a_block_mask_that_does_not_fit_is_refused():
    sizes = {"q": 64, "x": 64, "d": 4, "g_q": 16, "s_x": 16}
    p = nc.plan(_flash(), sizes)
    xs = [np.zeros((64, 4))] * 3 + [np.zeros(64, np.int32)] * 2
    with pytest.raises(ShapeError, match="axis 'x' has size 32"):
        p.run(*xs, block_mask=BlockMask.of(np.ones((64, 32), bool), "q x"))
    with pytest.raises(ShapeError, match=r"over axes \['q', 'y'\]"):
        nc.cost(_flash(), sizes=sizes, block_mask=BlockMask.of(np.ones((64, 64), bool), "q y"))
    with pytest.raises(ArgumentError, match="give sizes="):
        nc.cost(_flash(), block_mask=BlockMask.of(np.ones((64, 64), bool), "q x"))
    causal = nc.plan(nc.stream(nc.kernel(nc.library.causal_attention()), "x", "s_x"), {"q": 64, "x": 64, "d": 4,
                                                                                       "s_x": 16})
    with pytest.raises(ShapeError, match="no stream of this plan has a mask read from data"):
        causal.run(*xs[:3], block_mask=BlockMask.of(np.ones((64, 64), bool), "q x"))
    with pytest.raises(ShapeError, match="bool array"):
        BlockMask.of(np.ones((4, 4)), "q x")


@pytest.mark.parametrize("shape", [(), (9,), (7, 3), (4, 5, 6)])
def test_the_allowed_pairs_of_any_box_are_counted_by_brute_force(shape):
    """Every box of every axis count (none to three): the summed-area table's inclusion–exclusion (int32 tables)
    equals the pairs the box holds, counted on the mask itself."""
    rng = np.random.default_rng(len(shape))
    mask = rng.random(shape) < 0.4
    axes = tuple("abc"[:len(shape)])
    bm = BlockMask.of(mask, axes)
    for _ in range(40):
        box = {a: sorted(rng.integers(0, n + 1, size=2)) for a, n in zip(axes, shape)}
        want = int(mask[tuple(slice(lo, hi) for lo, hi in box.values())].sum())
        assert int(bm.allowed(lambda a, size: (box[a][0], box[a][1] - box[a][0]))) == want, box
