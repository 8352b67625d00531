"""``nc.grad`` checked by two independent routes: central finite differences of ⟨ȳ, f(x)⟩ on every library
algorithm (float64, ragged sizes), and torch.autograd on functions written from the mathematics (attention,
MHA, GQA, the MLPs, the transformer block).  Plus: ``wrt``, the result is an ordinary diagram (costed,
serialised, planned and run as a kernel), and the typed errors."""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import sympy

import napkin_cat as nc

LIBRARY = {
    "matmul": (nc.library.matmul, dict(a=3, b=5, c=2)),
    "linear": (nc.library.linear, dict(n=3, i=4, o=5)),
    "mlp_gelu": (nc.library.mlp, dict(n=3, i=4, f=5, o=2)),
    "mlp_relu": (lambda: nc.library.mlp(activation="relu"), dict(n=3, i=4, f=5, o=2)),
    "mlp_silu": (lambda: nc.library.mlp(activation="silu"), dict(n=3, i=4, f=5, o=2)),
    "layer_norm": (nc.library.layer_norm, dict(n=3, d=5)),
    "rms_norm": (nc.library.rms_norm, dict(n=4, d=3)),
    "attention": (nc.library.attention, dict(q=3, x=5, d=4)),
    "multi_head_attention": (nc.library.multi_head_attention, dict(q=3, x=4, d=2, h=3)),
    "grouped_query_attention": (nc.library.grouped_query_attention, dict(q=3, x=4, d=2, h=2, g=3)),
    "transformer_block": (nc.library.transformer_block, dict(n=3, e=4, h=2, d=3, f=5)),
}


def shapes(ty, sizes):
    env = {sympy.Symbol(k, positive=True, integer=True): v for k, v in sizes.items()}
    return [tuple(int(sympy.sympify(a.size).subs(env)) for a in arr.axes) for arr in ty.inside]


def as_tuple(y):
    return y if isinstance(y, tuple) else (y,)


def pairing(f, xs, ybar) -> float:
    """⟨ȳ, f(x)⟩."""
    return sum(float(np.sum(a * b)) for a, b in zip(as_tuple(nc.evaluate(f, *xs)), ybar, strict=True))


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_grad_agrees_with_central_finite_differences(name):
    make, sizes = LIBRARY[name]
    f = make()
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(s) for s in shapes(f.dom, sizes)]
    ybar = [rng.standard_normal(s) for s in shapes(f.cod, sizes)]
    grads = as_tuple(nc.evaluate(nc.grad(f), *xs, *ybar))
    assert [g.shape for g in grads] == [x.shape for x in xs]
    eps = 1e-6
    for i, x in enumerate(xs):
        v = rng.standard_normal(x.shape)
        shifted = [[xx + t * v if j == i else xx for j, xx in enumerate(xs)] for t in (eps, -eps)]
        fd = (pairing(f, shifted[0], ybar) - pairing(f, shifted[1], ybar)) / (2 * eps)
        assert float(np.sum(grads[i] * v)) == pytest.approx(fd, rel=1e-5, abs=1e-6), f"input {i} of {name}"


def test_wrt_picks_inputs_in_the_order_asked():
    f = nc.library.attention()
    sizes = dict(q=2, x=3, d=2)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(s) for s in shapes(f.dom, sizes)] + [rng.standard_normal((2, 2))]
    full = nc.evaluate(nc.grad(f), *xs)
    dV, dQ = nc.evaluate(nc.grad(f, wrt=[2, 0]), *xs)
    assert np.allclose(dV, full[2]) and np.allclose(dQ, full[0])
    assert len(nc.grad(f, wrt=1).cod) == 1


def test_an_input_the_output_ignores_gets_zeros_and_a_copied_one_the_sum():
    b = nc.Builder(nc.types("a, a", a=3))
    x, y = b.inputs
    d = b.build(b(nc.elementwise("mul", "a", a=3), x, x))          # x² ; y unused
    gx, gy = nc.evaluate(nc.grad(d), np.array([1., 2., 3.]), np.ones(3), np.array([1., 1., 2.]))
    assert gx.tolist() == [2., 4., 12.] and gy.tolist() == [0., 0., 0.]


def test_the_gradient_is_an_ordinary_diagram():
    g = nc.grad(nc.library.attention(q=8, x=8, d=4))
    c = nc.cost(nc.unfused(g))
    assert c.flops["tensor"] > 0 and c.H[1] > 0
    assert nc.loads(nc.dumps(g)) == g
    relu = nc.grad(nc.elementwise("relu", "a", a=5))
    k = nc.codegen.c(nc.plan(nc.kernel(relu), {}))               # the step H(x) printed in C
    out = k(np.array([-1., 2., 0., 3., -4.], np.float32), np.ones(5, np.float32))
    assert out.tolist() == [0., 1., 0., 1., 0.]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch.autograd needs torch "
                    "(pip install '.[kernels]')")
