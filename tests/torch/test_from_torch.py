"""``nc.from_torch``: diagrams from ``torch.export`` graphs (issue 33, item 6).

Every translated model is checked against the model itself, run by torch in float64 on inputs the translation
never saw (new random inputs replace the example's: the diagram is a function, not a recording), to 1e-10.  The
derived algorithm of a translated attention is checked against the library's hand-written attention derived at the
same sizes and memory (the same transfers), and its diagram run against torch.  The models are tiny (a test runs
in about a second).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tests.torch.zoo import MLP, Attention, Block, CausalSDPA, Loss, SwiGLU  # noqa: E402

F64 = dict(dtype=torch.float64)


class Lookup(nn.Module):
    """An embedding, a masked log-softmax over a position mask, a max and a mean: the indexing and mask ops."""

    def __init__(self, v=7, e=5):
        super().__init__()
        self.table = nn.Embedding(v, e)

    def forward(self, tokens, x):
        h = self.table(tokens) * 2.0 - 0.5                       # (n, e)
        scores = torch.log_softmax(h @ x.T, dim=-1)              # (n, m)
        masked = scores.masked_fill(scores < -2.0, -1e9)
        return masked.amax(-1) + torch.where(h > 0, h, h.exp() - 1).mean(-1), torch.sigmoid(h).pow(2).sum()


def randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), **F64)


ZOO = {
    "mlp_gelu": (MLP, lambda s: (randn(4, 5, seed=s),)),
    "mlp_silu": (lambda: MLP(activation="silu"), lambda s: (randn(2, 4, 5, seed=s),)),
    "swiglu": (SwiGLU, lambda s: (randn(4, 6, seed=s),)),
    "rms_norm": (lambda: nn.RMSNorm(6), lambda s: (randn(4, 6, seed=s),)),
    "layer_norm": (lambda: nn.LayerNorm(6), lambda s: (randn(3, 4, 6, seed=s),)),
    "attention_matmuls": (Attention, lambda s: tuple(randn(2, 5, 4, seed=s + k) for k in range(3))),
    "sdpa_causal": (CausalSDPA, lambda s: tuple(randn(2, 3, 5, 4, seed=s + k) for k in range(3))),
    "cross_entropy": (Loss, lambda s: (randn(5, 6, seed=s), torch.randint(0, 9, (5,), generator=torch.Generator()
                                                                           .manual_seed(s)))),
    "gpt_block": (Block, lambda s: (randn(2, 5, 8, seed=s),)),
    "lookup": (Lookup, lambda s: (torch.randint(0, 7, (4,), generator=torch.Generator().manual_seed(s)),
                                  randn(3, 5, seed=s))),
}


def model(name):
    torch.manual_seed(0)
    return ZOO[name][0]().double().eval()


@pytest.mark.parametrize("name", sorted(ZOO))
def test_the_diagram_computes_what_the_model_computes(name):
    m, inputs = model(name), ZOO[name][1]
    r = nc.from_torch(m, *inputs(0))
    fresh = inputs(1)                                   # inputs the translation never saw
    with torch.no_grad():
        want = m(*fresh)
    want = want if isinstance(want, tuple) else (want,)
    user = dict(zip(list(r.inputs)[:len(fresh)], fresh))
    got = r.evaluate(**user)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape)
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-10, atol=1e-10)
    # the diagram itself, on its arrays (nc.evaluate drops nothing but the model's size-1 dimensions)
    direct = nc.evaluate(r.diagram, *r.arrays(**user))
    direct = direct if isinstance(direct, tuple) else (direct,)
    for g, w in zip(direct, want):
        np.testing.assert_allclose(g, w.numpy().reshape(g.shape), rtol=1e-10, atol=1e-10)


def test_parameters_are_inputs_named_by_their_module_path():
    m = model("gpt_block")
    r = nc.from_torch(m, randn(2, 5, 8, seed=0))
    params = dict(m.named_parameters())
    assert list(r.inputs) == ["x", *params]
    for name, p in params.items():
        np.testing.assert_array_equal(r.inputs[name], p.detach().numpy())
    assert len(r.diagram.dom) == 1 + len(params)


def test_an_unsupported_operation_is_named_with_where_it_is():
    class Spectral(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            return torch.fft.fft(self.proj(x)).real

    class Sorted(nn.Module):
        def forward(self, x):
            return torch.sort(x, dim=-1).values * 2

    with pytest.raises(nc.UnsupportedOperationError,
                       match=r"aten\.fft_fft\.default \(node fft_fft\) in the model \(.*Spectral\), "
                             r"test_from_torch\.py:\d+ in forward: return torch\.fft\.fft"):
        nc.from_torch(Spectral().double(), randn(3, 4, seed=0))
    with pytest.raises(nc.UnsupportedOperationError, match=r"aten\.sort\.default .*no box for this operation"):
        nc.from_torch(Sorted(), randn(3, 4, seed=0))
    class Smooth(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Softplus()

        def forward(self, x):
            return self.fc(x)
    with pytest.raises(nc.UnsupportedOperationError, match=r"aten\.softplus\.default .* module 'fc' .*no box"):
        nc.from_torch(Smooth(), randn(3, 4, seed=0))
    with pytest.raises(nc.UnsupportedOperationError, match=r"aten\.view\.default .*reshapes \(6, 4\) to \(6, 2, 2\)"):
        nc.from_torch(lambda x: x.view(6, 2, 2).sum(-1), randn(6, 4, seed=0))


def test_equal_sizes_never_merge_two_axes():
    r = nc.from_torch(lambda a, b: (a @ b).exp(), randn(4, 4, seed=0), randn(4, 4, seed=1))
    (a0, a1), (b0, b1) = r.axes["a"], r.axes["b"]
    assert a1 == b0                                      # contracted: one axis
    assert len({a0, a1, b1}) == 3                        # four of size 4, three axes
    assert [x.name for x in r.diagram.cod.inside[0].axes] == [a0, b1]


def test_self_attention_keys_are_a_copy_of_the_sequence_axis():
    """``softmax(X Xᵀ) X``: the queries and the keys are one tensor's dimension; the scores carry two axes."""
    def f(x):
        return F.scaled_dot_product_attention(x, x, x, is_causal=True)
    r = nc.from_torch(f, randn(5, 4, seed=0))
    assert r.axes["x"] == ("x_0", "x_1")
    assert "rename" in [b.name for b in r.diagram.boxes]
    (scores,) = [b for b in r.diagram.boxes if b.name == "SoftMax"]
    assert [a.name for a in scores.dom.inside[0].axes] == ["x_0", "x_0'"]
    x = randn(5, 4, seed=3)
    np.testing.assert_allclose(r.evaluate(x=x), f(x).numpy(), rtol=1e-10, atol=1e-12)


