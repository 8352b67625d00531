"""``nc.torch.flex_attention`` inside ``torch.compile(fullgraph=True)`` (issue 33, items 1-2), and on zero-size tensors.

Second routes: the maths written here in float64 plain torch (scores, the mods on the full index grids, logsumexp,
``exp(S − L) V`` with an empty row's O = 0) and torch's autograd of it; and the same call run eagerly.  The mods are
those of ``test_flex_lse_grad.py`` (a relative bias table captured as a global, learnable; a sliding window in which
query 0 has no key), so that the derived kernels are the ones that test derives (one op per diagram and options; the
derivation is stored on disk): each compile here only traces.
"""
from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")

import napkin_cat as nc  # noqa: E402

B, H, N, D = 1, 2, 8, 4
G = torch.Generator().manual_seed(0)
TABLE = torch.randn(2 * N - 1, dtype=torch.float64, generator=G, requires_grad=True)
OPTIONS = {"return_lse": True, "memory": 64, "depth": 0}


def score_mod(s, b, h, q, x):
    return s + TABLE[q - x + N - 1]


def mask_mod(b, h, q, x):
    return (x < q) & (q - x <= 3)        # query 0 has no key: O = 0, L = −∞


def dense(q, k, v):
    """The maths by plain torch: O (an empty row's 0) and L."""
    n, x_ = q.shape[2], k.shape[2]
    b, h, i, x = (torch.arange(m).view([-1 if j == p else 1 for j in range(4)])
                  for p, m in enumerate((q.shape[0], q.shape[1], n, x_)))
    s = score_mod(q @ k.transpose(-1, -2) / math.sqrt(D), b, h, i, x).masked_fill(~mask_mod(b, h, i, x), -math.inf)
    L = torch.logsumexp(s, -1)
    return torch.exp(s - L[..., None]).nan_to_num(0.0) @ v, L


def loss(O, L):
    """A loss that reads O and L (L's empty rows left out), with fixed weights."""
    w = torch.linspace(-1, 1, O.numel(), dtype=O.dtype).reshape(O.shape)
    return (O * w).sum() + 0.5 * L.masked_fill(torch.isneginf(L), 0).square().sum()


def attend(q, k, v):
    return loss(*nc.torch.flex_attention(q, k, v, score_mod, mask_mod, **OPTIONS))


def inputs(n=N, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, n, D, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(3)]


def gradients(f, xs):
    value = f(*xs)
    return value, torch.autograd.grad(value, [*xs, TABLE])


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("backend", ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.skipif(
    not os.environ.get("NAPKIN_SLOW"), reason="inductor builds C++ (about 15 s here): NAPKIN_SLOW=1"))])
def test_fullgraph_compiled_equals_eager_and_the_maths(backend):
    """Forward and backward (q, k, v and the captured table) under ``torch.compile(fullgraph=True)`` equal the eager
    call's and the maths'; the table updated in place is read as it is now (an input of the graph, not a constant)."""
    torch.set_num_threads(1)
    xs = inputs()
    compiled = torch.compile(attend, fullgraph=True, backend=backend)
    got, got_grads = gradients(compiled, xs)
    eager, eager_grads = gradients(attend, xs)
    want, want_grads = gradients(lambda q, k, v: loss(*dense(q, k, v)), xs)
    assert abs(float(got - eager)) < 1e-12 and abs(float(got - want)) < 1e-10
    for name, g, e, w in zip("q k v table".split(), got_grads, eager_grads, want_grads):
        assert torch.isfinite(g).all() and (g - e).abs().max() < 1e-12 and (g - w).abs().max() < 1e-10, name
    before = TABLE.detach().clone()
    try:
        with torch.no_grad():
            TABLE[N] += 3.0                      # q − x = 1, the diagonal below the main one: read by rows 1 … N − 1
        assert abs(float(compiled(*xs) - loss(*dense(*xs)))) < 1e-10
        assert abs(float(compiled(*xs) - got)) > 1e-3
    finally:
        with torch.no_grad():
            TABLE.copy_(before)


def test_the_graph_holds_one_op_whose_inputs_are_the_tensors_and_the_table():
    """Dynamo's graph (``fullgraph``: one) calls napkin-cat once, on q, k, v and the captured table (a placeholder
    of the graph, not a constant folded into it)."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    torch.set_num_threads(1)
    xs = inputs(seed=2)
    out = torch.compile(attend, fullgraph=True, backend=backend)(*xs)
    assert abs(float(out - loss(*dense(*xs)))) < 1e-10
    (gm,) = graphs
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and "napkin" in str(n.target)]
    assert len(calls) == 1 and str(calls[0].target).startswith("napkin.flex_graph_")
    q, k, v, live = calls[0].args
    assert [a.op for a in (q, k, v)] == ["placeholder"] * 3
    (table,) = live
    assert table.op == "placeholder" and tuple(table.meta["example_value"].shape) == (2 * N - 1,)


def test_the_ops_pass_opcheck():
    """The op of the trace (eager calls) and the graph op (compiled calls) pass ``torch.library.opcheck``: schema,
    autograd registration, fake tensors against the real outputs, AOT dispatch with dynamic shapes."""
    torch.set_num_threads(1)
    xs = inputs(seed=3)
    torch.compile(attend, fullgraph=True, backend="eager")(*xs)
    (traced,) = [t for key, t in nc.torch.flex.TRACES.entries.items() if key[0] is score_mod]
    (graph,) = [g for key, g in nc.torch.flexgraph.REGISTERED.items() if key[0] is score_mod]
    for op, handle in ((traced.flex.forward, (traced.flex.handle,)), (graph.forward, ())):
        found = torch.library.opcheck(op, (*xs, [TABLE], *handle))
        assert set(found.values()) == {"SUCCESS"} and len(found) == 4, found


@pytest.mark.filterwarnings("ignore")
@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="derives at a second size: NAPKIN_SLOW=1")
def test_a_compiled_call_at_new_sizes_traces_the_mods_at_them():
    """Called again at another length, dynamo marks it dynamic; the op finds the trace at each call's sizes."""
    torch.set_num_threads(1)
    compiled = torch.compile(attend, fullgraph=True, backend="aot_eager")
    for n in (N, N - 2):           # a shorter length: the table (2N − 1 entries) still holds q − x + N − 1
        xs = inputs(n, seed=n)
        got, got_grads = gradients(compiled, xs)
        want, want_grads = gradients(lambda q, k, v: loss(*dense(q, k, v)), xs)
        assert abs(float(got - want)) < 1e-10
        for g, w in zip(got_grads[:3], want_grads[:3]):
            assert (g - w).abs().max() < 1e-10


