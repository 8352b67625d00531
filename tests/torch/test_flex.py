"""``nc.torch.flex_attention`` against ``torch.nn.attention.flex_attention`` (eager) on a zoo of mods: outputs,
log-sum-exp and gradients; an unsupported op in a mod is a typed error naming it."""
from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")
flex = pytest.importorskip("torch.nn.attention.flex_attention")

import napkin_cat as nc  # noqa: E402

B, H, N, D = 1, 2, 16, 4
G = torch.Generator().manual_seed(0)
DOC = torch.tensor([0] * 5 + [1] * 7 + [2] * 4)          # document ids, captured
SLOPE = torch.tensor([0.5, 0.25], dtype=torch.float64)    # ALiBi's per-head slope, captured
TABLE = torch.randn(2 * N - 1, dtype=torch.float64, generator=G)   # a relative bias table, captured

MASKS = {
    "causal": lambda b, h, q, x: x <= q,
    "sliding": lambda b, h, q, x: (x <= q) & (q - x < 4),
    "prefix": lambda b, h, q, x: (x <= q) | (x < 5),
    "document": lambda b, h, q, x: DOC[q] == DOC[x],
    "dilated": lambda b, h, q, x: ((q - x) % 2 == 0) & (x // 4 <= q // 4),
}
SCORES = {
    "alibi": lambda s, b, h, q, x: s + SLOPE[h] * (x - q),
    "softcap": lambda s, b, h, q, x: 2.0 * torch.tanh(s / 2.0),
    "relative": lambda s, b, h, q, x: s + TABLE[q - x + N - 1],
}


def qkv(requires_grad=False):
    return [torch.randn(B, H, N, D, dtype=torch.float64, generator=G).requires_grad_(requires_grad)
            for _ in range(3)]


def dense(q, k, v, score_mod=None, mask_mod=None):
    """The maths by plain torch (a second route, differentiable on the CPU where FlexAttention's backward is not):
    the mods applied to the full index grids, the scores masked to −∞, softmax, times V."""
    b, h, i, x = (torch.arange(n).view([-1 if j == p else 1 for j in range(4)]) for p, n in enumerate((B, H, N, N)))
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    s = s if score_mod is None else score_mod(s, b, h, i, x)
    s = s if mask_mod is None else s.masked_fill(~mask_mod(b, h, i, x), float("-inf"))
    return torch.softmax(s, -1) @ v


def reference(q, k, v, score_mod=None, mask_mod=None):
    block = flex.create_block_mask(mask_mod, B, H, N, N, device="cpu") if mask_mod else None
    return flex.flex_attention(q, k, v, score_mod=score_mod, block_mask=block, return_lse=True)


#: the cheap variant runs in CI (each case derives and compiles attention's kernels: seconds to tens of seconds on
#: two shared cores); the whole zoo with NAPKIN_SLOW=1
CHEAP = {("document", None), (None, "softcap")}
CASES = [*((m, None) for m in MASKS), *((None, s) for s in SCORES), ("causal", "alibi")]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("mask,score", [c if c in CHEAP else pytest.param(*c, marks=pytest.mark.skipif(
    not os.environ.get("NAPKIN_SLOW"), reason="the whole zoo of mods: NAPKIN_SLOW=1")) for c in CASES])
def test_equals_flex_attention(mask, score):
    torch.set_num_threads(1)
    q, k, v = qkv()
    mods = {"score_mod": SCORES.get(score), "mask_mod": MASKS.get(mask)}
    O, L = nc.torch.flex_attention(q, k, v, **mods, return_lse=True, memory=64)
    O2, L2 = reference(q, k, v, **mods)
    assert torch.allclose(O, O2, atol=1e-12) and torch.allclose(L, L2, atol=1e-12)


@pytest.mark.filterwarnings("ignore")
def test_gradients_equal_torch_including_a_captured_table():
    """Gradients w.r.t. q, k, v and a captured learnable bias table (the derived backward) equal plain torch's."""
    torch.set_num_threads(1)
    q, k, v = qkv(requires_grad=True)
    table = TABLE.clone().requires_grad_()
    mods = {"score_mod": lambda s, b, h, i, x: s + table[i - x + N - 1], "mask_mod": MASKS["sliding"]}
    O = nc.torch.flex_attention(q, k, v, **mods, memory=64)
    (O.square().sum()).backward()
    q2, k2, v2, table2 = (t.detach().requires_grad_() for t in (q, k, v, table))
    mods2 = {"score_mod": lambda s, b, h, i, x: s + table2[i - x + N - 1], "mask_mod": MASKS["sliding"]}
    O2 = dense(q2, k2, v2, **mods2)          # FlexAttention has no backward on the CPU: the maths by plain torch
    (O2.square().sum()).backward()
    assert torch.allclose(reference(*(t.detach() for t in (q, k, v)), **mods2)[0], O2, atol=1e-12)
    assert torch.allclose(O, O2, atol=1e-12)
    for a, b in ((q, q2), (k, k2), (v, v2), (table, table2)):
        assert torch.allclose(a.grad, b.grad, atol=1e-10)


@pytest.mark.filterwarnings("ignore")
def test_empty_row_is_zero_with_lse_minus_infinity():
    """A query no key may attend (row 0 below): FlexAttention's convention, O = 0 and L = −∞, not NaN."""
    torch.set_num_threads(1)
    q, k, v = qkv()
    shifted = lambda b, h, q_, x: x < q_          # noqa: E731
    O, L = nc.torch.flex_attention(q, k, v, mask_mod=shifted, return_lse=True, memory=64)
    O2, L2 = reference(q, k, v, mask_mod=shifted)
    assert torch.equal(O[:, :, 0], torch.zeros_like(O[:, :, 0])) and torch.isneginf(L[:, :, 0]).all()
    assert torch.allclose(O, O2, atol=1e-12) and torch.equal(torch.isneginf(L), torch.isneginf(L2))
    assert torch.allclose(L[:, :, 1:], L2[:, :, 1:], atol=1e-12)


def test_unsupported_op_in_a_mod_is_named():
    q, k, v = qkv()
    with pytest.raises(nc.UnsupportedOperationError, match=r"aten\.sin"):
        nc.torch.flex_attention(q, k, v, score_mod=lambda s, b, h, q_, x: s + torch.sin(q_ - x), memory=64)
