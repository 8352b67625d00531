"""``nc.torch.compile``: derived algorithms as torch.library custom ops (issue 33, item 1).

Every check compares with a second route that does not go through napkin-cat's kernels: a formula written here in
torch (attention: ``softmax(QKᵀ/√d) V`` and ``logsumexp``; the MLP: ``gelu(X W₁ + b₁) W₂ + b₂``), torch's own
autograd of it, ``torch.autograd.gradcheck``'s finite differences, and ``torch.library.opcheck``'s checks of the
registration (schema, fake tensors, autograd, AOT dispatch with dynamic shapes).  Attention is woven over batch and
heads (``(B, H, N, d)`` tensors) and runs at ragged sizes (q ≠ x, tiles that do not divide them); the memory is
small (64 values) so that the derived algorithms are tiled and streamed (FlashAttention's forward, its
two-kernel backward from the saved O and L).  The CPU kernels run on one thread (``torch.set_num_threads(1)``, the
op's convention: a tensor op takes torch's threads; two threads on tiny tensors only wait on each other).

``torch.compile(fullgraph=True)`` runs with the ``aot_eager`` backend (dynamo's graph capture and AOTAutograd on
fake tensors: what needs the fake implementation and the autograd registration); with inductor (a C++ build of
the graph, about half a minute here) under ``NAPKIN_SLOW=1``.
"""
from __future__ import annotations

import dataclasses

import importlib.util
import itertools
import math
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is the `kernels` extra (pip install 'napkin-cat[kernels]')")

import napkin_cat as nc  # noqa: E402

SIZES = {"b": 2, "h": 3, "q": 6, "x": 10}
D = 4
MEMORY = 64


def woven_attention():
    """Attention with its log-sum-exp, woven over heads and batch: (B, H, q, d) × (B, H, x, d)² → (B, H, q, d) and
    (B, H, q)."""
    return nc.weave(nc.weave(nc.library.attention(lse=True, d=D), "h", position=0), "b", position=0)


def attention_reference(Q, K, V):
    S = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return torch.softmax(S, dim=-1) @ V, torch.logsumexp(S, dim=-1)


def mlp_reference(X, W1, b1, W2, b2):
    return torch.nn.functional.gelu(X @ W1 + b1, approximate="tanh") @ W2 + b2


@pytest.fixture(scope="module")
def attention():
    return nc.torch.compile(woven_attention(), memory=MEMORY, aux=1, name="test_attention")


@pytest.fixture(scope="module")
def mlp():
    return nc.torch.compile(nc.library.mlp(), memory=MEMORY, name="test_mlp")


def attention_inputs(dtype, *, grad=False, seed=0, **sizes):
    s = {**SIZES, **sizes}
    g = torch.Generator().manual_seed(seed)
    shapes = ((s["b"], s["h"], s["q"], D), (s["b"], s["h"], s["x"], D), (s["b"], s["h"], s["x"], D))
    return [torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(grad) for shape in shapes]


def mlp_inputs(dtype, *, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = ((6, 5), (5, 7), (7,), (7, 3), (3,))       # n = 6, i = 5, f = 7, o = 3
    return [torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(grad) for shape in shapes]


CASES = {"attention": (attention_inputs, attention_reference), "mlp": (mlp_inputs, mlp_reference)}
TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12)}


