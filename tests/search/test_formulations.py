"""Any formulation, the same algorithm (issue 34, item 3): families of equal programs, each member written as a
user might.  For each family derive's H of every member is within 1 % of the best member's (the best member's H
is the second route: derived here from another member), and each result computes, at its tiles, what numpy
computes from the maths (an independent reference written in the test)."""
import numpy as np
import sympy

import napkin_cat as nc
from napkin_cat.syntax.indices import gather


def _derived(f, memory, sizes):
    return nc.derive(f, memory=memory, sizes=sizes)


def _family(members, memory, sizes, reference, inputs):
    """Derive every member; assert each H within 1 % of the best and each result equal to ``reference``."""
    results = {name: _derived(f(), memory, sizes) for name, f in members.items()}
    best = min(r.H for r in results.values())
    for name, r in results.items():
        hs = {k: v.H for k, v in results.items()}
        assert r.H <= 1.01 * best, f"{name}: H {r.H} vs the best member's {best} ({hs})"
        got = nc.evaluate(r.diagram, *inputs, sizes=r.optimum.sizes)
        np.testing.assert_allclose(got, reference(*inputs), rtol=1e-9, atol=1e-12, err_msg=name)
    return results


# ---------------------------------------------------------------------- attention: where the scale goes
ATT = dict(q=64, x=64, d=16)
C = sympy.Rational(1, 4)


def _attention(where):
    b = nc.Builder(nc.types("q d, x d, x d"))
    Q, K, V = b.inputs
    if where == "Q":
        Q = b(nc.elementwise("scale", "q d", const=C), Q)
    S = b(nc.einsum("q d, x d -> q x"), Q, K)
    if where == "scores":
        S = b(nc.elementwise("scale", "q x", const=C), S)
    P = b(nc.softmax("q x", over="x", beta=C if where == "beta" else 1), S)
    return b.build(b(nc.einsum("q x, x d -> q d"), P, V))


def _attention_numpy(Q, K, V):
    S = float(C) * Q @ K.T
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return P / P.sum(axis=1, keepdims=True) @ V


def test_attention_with_the_scale_on_q_on_the_scores_or_in_beta():
    rng = np.random.default_rng(0)
    inputs = tuple(rng.normal(size=(ATT[a], ATT["d"])) * 3 for a in "qxx")
    _family({w: (lambda w=w: _attention(w)) for w in ("Q", "scores", "beta")}, 1024, ATT, _attention_numpy, inputs)


# ---------------------------------------------------------------------- RMSNorm: rsqrt or 1/sqrt
NORM = dict(n=4, d=64)
EPS = 1e-6


def _rms_norm(inverse):
    b = nc.Builder(nc.types("n d, d"))
    X, g = b.inputs
    ms = b(nc.elementwise("shift", "n", const=EPS), b(nc.reduce("mean", "n d -> n"),
                                                      b(nc.elementwise("square", "n d"), X)))
    if inverse == "rsqrt":
        y = b(nc.elementwise("mul", "n d, n -> n d"), X, b(nc.elementwise("rsqrt", "n"), ms))
    elif inverse == "recip":
        inv = b(nc.elementwise("recip", "n"), b(nc.elementwise("sqrt", "n"), ms))
        y = b(nc.elementwise("mul", "n d, n -> n d"), X, inv)
    else:
        y = b(nc.elementwise("div", "n d, n -> n d"), X, b(nc.elementwise("sqrt", "n"), ms))
    return b.build(b(nc.elementwise("mul", "n d, d -> n d"), y, g))


def _rms_numpy(X, g):
    return X / np.sqrt((X ** 2).mean(axis=1, keepdims=True) + EPS) * g


def test_rms_norm_with_rsqrt_or_one_over_sqrt():
    rng = np.random.default_rng(1)
    inputs = (rng.normal(size=(4, 64)), rng.normal(size=64))
    _family({w: (lambda w=w: _rms_norm(w)) for w in ("rsqrt", "recip", "div")}, 32, NORM, _rms_numpy, inputs)


# ---------------------------------------------------------------------- cross-entropy
CE = dict(n=8, v=256)


def _cross_entropy(form):
    b = nc.Builder(nc.types("n v") @ nc.types("n", dtype=nc.INT32))
    L, t = b.inputs
    pick = gather("n v, n -> n")
    if form == "lse":
        y = b(nc.elementwise("sub", "n, n -> n"), b(nc.reduce("logsumexp", "n v -> n"), L), b(pick, L, t))
    else:
        logp = b(nc.elementwise("log", "n v"), b(nc.softmax("n v", over="v"), L))
        y = b(nc.elementwise("neg", "n"), b(pick, logp, t))
    return b.build(y)


def _ce_numpy(L, t):
    m = L.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(L - m).sum(axis=1, keepdims=True)))[:, 0]
    return lse - L[np.arange(len(t)), t]


def test_cross_entropy_by_log_softmax_or_log_sum_exp():
    rng = np.random.default_rng(2)
    inputs = (rng.normal(size=(8, 256)) * 4, rng.integers(0, 256, size=8))
    _family({f: (lambda f=f: _cross_entropy(f)) for f in ("lse", "log_softmax")}, 256, CE, _ce_numpy, inputs)


# ---------------------------------------------------------------------- GELU MLP: the biases' side
MLP = dict(n=32, i=32, f=64, o=32)


def _mlp(bias_first):
    b = nc.Builder(nc.types("n i, i f, f, f o, o"))
    X, W1, b1, W2, b2 = b.inputs
    h1 = b(nc.einsum("n i, i f -> n f"), X, W1)
    h = b(nc.elementwise("add", "f, n f -> n f"), b1, h1) if bias_first else \
        b(nc.elementwise("add", "n f, f -> n f"), h1, b1)
    h = b(nc.elementwise("gelu", "n f"), h)
    y1 = b(nc.einsum("n f, f o -> n o"), h, W2)
    y = b(nc.elementwise("add", "o, n o -> n o"), b2, y1) if bias_first else \
        b(nc.elementwise("add", "n o, o -> n o"), y1, b2)
    return b.build(y)


def _mlp_numpy(X, W1, b1, W2, b2):
    h = X @ W1 + b1
    g = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    return g @ W2 + b2


def test_gelu_mlp_with_the_bias_added_before_or_after():
    rng = np.random.default_rng(3)
    inputs = tuple(rng.normal(size=s) for s in ((32, 32), (32, 64), (64,), (64, 32), (32,)))
    _family({k: (lambda k=k: _mlp(k)) for k in (False, True)}, 1024, MLP, _mlp_numpy, inputs)


# ---------------------------------------------------------------------- SwiGLU: the gate's side
GLU = dict(n=32, e=32, f=64)


def _swiglu(gate_left):
    b = nc.Builder(nc.types("n e, e f, e f"))
    X, W1, W3 = b.inputs
    gate = b(nc.elementwise("silu", "n f"), b(nc.einsum("n e, e f -> n f"), X, W1))
    up = b(nc.einsum("n e, e f -> n f"), X, W3)
    return b.build(b(nc.elementwise("mul", "n f, n f -> n f"), *((gate, up) if gate_left else (up, gate))))


def _swiglu_numpy(X, W1, W3):
    a = X @ W1
    return a / (1 + np.exp(-a)) * (X @ W3)


def test_swiglu_with_the_gate_on_either_side():
    rng = np.random.default_rng(4)
    inputs = tuple(rng.normal(size=s) for s in ((32, 32), (32, 64), (32, 64)))
    _family({k: (lambda k=k: _swiglu(k)) for k in (True, False)}, 1024, GLU, _swiglu_numpy, inputs)
