"""A compiled op's index inputs are checked at call time: a target outside ``0 … v−1`` of a cross-entropy is an
``IndexingError`` naming the input, the axis and the legal range (torch's ``F.cross_entropy`` raises there too),
not the finite loss the gather's "0 outside" would give; targets inside give torch's loss and its gradient (the
second route: ``F.cross_entropy`` and torch's autograd)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import napkin_cat as nc  # noqa: E402
from napkin_cat.errors import IndexingError  # noqa: E402

G = torch.Generator().manual_seed(0)
N, E, V = 5, 3, 7


@pytest.fixture(scope="module")
def loss():
    return nc.torch.compile(nc.library.linear_cross_entropy(), memory=64, name="test_ranges_loss")


def inputs(dtype=torch.float64):
    return (torch.randn(N, E, dtype=dtype, generator=G, requires_grad=True),
            torch.randn(V, E, dtype=dtype, generator=G, requires_grad=True))


def test_targets_inside_give_torchs_loss_and_gradients(loss):
    h, w = inputs()
    t = torch.tensor([0, V - 1, 3, 1, V - 1], dtype=torch.int32)
    y, want = loss(h, w, t), torch.nn.functional.cross_entropy(h @ w.T, t.long(), reduction="none")
    assert (y - want).abs().max() < 1e-12
    got, expected = torch.autograd.grad(y.sum(), [h, w]), torch.autograd.grad(want.sum(), [h, w])
    assert all((a - b).abs().max() < 1e-12 for a, b in zip(got, expected))


@pytest.mark.parametrize("bad,values", [(V, f"0 … {V}"), (-1, "-1 … 3")])
def test_a_target_outside_the_classes_is_refused_naming_the_input_and_the_range(loss, bad, values):
    h, w = inputs()
    t = torch.tensor([0, bad, 3, 1, 2], dtype=torch.int32)
    with pytest.raises(IndexingError, match=rf"input 2 \(n\) of napkin::test_ranges_loss_\w+ indexes axis 'v' .* "
                                            rf"takes the values {values}; the legal range at this call is "
                                            rf"0 … {V - 1} \(v = {V}"):
        loss(h, w, t)


def test_the_range_follows_the_calls_sizes(loss):
    """The same op at a larger vocabulary: a target that was outside at V is inside at V + 2."""
    h = torch.randn(N, E, dtype=torch.float64, generator=G)
    w = torch.randn(V + 2, E, dtype=torch.float64, generator=G)
    t = torch.tensor([V, V + 1, 0, 0, 0], dtype=torch.int32)
    want = torch.nn.functional.cross_entropy(h @ w.T, t.long(), reduction="none")
    assert (loss(h, w, t) - want).abs().max() < 1e-12