def outputs(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


# ---------------------------------------------------------------------------------------------------------- import
#: what a fresh process (Triton's interpreter on) finds: the modules ``import napkin_cat`` loaded, those ``nc.torch``
#: loaded, then (with triton installed) the CUDA path's Triton kernels run in it (:data:`TRITON_SCRIPT`)
FRESH = """
import sys
import napkin_cat as nc
print("import napkin_cat:", "torch" in sys.modules, "triton" in sys.modules, flush=True)
assert callable(nc.torch.compile)
print("nc.torch:", "torch" in sys.modules, flush=True)
"""


@pytest.fixture(scope="module")
def fresh_process():
    """One new Python process for the checks that need one (each started cost an interpreter and the imports of
    napkin_cat and torch, 4 s of CPU): :data:`FRESH`, then :data:`TRITON_SCRIPT` where triton is installed; its
    output lines and exit status."""
    script = FRESH + (TRITON_SCRIPT if importlib.util.find_spec("triton") is not None else "")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    return run.stdout.splitlines(), run.returncode, run.stderr


def test_import_napkin_cat_leaves_torch_alone(fresh_process):
    """torch is optional: ``import napkin_cat`` imports neither torch nor triton; ``nc.torch`` loads them."""
    lines, _, stderr = fresh_process
    assert "import napkin_cat: False False" in lines, ("imported by napkin_cat", lines, stderr[-2000:])
    assert "nc.torch: True" in lines, (lines, stderr[-2000:])


# ---------------------------------------------------------------------------------------------------------- values
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_and_gradients_equal_the_torch_formula(case, dtype, request):
    op = request.getfixturevalue(case)
    make, reference = CASES[case]
    xs = make(dtype, grad=True)
    refs = [x.detach().clone().requires_grad_() for x in xs]
    got, want = outputs(op(*xs)), outputs(reference(*refs))
    assert [y.dtype for y in got] == [dtype] * len(want) and [y.shape for y in got] == [w.shape for w in want]
    for y, w in zip(got, want):
        torch.testing.assert_close(y, w.detach(), **TOLERANCE[dtype])
    cotangent = torch.randn(want[0].shape, generator=torch.Generator().manual_seed(1), dtype=dtype)
    (got[0] * cotangent).sum().backward()
    (want[0] * cotangent).sum().backward()
    for x, r in zip(xs, refs):
        torch.testing.assert_close(x.grad, r.grad, **TOLERANCE[dtype])


def test_attention_runs_the_derived_flash_algorithms(attention):
    """What ran is what nc.derive made of it at the call's sizes: FlashAttention's forward (grouped over q, h, b,
    streamed over x) and a backward from the saved O and L (no SoftMax, no log-sum-exp recomputed)."""
    op = attention.napkin
    op.forward(attention_inputs(torch.float64))
    (r,) = op.forward.derivations.values()
    assert str(r.variant).endswith("group q,h,b · stream x") and "SoftMax₁" in str(r.variant)
    op.backward(attention_inputs(torch.float64) + outputs(attention(*attention_inputs(torch.float64)))
                + [torch.ones(2, 3, 6, D, dtype=torch.float64)])
    (back,) = op.backward.derivations.values()
    assert "SoftMax" not in str(back.variant) and "LSE" not in str(back.variant)


@pytest.mark.parametrize("case", sorted(CASES))
def test_opcheck_passes(case, request):
    op = request.getfixturevalue(case)
    report = torch.library.opcheck(op, tuple(CASES[case][0](torch.float64, grad=True)))
    assert set(report.values()) == {"SUCCESS"}, report


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradcheck_in_float64(case, request):
    op = request.getfixturevalue(case)
    xs = tuple(CASES[case][0](torch.float64, grad=True))
    assert torch.autograd.gradcheck(lambda *a: outputs(op(*a))[0], xs)


def test_an_input_that_needs_no_gradient_gets_none(attention):
    Q, K, V = attention_inputs(torch.float64)
    Q.requires_grad_()
    O, L = attention(Q, K, V)
    assert not L.requires_grad                       # aux=1: the log-sum-exp is not differentiable
    O.sum().backward()
    assert Q.grad is not None and K.grad is None and V.grad is None


def test_an_input_outside_wrt_that_needs_a_gradient_is_refused():
    op = nc.torch.compile(nc.library.matmul(), memory=MEMORY, wrt=[0], name="test_wrt")
    A, B = torch.randn(4, 3, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    with pytest.raises(nc.GradError, match=r"input 1 \(b×c\) .* requires grad.*wrt=\[0\]"):
        op(A, B)
    A.requires_grad_()
    op(A, B.detach()).sum().backward()
    torch.testing.assert_close(A.grad, torch.ones(4, 5, dtype=torch.float64) @ B.detach().T)


# ---------------------------------------------------------------------------------------------------------- compile
@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.skipif(
    not os.environ.get("NAPKIN_SLOW"), reason="inductor builds C++ (about 30 s here): NAPKIN_SLOW=1"))])
