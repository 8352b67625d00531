"""``nc.from_torch`` decomposes ``var``, ``std``, ``var_mean`` and ``std_mean`` (every overload: ``unbiased``,
``correction``, ``dim`` as an int, a tuple or None, ``keepdim``): ``nc.evaluate`` of the diagram equals the module's
output, and numpy's ``var``/``std`` with ``ddof`` = the correction (a second route written from the maths); a
correction not below the elements reduced, or one over a dimension of symbolic size, is refused by name."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import napkin_cat as nc  # noqa: E402

X = torch.randn(3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))


class Moments(torch.nn.Module):
    def forward(self, x):
        var_mean = torch.var_mean(x, 1, correction=0)
        std_mean = torch.std_mean(x, (0, 2), keepdim=True)
        standardised = (x - x.mean(-1, keepdim=True)) / x.std(-1, True, True)
        return (x.var(-1, keepdim=True), x.std(dim=(0, 1), unbiased=False), *var_mean, *std_mean, x.var(),
                torch.var(x, 0, correction=2), x.std(unbiased=False), standardised)


def numpy_moments(x):
    """The same outputs by numpy from the maths: var = Σ(x − mean)² / (n − ddof)."""
    return (x.var(-1, ddof=1, keepdims=True), x.std((0, 1), ddof=0), x.var(1, ddof=0), x.mean(1),
            x.std((0, 2), ddof=1, keepdims=True), x.mean((0, 2), keepdims=True), x.var(ddof=1), x.var(0, ddof=2),
            x.std(ddof=0), (x - x.mean(-1, keepdims=True)) / x.std(-1, ddof=1, keepdims=True))


def test_moments_evaluate_to_the_module_and_to_numpy():
    r = nc.from_torch(Moments(), X)
    got = r.evaluate()
    want = [w.detach().numpy() for w in Moments()(X)]
    maths = numpy_moments(X.numpy())
    assert len(got) == len(want) == len(maths)
    for k, (g, w, m) in enumerate(zip(got, want, maths)):
        assert g.shape == w.shape == np.shape(m), k
        assert np.abs(g - w).max() < 1e-12 and np.abs(g - m).max() < 1e-12, k


class Fixed(torch.nn.Module):
    def __init__(self, op, **kw):
        super().__init__()
        self.op, self.kw = op, kw

    def forward(self, x):
        return getattr(torch, self.op)(x, **self.kw)


def test_a_correction_not_below_the_count_is_refused():
    """Over 4 elements a correction of 4 divides by 0 (torch: NaN or ∞): refused, naming the operation."""
    with pytest.raises(nc.errors.UnsupportedOperationError, match=r"aten.var.correction.*correction 4 runs over 4"):
        nc.from_torch(Fixed("var", dim=1, correction=4), X)


def test_a_symbolic_size_takes_correction_zero_only():
    """With the reduced dimension dynamic, ``unbiased=False`` translates (the mean of squares) and its evaluation at
    the example equals torch's; a correction of 1 has no constant factor: refused naming the symbolic size."""
    n = torch.export.Dim("n", min=2)
    r = nc.from_torch(Fixed("std", dim=0, unbiased=False), X, dynamic_shapes={"x": {0: n}})
    assert np.abs(r.evaluate() - X.std(0, unbiased=False).numpy()).max() < 1e-12
    with pytest.raises(nc.errors.UnsupportedOperationError, match="symbolic size"):
        nc.from_torch(Fixed("std", dim=0), X, dynamic_shapes={"x": {0: n}})
