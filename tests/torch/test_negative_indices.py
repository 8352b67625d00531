"""A negative index counts from the end, as torch's ``table[i]`` does: a relative bias read at ``q − x`` (which is
negative above the diagonal) in a FlexAttention score_mod, and a model's ``x[i]`` by an index tensor with negative
entries.  Second routes: the maths written here in float64 plain torch (the mods on the full index grids) with its
autograd (the learnable table's gradient), FlexAttention itself, and the model run eagerly."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
flex = pytest.importorskip("torch.nn.attention.flex_attention")

import napkin_cat as nc  # noqa: E402
from napkin_cat.errors import IndexingError  # noqa: E402

B, H, N, D = 1, 1, 8, 4
G = torch.Generator().manual_seed(11)
TABLE = torch.randn(N, dtype=torch.float64, generator=G, requires_grad=True)   # read at q − x ∈ −7 … 7


def score_mod(s, b, h, q, x):
    return s + TABLE[q - x]


def dense(q, k, v):
    grid = [torch.arange(m).view([-1 if j == p else 1 for j in range(4)]) for p, m in enumerate((B, H, N, N))]
    s = score_mod(q @ k.transpose(-1, -2) / math.sqrt(D), *grid)
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


@pytest.mark.filterwarnings("ignore")
def test_a_relative_bias_read_at_q_minus_x_counts_from_the_end_with_its_gradient():
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64, generator=G, requires_grad=True) for _ in range(3))
    O, L = nc.torch.flex_attention(q, k, v, score_mod, return_lse=True, memory=64, depth=0)
    O2, L2 = dense(q, k, v)
    O3, L3 = flex.flex_attention(q.detach(), k.detach(), v.detach(), score_mod, return_lse=True)
    assert float((O - O2).detach().abs().max()) < 1e-12 and float((L - L2).detach().abs().max()) < 1e-12
    assert float((O - O3).detach().abs().max()) < 1e-12
    w = torch.linspace(-1, 1, O.numel(), dtype=O.dtype).reshape(O.shape)
    got = torch.autograd.grad((O * w).sum() + L.sum(), (q, k, v, TABLE))
    want = torch.autograd.grad((O2 * w).sum() + L2.sum(), (q, k, v, TABLE))
    assert max(float((a - b).abs().max()) for a, b in zip(got, want)) < 1e-12
    assert float(got[3][1:].abs().min()) > 0          # every entry read: −7 … −1 as 1 … 7, 0 … 7 as themselves


class Lookup(torch.nn.Module):
    def __init__(self, n=5):
        super().__init__()
        self.register_buffer("table", torch.arange(n, dtype=torch.float64) ** 2 + 1)

    def forward(self, x, i):
        return x * self.table[i]


def test_a_models_negative_index_is_read_from_the_end_and_one_beyond_is_refused():
    x, i = torch.randn(6, dtype=torch.float64, generator=G), torch.tensor([0, -1, 4, -5, 2, -3])
    r = nc.from_torch(Lookup(), x, i)
    assert np.abs(r.evaluate() - Lookup()(x, i).numpy()).max() == 0
    with pytest.raises(IndexingError, match=r"takes the values -6 … 4.*legal range of dimension 0 is -5 … 4 "
                                            r"\(negative indices count from the end\)"):
        r.evaluate(i=np.array([0, -6, 4, 1, 2, 3]))
    with pytest.raises(IndexingError, match=r"-6 … 4 on the example inputs; the legal range of dimension 0 is -5"):
        nc.from_torch(Lookup(), x, torch.tensor([0, -6, 4, 1, 2, 3]))


def test_traced_with_no_negative_index_a_negative_one_later_is_refused():
    """The diagram reads ``i mod n`` only where the example had a negative index; elsewhere a later negative index
    is refused, not read as 0."""
    r = nc.from_torch(Lookup(), torch.ones(6, dtype=torch.float64), torch.tensor([0, 1, 4, 3, 2, 1]))
    with pytest.raises(IndexingError, match="the legal range of dimension 0 is 0 … 4 .*traced with none here"):
        r.evaluate(i=np.array([0, -1, 4, 1, 2, 3]))