def test_it_works_under_torch_compile_fullgraph(attention, backend):
    xs = attention_inputs(torch.float64, grad=True, seed=2)
    refs = [x.detach().clone().requires_grad_() for x in xs]

    def loss(Q, K, V):
        O, L = attention(Q, K, V)
        return (O * O).sum() + L.detach().sum()

    compiled = torch.compile(loss, fullgraph=True, backend=backend)
    got = compiled(*xs)
    got.backward()
    want = loss(*refs)
    want.backward()
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for x, r in zip(xs, refs):
        torch.testing.assert_close(x.grad, r.grad, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------------------- caching
def test_the_same_diagram_and_options_are_one_op_and_other_options_another(attention):
    again = nc.torch.compile(woven_attention(), memory=MEMORY, aux=1, name="test_attention")
    other = nc.torch.compile(woven_attention(), memory=2 * MEMORY, aux=1, name="test_attention")
    assert again is attention and other is not attention
    assert other.napkin.name != attention.napkin.name and other.napkin.name.startswith("napkin::test_attention_")


def test_a_kernel_is_made_once_per_sizes_and_dtype():
    op = nc.torch.compile(nc.library.matmul(), memory=MEMORY, name="test_cache")
    calls = [(4, 3, 5, torch.float32), (4, 3, 5, torch.float32), (4, 3, 5, torch.float64), (6, 3, 5, torch.float64),
             (4, 3, 5, torch.float64)]
    for a, b, c, dtype in calls:
        A, B = torch.randn(a, b, dtype=dtype), torch.randn(b, c, dtype=dtype)
        torch.testing.assert_close(op(A, B), A @ B, **TOLERANCE[dtype])
    kernels = op.napkin.forward.kernels
    assert len(kernels) == 3 and len(op.napkin.forward.derivations) == 2      # derived per sizes, not per dtype
    assert sorted(k.printer.real.ctype for k in kernels.values()) == ["double", "double", "float"]


# ---------------------------------------------------------------------------------------------------------- sizes
def test_reference_sizes_derive_once_and_each_call_is_retiled_within_the_memory():
    """``sizes=``: derived once at q = x = 16; calls at other (ragged) sizes run the same algorithm at the tiles that
    move least at their sizes within the memory, and give the formula's values.  Least: what the call's plan moves
    (its instrumented run's count) is the least transfers the cost functor gives over every divisor tiling of
    the groups (a brute force, not the integer program the op's ``nc.optimal`` solves) that fits the memory; at
    q = 3 the reference's g_q = 4 would not even fit the axis."""
    op = nc.torch.compile(woven_attention(), memory=MEMORY, aux=1, sizes={**SIZES, "q": 16, "x": 16},
                          name="test_reference")
    calls = ((6, 10), (5, 7), (3, 2), (16, 16))
    for q, x in calls:
        xs = attention_inputs(torch.float64, q=q, x=x)
        for y, w in zip(op(*xs), attention_reference(*xs)):
            torch.testing.assert_close(y, w, **TOLERANCE[torch.float64])
    forward = op.napkin.forward
    (r,) = forward.derivations.values()
    assert len(forward.kernels) == len(calls) and r.regimes[0].tiles["g_q"] == 4
    for k in forward.kernels.values():
        s = {str(a): v for a, v in k.plan.sizes.items()}
        fits = []
        for g_q, g_h, g_b in itertools.product(divisors(s["q"]), divisors(s["h"]), divisors(s["b"])):
            c = nc.cost(r.diagram, sizes={**SIZES, "q": s["q"], "x": s["x"], "g_q": g_q, "g_h": g_h, "g_b": g_b,
                                          "s_x": 1})
            if c.M[1] <= MEMORY:
                fits.append(c.H[1])
        _, counted = k.plan.run(*(x.numpy() for x in attention_inputs(torch.float64, q=s["q"], x=s["x"])))
        assert counted.transfers[1] == min(fits) and k.plan.peak[1] <= MEMORY, s


def divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def test_a_derivation_is_compiled_as_it_was_derived():
    r = nc.derive(nc.library.matmul(), memory=MEMORY, sizes={"a": 12, "b": 10, "c": 8})
    op = nc.torch.compile(r, name="test_given")
    A, B = torch.randn(12, 10, dtype=torch.float64), torch.randn(10, 8, dtype=torch.float64)
    torch.testing.assert_close(op(A, B), A @ B, **TOLERANCE[torch.float64])
    (k,) = op.napkin.forward.kernels.values()
    assert k.plan.diagram is r.diagram and {str(a): v for a, v in k.plan.sizes.items()} == \
        {**{str(a): v for a, v in r.sizes.items()}, **r.regimes[0].tiles}
    with pytest.raises(nc.ArgumentError, match="a derivation fixes memory"):
        nc.torch.compile(r, memory=MEMORY)


# ---------------------------------------------------------------------------------------------------------- errors
BAD = {
    "rank": (lambda Q, K, V: (Q[0], K, V), nc.ShapeError, r"input 0 \(b×h×q×d\) .* has rank 3 .* it takes rank 4"),
    "fixed size": (lambda Q, K, V: (Q[..., :3], K, V), nc.ShapeError, r"axis 'd' is 4 in the diagram; input 0 "
                                                                     r"\(b×h×q×d\) has 3"),
    "one size per axis": (lambda Q, K, V: (Q, K, V[:, :, :7]), nc.ShapeError, r"axis 'x' is 10 on input 1 "
                                                                              r"\(b×h×x×d\) but 7 on input 2"),
    "dtype": (lambda Q, K, V: (Q.half(), K.half(), V.half()), nc.TensorError, r"input 0 \(b×h×q×d\) .* is "
                                                                              r"torch.float16; a real array takes "
                                                                              r"torch.float32 or torch.float64"),
    "mixed dtypes": (lambda Q, K, V: (Q, K.double(), V), nc.TensorError, r"input 1 .* is torch.float64 but input 0 "
                                                                         r"is torch.float32"),
    "integers": (lambda Q, K, V: (Q, K.int(), V), nc.TensorError, r"input 1 .* is torch.int32; a real array"),
    "device": (lambda Q, K, V: (Q.to("meta"), K.to("meta"), V.to("meta")), nc.TensorError,
               r"tensors are on meta: it runs on cpu \(C/OpenMP\), cuda \(Triton\)"),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_call_it_cannot_take_is_a_typed_error_naming_the_input(attention, bad):
    change, error, message = BAD[bad]
    with pytest.raises(error, match=message):
        attention(*change(*attention_inputs(torch.float32)))


def test_a_call_short_of_a_tensor_is_refused_by_the_schema(attention):
    """The op's schema takes one tensor per input array, then its optional block tables: torch's dispatcher refuses
    a call short of one, or with something else in its place, before the op runs."""
    Q, K, V = attention_inputs(torch.float32)
    with pytest.raises(RuntimeError, match=r"missing value for argument 'x2'.*\(Tensor x0, Tensor x1, Tensor x2, "
                                           r"Tensor\[\]\? blocks=None\)"):
        attention(Q, K)
    with pytest.raises(RuntimeError, match=r"Expected a value of type 'Tensor' for argument 'x2'"):
        attention(Q, K, V.numpy())


@pytest.mark.parametrize("options, error, message", [
    (dict(memory=64, hardware="epyc-zen4"), nc.NapkinError, "memory= .* or hardware= .* not both"),
    (dict(memory=0), nc.MemoryLimitError, "memory=0: the values level 1 holds"),
    (dict(aux=2), nc.GradError, r"aux=2: .* 0 … 1 \(f has 2 output\(s\)"),
    (dict(wrt=[3]), nc.GradError, r"wrt=\[3\]: 3 is not an input position; the op has inputs 0 … 2"),
    (dict(name="has space"), nc.ArgumentError, "name='has space': the op's name is an identifier"),
    (dict(sizes={"q": 6}), nc.AxisError, "missing"),
    (dict(hardware="tpu"), nc.HardwareError, "hardware='tpu': give a CPU model"),
    (dict(backend="cuda"), nc.NapkinError, "backend='cuda': a torch op runs on 'c', 'triton'"),
])
def test_options_it_cannot_take_are_typed_errors(options, error, message):
    with pytest.raises(error, match=message):
        nc.torch.compile(nc.library.attention(lse=True), **options)


def test_an_integer_input_has_no_gradient_to_ask_for():
    with pytest.raises(nc.GradError, match=r"input 1 \(n\) is int32, which has no gradient; real inputs are \[0\]"):
        nc.torch.compile(nc.library.cross_entropy(), memory=MEMORY, wrt=[1])


# ---------------------------------------------------------------------------------------------------------- triton
needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                  reason="triton is the `kernels` extra (pip install 'napkin-cat[kernels]')")

TRITON_SCRIPT = """
import torch
from napkin_cat.torch.kernels import interpreted
assert interpreted()
op = nc.torch.compile(nc.library.matmul(), memory=64, backend="triton", name="test_triton_in_process")
A, B = torch.randn(8, 6, requires_grad=True), torch.randn(6, 4, requires_grad=True)
C = op(A, B)
(C * C).sum().backward()
A2, B2 = A.detach().requires_grad_(), B.detach().requires_grad_()
C2 = A2 @ B2
(C2 * C2).sum().backward()
for got, want in ((C, C2), (A.grad, A2.grad), (B.grad, B2.grad)):
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
from napkin_cat.torch import kernels
print("ok", next(iter(op.napkin.forward.kernels.values())).backend, kernels.launcher.cache_info().currsize)
"""


@needs_triton
def test_the_cuda_path_runs_its_triton_kernels_in_process_under_the_interpreter(fresh_process):
    """What a CUDA call runs (the Triton kernel's ``nc_run`` in this process, :func:`~napkin_cat.torch.kernels.
    launcher`), on CPU tensors in a process started with ``TRITON_INTERPRET=1``: forward and backward."""
    lines, status, stderr = fresh_process
    # two launchers imported: the forward's kernel and the backward's (nc_run in this process, not the worker's)
    assert status == 0 and lines[2:] == ["ok triton 2"], (lines, stderr[-3000:])


def test_the_triton_backend_refuses_float64_before_deriving():
    op = nc.torch.compile(nc.library.matmul(), memory=MEMORY, backend="triton", name="test_triton_float64")
    with pytest.raises(nc.TensorError, match="the Triton kernel computes real values in float32; this call is "
                                             "torch.float64"):
        op(torch.randn(8, 6, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64))
    assert not op.napkin.forward.derivations


@needs_triton
@pytest.mark.skipif(not os.environ.get("NAPKIN_SLOW"), reason="starts Triton's interpreter in a worker process "
                                                               "(about 10 s here): NAPKIN_SLOW=1")
def test_triton_on_cpu_tensors_runs_in_the_interpreters_worker():
    op = nc.torch.compile(nc.library.matmul(), memory=MEMORY, backend="triton", name="test_triton_worker")
    A, B = torch.randn(8, 6), torch.randn(6, 4)
    torch.testing.assert_close(op(A, B), A @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hardware", ["epyc-zen4", "no-rates"])
def test_without_a_memory_the_cpu_models_l2_holds_the_calls_values(hardware):
    """On a CPU model without rates (format 1) the default memory is its L2 per core in values of the call's dtype:
    a float64 value takes 8 bytes, so half as many fit as of float32."""
    model = nc.hardware.load_cpu("epyc-zen4")
    if hardware == "no-rates":     # a time model's CPU with its rates dropped derives by its L2 too
        model = dataclasses.replace(nc.hardware.load_cpu("epyc-zen3-dev"), l3_bandwidth=None)
    op = nc.torch.compile(nc.library.matmul(), hardware=model, name="test_default_memory")
    for dtype in (torch.float32, torch.float64):
        A, B = torch.randn(8, 6, dtype=dtype), torch.randn(6, 4, dtype=dtype)
        torch.testing.assert_close(op(A, B), A @ B, **TOLERANCE[dtype])
    assert sorted(memory for _, memory in op.napkin.forward.derivations) == [model.l2 // 8, model.l2 // 4]


def test_on_a_cpu_model_with_rates_each_call_is_derived_by_predicted_time():
    """A CPU model with rates (the default, this-cpu, where a shipped model has this machine's caches) derives each
    call by the C kernel's predicted time on the call's threads, in values of its dtype: the tiles are the time
    model's own pick (nc.derive(hardware=)), and the op computes attention."""
    att = nc.library.attention()
    op = nc.torch.compile(att, hardware="epyc-zen3-dev", wrt=[], name="test_cpu_time")
    Q, K, V = (torch.randn(128, 16, dtype=torch.float64) for _ in range(3))
    expected = torch.softmax(Q @ K.T / 4.0, dim=1) @ V
    torch.testing.assert_close(op(Q, K, V), expected, **TOLERANCE[torch.float64])
    ((sizes, (name, threads, real)), r), = op.napkin.forward.derivations.items()
    assert (name, threads, real) == ("epyc-zen3-dev", torch.get_num_threads(), torch.float64)
    own = nc.derive(att, sizes=dict(sizes), hardware="epyc-zen3-dev", threads=threads, value_bytes=8)
    assert r.optimum.exact_sizes == own.optimum.exact_sizes and r.prediction.time == own.prediction.time
    assert op.napkin.forward.tiles_at(dict(sizes), torch.float64, torch.device("cpu")) == {
        str(k): int(v) for k, v in own.optimum.exact_sizes.items()}
