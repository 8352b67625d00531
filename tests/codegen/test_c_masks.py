"""Masks in the C kernel: a causal ``where`` at a constant 8×8 tile equals numpy's, in float and in double.

gcc 12.2 (Debian 12's, what CI compiles with) vectorises such a loop wrongly when the mask is held in one or two
bytes (``unsigned char``: 12 of 64 values wrong in float, 6 in double); the C printer holds masks as ``int``
(``CPrinter.held_width``), and the kernel takes and gives ``bool`` numpy arrays."""
import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.codegen.c.openmp import blas_available

N = 8


def causal_where():
    """``S`` where ``x ≤ q``, else −∞: the mask from positions, built inside the kernel."""
    where = nc.where("q x, q x -> q x", q=N, x=N)
    b = nc.Builder(where.dom[1:])
    (S,) = b.inputs
    return b.build(b(where, b(nc.library.causal_mask(q=N, x=N)), S))


@pytest.mark.parametrize("real, dtype", [("float", np.float32), ("double", np.float64)])
def test_a_causal_where_at_a_constant_tile_equals_numpy(real, dtype):
    S = np.random.default_rng(0).standard_normal((N, N)).astype(dtype)
    k = nc.codegen.c(nc.plan(causal_where(), {}), real=real, blas=blas_available())
    got = k(S)
    want = np.where(np.tril(np.ones((N, N), bool)), S, -np.inf)
    assert got.dtype == dtype and np.array_equal(got, want), np.argwhere(got != want).tolist()


def test_masks_in_and_out_are_bool_arrays():
    """A mask given (``where`` reading it) and a mask returned (the causal mask itself) are numpy bool arrays
    on the outside, whatever the kernel holds them in."""
    mask = nc.library.causal_mask(q=N, x=N)
    k = nc.codegen.c(nc.plan(mask, {}))
    got = k()
    assert got.dtype == np.bool_ and np.array_equal(got, np.tril(np.ones((N, N), bool)))
    out = np.zeros((N, N), bool)
    assert k(out=[out]) is out and np.array_equal(out, got)
    where = nc.where("q x, q x -> q x", q=N, x=N)
    m = np.random.default_rng(1).random((N, N)) < 0.5
    S = np.random.default_rng(2).standard_normal((N, N)).astype(np.float32)
    assert np.array_equal(nc.codegen.c(nc.plan(where, {}))(m, S), np.where(m, S, -np.inf))


def band_where(p=9, k=11):
    """``X`` where ``p ≤ k`` and ``k ≤ p`` (the diagonal), else −1.5: an ``int`` mask made of two comparisons."""
    s = {"p": p, "k": k}
    b = nc.Builder(nc.types("p k", sizes=s))
    (X,) = b.inputs
    pp, pk = b(nc.position("p", p=p)), b(nc.position("k", k=k))
    m = b(nc.logical("and", "p k, p k -> p k", **s), b(nc.compare("le", "p, k -> p k", **s), pp, pk),
          b(nc.compare("le", "k, p -> p k", **s), pk, pp))
    return b.build(b(nc.where("p k, p k -> p k", other=-1.5, **s), m, X))


@pytest.mark.parametrize("real, dtype", [("float", np.float32), ("double", np.float64)])
def test_a_band_where_at_a_constant_tile_equals_numpy(real, dtype):
    """gcc 12.2 made ``m[i] ? x[i] : c`` a masked load and got 4 of 99 values wrong in float, even with the mask
    held as int; the C printer reads each operand into a local first (``CPrinter.bound``)."""
    X = np.random.default_rng(0).standard_normal((9, 11)).astype(dtype)
    got = nc.codegen.c(nc.plan(band_where(), {}), real=real, blas=blas_available())(X)
    want = np.where(np.eye(9, 11, dtype=bool), X, -1.5)
    assert np.array_equal(got, want), np.argwhere(got != want).tolist()
