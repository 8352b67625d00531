"""Kinds the library does not have, declared once with their printed forms, print and run in every backend.

softplus (C ``log1pf(expf(x))``), a leaky ReLU with a parameter ``alpha`` (C ``{max}(x, alpha·x)``: the C dialect's
NaN-propagating ``nc_fmax``, CUDA's select), ``clamp(x, lo, hi)`` with parameters and defaults (``{min}({max}(…))``
in C and in Triton alike) and a product reduction folding with a user's accumulator: planned, printed in C, CUDA
and Triton from their records alone, and run in C and under the Triton interpreter against numpy computed from
their definitions; the plan's counts equal ``nc.cost``.  A part the record lacks is refused by name."""
from __future__ import annotations

import re

import numpy as np
import pytest

import napkin_cat as nc
from napkin_cat.syntax.primitive import KINDS

from kernels_common import needs_cc, needs_nvcc, needs_triton

NAMES = ("softplus", "leaky_relu", "clamp", "reduce_prod")
SIZES = {"n": 7, "m": 5, "g_n": 3}
ALPHA, HI = 0.1, 1.5           # clamp's lo is its form's default, -1


def _last(core):
    return tuple(range(-len(core.inputs[0]), 0))


@pytest.fixture(scope="module")
def declared():
    """The user's kinds, each declared once (removed afterwards)."""
    assert not set(NAMES) & set(KINDS)
    bounds = {"lo": -1.0, "hi": 1.0}
    nc.declare("softplus", lambda xs, core: [np.logaddexp(0.0, xs[0])], flops=lambda core: {"special": 2},
               forms={"c": "log1pf(expf({0}))", "triton": "tl.log(1.0 + tl.exp({0}))"})
    nc.declare("leaky_relu", lambda xs, core: [np.where(xs[0] > 0, xs[0], core.value(core.params["alpha"]) * xs[0])],
               flops=lambda core: {"general": 2},
               forms={"c": "{max}({0}, {alpha} * {0})", "triton": "tl.where({0} > 0.0, {0}, {alpha} * {0})"})
    clamp = nc.Template("{min}({max}({0}, {lo}), {hi})", bounds)
    nc.declare("clamp", lambda xs, core: [np.clip(xs[0], *(core.value(core.params.get(k, v))
                                                           for k, v in bounds.items()))],
               flops=lambda core: {"general": 2}, forms={"c": clamp, "triton": clamp})
    prod = nc.Accumulator("prod", lambda shape, dtype=float: np.ones(shape, dtype), np.multiply,
                          forms={"c": nc.Fold("{0} * {1}", reduce="*"), "triton": nc.Fold("{0} * {1}")})
    nc.declare("reduce_prod", lambda xs, core: [np.prod(xs[0], axis=_last(core))], flops=lambda core: {"general": 1},
               accumulator=prod, forms={"c": nc.Structured("reduce"), "triton": nc.Structured("reduce")})
    yield
    for name in NAMES:
        KINDS.pop(name, None)


def _maps():
    """leaky_relu ; clamp ; softplus on a (n, m) array, a kernel per group of rows."""
    d = (nc.apply("leaky_relu", "n m -> n m", params={"alpha": ALPHA}) >> nc.apply("clamp", "n m -> n m",
                                                                                   params={"hi": HI})
         >> nc.apply("softplus", "n m -> n m"))
    return nc.group(nc.kernel(d), "n", "g_n")


def _reference(x):
    """The maths: softplus(clamp(leaky(x), −1, 1.5))."""
    leaky = np.where(x > 0, x, ALPHA * x)
    return np.log1p(np.exp(np.minimum(np.maximum(leaky, -1.0), HI)))


