"""``return_lse=True``: the log-sum-exp is differentiable, as FlexAttention's is (``∂L/∂S = P``), so a loss that
reads L (a z-loss on the attention's normaliser) gets its gradient in q, k, v and a captured bias table, rows with
no allowed key included (their L = −∞ contributes nothing).  The second route: the same maths written here in
float64 (scores, the mods on the full index grids, logsumexp, softmax) and torch's autograd of it."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import napkin_cat as nc  # noqa: E402

B, H, N, D = 1, 2, 8, 4
G = torch.Generator().manual_seed(0)
TABLE = torch.randn(2 * N - 1, dtype=torch.float64, generator=G, requires_grad=True)


def score_mod(s, b, h, q, x):
    return s + TABLE[q - x + N - 1]


def mask_mod(b, h, q, x):
    return (x < q) & (q - x <= 3)        # query 0 has no key: O = 0, L = −∞


def dense(q, k, v):
    b, h, i, x = (torch.arange(n).view([-1 if j == p else 1 for j in range(4)]) for p, n in enumerate((B, H, N, N)))
    s = score_mod(q @ k.transpose(-1, -2) / math.sqrt(D), b, h, i, x).masked_fill(~mask_mod(b, h, i, x), -math.inf)
    L = torch.logsumexp(s, -1)
    return torch.exp(s - L[..., None]).nan_to_num(0.0) @ v, L


def test_a_loss_that_reads_the_log_sum_exp_gets_its_gradient():
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64, generator=G, requires_grad=True) for _ in range(3))
    O, L = nc.torch.flex_attention(q, k, v, score_mod, mask_mod, return_lse=True, memory=64, depth=0)
    O2, L2 = dense(q, k, v)
    assert L.requires_grad and torch.isneginf(L[..., 0]).all()
    assert (O - O2).abs().max() < 1e-12 and (L[..., 1:] - L2[..., 1:]).abs().max() < 1e-12
    a, c = (torch.randn(x.shape, dtype=torch.float64, generator=G) for x in (O, L))

    def loss(O, L):
        return (O * a).sum() + (L.masked_fill(torch.isneginf(L), 0) * c).sum()
    got = torch.autograd.grad(loss(O, L), [q, k, v, TABLE])
    want = torch.autograd.grad(loss(O2, L2), [q, k, v, TABLE])
    for name, g, w in zip("q k v table".split(), got, want):
        assert torch.isfinite(g).all() and (g - w).abs().max() < 1e-12, name
