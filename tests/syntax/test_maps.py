"""Every elementwise map of the record (``arity`` set: the built-ins of ``maps.py`` and ``division.py``) checked by a
second route: float64 evaluation (``nc.evaluate``, the plan's runner and its fast run) against a float64 numpy
reference written from the mathematics to 1e-12, the VJP against central finite differences, and the new
``sin``/``cos``/``erf``/``gelu_erf``: their interval images and their C and Triton kernels."""
from __future__ import annotations

import math

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax import interval as iv
from napkin_cat.syntax.primitive import KINDS

ERF = np.vectorize(math.erf, otypes=[float])
C = 0.3                                                 # the constant of the kinds that require one
REFERENCE = {
    "id": lambda x: x, "neg": lambda x: -x, "abs": lambda x: np.where(x < 0, -x, x),
    "exp": lambda x: math.e ** x, "log": lambda x: np.log2(x) / math.log2(math.e),
    "relu": lambda x: np.where(x > 0, x, 0.0), "step": lambda x: np.where(x > 0, 1.0, 0.0),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "gelu_erf": lambda x: x * 0.5 * (1 + ERF(x / math.sqrt(2))),
    "silu": lambda x: x / (1 + math.e ** -x), "sigmoid": lambda x: 1 / (1 + math.e ** -x),
    "tanh": lambda x: (math.e ** (2 * x) - 1) / (math.e ** (2 * x) + 1), "sqrt": lambda x: x ** 0.5,
    "rsqrt": lambda x: x ** -0.5, "recip": lambda x: x ** -1.0, "square": lambda x: x ** 2,
    "sin": lambda x: np.imag(np.exp(1j * x)), "cos": lambda x: np.real(np.exp(1j * x)), "erf": ERF,
    "scale": lambda x: C * x, "shift": lambda x: x + C,
    "floordiv_by": lambda x: np.floor(x / C), "mod_by": lambda x: x - C * np.floor(x / C),
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "max": lambda a, b: np.where(a >= b, a, b), "min": lambda a, b: np.where(a <= b, a, b),
    "floordiv": lambda a, b: np.floor(a / b), "mod": lambda a, b: a - b * np.floor(a / b),
    "fma": lambda a, b, c: a * b + c,
}
POSITIVE = {"sqrt", "rsqrt", "recip", "log"}


def built_in_maps():
    return sorted(k for k, kind in KINDS.items() if kind.arity is not None)


def operands(name, rng, n=7):
    """Values away from each map's kinks and poles: positive where it needs it, |x| ≥ 0.2 elsewhere."""
    arity = KINDS[name].arity
    if name in POSITIVE:
        return [rng.uniform(0.5, 2.0, n) for _ in range(arity)]
    xs = [rng.uniform(0.2, 2.0, n) * rng.choice([-1.0, 1.0], n) for _ in range(arity)]
    if name in ("floordiv", "mod", "div"):
        xs[1] = np.abs(xs[1]) + 0.3
    return xs


def build(name):
    return nc.elementwise(name, "n", const=C if "c" in KINDS[name].requires else None)


def test_every_elementwise_map_has_a_reference_here():
    assert set(built_in_maps()) - {"squareplus", "squareplus_bare"} == set(REFERENCE)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_float64_does_not_round_through_float32(name, rng):
    """A float32 rounding anywhere leaves errors near 1e-8 relative; float64 throughout leaves 1e-16."""
    xs = operands(name, rng)
    want = REFERENCE[name](*xs)
    f = build(name)
    got = nc.evaluate(f, *xs)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    p = nc.plan(nc.kernel(f), {"n": len(xs[0])})
    ran, _ = p.run(*xs)
    assert ran.dtype == np.float64 and p(*xs).dtype == np.float64
    np.testing.assert_allclose(ran, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(p(*xs), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", [k for k in sorted(REFERENCE) if KINDS[k].part("vjp", default=None)])
def test_vjp_agrees_with_central_finite_differences(name, rng):
    f = build(name)
    xs = operands(name, rng)
    ybar = rng.normal(size=xs[0].shape)
    grads = nc.evaluate(nc.grad(f), *xs, ybar)
    grads = grads if isinstance(grads, tuple) else (grads,)
    eps = 1e-6
    for i, x in enumerate(xs):
        v = rng.normal(size=x.shape)
        up = [xx + eps * v if j == i else xx for j, xx in enumerate(xs)]
        down = [xx - eps * v if j == i else xx for j, xx in enumerate(xs)]
        fd = float(np.sum(ybar * (REFERENCE[name](*up) - REFERENCE[name](*down)))) / (2 * eps)
        assert float(np.sum(grads[i] * v)) == pytest.approx(fd, rel=1e-5, abs=1e-6), f"operand {i} of {name}"


@pytest.mark.parametrize("phase, fn", [(0.0, np.sin), (math.pi / 2, np.cos)])
def test_sine_image_is_the_hull_of_the_values(phase, fn, rng):
    """On random intervals: the image holds every value, and is within the sampling's resolution of the values'
    hull (exact: a crest or trough inside widens it to ±1, else the ends decide); numbers and arrays agree."""
    lo = rng.uniform(-10, 10, 300)
    hi = lo + rng.exponential(1.5, 300)
    image = iv.sine(iv.Interval(lo, hi), phase)
    for k in range(300):
        t = np.linspace(lo[k], hi[k], 20001)
        vals = fn(t)
        assert image.lo[k] <= vals.min() + 1e-12 and vals.max() <= image.hi[k] + 1e-12
        assert image.lo[k] >= vals.min() - 1e-6 and image.hi[k] <= vals.max() + 1e-6
        one = iv.sine(iv.Interval(float(lo[k]), float(hi[k])), phase)
        assert (one.lo, one.hi) == (image.lo[k], image.hi[k])
    assert iv.sine(iv.Interval(-iv.INF, 0.0)) == iv.Interval(-1.0, 1.0)


@pytest.mark.parametrize("name", ["sin", "cos", "erf", "gelu_erf"])
def test_new_maps_print_in_c_and_triton(name, monkeypatch):
    x = np.linspace(-4, 4, 17)
    p = nc.plan(nc.kernel(nc.elementwise(name, "n")), {"n": 17})
    xf = x.astype(np.float32)
    want = REFERENCE[name](xf.astype(np.float64))
    try:
        np.testing.assert_allclose(nc.codegen.c(p, blas=False)(xf), want, rtol=1e-6, atol=1e-6)
    except nc.ToolNotFoundError as missing:
        pytest.skip(str(missing))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    try:
        np.testing.assert_allclose(nc.codegen.triton(p)(xf), want, rtol=1e-6, atol=1e-6)
    except nc.ToolNotFoundError as missing:
        pytest.skip(str(missing))
