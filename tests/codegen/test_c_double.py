"""The C kernel in double precision (``nc.codegen.c(p, real="double")``): every real value a double, so that a
float64 input is computed without rounding through float.

Checked against ``nc.evaluate`` of the *function* (numpy, float64, a route that shares nothing with the printer)
at a tolerance float cannot reach: the float kernel of the same plan misses it (so the check tells the two
apart), the double kernel meets it, with BLAS (``cblas_dgemm``) and with the loops, at ragged sizes with the arena
poisoned (a value read before it is written is NaN).  Mutation: printing the literals with float's suffix
(``CFamilyPrinter.number`` returning ``…f``, so that β = 1/√d rounds to float) fails the first test at about
1e-8."""
from __future__ import annotations

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.primitive import KINDS
from napkin_cat.syntax.sizes import symbols_of

from kernels_common import inputs, needs_blas, needs_cc

pytestmark = needs_cc

LIBRARY = nc.library
#: name → (function, algorithm, axis sizes, tile): ragged tiles, so the masks are printed too
CASES = {
    "flash attention with L": (LIBRARY.attention(lse=True),
                               nc.group(nc.stream(nc.kernel(LIBRARY.attention(lse=True)), "x", "s_x"), "q", "g_q"),
                               {"q": 11, "x": 13, "d": 6}, 4),
    "saved backward": (nc.grad(LIBRARY.attention(lse=True), saved=True, aux=1),
                       nc.unfused(nc.grad(LIBRARY.attention(lse=True), saved=True, aux=1)),
                       {"q": 7, "x": 5, "d": 3}, 2),
    "mlp": (LIBRARY.mlp(), nc.unfused(LIBRARY.mlp()), {"n": 6, "i": 5, "f": 7, "o": 3}, 2),
    "layer norm": (LIBRARY.layer_norm(), nc.group(nc.kernel(LIBRARY.layer_norm()), "n", "g_n"), {"n": 7, "d": 10}, 3),
}


def plan(name):
    _, algorithm, axes, tile = CASES[name]
    return nc.plan(algorithm, {**axes, **{str(s): tile for s in symbols_of(algorithm) if str(s) not in axes}})


def error(got, want) -> float:
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    return max(float(np.max(np.abs(g - w) / (1 + np.abs(w)))) for g, w in zip(got, want, strict=True))


@pytest.mark.parametrize("blas", [False, pytest.param(True, marks=needs_blas)])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_double_kernel_meets_float64_where_the_float_kernel_cannot(name, blas):
    p = plan(name)
    xs = [x.astype(np.float64) for x in inputs(p, seed=3)]
    want = nc.evaluate(CASES[name][0], *xs)
    double = nc.codegen.c(p, blas=blas, poison=True, real="double")
    got = double(*xs)
    assert all(y.dtype == np.float64 for y in (got if isinstance(got, tuple) else (got,)))
    assert error(got, want) < 1e-12
    single = nc.codegen.c(p, blas=blas, real="float")
    assert 1e-12 < error(single(*xs), want) < 1e-4
    assert ("cblas_dgemm" in double.source) == (blas and "cblas_sgemm" in single.source)
    assert "float" not in double.source.replace("float64", "")


def test_the_double_arena_holds_eight_bytes_a_value():
    """Each fp32 variable of the arena takes 8 bytes a value in double, 4 in float (the layout's width)."""
    p = plan("flash attention with L")
    single, double = (nc.codegen.c(p, blas=False, real=r).printer for r in ("float", "double"))
    on_chip = [v for v in p.variables if v.level == 1 and v.name in single.layout.offsets]
    assert on_chip and all(double.layout[1].sizes[v.name] == 2 * single.layout[1].sizes[v.name] for v in on_chip)


def test_an_unknown_real_type_is_refused_by_name():
    with pytest.raises(nc.CodegenError, match=r"real='half'.*'float' or 'double'"):
        nc.codegen.c(plan("mlp"), real="half")


#: a user's maps, declared with C forms only: one in float's spelling (``sqrtf``, ``0.5f``: what a float kernel
#: reads), one with the dialect's libm helpers (``{log1p}``, ``{exp}``) and a parameter with a default
USER = ("squareplus_d", "softplus_d")
B, BETA = 4.1, 0.7


def squareplus(x):
    return 0.5 * (x + np.sqrt(x * x + B))


def softplus(x, beta=BETA):
    return np.log1p(np.exp(beta * x)) / beta


@pytest.fixture(scope="module")
def user_kinds():
    assert not set(USER) & set(KINDS)
    nc.declare("squareplus_d", lambda xs, core: [squareplus(xs[0])],
               forms={"c": "0.5f * ({0} + sqrtf({0} * {0} + 4.1f))", "triton": "{0}"})
    nc.declare("softplus_d", lambda xs, core: [softplus(xs[0], core.value(core.params.get("beta", BETA)))],
               forms={"c": nc.Template("{log1p}({exp}({beta} * {0})) / {beta}", {"beta": BETA}), "triton": "{0}"})
    yield
    for name in USER:
        KINDS.pop(name, None)


@pytest.mark.parametrize("kinds", [("squareplus_d", "softplus_d"), ("log", "abs", "tanh", "rsqrt", "sqrt")])
def test_declared_and_built_in_maps_print_in_double_from_their_records(user_kinds, kinds):
    """A kind's C form prints in double with no work of its own: its float literals and libm calls respelled, its
    helpers filled with double's functions (the Real record); the built-ins' ``{log}``, ``{sqrt}``, … alike."""
    d = nc.apply(kinds[0], "n m -> n m")
    for k in kinds[1:]:
        d = d >> nc.apply(k, "n m -> n m")
    p = nc.plan(nc.group(nc.kernel(d), "n", "g_n"), {"n": 7, "m": 5, "g_n": 3})
    x = np.random.default_rng(5).uniform(0.5, 2.0, size=(7, 5))
    want = x
    for k in kinds:
        want = {"squareplus_d": squareplus, "softplus_d": softplus, "log": np.log, "tanh": np.tanh,
                "rsqrt": lambda v: 1 / np.sqrt(v), "abs": np.abs, "sqrt": np.sqrt}[k](want)
    double = nc.codegen.c(p, blas=False, real="double")
    assert error(double(x), want) < 1e-12
    single = nc.codegen.c(p, blas=False)
    assert 1e-12 < error(single(x), want) < 1e-5
    body = double.source.split("nc_run")[0].split("static void")[1]     # the first launch: the kinds' lines
    assert "f(" not in body.replace("nc_fold_max(", "").replace("nc_fmax(", "").replace("nc_fmin(", "") and \
        not any(c.isdigit() and body[i + 1] == "f" for i, c in enumerate(body[:-1]))