@pytest.mark.parametrize("name", ["attention", "multi_head_attention", "grouped_query_attention", "mlp_gelu",
                                  "mlp_relu", "transformer_block"])
def test_grad_agrees_with_torch_autograd(name):
    import torch
    make, sizes = LIBRARY[name]
    f = make()
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(s) for s in shapes(f.dom, sizes)]
    ybar = [rng.standard_normal(s) for s in shapes(f.cod, sizes)]
    ts = [torch.tensor(x, requires_grad=True) for x in xs]
    (y,) = [TORCH[name](*ts)]
    y.backward(torch.tensor(ybar[0]))
    ours = as_tuple(nc.evaluate(nc.grad(f), *xs, *ybar))
    for i, (t, g) in enumerate(zip(ts, ours, strict=True)):
        assert np.allclose(t.grad.numpy(), g, rtol=1e-8, atol=1e-10), f"input {i} of {name}"


def _attention(Q, K, V):
    import torch
    return torch.softmax(Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1]), dim=-1) @ V


def _gqa(Q, K, V):          # Q: h g q d, K, V: h x d
    return _attention(Q, K[:, None], V[:, None])


def _gelu(x):
    import torch
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _mlp(act):
    def f(X, W1, b1, W2, b2):
        return act(X @ W1 + b1) @ W2 + b2
    return f


def _layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / (var + eps).sqrt() * g + b


def _block(X, g1, be1, Wq, Wk, Wv, Wo, g2, be2, W1, b1, W2, b2):
    import torch
    x1 = _layer_norm(X, g1, be1)
    Q, K, V = (torch.einsum("ne,ehd->hnd", x1, W) for W in (Wq, Wk, Wv))
    Y = X + torch.einsum("hnd,hde->ne", _attention(Q, K, V), Wo)
    return Y + _mlp(_gelu)(_layer_norm(Y, g2, be2), W1, b1, W2, b2)


TORCH = {"attention": _attention, "multi_head_attention": _attention, "grouped_query_attention": _gqa,
         "mlp_gelu": _mlp(_gelu), "mlp_relu": _mlp(lambda x: x.clamp(min=0)), "transformer_block": _block}


def test_a_gradient_with_no_output_or_with_respect_to_nothing_is_refused():
    """Issue 31: ``wrt=[]`` made a gradient with no outputs, and a diagram with no output was told "aux is 0 … -1".
    Mutation caught: dropping the empty-``wrt`` check in ``_positions`` (the gradient of attention with no outputs is
    returned), or the no-output check in ``_aux`` (the message is about aux)."""
    f = nc.library.attention()
    for wrt in ([], (), range(0)):
        with pytest.raises(nc.GradError, match=r"wrt=.* names no input.* positions 0 … 2, or wrt=None for all 3"):
            nc.grad(f, wrt=wrt)
    assert len(nc.grad(f, wrt=[2]).cod) == 1              # one input named: one gradient output
    for empty in (nc.Id(nc.Ty()), nc.Id(nc.Ty()) @ nc.Id(nc.Ty())):
        with pytest.raises(nc.GradError, match="has no output, so it has no gradient") as e:
            nc.grad(empty)
        assert "aux" not in str(e.value).split("(")[0]


def test_errors_name_what_cannot_be_differentiated():
    f = nc.library.attention()
    with pytest.raises(nc.GradError, match=r"wrt=3: differentiate with respect to input positions 0 … 2"):
        nc.grad(f, wrt=3)
    with pytest.raises(nc.GradError, match="names an input twice"):
        nc.grad(f, wrt=[0, 0])
    with pytest.raises(nc.GradError, match="takes a diagram, got str"):
        nc.grad("attention")
    from rewrites import flash_attention
    with pytest.raises(nc.NoVJPError, match="is a region.*differentiate before partitioning"):
        nc.grad(flash_attention(f).diagram)
    nc.declare("cube_no_vjp", lambda xs, core: [xs[0] ** 3], flops=lambda core: {"general": 2})
    try:
        box = nc.apply("cube_no_vjp", "a", a=3)
        with pytest.raises(nc.NoVJPError, match="kind 'cube_no_vjp' has no vector-Jacobian product: declare it "
                                                "with vjp=") as refused:
            nc.grad(box)
        assert isinstance(refused.value, nc.MissingPartError)
    finally:
        del nc.engine.KINDS["cube_no_vjp"]


