"""An initialiser prints as a fill of its record's values wherever it stands (issue 33).

``Initialize() = (μ′, z′) = (−∞, 0)``, the head of online softmax, is a box of the diagram that
``softmax_contraction_to_unscaled`` writes.  Where the softmax axis fits the memory whole, ``nc.derive`` keeps that
form without a stream along it, so Initialize stands in a sweep of its own rather than in a stream's head:
FlexAttention's causal mask at memory=256 raised ``UnknownKindError`` there.  The plan is legal (it computes
attention); the printers read the kind's form off its record (``forms=filled(-inf, 0)``) like every other kind's.
Checked against numpy computed from the maths, and with a user's initialiser of another arity and other values.
"""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.errors import CodegenError, SignatureError
from napkin_cat.syntax.printed import filled
from rewrites.softmax import softmax_contraction_to_unscaled

from kernels_common import needs_nvcc, needs_triton

N, X, D = 16, 16, 4


def flex_causal():
    """The diagram ``nc.torch.flex_attention`` translates ``mask_mod=lambda b, h, i, x: x <= i`` to (one head):
    the positions compared (x ≤ q), negated twice (the translation's ``~`` and ``where``'s), masked attention
    with its log-sum-exp."""
    sizes = {"q": N, "x": X}
    mask = ((nc.position("x", x=X) @ nc.position("q", q=N)) >> nc.compare("le", "x, q -> q x", **sizes)
            >> nc.logical("not", "q x", **sizes) >> nc.logical("not", "q x", **sizes))
    return nc.library.masked_attention(mask, q=N, x=X, d=D, lse=True)


def reference(Q, K, V):
    """Causal attention and its log-sum-exp from the maths: S = QKᵀ/√d, −∞ above the diagonal."""
    S = Q @ K.T / np.sqrt(D)
    S[np.triu_indices(N, 1)] = -np.inf
    m = S.max(axis=1, keepdims=True)
    P = np.exp(S - m)
    return (P / P.sum(axis=1, keepdims=True)) @ V, (m + np.log(P.sum(axis=1, keepdims=True)))[:, 0]


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, D)) for n in (N, X, X)]


@pytest.fixture(scope="module")
def derived_plan():
    """``nc.derive`` of the translated causal mask at memory=256 (x fits whole: no stream along it), planned."""
    r = nc.derive(flex_causal(), memory=256, sizes={})
    return nc.plan(r.diagram, {k: int(v) for k, v in r.regimes[-1].tiles.items()})


def test_the_derived_plan_keeps_initialize_outside_a_stream_along_x(derived_plan):
    text = str(derived_plan)
    assert "← Initialize(" in text          # the path of issue 33: reached by the search, not built by hand
    assert "# stream x" not in text


def test_the_derived_plan_prints_in_c_and_computes_attention(derived_plan):
    xs = inputs()
    k = nc.codegen.c(derived_plan, real="double", poison=True)   # a value read before it is written is NaN
    assert "= -INFINITY;" in k.source
    O, L = k(*xs)
    O2, L2 = reference(*xs)
    np.testing.assert_allclose(O, O2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(L, L2, rtol=0, atol=1e-12)


def test_the_derived_plan_prints_in_cuda_and_triton(derived_plan):
    assert "= -INFINITY;" in nc.codegen.cuda(derived_plan).source
    assert 'float("-inf")' in nc.codegen.triton(derived_plan).source


@needs_nvcc
def test_the_derived_plans_cuda_kernel_compiles_with_the_plans_shared_memory(derived_plan):
    assert nc.codegen.cuda(derived_plan).compile(arch="sm_90")["smem"] == derived_plan.smem_bytes


@needs_triton
def test_the_derived_plan_runs_under_the_triton_interpreter(derived_plan):
    xs = inputs(1)
    O, L = nc.codegen.triton(derived_plan)(*[x.astype(np.float32) for x in xs])
    O2, L2 = reference(*xs)
    np.testing.assert_allclose(np.asarray(O), O2, rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(L), L2, rtol=0, atol=1e-5)


def test_the_rules_output_prints_unstreamed_in_one_kernel():
    """The rule's right-hand side as it stands (no derive): Initialize in a kernel with no stream at all."""
    att = nc.library.attention(q=5, x=7, d=3)
    fa2 = nc.kernel(softmax_contraction_to_unscaled.apply(att))
    p = nc.plan(fa2, {})
    rng = np.random.default_rng(2)
    Q, K, V = rng.standard_normal((5, 3)), rng.standard_normal((7, 3)), rng.standard_normal((7, 3))
    S = Q @ K.T / np.sqrt(3)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    want = P / P.sum(axis=1, keepdims=True) @ V
    np.testing.assert_allclose(nc.codegen.c(p, real="double", poison=True)(Q, K, V), want, rtol=0, atol=1e-12)
    _, counted = p.run(Q, K, V)
    assert counted.transfers == nc.cost(fa2, sizes={}).H


@pytest.fixture(params=["n", "()"], ids=["rows", "scalar"])
def three_heads(request, scratch_kinds):
    """A user's initialiser of another arity and other values than softmax's: (+∞, 1, −2.5) per row (or once),
    whatever its input holds; then the first two added (+∞ + 1 = +∞): a kernel whose outputs are (+∞, −2.5)."""
    rows = request.param
    values = (np.inf, 1.0, -2.5)

    def impl(xs, core):
        batch = xs[0].shape[:xs[0].ndim - len(core.inputs[0])]
        return [np.full(batch, v) for v in values]
    nc.declare("three_heads", impl, forms=filled(*values))
    box = nc.apply("three_heads", f"n m -> {rows}, {rows}, {rows}", core=["m"] if rows == "n" else ["n", "m"],
                   n=6, m=4)
    add = nc.elementwise("add", f"{rows}, {rows} -> {rows}", **({"n": 6} if rows == "n" else {}))
    return nc.plan(nc.kernel(box >> (add @ nc.Id(box.cod[2:]))), {})


def test_a_users_initialiser_prints_and_runs_in_c(three_heads):
    a, b = nc.codegen.c(three_heads, real="double", poison=True)(np.random.default_rng(3).standard_normal((6, 4)))
    assert np.all(a == np.inf) and np.all(b == -2.5)


@needs_triton
def test_a_users_initialiser_runs_under_the_triton_interpreter(three_heads):
    a, b = nc.codegen.triton(three_heads)(np.random.default_rng(4).standard_normal((6, 4)).astype(np.float32))
    assert np.all(np.asarray(a) == np.inf) and np.all(np.asarray(b) == -2.5)


def test_a_fill_with_the_wrong_number_of_values_is_refused_by_name(scratch_kinds):
    nc.declare("two_heads", lambda xs, core: [np.zeros(xs[0].shape[:1])] * 2,
               forms={"c": nc.Structured("fill", values=(0.0,))})
    d = nc.kernel(nc.apply("two_heads", "n m -> n, n", core=["m"], n=3, m=2))
    with pytest.raises(CodegenError, match=r"kind 'two_heads' prints as a fill of its 2 output\(s\), but its c form "
                                           r".* gives 1 value\(s\)"):
        nc.codegen.c(nc.plan(d, {}))
    with pytest.raises(SignatureError, match="an initialiser's values are numbers, one per output"):
        filled("zero")
    with pytest.raises(SignatureError, match="an initialiser's values are numbers"):
        filled()