def test_axis_names_from_dims_and_from_names():
    seq = torch.export.Dim("seq", min=2, max=64)
    xs = [randn(2, 3, 5, 4, seed=k) for k in range(3)]
    r = nc.from_torch(CausalSDPA(), *xs, dynamic_shapes=({2: seq}, {2: seq}, {2: seq}),
                      names={"q": "b h _ d", "v": (None, None, None, "e")})
    assert r.axes["q"] == ("b", "h", "seq", "d")
    assert r.axes["k"][:2] == ("b", "h") and r.axes["k"][2] != "seq"      # the keys: another axis of the same Dim
    assert r.axes["v"] == ("b", "h", r.axes["k"][2], "e")
    assert r.sizes == {"seq": 5, r.axes["k"][2]: 5}                        # the dynamic axes are symbols
    assert str(r.diagram.cod.inside[0]) == "b[2]×h[3]×seq×e[4]"
    longer = [randn(2, 3, 9, 4, seed=10 + k) for k in range(3)]           # another length, as the Dim allows
    np.testing.assert_allclose(r.evaluate(q=longer[0], k=longer[1], v=longer[2]), CausalSDPA()(*longer).numpy(),
                               rtol=1e-10, atol=1e-12)
    with pytest.raises(nc.AxisError, match=r"names= names two distinct axes 'n' \(q\[2\] and k\[2\]\)"):
        nc.from_torch(CausalSDPA(), *xs, names={"q": "_ _ n _", "k": "_ _ n _"})
    with pytest.raises(nc.AxisError, match=r"names= gives one axis two names"):
        nc.from_torch(CausalSDPA(), *xs, names={"q": "_ _ _ d", "k": "_ _ _ e"})
    with pytest.raises(nc.ArgumentError, match=r"names= names \['w'\], which are not inputs"):
        nc.from_torch(CausalSDPA(), *xs, names={"w": "a"})