def test_a_declared_kind_brings_its_own_vjp():
    def vjp(ctx, box, ins, outs, ybar):          # d(x³) = 3x²
        x = ctx.x(ins[0])
        return [ctx.ew("mul", ybar[0], ctx.const("scale", ctx.ew("square", x), 3))]
    nc.declare("cube", lambda xs, core: [xs[0] ** 3], flops=lambda core: {"general": 2}, vjp=vjp)
    try:
        g = nc.evaluate(nc.grad(nc.apply("cube", "a", a=3)), np.array([1., 2., -1.]), np.ones(3))
        assert g.tolist() == [3., 12., 3.]
    finally:
        del nc.engine.KINDS["cube"]


MASKED = {
    "causal_attention": (nc.library.causal_attention, dict(q=4, x=5, d=3), ()),
    "sliding_window_attention": (lambda: nc.library.sliding_window_attention(1), dict(q=4, x=5, d=3), ()),
    "alibi_attention": (nc.library.alibi_attention, dict(q=4, x=5, d=3), ()),
    "document_attention": (nc.library.document_attention, dict(q=4, x=5, d=3), ([0, 0, 1, 1], [0, 0, 0, 1, 1])),
    "cross_entropy": (nc.library.cross_entropy, dict(n=4, v=6), ([5, 0, 2, 2],)),
    "linear_cross_entropy": (nc.library.linear_cross_entropy, dict(n=4, e=3, v=6), ([5, 0, 2, 2],)),
}


@pytest.mark.parametrize("name", sorted(MASKED))
def test_masked_attention_and_the_losses_differentiate_through_masks_and_gathers(name):
    """The float inputs agree with finite differences; the integer ones (segment ids, targets) get zeros."""
    make, sizes, ints = MASKED[name]
    f = make()
    rng = np.random.default_rng(3)
    floats = [s for s, arr in zip(shapes(f.dom, sizes), f.dom.inside) if not arr.dtype.is_integer]
    xs = [rng.standard_normal(s) for s in floats] + [np.array(i) for i in ints]
    ybar = [rng.standard_normal(s) for s in shapes(f.cod, sizes)]
    grads = as_tuple(nc.evaluate(nc.grad(f), *xs, *ybar))
    eps = 1e-6
    for i in range(len(floats)):
        v = rng.standard_normal(xs[i].shape)
        shifted = [[xx + t * v if j == i else xx for j, xx in enumerate(xs)] for t in (eps, -eps)]
        fd = (pairing(f, shifted[0], ybar) - pairing(f, shifted[1], ybar)) / (2 * eps)
        assert float(np.sum(grads[i] * v)) == pytest.approx(fd, rel=1e-5, abs=1e-6), f"input {i} of {name}"
    for g in grads[len(floats):]:
        assert not np.any(g)


@pytest.mark.parametrize("kind, x", [("log", np.array([0.5, 1.0, 3.0])), ("abs", np.array([-2.0, 0.5, 3.0]))])
def test_log_and_abs(kind, x):
    f = nc.elementwise(kind, "n")
    g = nc.evaluate(nc.grad(f), x, np.ones(3))
    np.testing.assert_allclose(g, 1 / x if kind == "log" else np.sign(x))


def test_a_table_read_at_positions_over_other_axes_scatters_its_cotangent():
    """``y = exp(T[h, t[q, x]])``: the table woven over h only, the index over q and x.  T̄ is the cotangent summed
    over every (q, x) that read each entry (``np.add.at``), and agrees with finite differences."""
    gather = nc.gather("h v, q x -> h q x", h=2, v=7, q=3, x=4)
    b = nc.Builder(gather.dom)
    f = b.build(b(nc.elementwise("exp", "h q x", h=2, q=3, x=4), b(gather, *b.inputs)))
    rng = np.random.default_rng(5)
    T, t = rng.standard_normal((2, 7)), rng.integers(0, 7, size=(3, 4)).astype(np.int32)
    t[0, :2] = 6                                  # an entry read twice, and (most likely) some never read
    ybar = rng.standard_normal((2, 3, 4))
    Tbar, tbar = nc.evaluate(nc.grad(f), T, t, ybar)
    want = np.zeros_like(T)
    for h in range(2):
        np.add.at(want[h], t.ravel(), (ybar[h] * np.exp(T[h][t])).ravel())
    np.testing.assert_allclose(Tbar, want, rtol=1e-12)
    assert not np.any(tbar)
    v, eps = rng.standard_normal(T.shape), 1e-6
    fd = (pairing(f, [T + eps * v, t], [ybar]) - pairing(f, [T - eps * v, t], [ybar])) / (2 * eps)
    assert float(np.sum(Tbar * v)) == pytest.approx(fd, rel=1e-6)
