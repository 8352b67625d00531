"""Conventions of torch code that ``nc.from_torch`` and ``nc.torch.compile`` take as torch does: ``torch.einsum``
with an ellipsis (broadcast from the right) or with no ``->`` (torch's implicit output), tensors filled with one
number (``zeros_like``, ``new_full``, ``full``, ``scalar_tensor``), and torch's int64 class targets given to the op
compiled from a translated cross-entropy.  The second route is torch itself: the module run eagerly, its autograd."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import napkin_cat as nc  # noqa: E402
from napkin_cat.errors import TensorError  # noqa: E402
from napkin_cat.torch.equations import explicit  # noqa: E402

G = torch.Generator().manual_seed(5)


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float64, generator=G)


class Function(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


EINSUMS = {
    "batched matmul": ("...ij,...jk->...ik", (2, 3, 4), (2, 4, 5)),
    "broadcast from the right": ("...nd,...md->...nm", (2, 3, 5, 4), (3, 6, 4)),
    "implicit output": ("bij,bjk", (2, 3, 4), (2, 4, 5)),
    "implicit with an ellipsis": ("...ij,jk", (2, 3, 4), (4, 5)),
}


@pytest.mark.parametrize("case", list(EINSUMS))
def test_einsum_with_an_ellipsis_or_an_implicit_output_is_torchs(case):
    equation, *shapes = EINSUMS[case]
    xs = [randn(*s) for s in shapes]
    model = Function(lambda a, b: torch.einsum(equation, a, b))
    want = model(*xs)
    got = nc.from_torch(model, *xs).evaluate()
    assert got.shape == tuple(want.shape) and np.abs(got - want.numpy()).max() < 1e-12


def test_the_letters_of_an_ellipsis_align_from_the_right():
    assert explicit(None, "...nd,...md->...nm", [4, 3]) == (["ABnd", "Bmd"], "ABnm")
    assert explicit(None, "i...,i...", [1, 3]) == (["i", "iAB"], "AB")


FILLED = {
    "zeros_like in a where": lambda x: torch.where(x > 0, x, torch.zeros_like(x)),
    "new_full added": lambda x: x + x.new_full((1, 1), 2.5),
    "full of another size broadcast": lambda x: x * torch.full((3, 1), 3.0, dtype=x.dtype),
    "a 0-d tensor": lambda x: torch.maximum(x, torch.tensor(0.25, dtype=x.dtype)),
    "ones_like mask": lambda x: torch.where(torch.ones_like(x, dtype=torch.bool) & (x < 1), x, -1.0),
}


@pytest.mark.parametrize("case", list(FILLED))
def test_a_tensor_filled_with_one_number_is_that_number(case):
    x = randn(3, 4)
    model = Function(FILLED[case])
    got = nc.from_torch(model, x).evaluate()
    assert np.abs(got - model(x).numpy()).max() == 0


@pytest.fixture(scope="module")
def cross_entropy():
    """The op compiled from a translated ``F.cross_entropy(x @ w, t)``, and the model."""
    model = Function(lambda x, w, t: torch.nn.functional.cross_entropy(x @ w, t))
    x, w, t = randn(6, 5), randn(5, 9), torch.tensor([1, 0, 8, 3, 3, 5])
    op = nc.torch.compile(nc.from_torch(model, x, w, t).diagram, memory=64, name="test_int64_targets")
    return op, model


def test_the_op_takes_torchs_int64_targets(cross_entropy):
    op, model = cross_entropy
    x, w = randn(6, 5).requires_grad_(), randn(5, 9).requires_grad_()
    t = torch.tensor([8, 2, 0, 4, 4, 7])        # int64, as F.cross_entropy takes them
    got, want = op(x, w, t), model(x, w, t)
    assert float((got - want).detach().abs()) < 1e-12
    for a, b in zip(torch.autograd.grad(got, (x, w)), torch.autograd.grad(want, (x, w))):
        assert float((a - b).abs().max()) < 1e-12
    assert float((op(x, w, t.to(torch.int32)) - want).detach().abs()) < 1e-12


def test_int64_targets_outside_int32_are_refused_naming_the_input(cross_entropy):
    op, _ = cross_entropy
    with pytest.raises(TensorError, match=r"input 2 \(.*\) of .* holds torch.int64 values outside int32"):
        op(randn(6, 5), randn(5, 9), torch.tensor([0, 1, 2, 3, 4, 2 ** 40]))
    with pytest.raises(TensorError, match="takes an integer tensor"):
        op(randn(6, 5), randn(5, 9), torch.zeros(6, dtype=torch.bool))
