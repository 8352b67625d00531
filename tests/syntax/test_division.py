"""Floor division and remainder (``floordiv``, ``mod``, ``floordiv_by``, ``mod_by``): Python's meaning on negative
operands in numpy and in the C and Triton kernels, interval images sound (and exact where claimed) on every tile,
and masks built with them (block-causal, dilated window) skipping tiles: the runner's counts equal ``nc.cost`` and
a count of the live tiles made from the mask in numpy, the output a numpy attention."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.algorithms.intervals import evaluate as intervals
from napkin_cat.syntax.wiring import trace_values

A = np.array([-9, -7, -4, -1, 0, 1, 3, 7, 8])
B = np.array([2, -2, 3, -3, 4, 5, -5, 2, -3])


def test_numpy_meaning_is_pythons_on_negatives():
    for kind, op in (("floordiv", lambda a, b: a // b), ("mod", lambda a, b: a % b)):
        got = nc.evaluate(nc.elementwise(kind, "n", dtype="int32"), A, B)
        assert got.tolist() == [op(int(a), int(b)) for a, b in zip(A, B)], kind
    for c in (3, -4):
        q = nc.evaluate(nc.elementwise("floordiv_by", "n", const=c, dtype="int32"), A)
        r = nc.evaluate(nc.elementwise("mod_by", "n", const=c, dtype="int32"), A)
        assert q.tolist() == [int(a) // c for a in A] and r.tolist() == [int(a) % c for a in A]
        assert np.array_equal(c * q + r, A)                                 # the law b·(a // b) + a % b = a


def kernel_of(kind, **const):
    arity = nc.engine.KINDS[kind].arity
    f = nc.elementwise(kind, "n", dtype="fp32", **const)
    return nc.plan(nc.kernel(f), {"n": len(A)}), [A.astype(np.float32), B.astype(np.float32)][:arity]


@pytest.mark.parametrize("kind, const, reference", [
    ("floordiv", {}, lambda: A // B), ("mod", {}, lambda: A % B),
    ("floordiv_by", {"const": -4}, lambda: A // -4), ("mod_by", {"const": 3}, lambda: A % 3)])
def test_kernels_floor_where_c_truncates(kind, const, reference, monkeypatch):
    """C's -7 / 2 is -3 and -7 % 2 is -1: the printed forms must give Python's -4 and 1 (negatives in A and B)."""
    p, args = kernel_of(kind, **const)
    try:
        np.testing.assert_array_equal(nc.codegen.c(p, blas=False)(*args), reference())
    except nc.ToolNotFoundError as missing:
        pytest.skip(str(missing))
    assert "floorf(" in nc.codegen.cuda(p).source                            # CUDA prints the C form
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    try:
        np.testing.assert_array_equal(nc.codegen.triton(p)(*args), reference())
    except nc.ToolNotFoundError as missing:
        pytest.skip(str(missing))


def test_bad_divisors_are_refused_by_name():
    with pytest.raises(nc.SignatureError, match=r"floordiv_by: divides by the constant c, which must be a finite "
                                                r"nonzero number; got c=0"):
        nc.elementwise("floordiv_by", "n", const=0, dtype="int32")
    with pytest.raises(nc.IndexingError, match=r"mod: the divisor \(second input\) holds 0 at index \(2,\)"):
        nc.evaluate(nc.elementwise("mod", "n", dtype="int32"), A[:4], np.array([1, 2, 0, 3]))


# --------------------------------------------------------------------------- masks and tiles
def block_causal(block):
    """``q // B ≥ x // B``: a query sees every key of its own block and the blocks before."""
    b = nc.Builder(nc.Ty())
    qi, xi = b(nc.position("q")), b(nc.position("x"))
    qb = b(nc.elementwise("floordiv_by", "q", const=block, dtype="int32"), qi)
    xb = b(nc.elementwise("floordiv_by", "x", const=block, dtype="int32"), xi)
    return b.build(b(nc.compare("ge", "q, x -> q x"), qb, xb))


def dilated_window(step, width):
    """``(q − x) % s = 0 and |q − x| ≤ w``: every s-th key within w of the query, on both sides."""
    b = nc.Builder(nc.Ty())
    qi, xi = b(nc.position("q")), b(nc.position("x"))
    diff = b(nc.elementwise("sub", "q, x -> q x", dtype="int32"), qi, xi)
    zero = b(nc.elementwise("scale", "q x", const=0, dtype="int32"), diff)
    on_grid = b(nc.compare("eq", "q x, q x -> q x"),
                b(nc.elementwise("mod_by", "q x", const=step, dtype="int32"), diff), zero)
    near = b(nc.compare("le", "q x, q x -> q x"), b(nc.elementwise("abs", "q x", dtype="int32"), diff),
             b(nc.elementwise("shift", "q x", const=width, dtype="int32"), zero))
    return b.build(b(nc.logical("and", "q x, q x -> q x"), on_grid, near))


def floored_difference(block):
    """``(x − q − B) // B ≤ −1``, i.e. ``x < q + B``: a floor of a negative difference, where C's truncation would
    round up (and a truncated trip test would skip live tiles)."""
    b = nc.Builder(nc.Ty())
    qi, xi = b(nc.position("q")), b(nc.position("x"))
    ahead = b(nc.elementwise("shift", "q x", const=-block, dtype="int32"),
              b(nc.elementwise("sub", "x, q -> q x", dtype="int32"), xi, qi))
    diff = b(nc.elementwise("floordiv_by", "q x", const=block, dtype="int32"), ahead)
    minus_one = b(nc.elementwise("shift", "q x", const=-1, dtype="int32"),
                  b(nc.elementwise("scale", "q x", const=0, dtype="int32"), diff))
    return b.build(b(nc.compare("le", "q x, q x -> q x"), diff, minus_one))


