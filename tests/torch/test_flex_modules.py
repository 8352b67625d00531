"""Mods that read a ``torch.nn.Module``'s parameters and buffers (a bound method, the module itself): the values
read at each call are the parameters as they are now, and their gradients reach them; the trace is made once and
reused after an optimizer step.  The second route is a dense float64 reference written here (the mods on the full
index grids, softmax, times V) and torch's autograd of it."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import napkin_cat as nc  # noqa: E402

B, H, N, D = 1, 2, 8, 4
G = torch.Generator().manual_seed(0)


class RelativeBias(torch.nn.Module):
    """A learnable per-head relative bias table and a document-id buffer."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(H, 2 * N - 1, dtype=torch.float64, generator=G))
        self.register_buffer("doc", torch.tensor([0, 0, 1, 1, 1, 2, 2, 2]))

    def forward(self, s, b, h, q, x):
        return s + self.table[h, q - x + N - 1]

    def score(self, s, b, h, q, x):
        return s + self.table[h, q - x + N - 1]

    def mask(self, b, h, q, x):
        return self.doc[q] == self.doc[x]


def dense(q, k, v, score_mod, mask_mod=None):
    b, h, i, x = (torch.arange(n).view([-1 if j == p else 1 for j in range(4)]) for p, n in enumerate((B, H, N, N)))
    s = score_mod(q @ k.transpose(-1, -2) / math.sqrt(D), b, h, i, x)
    s = s if mask_mod is None else s.masked_fill(~mask_mod(b, h, i, x), float("-inf"))
    return torch.softmax(s, -1) @ v


def check(m, score_mod, mask_mod=None):
    """O and the table's gradient against the dense reference."""
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64, generator=G, requires_grad=True) for _ in range(3))
    O = nc.torch.flex_attention(q, k, v, score_mod, mask_mod, memory=64, depth=0)
    want = dense(q, k, v, score_mod, mask_mod)
    assert (O - want).abs().max() < 1e-12
    cotangent = torch.randn(O.shape, dtype=torch.float64, generator=G)
    (got,) = torch.autograd.grad(O, [m.table], cotangent, allow_unused=True)
    (expected,) = torch.autograd.grad(want, [m.table], cotangent)
    assert got is not None, "the parameter the mod reads got no gradient"
    assert (got - expected).abs().max() < 1e-12


def test_a_bound_method_reads_the_parameter_as_it_is_now_and_gives_it_its_gradient(monkeypatch):
    m = RelativeBias()
    exports, real = [], torch.export.export
    monkeypatch.setattr(torch.export, "export", lambda *a, **kw: exports.append(1) or real(*a, **kw))
    check(m, m.score, m.mask)
    with torch.no_grad():
        m.table.add_(torch.randn(m.table.shape, dtype=torch.float64, generator=G))    # an optimizer's step
    check(m, m.score, m.mask)
    assert len(exports) == 1


def test_a_module_as_the_score_mod_gives_its_parameter_its_gradient():
    """(A lambda over the module, ``s + m.table[h, q - x + N - 1]``, is the same mechanism: not repeated here, each
    trace derives and compiles attention's forward and backward.)"""
    m = RelativeBias()
    check(m, m)
