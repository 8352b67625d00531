"""What FlexAttention users pass that napkin-cat used to bake into the trace or refuse (issue 33's follow-ups): a
``scale`` given as a tensor (learnable; inside ``torch.compile(fullgraph=True)``), tensors a mod reads inside a
captured object, dict or list, and a captured table of another dtype than the queries'.

Second routes: the maths written here in float64 plain torch (scores times the scale, the mods on the full index
grids, the mask, softmax, times V; its autograd for the gradients) and ``torch.nn.attention.flex_attention`` eager on
the same inputs (values and result dtype).  Sizes and options are those of the other flex tests (``memory=64``,
``depth=0``): the derivations are small and stored on disk.
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import napkin_cat as nc  # noqa: E402
from torch.nn.attention.flex_attention import flex_attention as torch_flex  # noqa: E402

B, H, N, D = 1, 2, 8, 4
OPTIONS = {"memory": 64, "depth": 0}
G = torch.Generator().manual_seed(7)


def qkv(dtype=torch.float64, grad=False):
    return [torch.randn(B, H, N, D, dtype=dtype, generator=G, requires_grad=grad) for _ in range(3)]


def dense(q, k, v, score_mod=None, mask_mod=None, scale=None):
    """Masked attention from the maths, in float64 (the scale a float or a tensor: differentiable)."""
    q, k, v = (x.double() for x in (q, k, v))
    b, h, i, x = (torch.arange(n).view([-1 if j == p else 1 for j in range(4)]) for p, n in enumerate((B, H, N, N)))
    s = q @ k.transpose(-1, -2) * (1 / math.sqrt(D) if scale is None else scale)
    s = s if score_mod is None else score_mod(s, b, h, i, x).double()
    s = s if mask_mod is None else s.masked_fill(~mask_mod(b, h, i, x), -math.inf)
    return torch.softmax(s, -1) @ v


def eager(q, k, v, score_mod, scale=None):
    """torch's ``flex_attention`` eager (its CPU path takes no tensor that requires grad), the mask in the mod."""
    return torch_flex(*(x.detach() for x in (q, k, v)), score_mod=score_mod,
                      scale=scale.detach() if isinstance(scale, torch.Tensor) else scale)


def causal(b, h, q, x):
    return x <= q


@pytest.mark.filterwarnings("ignore")
def test_a_tensor_scale_is_an_input_with_its_gradient():
    """A 0-d tensor scale is read per call (no ``.item()``): O equals the maths and torch's flex_attention; the
    scale's gradient equals the maths' (torch's flex_attention gives it none); changed in place, the next call
    reads the new value through the same trace.  On 1decefe the scale was ``.item()``-ed: no gradient."""
    q, k, v = qkv(grad=True)
    scale = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    O = nc.torch.flex_attention(q, k, v, mask_mod=causal, scale=scale, **OPTIONS)
    want = dense(q, k, v, mask_mod=causal, scale=scale)
    assert (O - want).abs().max() < 1e-12
    torch_O = eager(q, k, v, lambda s, b, h, i, x: torch.where(x <= i, s, -math.inf), scale=scale)
    assert (O - torch_O).abs().max() < 1e-12
    w = torch.randn(O.shape, dtype=torch.float64, generator=G)
    got = torch.autograd.grad(O, [scale, q], w)
    expected = torch.autograd.grad(want, [scale, q], w)
    assert all((g - e).abs().max() < 1e-11 for g, e in zip(got, expected)), (got[0], expected[0])
    assert abs(float(got[0])) > 1e-3            # a gradient that is not zero by accident
    traces = len(nc.torch.flex.TRACES)
    with torch.no_grad():
        scale.fill_(0.7)
    O = nc.torch.flex_attention(q, k, v, mask_mod=causal, scale=scale, **OPTIONS)
    assert (O - dense(q, k, v, mask_mod=causal, scale=0.7)).abs().max() < 1e-12
    assert len(nc.torch.flex.TRACES) == traces


def test_a_tensor_scale_inside_a_fullgraph_compile():
    """Under ``torch.compile(fullgraph=True)`` the tensor scale is an input of the graph (``.item()`` there was a
    graph break, refused by fullgraph): the values and the scale's gradient equal the maths'."""
    q, k, v = qkv(grad=True)
    scale = torch.tensor(0.45, dtype=torch.float64, requires_grad=True)

    def attend(q, k, v, scale):
        return nc.torch.flex_attention(q, k, v, mask_mod=causal, scale=scale, **OPTIONS)
    O = torch.compile(attend, fullgraph=True, backend="eager")(q, k, v, scale)
    want = dense(q, k, v, mask_mod=causal, scale=scale)
    assert (O - want).abs().max() < 1e-12
    w = torch.randn(O.shape, dtype=torch.float64, generator=G)
    (got,), (expected,) = torch.autograd.grad(O, [scale], w), torch.autograd.grad(want, [scale], w)
    assert abs(float(got - expected)) < 1e-11 and abs(float(expected)) > 1e-3


