"""``nc.library.in_a_row``: blocks in a row, each with its own weights (transformer_stack is one), checked against
numpy: ``x₂ = x₁ + mlp(x₁, θ₁)``, ``x₁ = x₀ + mlp(x₀, θ₀)``, the MLP written out in the test."""
import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.errors import ArgumentError

L = nc.library


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def test_a_residual_row_of_mlps_is_what_numpy_computes():
    block = nc.rename_axis(nc.rename_axis(L.mlp(), "i", "e"), "o", "e")
    row = L.in_a_row([block, block], residual=True)
    rng = np.random.default_rng(0)
    n, e, f = 3, 4, 5
    x = rng.normal(size=(n, e))
    weights = [[rng.normal(size=s) for s in ((e, f), (f,), (f, e), (e,))] for _ in range(2)]
    want = x
    for W1, b1, W2, b2 in weights:
        want = want + _gelu(want @ W1 + b1) @ W2 + b2
    got = nc.evaluate(row, x, *weights[0], *weights[1], sizes={"n": n, "e": e, "f": f})
    np.testing.assert_allclose(got, want, rtol=1e-10)
    plain = nc.evaluate(L.in_a_row([block]), x, *weights[0], sizes={"n": n, "e": e, "f": f})
    np.testing.assert_allclose(plain, _gelu(x @ weights[0][0] + weights[0][1]) @ weights[0][2] + weights[0][3],
                               rtol=1e-10)


def test_a_block_that_does_not_return_x_is_named():
    widening = L.mlp()      # n i -> n o: its output is not its running input's type
    with pytest.raises(ArgumentError, match="block 0 maps"):
        L.in_a_row([widening])
