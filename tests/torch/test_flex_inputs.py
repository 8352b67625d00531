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
    return torch.exp(s - torch.logsumexp(s, -1, keepdim=True)).nan_to_num(0.0) @ v      # a row with no key: 0


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
        self.bias = bias_table()


def bias_table(dtype=torch.float64):
    return torch.randn(2 * N - 1, dtype=dtype, generator=G, requires_grad=True)


def window(b, h, q, x):
    return (x < q) & (q - x <= 3)        # query 0 has no key: O = 0 there (FlexAttention's convention)


@pytest.mark.filterwarnings("ignore")
def test_tensors_inside_a_captured_object_dict_and_list_are_inputs():
    """A relative-bias table read as ``cfg.bias``, ``tables["bias"]`` or ``biases[0]`` is read fresh at each call
    (one trace: updated in place or rebound, the next call uses the new values) and gets its gradient, as a directly
    captured tensor does; under ``torch.compile(fullgraph=True)`` dynamo follows the entry and the item (an
    attribute's path was followed before).  On 1decefe such a table was a constant of the trace (traced again at
    each call, no gradient).  (The mods are ``test_flex_compiled.py``'s, so that the derivations are the ones it
    stores.)"""
    cfg, tables, biases = Config(), {"bias": bias_table()}, [bias_table()]
    mods = {"attribute": (lambda s, b, h, q, x: s + cfg.bias[q - x + N - 1], lambda: cfg.bias),
            "entry": (lambda s, b, h, q, x: s + tables["bias"][q - x + N - 1], lambda: tables["bias"]),
            "item": (lambda s, b, h, q, x: s + biases[0][q - x + N - 1], lambda: biases[0])}
    q, k, v = qkv(grad=True)
    w = torch.randn(B, H, N, D, dtype=torch.float64, generator=G)
    for name, (score_mod, read) in mods.items():
        O, L = nc.torch.flex_attention(q, k, v, score_mod, window, return_lse=True, **OPTIONS)
        want = dense(q, k, v, score_mod, window)
        assert (O - want).abs().max() < 1e-12, name
        assert (O - eager(q, k, v, lambda s, b, h, i, x: torch.where(
            window(b, h, i, x), score_mod(s, b, h, i, x), -math.inf))).abs().max() < 1e-12, name
        got = torch.autograd.grad(O, [read()], w, allow_unused=True)[0]
        expected = torch.autograd.grad(want, [read()], w)[0]
        assert got is not None, f"a table read as an {name} got no gradient"
        assert (got - expected).abs().max() < 1e-11 and expected.abs().max() > 1e-3, name
    traces = len(nc.torch.flex.TRACES)
    with torch.no_grad():
        cfg.bias.mul_(-2.0)
    tables["bias"], biases[0] = bias_table(), bias_table()
    for name, (score_mod, _) in mods.items():
        O = nc.torch.flex_attention(q, k, v, score_mod, window, return_lse=True, **OPTIONS)[0]
        assert (O - dense(q, k, v, score_mod, window)).abs().max() < 1e-12, name
    assert len(nc.torch.flex.TRACES) == traces, "the mods were traced again"
    for name, (score_mod, read) in [(n, mods[n]) for n in ("entry", "item")]:     # a dict's, a list's: ("item", k)
        compiled = torch.compile(lambda q, k, v: nc.torch.flex_attention(q, k, v, score_mod, window,
                                                                         return_lse=True, **OPTIONS)[0],
                                 fullgraph=True, backend="eager")
        O, want = compiled(q, k, v), dense(q, k, v, score_mod, window)
        assert (O - want).abs().max() < 1e-12, name
        (got,), (expected,) = torch.autograd.grad(O, [read()], w), torch.autograd.grad(want, [read()], w)
        assert (got - expected).abs().max() < 1e-11 and expected.abs().max() > 1e-3, name


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("queries, table", [(torch.float32, torch.float64), (torch.float64, torch.float32)])
def test_a_table_of_another_dtype_is_promoted_as_torch_does(queries, table):
    """float32 queries with a float64 bias table (refused on 1decefe), and float64 queries with a float32 one: the
    result has torch's flex_attention's dtype (the query's), its values torch's and the maths' (float32's precision
    where the queries are float32), the table's gradient in the table's dtype, equal to the maths'."""
    bias = bias_table(table)

    def score_mod(s, b, h, q, x):
        return s + bias[q - x + N - 1]
    q, k, v = qkv(queries)
    O = nc.torch.flex_attention(q, k, v, score_mod, window, return_lse=True, **OPTIONS)[0]
    expected = eager(q, k, v, lambda s, b, h, i, x: torch.where(window(b, h, i, x), score_mod(s, b, h, i, x),
                                                                -math.inf))
    want = dense(q, k, v, score_mod, window)
    tolerance = 1e-5 if queries == torch.float32 else 1e-12
    assert O.dtype == expected.dtype == queries
    assert (O - expected).abs().max() < tolerance and (O.double() - want).abs().max() < tolerance
    w = torch.randn(O.shape, dtype=queries, generator=G)
    (got,), (wanted,) = torch.autograd.grad(O, [bias], w), torch.autograd.grad(want, [bias], w.double())
    tolerance = 1e-5 if torch.float32 in (queries, table) else 1e-12
    assert got.dtype == table and (got.double() - wanted).abs().max() < tolerance
