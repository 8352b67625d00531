"""Every library algorithm against an independent plain-numpy reference.

Random sizes and data (seeded); symbolic diagrams infer their sizes from the
inputs, concrete ones check them.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat import library

SEEDS = [0, 1, 2]


def sizes(rng, *names, low=1, high=6):
    return {n: int(rng.integers(low, high + 1)) for n in names}


# --------------------------------------------------------------------------- matmul, attention
@pytest.mark.parametrize("seed", SEEDS)
def test_matmul_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    s = sizes(rng, "a", "b", "c")
    A, B = rng.normal(size=(s["a"], s["b"])), rng.normal(size=(s["b"], s["c"]))
    np.testing.assert_allclose(nc.evaluate(library.matmul(), A, B), A @ B, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_attention_matches_numpy(seed, helpers):
    rng = np.random.default_rng(seed)
    s = sizes(rng, "q", "x", "d")
    Q, K, V = (rng.normal(size=(s[a], s["d"])) for a in ("q", "x", "x"))
    np.testing.assert_allclose(nc.evaluate(library.attention(), Q, K, V), helpers.attention(Q, K, V),
                               rtol=1e-10, atol=1e-12)


def test_attention_uses_inverse_square_root_of_d(helpers, rng):
    """β = d^(-1/2): with β = 1 the result differs (the test of the temperature can fail)."""
    Q, K, V = rng.normal(size=(3, 16)), rng.normal(size=(5, 16)), rng.normal(size=(5, 16))
    got = nc.evaluate(library.attention(), Q, K, V)
    unscaled = helpers.softmax(Q @ K.T) @ V
    assert not np.allclose(got, unscaled)
    np.testing.assert_allclose(got, helpers.attention(Q, K, V), rtol=1e-10)


@pytest.mark.parametrize("magnitude", [1e3, 3e4])
def test_attention_with_huge_logits_is_stable(magnitude, helpers, rng):
    d = 4
    Q = rng.normal(size=(6, d))
    K = rng.normal(size=(7, d))
    V = rng.normal(size=(7, d))
    logits = Q @ K.T / math.sqrt(d)
    Q = Q * (magnitude / np.abs(logits).max())  # logits now reach ±magnitude
    assert np.abs(Q @ K.T / math.sqrt(d)).max() == pytest.approx(magnitude)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        got = nc.evaluate(library.attention(), Q, K, V)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, helpers.attention(Q, K, V), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_multi_head_attention_matches_numpy(seed, helpers):
    rng = np.random.default_rng(seed)
    s = sizes(rng, "h", "q", "x", "d")
    Q = rng.normal(size=(s["h"], s["q"], s["d"]))
    K, V = (rng.normal(size=(s["h"], s["x"], s["d"])) for _ in range(2))
    want = np.stack([helpers.attention(Q[i], K[i], V[i]) for i in range(s["h"])])
    np.testing.assert_allclose(nc.evaluate(library.multi_head_attention(), Q, K, V), want, rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_grouped_query_attention_matches_numpy(seed, helpers):
    """h key/value heads, g query heads per key/value head: query head (i, j) reads kv head i."""
    rng = np.random.default_rng(seed)
    s = sizes(rng, "h", "g", "q", "x", "d")
    s["g"] = max(s["g"], 2)  # at least two query heads share a kv head
    Q = rng.normal(size=(s["h"], s["g"], s["q"], s["d"]))
    K, V = (rng.normal(size=(s["h"], s["x"], s["d"])) for _ in range(2))
    want = np.empty_like(Q)
    for i in range(s["h"]):
        for j in range(s["g"]):
            want[i, j] = helpers.attention(Q[i, j], K[i], V[i])
    got = nc.evaluate(library.grouped_query_attention(), Q, K, V)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_grouped_query_attention_is_not_multi_head_on_flattened_heads(helpers, rng):
    """Sharing matters: giving each query head its own K, V changes the answer."""
    h, g, q, x, d = 2, 3, 4, 5, 6
    Q = rng.normal(size=(h, g, q, d))
    K, V = rng.normal(size=(h, x, d)), rng.normal(size=(h, x, d))
    got = nc.evaluate(library.grouped_query_attention(), Q, K, V)
    K2 = np.roll(K, 1, axis=0)
    other = nc.evaluate(library.grouped_query_attention(), Q, K2, V)
    assert not np.allclose(got, other)


# --------------------------------------------------------------------------- transformer parts
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_numpy(bias, rng):
    n, i, o = 4, 3, 5
    X, W, b = rng.normal(size=(n, i)), rng.normal(size=(i, o)), rng.normal(size=o)
    d = library.linear(bias=bias)
    if bias:
        np.testing.assert_allclose(nc.evaluate(d, X, W, b), X @ W + b, rtol=1e-12)
    else:
        assert len(d.dom) == 2
        np.testing.assert_allclose(nc.evaluate(d, X, W), X @ W, rtol=1e-12)


@pytest.mark.parametrize("activation", ["gelu", "relu", "silu"])
def test_mlp_matches_numpy(activation, helpers, rng):
    n, i, f, o = 5, 4, 7, 3
    X = rng.normal(size=(n, i))
    W1, b1 = rng.normal(size=(i, f)), rng.normal(size=f)
    W2, b2 = rng.normal(size=(f, o)), rng.normal(size=o)
    act = {"gelu": helpers.gelu_tanh, "relu": helpers.relu, "silu": helpers.silu}[activation]
    want = act(X @ W1 + b1) @ W2 + b2
    got = nc.evaluate(library.mlp(activation=activation), X, W1, b1, W2, b2)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_swiglu_matches_numpy(seed, helpers):
    rng = np.random.default_rng(seed)
    n, e, f, o = sizes(rng, "n", "e", "f", "o", low=1, high=7).values()
    X, W1, W3, W2 = (rng.normal(size=s) for s in ((n, e), (e, f), (e, f), (f, o)))
    up = helpers.silu(X @ W1) * (X @ W3)
    np.testing.assert_allclose(nc.evaluate(library.swiglu(), X, W1, W3), up, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(nc.evaluate(library.swiglu_mlp(), X, W1, W3, W2), up @ W2, rtol=1e-12, atol=1e-12)
    concrete = library.swiglu_mlp(n=n, e=e, f=f, o=o)
    assert [a.names for a in concrete.dom.inside] == [("n", "e"), ("e", "f"), ("e", "f"), ("f", "o")]
    np.testing.assert_allclose(nc.evaluate(concrete, X, W1, W3, W2), up @ W2, rtol=1e-12, atol=1e-12)


def test_gelu_is_the_tanh_approximation(helpers):
    """The tanh form differs from the erf form by up to ~1e-3: make sure the library uses tanh."""
    from math import erf
    x = np.linspace(-4, 4, 81)
    got = nc.evaluate(nc.elementwise("gelu", "n"), x)
    np.testing.assert_allclose(got, helpers.gelu_tanh(x), rtol=1e-14, atol=1e-15)
    exact = np.array([0.5 * v * (1 + erf(v / math.sqrt(2))) for v in x])
    assert np.abs(got - exact).max() > 1e-5


@pytest.mark.parametrize("seed", SEEDS)
def test_layer_norm_matches_numpy(seed, helpers):
    rng = np.random.default_rng(seed)
    n, d = sizes(rng, "n", "d", low=2, high=8).values()
    X = rng.normal(size=(n, d)) * 3 + 1
    gamma, beta = rng.normal(size=d), rng.normal(size=d)
    got = nc.evaluate(library.layer_norm(eps=1e-5), X, gamma, beta)
    np.testing.assert_allclose(got, helpers.layer_norm(X, gamma, beta, 1e-5), rtol=1e-10, atol=1e-12)


def test_layer_norm_eps_is_used(helpers):
    X = np.array([[1.0, 1.0 + 1e-3]])
    ones, zeros = np.ones(2), np.zeros(2)
    a = nc.evaluate(library.layer_norm(eps=1e-5), X, ones, zeros)
    b = nc.evaluate(library.layer_norm(eps=1.0), X, ones, zeros)
    np.testing.assert_allclose(b, helpers.layer_norm(X, ones, zeros, 1.0), rtol=1e-10)
    assert not np.allclose(a, b)


@pytest.mark.parametrize("seed", SEEDS)
def test_rms_norm_matches_numpy(seed, helpers):
    rng = np.random.default_rng(seed)
    n, d = sizes(rng, "n", "d", low=1, high=8).values()
    X, gamma = rng.normal(size=(n, d)), rng.normal(size=d)
    got = nc.evaluate(library.rms_norm(eps=1e-6), X, gamma)
    np.testing.assert_allclose(got, helpers.rms_norm(X, gamma, 1e-6), rtol=1e-10, atol=1e-12)


def transformer_reference(h, X, g1, be1, Wq, Wk, Wv, Wo, g2, be2, W1, b1, W2, b2, *, eps, act):
    """By hand from the docstring: y = x + MHA(LN₁(x)) W_o, out = y + MLP(LN₂(y))."""
    x1 = h.layer_norm(X, g1, be1, eps)
    Q = np.einsum("ne,ehd->hnd", x1, Wq)
    K = np.einsum("ne,ehd->hnd", x1, Wk)
    V = np.einsum("ne,ehd->hnd", x1, Wv)
    A = np.stack([h.attention(Q[i], K[i], V[i]) for i in range(Q.shape[0])])
    Y = X + np.einsum("hnd,hde->ne", A, Wo)
    x2 = h.layer_norm(Y, g2, be2, eps)
    return Y + act(x2 @ W1 + b1) @ W2 + b2


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("activation", ["gelu", "silu"])
def test_transformer_block_matches_numpy(seed, activation, helpers):
    rng = np.random.default_rng(seed)
    n, e, hh, d, f = 5, 6, 2, 3, 7
    args = [rng.normal(size=(n, e)), 1 + 0.1 * rng.normal(size=e), 0.1 * rng.normal(size=e),
            rng.normal(size=(e, hh, d)), rng.normal(size=(e, hh, d)), rng.normal(size=(e, hh, d)),
            rng.normal(size=(hh, d, e)), 1 + 0.1 * rng.normal(size=e), 0.1 * rng.normal(size=e),
            rng.normal(size=(e, f)), rng.normal(size=f), rng.normal(size=(f, e)), rng.normal(size=e)]
    act = {"gelu": helpers.gelu_tanh, "silu": helpers.silu}[activation]
    want = transformer_reference(helpers, *args, eps=1e-5, act=act)
    got = nc.evaluate(library.transformer_block(activation=activation), *args)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    concrete = library.transformer_block(n=n, e=e, h=hh, d=d, f=f, activation=activation)
    np.testing.assert_allclose(nc.evaluate(concrete, *args), want, rtol=1e-9, atol=1e-10)


def test_a_transformer_stack_is_its_blocks_one_after_another(helpers):
    """Three blocks with their own weights = the numpy block applied three times (the reference above)."""
    rng = np.random.default_rng(7)
    n, e, hh, d, f = 4, 6, 2, 3, 5

    def weights():
        return [1 + 0.1 * rng.normal(size=e), 0.1 * rng.normal(size=e),
                rng.normal(size=(e, hh, d)), rng.normal(size=(e, hh, d)), rng.normal(size=(e, hh, d)),
                rng.normal(size=(hh, d, e)), 1 + 0.1 * rng.normal(size=e), 0.1 * rng.normal(size=e),
                rng.normal(size=(e, f)), rng.normal(size=f), rng.normal(size=(f, e)), rng.normal(size=e)]
    X, ws = rng.normal(size=(n, e)), [weights() for _ in range(3)]
    want = X
    for w in ws:
        want = transformer_reference(helpers, want, *w, eps=1e-5, act=helpers.gelu_tanh)
    got = nc.evaluate(library.transformer_stack(3), X, *[a for w in ws for a in w])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    with pytest.raises(nc.errors.ArgumentError, match="blocks must be a positive int"):
        library.transformer_stack(0)


def test_transformer_block_types():
    t = library.transformer_block()
    assert [a.names for a in t.dom.inside] == [
        ("n", "e"), ("e",), ("e",), ("e", "h", "d"), ("e", "h", "d"), ("e", "h", "d"), ("h", "d", "e"),
        ("e",), ("e",), ("e", "f"), ("f",), ("f", "e"), ("e",)]
    assert [a.names for a in t.cod.inside] == [("n", "e")]


# --------------------------------------------------------------------------- symbolic vs concrete
def test_symbolic_library_sizes_are_symbols():
    att = library.attention()
    q, x, d = nc.axes("q x d")
    assert att.dom == nc.Ty(nc.Array((q, d)), nc.Array((x, d)), nc.Array((x, d)))
    beta = att.boxes[1].data.param("beta")
    assert beta == 1 / sympy.sqrt(nc.symbol("d"))


def test_concrete_library_sizes_are_ints(helpers, rng):
    att = library.attention(q=4, x=6, d=8)
    assert [a.shape for a in att.dom.inside] == [(4, 8), (6, 8), (6, 8)]
    assert att.boxes[1].data.param("beta") == sympy.sqrt(2) / 4
    Q, K, V = rng.normal(size=(4, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    np.testing.assert_allclose(nc.evaluate(att, Q, K, V), helpers.attention(Q, K, V), rtol=1e-10)
    with pytest.raises(nc.ShapeError, match=r"axis 'q' has size 4, but the array has 5"):
        nc.evaluate(att, rng.normal(size=(5, 8)), K, V)


def test_partly_concrete_sizes(helpers, rng):
    """Sizes given for some axes only: those are checked, the others inferred."""
    att = library.attention(d=8)
    assert [str(a) for a in att.dom.inside] == ["q×d[8]", "x×d[8]", "x×d[8]"]
    for q, x in [(1, 1), (3, 9)]:
        Q, K, V = rng.normal(size=(q, 8)), rng.normal(size=(x, 8)), rng.normal(size=(x, 8))
        np.testing.assert_allclose(nc.evaluate(att, Q, K, V), helpers.attention(Q, K, V), rtol=1e-10)


def test_symbolic_and_concrete_agree_under_substitution():
    sym = nc.substitute(library.multi_head_attention(), q=3, x=4, d=5, h=2)
    assert sym == library.multi_head_attention(q=3, x=4, d=5, h=2)


@pytest.mark.parametrize("build", [library.matmul, library.attention, library.multi_head_attention,
                                   library.grouped_query_attention, library.linear, library.mlp,
                                   library.layer_norm, library.rms_norm, library.transformer_block])
def test_library_diagrams_are_well_typed(build, helpers):
    helpers.well_typed(build())


def test_attention_in_the_papers_number_formats(rng):
    """Table 1's quantization labels: FP8 queries and keys, FP16 values, scores, probabilities and output."""
    f = {"Q": "fp8", "K": "fp8", "S": "fp16", "P": "fp16", "V": "fp16", "O": "fp16"}
    att = nc.library.attention(formats=f)
    assert [a.dtype.name for a in att.dom.inside] == ["fp8", "fp8", "fp16"] and att.cod.inside[0].dtype.name == "fp16"
    boxes = [b for b in att.boxes if b.name in ("·", "SoftMax")]
    assert [(b.dom.inside[0].dtype.name, b.cod.inside[0].dtype.name) for b in boxes] == \
        [("fp8", "fp16"), ("fp16", "fp16"), ("fp16", "fp16")]
    assert nc.library.multi_head_attention(formats=f).dom.inside[2].dtype.name == "fp16"
    assert nc.library.attention(formats={}) == nc.library.attention()
    Q, K, V = (rng.normal(size=s) for s in ((4, 8), (6, 8), (6, 8)))
    assert np.allclose(nc.evaluate(att, Q, K, V), nc.evaluate(nc.library.attention(), Q, K, V), atol=0.2)


@pytest.mark.parametrize("formats, message", [
    ({"Q": "fp8"}, "Q is fp8 but K is fp32"),
    ({"P": "fp16"}, "P is fp16 but V is fp32"),
    ({"X": "fp16"}, "attention has no array 'X'"),
    ({"Q": "fp7", "K": "fp7"}, "unknown dtype 'fp7'"),
])
def test_attention_formats_are_checked(formats, message):
    with pytest.raises(nc.NapkinError, match=message):
        nc.library.attention(formats=formats)