@pytest.mark.parametrize("causal", [False, True])
def test_derive_finds_flash_attention_in_a_translated_attention(causal):
    """The translated attention derives to the algorithm the library's own attention does: the same transfers at
    the same sizes and memory, streamed along the keys; the derived diagram computes the model's output."""
    n, d, memory = 32, 8, 256
    xs = [randn(n, d, seed=k) for k in range(3)]
    r = nc.from_torch(CausalSDPA() if causal else Attention(), *xs)
    found = nc.derive(r.diagram, memory=memory, sizes=r.sizes)
    library = nc.library.causal_attention(q=n, x=n, d=d) if causal else nc.library.attention(q=n, x=n, d=d)
    assert found.H == nc.derive(library, memory=memory, sizes={}).H
    assert found.H == nc.cost(found.diagram, sizes=found.optimum.sizes).H[1]
    keys = r.axes["k"][0]
    assert str(found.variant).endswith(f"stream {keys}")
    want = (CausalSDPA() if causal else Attention())(*xs).numpy()
    np.testing.assert_allclose(nc.evaluate(found.diagram, *r.arrays(), sizes=found.optimum.sizes), want,
                               rtol=1e-10, atol=1e-12)


def test_lazy_and_typed():
    assert nc.from_torch is nc.torch.from_torch
    assert issubclass(nc.UnsupportedOperationError, nc.NapkinError)
    r = nc.from_torch(Loss().double(), randn(5, 6, seed=0), torch.tensor([0, 8, 3, 3, 1]))
    with pytest.raises(nc.ShapeError, match=r"input 'targets' holds a target equal to ignore_index=-100"):
        r.evaluate(targets=torch.tensor([0, -100, 3, 3, 1]))
    with pytest.raises(nc.ArgumentError, match=r"\['y'\] are not inputs of the diagram"):
        r.evaluate(y=np.ones(3))
    assert math.isfinite(float(r.evaluate()))


#: tables read at integer indices: (the model, its table's shape given its length, its index tensors (ints < 7))
READS = {
    "index": (lambda w, i: w[i] * 2.0, lambda v: (v, 4), lambda g: (torch.randint(0, 7, (2, 3), generator=g),)),
    "index_two": (lambda w, i, j: w[i, j] + 1.0, lambda v: (v, 5, 3),
                  lambda g: (torch.randint(0, 7, (4, 1), generator=g), torch.randint(0, 5, (1, 6), generator=g))),
    "index_select": (lambda w, i: w.index_select(1, i) * 2.0, lambda v: (3, v, 2),
                     lambda g: (torch.randint(0, 7, (5,), generator=g),)),
    "embedding": (lambda w, i: F.embedding(i, w) * 2.0, lambda v: (v, 4),
                  lambda g: (torch.randint(0, 7, (3, 2), generator=g),)),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_a_table_is_read_by_index_not_by_its_length(name):
    """``w[i]``, ``w[i, j]``, ``index_select``, ``embedding``: the diagram equals torch (on indices it never saw),
    and its FLOPs are one per item read: a table 100× as long costs the same (a one-hot contraction over the
    table's entries would cost 2·items·length)."""
    fn, shape, indices = READS[name]
    g = torch.Generator().manual_seed(1)
    flops = []
    for v in (7, 700):
        w, idx = torch.randn(*shape(v), generator=g, **F64), indices(g)
        r = nc.from_torch(fn, w, *idx)
        assert "contract" not in {getattr(b.data, "kind", None) for b in r.diagram.boxes}
        flops.append(nc.cost(r.diagram).flops)
        new = indices(g)
        given = dict(zip(list(r.inputs)[1:], (i.numpy() for i in new)))
        np.testing.assert_allclose(r.evaluate(**given), fn(w, *new).numpy(), rtol=1e-12)
    assert flops[0] == flops[1]


def test_an_index_outside_its_table_is_refused_on_the_example_and_on_new_inputs():
    """The diagram's gather reads 0 outside the table (its slices add up); torch reads out of bounds or raises: an
    index outside is refused by name, on the example (a computed index) and on inputs given to ``evaluate``."""
    w = torch.randn(7, 4, **F64)
    with pytest.raises(nc.IndexingError, match=r"aten\.index_select\.default \(node index_select\).*: index 0 into "
                                               r"the input 'w' of shape \(7, 4\) takes the values 3 … 9 on the "
                                               r"example inputs; the legal range of dimension 0 is 0 … 6"):
        nc.from_torch(lambda w, i: w.index_select(0, i + 3), w, torch.tensor([0, 6, 2]))
    r = nc.from_torch(lambda w, i: w[i], w, torch.tensor([[0, 6], [2, 2]]))
    with pytest.raises(nc.IndexingError, match=r"aten\.index\.Tensor .*index 0 into the input 'w' of shape \(7, 4\) "
                                               r"takes the values -1 … 2 on the inputs given"):
        r.evaluate(i=np.array([[0, -1], [2, 2]]))
    np.testing.assert_array_equal(r.evaluate(i=np.array([[6, 6], [0, 1]])), w.numpy()[[[6, 6], [0, 1]]])
