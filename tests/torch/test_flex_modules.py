"""Mods that read a ``torch.nn.Module``'s parameters and buffers (a bound method, a module as the mod): the values
read at each call are the parameters as they are now, and their gradients reach them; the trace is made once and
reused after an optimizer step, and made again when an attribute a mod reads changes.  The second route is a dense
float64 reference written here (the mods on the full index grids, softmax, times V) and torch's autograd of it."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import napkin_cat as nc  # noqa: E402

B, H, N, D = 1, 2, 8, 4
G = torch.Generator().manual_seed(0)


class RelativeBias(torch.nn.Module):
    """A learnable per-head relative bias table, read by a method."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(H, 2 * N - 1, dtype=torch.float64, generator=G))

    def score(self, s, b, h, q, x):
        return s + self.table[h, q - x + N - 1]


class Documents(torch.nn.Module):
    """A mask module: a document-id buffer, read by its forward."""

    def __init__(self):
        super().__init__()
        self.register_buffer("doc", torch.tensor([0, 0, 1, 1, 1, 2, 2, 2]))

    def forward(self, b, h, q, x):
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


def test_a_method_and_a_module_read_their_parameters_as_they_are_now_and_give_them_their_gradients(monkeypatch):
    """The score_mod a bound method reading a Parameter, the mask_mod a module reading a buffer: one trace, reused
    after an optimizer's in-place step, each call equal to the reference at the parameter's current values."""
    m, documents = RelativeBias(), Documents()
    exports, real = [], torch.export.export
    monkeypatch.setattr(torch.export, "export", lambda *a, **kw: exports.append(1) or real(*a, **kw))
    check(m, m.score, documents)
    with torch.no_grad():
        m.table.add_(torch.randn(m.table.shape, dtype=torch.float64, generator=G))    # an optimizer's step
    check(m, m.score, documents)
    assert len(exports) == 1


class Stop(Exception):
    """Raised in place of the kernels: the test looks at the traces only."""


def test_an_attribute_changed_on_a_captured_object_or_module_traces_again(monkeypatch):
    """``cfg.width = 5`` (an object a lambda captures), ``module.width = 5`` (a bound method's module) or
    ``widths["width"] = 5`` (a dict a lambda captures; on main its entries were not in the key) is another mask:
    it exports again, where an unchanged call reuses the trace (each call stops before the kernels)."""
    import types
    exports, real = [], torch.export.export
    monkeypatch.setattr(torch.export, "export", lambda *a, **kw: exports.append(1) or real(*a, **kw))
    monkeypatch.setattr(nc.torch.flexop.FlexOp, "arrays", lambda *a: (_ for _ in ()).throw(Stop))
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64, generator=G) for _ in range(3))

    class Band(torch.nn.Module):
        width = 2

        def mask(self, b, h, q, x):
            return (q - x <= self.width) & (x <= q)
    cfg, band, widths = types.SimpleNamespace(width=2), Band(), {"width": 2}
    for mask_mod, owner in ((lambda b, h, q, x: (q - x <= cfg.width) & (x <= q), cfg), (band.mask, band),
                            (lambda b, h, q, x: (q - x <= widths["width"]) & (x <= q), widths)):
        before = len(exports)
        for width in (2, 2, 5, 5):
            owner.__setitem__("width", width) if isinstance(owner, dict) else setattr(owner, "width", width)
            with pytest.raises(Stop):
                nc.torch.flex_attention(q, k, v, mask_mod=mask_mod, memory=64, depth=0)
        assert len(exports) - before == 2