def test_the_op_with_a_tensor_scale_passes_opcheck():
    """The registered op, called with the trace of a tensor scale (its handle), passes ``torch.library.opcheck``."""
    q, k, v = qkv(grad=True)
    scale = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    nc.torch.flex_attention(q, k, v, mask_mod=causal, scale=scale, **OPTIONS)
    (traced,) = [t for key, t in nc.torch.flex.TRACES.entries.items() if key[1] is causal and key[2][0] == "tensor"]
    live = traced.live(nc.torch.flex.live_reads(None, causal, scale))
    assert [t is scale for t in live] == [True]
    found = torch.library.opcheck(traced.flex.forward, (q, k, v, live, traced.flex.handle))
    assert set(found.values()) == {"SUCCESS"} and len(found) == 4, found


class Config:
    """A plain object a mod captures, holding a learnable relative-bias table."""

    def __init__(self):
        self.bias = torch.randn(2 * N - 1, dtype=torch.float64, generator=G, requires_grad=True)


@pytest.mark.filterwarnings("ignore")
def test_tensors_inside_a_captured_object_dict_and_list_are_inputs():
    """A table read as ``cfg.bias``, a per-head slope as ``slopes["h"]`` and document ids as ``docs[0]`` are read
    fresh at each call (one trace: updated in place or rebound, the next call uses the new values) and the learnable
    ones get their gradients, as a directly captured tensor does.  On 1decefe they were constants of the trace
    (traced again at each call, no gradient)."""
    cfg = Config()
    slopes = {"h": torch.tensor([0.5, -0.25], dtype=torch.float64, requires_grad=True)}
    docs = [torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])]

    def score_mod(s, b, h, q, x):
        return s + cfg.bias[q - x + N - 1] + slopes["h"][h] * (q - x)

    def mask_mod(b, h, q, x):
        return docs[0][q] == docs[0][x]
    q, k, v = qkv(grad=True)
    O = nc.torch.flex_attention(q, k, v, score_mod, mask_mod, **OPTIONS)
    want = dense(q, k, v, score_mod, mask_mod)
    assert (O - want).abs().max() < 1e-12
    assert (O - eager(q, k, v, lambda s, b, h, i, x: torch.where(
        mask_mod(b, h, i, x), score_mod(s, b, h, i, x), -math.inf))).abs().max() < 1e-12
    w = torch.randn(O.shape, dtype=torch.float64, generator=G)
    got = torch.autograd.grad(O, [cfg.bias, slopes["h"]], w, allow_unused=True)
    expected = torch.autograd.grad(want, [cfg.bias, slopes["h"]], w)
    assert all(g is not None for g in got), "a tensor inside a captured object or dict got no gradient"
    assert all((g - e).abs().max() < 1e-11 and e.abs().max() > 1e-3 for g, e in zip(got, expected))
    traces = len(nc.torch.flex.TRACES)
    with torch.no_grad():
        cfg.bias.mul_(-2.0)
    slopes["h"] = torch.tensor([1.5, 0.75], dtype=torch.float64)
    docs[0] = torch.tensor([0, 1, 1, 1, 1, 1, 3, 3])
    O = nc.torch.flex_attention(q, k, v, score_mod, mask_mod, **OPTIONS)
    assert (O - dense(q, k, v, score_mod, mask_mod)).abs().max() < 1e-12
    assert len(nc.torch.flex.TRACES) == traces, "the mods were traced again"
    compiled = torch.compile(lambda q, k, v: nc.torch.flex_attention(q, k, v, score_mod, mask_mod, **OPTIONS),
                             fullgraph=True, backend="eager")      # dynamo follows cfg.bias, slopes["h"], docs[0]
    O, want = compiled(q, k, v), dense(q, k, v, score_mod, mask_mod)
    assert (O - want).abs().max() < 1e-12
    (got,), (expected,) = torch.autograd.grad(O, [cfg.bias], w), torch.autograd.grad(want, [cfg.bias], w)
    assert (got - expected).abs().max() < 1e-11 and expected.abs().max() > 1e-3


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("queries, table", [(torch.float32, torch.float64), (torch.float64, torch.float32)])
def test_a_table_of_another_dtype_is_promoted_as_torch_does(queries, table):
    """float32 queries with a float64 bias table (refused on 1decefe), and float64 queries with a float32 one: the
    result has torch's flex_attention's dtype (the query's), its values torch's and the maths' (float32's precision
    where the queries are float32), the table's gradient in the table's dtype, equal to the maths'."""
    bias = torch.randn(2 * N - 1, dtype=table, generator=G, requires_grad=True)

    def score_mod(s, b, h, q, x):
        return s + bias[q - x + N - 1]
    q, k, v = qkv(queries)
    O = nc.torch.flex_attention(q, k, v, score_mod, causal, **OPTIONS)
    expected = eager(q, k, v, lambda s, b, h, i, x: torch.where(x <= i, score_mod(s, b, h, i, x), -math.inf))
    want = dense(q, k, v, score_mod, causal)
    tolerance = 1e-5 if queries == torch.float32 else 1e-12
    assert O.dtype == expected.dtype == queries
    assert (O - expected).abs().max() < tolerance and (O.double() - want).abs().max() < tolerance
    w = torch.randn(O.shape, dtype=queries, generator=G)
    (got,), (wanted,) = torch.autograd.grad(O, [bias], w), torch.autograd.grad(want, [bias], w.double())
    tolerance = 1e-5 if torch.float32 in (queries, table) else 1e-12
    assert got.dtype == table and (got.double() - wanted).abs().max() < tolerance
