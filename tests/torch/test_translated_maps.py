"""The maps the library has, reached from torch: ``sin``, ``cos``, ``erf``, the exact (erf) GELU beside the tanh one,
``clamp``, ``nll_loss`` (the negated gather of cross-entropy), and the exact conversions ``x.to(dtype)`` (an
integer or a bool to a real format, a bool to an integer), each translated by ``nc.from_torch`` and checked against
torch itself (a second route: torch's own kernels, in float64); one compiled op runs them in the C kernel, forward
and backward, in float64 and float32 against torch's autograd.  A conversion that is not exact (a real to an
integer: torch truncates) stays a typed refusal naming the operation."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import napkin_cat as nc  # noqa: E402
from napkin_cat.errors import UnsupportedOperationError  # noqa: E402

F = torch.nn.functional
G = torch.Generator().manual_seed(0)
X = torch.randn(4, 6, dtype=torch.float64, generator=G) * 2
I = torch.arange(6, dtype=torch.int32) - 2
M = torch.rand(4, 6, generator=G) > 0.5
T = torch.tensor([5, 0, 2, 2])                     # class targets of X's rows

#: torch functions of (x, i, m), each reaching one map or conversion (the name says which)
FUNCTIONS = {
    "sin": lambda x, i, m: torch.sin(x),
    "cos": lambda x, i, m: torch.cos(x) * x,
    "erf": lambda x, i, m: torch.erf(x),
    "special.erf": lambda x, i, m: torch.special.erf(x) + 1,
    "gelu exact": lambda x, i, m: F.gelu(x),
    "gelu tanh": lambda x, i, m: F.gelu(x, approximate="tanh"),
    "int to real": lambda x, i, m: x + i.to(x.dtype),
    "int.double()": lambda x, i, m: (i * 3).double(),
    "bool to real": lambda x, i, m: x * m.to(x.dtype),
    "bool to int": lambda x, i, m: m.to(torch.int32) + i,
    "clamp": lambda x, i, m: x.clamp(-0.5, 1.5) + x.clamp(min=0.25) + x.clamp(max=-1),
    "nll_loss": lambda x, i, m: F.nll_loss(F.log_softmax(x, -1), T),
    "nll_loss sum": lambda x, i, m: F.nll_loss(F.log_softmax(x, -1), T, reduction="sum"),
    "nll_loss none": lambda x, i, m: F.nll_loss(x, T, reduction="none"),
}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_the_diagram_computes_what_torch_computes(name):
    fn = FUNCTIONS[name]
    want = fn(X, I, M)
    got = nc.from_torch(fn, X, I, M).evaluate()
    assert got.dtype.kind == {torch.float64: "f", torch.int64: "i", torch.int32: "i"}[want.dtype], got.dtype
    assert abs(got - want.numpy()).max() <= 1e-12 * max(1.0, float(want.abs().max()))


def model(x, i, m):
    return F.gelu(x) + torch.sin(x) * torch.cos(x) + torch.erf(x) + i.to(x.dtype) * 0.5 + m.to(x.dtype)


@pytest.fixture(scope="module")
def op():
    return nc.torch.compile(nc.from_torch(model, X, I, M).diagram, memory=64, name="test_maps")


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-13), (torch.float32, 2e-6)])
def test_the_c_kernel_and_its_backward_equal_torch(op, dtype, tol):
    x = X.to(dtype).requires_grad_(True)
    y, want = op(x, I, M), model(x, I, M)
    assert y.dtype == dtype and (y - want).abs().max() <= tol * want.abs().max()
    (g,), (g_want,) = torch.autograd.grad(y.sum(), [x]), torch.autograd.grad(want.sum(), [x])
    assert (g - g_want).abs().max() <= tol * g_want.abs().max()


@pytest.mark.parametrize("fn,said", [(lambda x: x.to(torch.int32), "converts a fp32 tensor to int32"),
                                     (lambda x: x.to(torch.float16), "converts a fp32 tensor to fp16")])
def test_a_conversion_that_is_not_exact_is_refused_by_name(fn, said):
    with pytest.raises(UnsupportedOperationError, match=r"aten\.(_to_copy|to)\..*" + said):
        nc.from_torch(fn, X)