def mask_in_numpy(name, q, x):
    qi, xi = np.arange(q)[:, None], np.arange(x)[None, :]
    if name == "block_causal":
        return qi // 3 >= xi // 3
    if name == "floored_difference":
        return (xi - qi - 4) // 4 <= -1
    return ((qi - xi) % 3 == 0) & (np.abs(qi - xi) <= 4)


MASKS = {"block_causal": lambda: block_causal(3), "dilated_window": lambda: dilated_window(3, 4),
         "floored_difference": lambda: floored_difference(4)}
EXACT = {"block_causal", "floored_difference"}        # monotone maps only: the image is exact on every tile


@pytest.mark.parametrize("name", sorted(MASKS))
def test_interval_image_is_sound_on_every_tile_and_exact_for_monotone_masks(name):
    """always ⟹ every element true, some element true ⟹ possibly; masks of monotone maps only: ⟺."""
    n = 9
    m = nc.substitute(MASKS[name](), q=n, x=n)
    whole = nc.evaluate(m).astype(bool)
    assert np.array_equal(whole, mask_in_numpy(name, n, n))
    ops, _, (out,) = trace_values(m)
    spans = [(a, k) for a in range(n) for k in range(1, n + 1 - a)]
    for (q0, qn), (x0, xn) in itertools.product(spans[::2], spans[::3]):
        truth = intervals(ops, lambda axis, size: (q0, qn) if axis == "q" else (x0, xn))[out]
        tile = whole[q0:q0 + qn, x0:x0 + xn]
        assert not truth.always or tile.all(), (q0, qn, x0, xn)
        assert truth.possibly or not tile.any(), (q0, qn, x0, xn)
        if name in EXACT:
            assert (bool(truth.always), bool(truth.possibly)) == (tile.all(), tile.any()), (q0, qn, x0, xn)


@pytest.mark.parametrize("name", sorted(MASKS))
def test_masked_attention_skips_empty_tiles(name, monkeypatch):
    att = nc.library.masked_attention(MASKS[name]())
    flash = nc.group(nc.stream(att, "x", "s_x"), "q", "g_q")
    q, x, d, g, s = 13, 14, 2, 3, 2                      # ragged: 13 = 4·3 + 1, and tiles straddle blocks
    sizes = {"q": q, "x": x, "d": d, "g_q": g, "s_x": s}
    rng = np.random.default_rng(3)
    Q, K, V = rng.normal(size=(q, d)), rng.normal(size=(x, d)), rng.normal(size=(x, d))
    mask = mask_in_numpy(name, q, x)
    S = np.where(mask, Q @ K.T / math.sqrt(d), -np.inf)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    reference = (P / P.sum(axis=1, keepdims=True)) @ V

    counted = {}
    got = nc.evaluate(flash, Q, K, V, sizes={"g_q": g, "s_x": s}, counters=counted)
    p = nc.plan(flash, sizes)
    planned, run = p.run(Q, K, V)
    np.testing.assert_allclose(got, reference, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(planned, reference, rtol=1e-12, atol=1e-12)
    assert counted == run.transfers == nc.cost(flash, sizes=sizes).H

    live = [(a, j) for a in range(0, q, g) for j in range(0, x, s) if mask[a:a + g, j:j + s].any()]
    exact = 2 * q * d + sum(2 * min(s, x - j) * d for _, j in live)           # Q, O once; K, V per live tile
    dense = 2 * q * d + -(-q // g) * 2 * x * d
    if name in EXACT:
        assert run.transfers == {1: exact} and exact < dense
    else:       # intervals see each conjunct alone: a tile may pass both without an element passing both
        assert exact <= run.transfers[1] < dense

    f32 = [a.astype(np.float32) for a in (Q, K, V)]                          # the skip tests print sign-safe floors
    try:
        np.testing.assert_allclose(nc.codegen.c(p, blas=False)(*f32), reference, rtol=1e-5, atol=1e-5)
    except nc.ToolNotFoundError as missing:
        pytest.skip(str(missing))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    try:
        np.testing.assert_allclose(nc.codegen.triton(p)(*f32), reference, rtol=1e-5, atol=1e-5)
    except nc.ToolNotFoundError as missing:
        pytest.skip(str(missing))


def test_derived_block_causal_attention_skips_the_blocks_ahead():
    """``nc.derive`` at a memory: its H counts only live tiles, and the plan at its tiles moves exactly that."""
    q = x = 64
    d, block = 8, 4
    r = nc.derive(nc.library.masked_attention(block_causal(block)), memory=600, sizes={"q": q, "x": x, "d": d})
    tiles = {k: int(v) for k, v in r.optimum.sizes.items()}
    g, s = tiles["g_q"], tiles["s_x"]
    rng = np.random.default_rng(5)
    Q, K, V = rng.normal(size=(q, d)), rng.normal(size=(x, d)), rng.normal(size=(x, d))
    out, run = nc.plan(r.diagram, tiles).run(Q, K, V)
    mask = (np.arange(q)[:, None] // block) >= (np.arange(x)[None, :] // block)
    S = np.where(mask, Q @ K.T / math.sqrt(d), -np.inf)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, (P / P.sum(axis=1, keepdims=True)) @ V, rtol=1e-12, atol=1e-12)
    live = sum(min(s, x - j) for a in range(0, q, g) for j in range(0, x, s) if mask[a:a + g, j:j + s].any())
    assert run.transfers == {1: r.H} == {1: 2 * q * d + 2 * d * live}
    assert r.H < 2 * q * d + -(-q // g) * 2 * x * d                                 # dense at the same tiles