# ------------------------------------------------------------------------------------------------ zero-size tensors
EMPTY = {"no batch": ((0, H, N, D), (0, H, N, D), (0, H, N, D)),
         "no head": ((B, 0, N, D), (B, 0, N, D), (B, 0, N, D)),
         "no query": ((B, H, 0, D), (B, H, N, D), (B, H, N, D)),
         "no key": ((B, H, N, D), (B, H, 0, D), (B, H, 0, D)),
         "no value dimension": ((B, H, N, D), (B, H, N, D), (B, H, N, 0))}


@pytest.mark.parametrize("case", list(EMPTY))
def test_zero_size_tensors_give_empty_outputs_and_gradients_without_deriving(case, monkeypatch):
    """Torch's attention returns empty tensors here; so does flex_attention, of SDPA's shape, with FlexAttention's
    convention for a row no key may attend (no key at all: O = 0, L = −∞), and gradients of the inputs' shapes (zeros;
    the table's too), without tracing or deriving anything."""
    monkeypatch.setattr(torch.export, "export", lambda *a, **kw: pytest.fail("traced a zero-size call"))
    q, k, v = (torch.randn(s, dtype=torch.float64).requires_grad_() for s in EMPTY[case])
    O, L = nc.torch.flex_attention(q, k, v, score_mod, mask_mod, **OPTIONS)
    assert O.shape == torch.nn.functional.scaled_dot_product_attention(q, k, v).shape
    assert L.shape == q.shape[:3] and O.dtype == L.dtype == q.dtype
    if case == "no key":
        assert torch.equal(O, torch.zeros_like(O)) and torch.isneginf(L).all()
    grads = torch.autograd.grad(O.sum() + L.masked_fill(torch.isneginf(L), 0).sum(), [q, k, v, TABLE],
                                allow_unused=True)
    for x, g in zip((q, k, v), grads):
        assert g is not None and g.shape == x.shape
        if case != "no value dimension":       # there only O is empty: L's gradient reaches q and k
            assert torch.equal(g, torch.zeros_like(g))
    if case != "no value dimension":
        assert grads[3] is None or torch.equal(grads[3], torch.zeros_like(TABLE))


def test_zero_size_tensors_compile():
    q, k, v = (torch.randn(s, dtype=torch.float64) for s in EMPTY["no key"])
    O, L = torch.compile(lambda q, k, v: nc.torch.flex_attention(q, k, v, score_mod, mask_mod, **OPTIONS),
                         fullgraph=True, backend="eager")(q, k, v)
    assert O.shape == (B, H, N, D) and torch.equal(O, torch.zeros_like(O)) and torch.isneginf(L).all()


def test_a_head_dimension_of_zero_is_refused():
    q, k, v = (torch.randn(B, H, N, 0, dtype=torch.float64) for _ in range(3))
    with pytest.raises(nc.ShapeError, match=r"head dimension is 0 .*d ≥ 1"):
        nc.torch.flex_attention(q, k, v, mask_mod=mask_mod)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="derives a second mask: NAPKIN_SLOW=1")
def test_a_captured_number_changed_between_compiled_calls_is_read_at_the_call():
    """The graph is not recompiled for a captured ``int``: the op looks the trace up by the captured values when it
    runs, so a changed window traces again and equals the maths at the new width."""
    torch.set_num_threads(1)
    width = {"w": 3}

    def window(b, h, q, x):
        return (x <= q) & (q - x <= width["w"])

    def maths(q, k, v):
        i, x = torch.arange(N)[:, None], torch.arange(N)[None, :]
        s = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(~window(0, 0, i, x), -math.inf)
        return torch.softmax(s, -1) @ v
    compiled = torch.compile(lambda q, k, v: nc.torch.flex_attention(q, k, v, None, window, memory=64, depth=0),
                             fullgraph=True, backend="aot_eager")
    q, k, v = (x.detach() for x in inputs(seed=4))
    for w in (3, 1):
        width["w"] = w
        assert (compiled(q, k, v) - maths(q, k, v)).abs().max() < 1e-12
