"""Tracing FlexAttention's mods again with new captured values registers no new ``torch.library`` op (issue 33's
follow-up: ``torch.library`` cannot unregister, and one op per trace grew for the process's life).

Second routes: the registered ops are counted by the dispatcher (``torch._C._dispatch_get_all_op_names``, not the
library's own tables), and each call's output is checked against the maths written here (float64 plain torch), so
that a reused op that ran a stale trace would fail.
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import napkin_cat as nc  # noqa: E402

B, H, N, D = 1, 2, 8, 4
OPTIONS = {"memory": 64, "depth": 0}
G = torch.Generator().manual_seed(11)


def registered() -> set:
    """The ops registered in the ``napkin`` namespace, as the dispatcher lists them."""
    return {name for name in torch._C._dispatch_get_all_op_names() if name.startswith("napkin::")}


def dense(q, k, v, score_mod=None, mask_mod=None):
    b, h, i, x = (torch.arange(n).view([-1 if j == p else 1 for j in range(4)]) for p, n in enumerate((B, H, N, N)))
    s = q @ k.transpose(-1, -2) / math.sqrt(D)
    s = s if score_mod is None else score_mod(s, b, h, i, x)
    s = s if mask_mod is None else s.masked_fill(~mask_mod(b, h, i, x), -math.inf)
    return torch.exp(s - torch.logsumexp(s, -1, keepdim=True)).nan_to_num(0.0) @ v      # a row with no key: 0


def window(width: int):
    """A sliding window of ``width`` keys before the query (query 0 has none)."""
    return lambda b, h, i, x: (x < i) & (i - x <= width)


def test_twenty_captured_values_register_no_op():
    """20 distinct numbers a mod captures (each makes a new trace: the mod makes a table of it, a constant of the
    trace; the diagram is ``test_flex_compiled.py``'s, whose derivation is stored) and 2 window widths (each a new
    diagram, derived) register nothing once the first call has registered the process's flex ops; each call gives
    its own value's attention, through the trace of its own handle."""
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64, generator=G) for _ in range(3))
    bias = torch.randn(2 * N - 1, dtype=torch.float64, generator=G)

    def relative(s, b, h, i, x):
        return s + bias[i - x + N - 1]
    nc.torch.flex_attention(q, k, v, relative, window(3), return_lse=True, **OPTIONS)
    before = registered()
    for w in range(20):
        def score_mod(s, b, h, i, x):
            return s + torch.tensor([0.25 * w] * (2 * N - 1), dtype=torch.float64)[i - x + N - 1]
        O = nc.torch.flex_attention(q, k, v, score_mod, window(3), return_lse=True, **OPTIONS)[0]
        assert (O - dense(q, k, v, score_mod, window(3))).abs().max() < 1e-12, w
    for width in (2, 3):
        O = nc.torch.flex_attention(q, k, v, relative, window(width), return_lse=True, **OPTIONS)[0]
        assert (O - dense(q, k, v, relative, window(width))).abs().max() < 1e-12, width
    assert registered() == before, sorted(registered() - before)


def test_a_handle_of_no_live_trace_is_refused():
    """The registered op called with a handle no live trace has: a TensorError naming it."""
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64) for _ in range(3))
    bias = torch.randn(2 * N - 1, dtype=torch.float64, generator=G)
    nc.torch.flex_attention(q, k, v, lambda s, b, h, i, x: s + bias[i - x + N - 1], window(3), return_lse=True,
                            **OPTIONS)
    forward, _ = nc.torch.flexop.registered()
    with pytest.raises(nc.errors.TensorError, match="no trace has handle -1"):
        forward(q, k, v, [], -1)