def _x(shape=(7, 5), seed=0):
    return (2 * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def test_the_maps_plan_with_counts_equal_to_the_cost(declared):
    d = _maps()
    x = _x()
    y, counted = nc.plan(d, SIZES).run(x)
    c = nc.cost(d, sizes=SIZES)
    assert (counted.transfers, counted.flops, counted.peak) == (c.H, c.flops, c.peak)
    assert counted.flops == {"general": 4 * 7 * 5, "special": 2 * 7 * 5}      # leaky 2, clamp 2, softplus 2 each
    np.testing.assert_allclose(y, _reference(x), rtol=1e-6)


@needs_cc
def test_the_maps_print_from_their_records_and_run_in_c(declared):
    p = nc.plan(_maps(), SIZES)
    k = nc.codegen.c(p, blas=False)
    # the C dialect fills {max}/{min} with its NaN-propagating functions; the parameters are the box's or defaults
    # (the three maps one loop: leaky and clamp computed where they are read, codegen/fusion.py; the last one's
    # operand read into nc_a0 first: CPrinter.bound)
    assert "nc_a0 = (nc_fmin(nc_fmax((nc_fmax(x0_1[j_m + 5*j_n], 0.1f * x0_1[j_m + 5*j_n])), -1.0f), 1.5f));" \
        in k.source
    assert "= log1pf(expf(nc_a0));" in k.source and not re.search(r"(leaky_relu|clamp)\d+\[", k.source)
    x = _x(seed=1)
    np.testing.assert_allclose(k(x), _reference(x), rtol=2e-6, atol=1e-7)
    x[0, 0] = np.nan                   # a NaN goes through {max} and {min} as through numpy's maximum/minimum
    assert np.isnan(k(x)[0, 0]) and np.isnan(_reference(x)[0, 0])


def test_the_cuda_dialect_prints_its_own_helpers_and_a_kinds_own_cuda_form(declared, scratch_kinds):
    p = nc.plan(_maps(), SIZES)
    src = nc.codegen.cuda(p).source
    # {max}(a, b) is the NaN-propagating select (a) != (a) || (a) > (b) ? (a) : (b) in CUDA
    assert "((x0_1[j_m + 5*j_n]) != (x0_1[j_m + 5*j_n]) || (x0_1[j_m + 5*j_n]) > (0.1f * x0_1[j_m + 5*j_n]) ? " \
           "(x0_1[j_m + 5*j_n]) : (0.1f * x0_1[j_m + 5*j_n]))" in src
    assert "nc_fmax" not in src and "log1pf(expf(" in src
    nc.declare("cube", lambda xs, core: [xs[0] ** 3], forms={"c": "({0} * {0} * {0})", "cuda": "__powf({0}, 3.0f)"})
    q = nc.plan(nc.kernel(nc.apply("cube", "n -> n")), {"n": 4})
    assert "__powf(" in nc.codegen.cuda(q).source and "__powf(" not in nc.codegen.c(q, blas=False).source


@needs_nvcc
def test_the_cuda_kernel_of_the_maps_compiles_with_the_plans_shared_memory(declared):
    p = nc.plan(_maps(), SIZES)
    r = nc.codegen.cuda(p).compile(arch="sm_90")
    assert r["smem"] == p.smem_bytes > 0


@needs_triton
def test_the_maps_run_under_the_triton_interpreter(declared):
    p = nc.plan(_maps(), SIZES)
    k = nc.codegen.triton(p)
    assert "tl.minimum(tl.maximum(" in k.source and "tl.log(1.0 + tl.exp(" in k.source
    x = _x(seed=2)
    np.testing.assert_allclose(k(x), _reference(x), rtol=2e-6, atol=1e-7)


@needs_triton
@needs_cc
def test_one_template_of_libm_helpers_prints_in_c_and_triton_alike(scratch_kinds):
    """``{sqrt}({fabs}({0}))``, given once for both backends: C fills ``sqrtf``/``fabsf``, Triton ``tl.sqrt``,
    ``tl.abs``; both kernels compute √|x| (numpy)."""
    root = nc.Template("{sqrt}({fabs}({0}))")
    nc.declare("root_abs", lambda xs, core: [np.sqrt(np.abs(xs[0]))], flops=lambda core: {"special": 1},
               forms={"c": root, "triton": root})
    p = nc.plan(nc.group(nc.kernel(nc.apply("root_abs", "n m -> n m")), "n", "g_n"), SIZES)
    x = _x(seed=3)
    c, t = nc.codegen.c(p), nc.codegen.triton(p)
    assert "sqrtf(fabsf(" in c.source and "tl.sqrt(tl.abs(" in t.source
    for k in (c, t):
        np.testing.assert_allclose(k(x), np.sqrt(np.abs(x)), rtol=2e-6, atol=1e-7)


@needs_cc
def test_a_declared_reduction_folds_with_its_accumulators_printed_fold(declared):
    """Σ-free: the product over x, whole in one kernel (an OpenMP ``*`` reduction) and streamed along x (each
    slice's product folded into the state with the accumulator's C fold ``{0} * {1}``)."""
    x = (1 + 0.1 * np.random.default_rng(3).standard_normal((7, 9))).astype(np.float32)
    want = np.prod(x.astype(np.float64), axis=1)
    whole = nc.plan(nc.group(nc.kernel(nc.apply("reduce_prod", "q x -> q")), "q", "g_q"), {"q": 7, "x": 9, "g_q": 3})
    streamed = nc.plan(nc.group(nc.stream(nc.apply("reduce_prod", "q x -> q"), "x", "s_x"), "q", "g_q"),
                       {"q": 7, "x": 9, "g_q": 3, "s_x": 4})
    for p in (whole, streamed):
        k = nc.codegen.c(p, blas=False)
        assert "float nc_acc = 1.0f;" in k.source and "nc_acc = nc_acc * x0_1[" in k.source
        assert "#pragma omp simd reduction(*:nc_acc)" in k.source
        np.testing.assert_allclose(k(x), want, rtol=1e-5)
    assert "prod0[j_q] = prod0[j_q] * nc_acc;" in nc.codegen.c(streamed, blas=False).source
    # its Triton fold gives no block reduction: refused by name, the kind, the accumulator and the keyword
    with pytest.raises(nc.MissingPartError, match=r"the triton backend has no printed form for primitive kind "
                                                  r"'reduce_prod': its accumulator 'prod' has no Triton block "
                                                  r"reduction: give it forms=\{'triton': Fold\(…, reduce='tl.…'\)\}"):
        nc.codegen.triton(whole)


def test_a_part_the_record_lacks_is_refused_by_name(declared, scratch_kinds):
    # a parameter the form reads and the box does not carry (leaky_relu has no default alpha)
    p = nc.plan(nc.kernel(nc.apply("leaky_relu", "n -> n")), {"n": 4})
    with pytest.raises(nc.CodegenError, match=r"kind 'leaky_relu''s c form '\{max\}\(\{0\}, \{alpha\} \* \{0\}\)' "
                                              r"reads the parameter\(s\) \['alpha'\], which the box does not carry"):
        nc.codegen.c(p, blas=False)
    # a helper the dialect does not fill
    nc.declare("soft_sign", lambda xs, core: [xs[0] / (1 + np.abs(xs[0]))], forms={"c": "{0} / (1.0f + {abs}({0}))"})
    q = nc.plan(nc.kernel(nc.apply("soft_sign", "n -> n")), {"n": 4})
    with pytest.raises(nc.CodegenError, match=r"calls the helper\(s\) \['abs'\], which the cuda backend does not "
                                              r"fill; it fills \['acos', .*'exp', .*'fabs', .*'max', 'min', .*'sqrt'"):
        nc.codegen.cuda(q)
    # a structure no printer has
    nc.declare("scan", lambda xs, core: [np.cumsum(xs[0], axis=-1)], forms={"c": nc.Structured("prefix_sum")})
    r = nc.plan(nc.kernel(nc.apply("scan", "n -> n", core="n")), {"n": 4})
    with pytest.raises(nc.MissingPartError, match=r"kind 'scan': its form Structured\('prefix_sum'\) names a "
                                                  r"structure the c printer does not print; it prints \[.*'reduce'"):
        nc.codegen.c(r, blas=False)
    # a Triton form only: C and CUDA refuse, naming the keyword (CUDA's falls back on C's)
    nc.declare("only_triton", lambda xs, core: [xs[0]], forms={"triton": "{0}"})
    s = nc.plan(nc.kernel(nc.apply("only_triton", "n -> n")), {"n": 4})
    with pytest.raises(nc.MissingPartError, match=r"kind 'only_triton' has no CUDA form: declare it with "
                                                  r"forms=\{'cuda': …\} \(or a C form\)"):
        nc.codegen.cuda(s)


def test_malformed_forms_are_refused_at_the_declaration(scratch_kinds):
    for forms, message in ((lambda: {"opencl": "{0}"}, r"forms are given per backend \('c', 'cuda', 'triton'\), got "
                                                        r"'opencl'"),
                           (lambda: {"c": 3}, r"a printed form is a Template \(or its text\) or a Structured form, "
                                              r"got int"),
                           (lambda: {"c": "{0"}, r"the printed form '\{0' is not a template"),
                           (lambda: {"c": nc.Template("{c} * {0}", {"c": "two"})},
                            r"the default of parameter 'c' must be a number, got 'two'"),
                           (lambda: {"c": nc.Structured("elementwise")}, r"a structure is named by a lower-case")):
        with pytest.raises(nc.SignatureError, match=message):
            nc.declare("bad", lambda xs, core: [xs[0]], forms=forms())
    with pytest.raises(nc.SignatureError, match=r"forms map a backend of \('c', 'cuda', 'triton'\) to a Fold"):
        nc.Accumulator("bad", np.zeros, np.add, forms={"c": "{0} + {1}"})
