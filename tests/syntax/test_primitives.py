"""Primitive kinds: numpy semantics, FLOPs per pipeline, SoftMax forms, casts, user kinds."""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.syntax.primitive import KINDS, PIPELINES, kind_of
from napkin_cat.syntax.weave import core_of

# --------------------------------------------------------------------------- numpy semantics
UNARY_REFERENCE = {
    "id": lambda x: x,
    "exp": np.exp,
    "neg": lambda x: -x,
    "relu": lambda x: np.where(x > 0, x, 0.0),
    "step": lambda x: np.where(x > 0, 1.0, 0.0),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x * (1 / (1 + np.exp(-x))),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": lambda x: (np.exp(2 * x) - 1) / (np.exp(2 * x) + 1),
    "sqrt": lambda x: x ** 0.5,
    "rsqrt": lambda x: x ** -0.5,
    "recip": lambda x: x ** -1.0,
    "square": lambda x: x ** 2,
    "log": lambda x: np.log(x),
    "abs": lambda x: np.where(x < 0, -x, x),
}
BINARY_REFERENCE = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": lambda a, b: np.where(a >= b, a, b),
    "min": lambda a, b: np.where(a <= b, a, b),
}
POSITIVE = {"sqrt", "rsqrt", "recip", "log"}


@pytest.mark.parametrize("name", sorted(UNARY_REFERENCE))
def test_unary_elementwise_semantics(name, rng):
    X = rng.normal(size=(3, 4))
    if name in POSITIVE:
        X = np.abs(X) + 0.1
    got = nc.evaluate(nc.elementwise(name, "q x"), X)
    np.testing.assert_allclose(got, UNARY_REFERENCE[name](X), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name, const, reference", [
    ("scale", 0.25, lambda x: x / 4), ("shift", -1.5, lambda x: x - 1.5)])
def test_elementwise_with_constant(name, const, reference, rng):
    X = rng.normal(size=(3, 4))
    np.testing.assert_allclose(nc.evaluate(nc.elementwise(name, "q x", const=const), X), reference(X))


def test_elementwise_constant_may_be_symbolic(rng):
    d = nc.elementwise("scale", "q x", const=1 / sympy.sqrt(nc.symbol("x")))
    X = rng.normal(size=(3, 4))
    np.testing.assert_allclose(nc.evaluate(d, X), X / 2)


@pytest.mark.parametrize("name", sorted(BINARY_REFERENCE))
def test_binary_elementwise_semantics(name, rng):
    A, B = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    if name == "div":
        B = np.sign(B) * (np.abs(B) + 0.1)
    got = nc.evaluate(nc.elementwise(name, "q x"), A, B)
    np.testing.assert_allclose(got, BINARY_REFERENCE[name](A, B), rtol=1e-12)


def test_fused_multiply_add(rng):
    """fma(a, b, c) = a·b + c with broadcasting by weaves: one multiply and one add (2 general FLOPs) per item."""
    A, B, C = rng.normal(size=(3, 4)), rng.normal(size=3), rng.normal(size=(3, 4))
    f = nc.elementwise("fma", "q d, q, q d -> q d")
    np.testing.assert_allclose(nc.evaluate(f, A, B, C), A * B[:, None] + C, rtol=1e-12)
    assert nc.cost(f).flops == {"general": 2 * nc.symbol("q") * nc.symbol("d")}
    with pytest.raises(nc.SignatureError, match="'fma' takes 3 input"):
        nc.elementwise("fma", "q d, q d -> q d")


@pytest.mark.parametrize("name, reference", [
    ("sum", lambda x: x.sum(-1)), ("max", lambda x: x.max(-1)),
    ("min", lambda x: x.min(-1)), ("mean", lambda x: x.sum(-1) / x.shape[-1]),
    ("count", lambda x: np.full(x.shape[:-1], float(x.shape[-1])))])
def test_reduction_semantics(name, reference, rng):
    X = rng.normal(size=(3, 5))
    np.testing.assert_allclose(nc.evaluate(nc.reduce(name, "q x -> q"), X), reference(X), rtol=1e-12)


def test_contraction_semantics(rng):
    A, B = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    want = np.array([[sum(A[i, k] * B[j, k] for k in range(4)) for j in range(5)] for i in range(3)])
    np.testing.assert_allclose(nc.evaluate(nc.einsum("q d, x d -> q x"), A, B), want, rtol=1e-12)


def test_contraction_item_impl_without_labels(rng):
    """The item-level implementation (used when a kind is driven by weaves) agrees with einsum."""
    from napkin_cat.syntax.primitive import Core
    d = nc.Axis("d", 4)
    A, B = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    (y,) = kind_of("contract").impl([A, B], Core(((d,), (d,)), ((),)))
    np.testing.assert_allclose(y, (A * B).sum(-1))


def test_softmax_semantics(helpers, rng):
    X = rng.normal(size=(3, 5))
    got = nc.evaluate(nc.softmax("q x", over="x", beta=0.3), X)
    want = np.exp(0.3 * X) / np.exp(0.3 * X).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got.sum(axis=1), 1.0)


def test_softmax_with_minus_infinity_rows(helpers):
    """A row of −∞ (fully masked) stays finite where it can; a partly masked row ignores −∞."""
    X = np.array([[0.0, -np.inf, 1.0]])
    got = nc.evaluate(nc.softmax("q x", over="x"), X)
    np.testing.assert_allclose(got, [[1 / (1 + math.e), 0.0, math.e / (1 + math.e)]])


def test_split_join_load_save_rename_are_reindexings(rng):
    X = rng.normal(size=(5, 2))
    parts = nc.evaluate(nc.split("q d", along="q", parts=(1, 4)), X)
    np.testing.assert_array_equal(parts[0], X[:1])
    np.testing.assert_array_equal(parts[1], X[1:])
    np.testing.assert_array_equal(nc.evaluate(nc.join("q d", along="q", parts=(1, 4)), *parts), X)
    arr = nc.types("q d").inside[0]
    np.testing.assert_array_equal(nc.evaluate(nc.transfer("load", arr), X), X)
    np.testing.assert_array_equal(nc.evaluate(nc.transfer("save", arr.replace(level=1)), X), X)
    np.testing.assert_array_equal(nc.evaluate(nc.renaming("q d -> k d"), X), X)


TESTED_KINDS = (set(UNARY_REFERENCE) | set(BINARY_REFERENCE) | {"scale", "shift"}
                | {f"reduce_{n}" for n in ("sum", "max", "min", "mean", "count")}
                | {"contract", "softmax", "softmax_aux", "softmax_unscaled", "split", "join", "load", "save",
                   "rename", "cast", "fma"})


#: kinds whose float64 reference and VJP check live in tests/syntax/test_maps.py
TESTED_IN_MAPS = {"sin", "cos", "erf", "gelu_erf", "floordiv", "mod", "floordiv_by", "mod_by"}


def test_every_built_in_kind_is_tested_here():
    declaring = ("napkin_cat.syntax.ops", "napkin_cat.syntax.maps", "napkin_cat.syntax.division")
    built_in = {name for name, k in KINDS.items() if getattr(k.impl, "__module__", "") in declaring}
    assert {"exp", "add", "sin", "mod"} <= built_in                     # the modules that declare them are read
    built_in -= TESTED_IN_MAPS
    assert built_in - TESTED_KINDS == set(), "add the new built-in kinds to test_primitives.py"


# --------------------------------------------------------------------------- FLOPs per pipeline
q, x, d, h = (nc.symbol(n) for n in "qxdh")


def flops(diagram, helpers):
    return {k: sympy.expand(v) for k, v in helpers.diagram_flops(diagram).items()}


@pytest.mark.parametrize("build, expected", [
    (lambda: nc.einsum("q d, x d -> q x"), {"tensor": 2 * q * x * d}),
    (lambda: nc.weave(nc.einsum("q d, x d -> q x"), "h"), {"tensor": 2 * h * q * x * d}),
    (lambda: nc.einsum("q d, x d -> q x", q=128, x=64, d=32), {"tensor": 2 * 128 * 64 * 32}),
    (lambda: nc.einsum("d, d -> "), {"tensor": 2 * d}),
    (lambda: nc.einsum("q x -> q"), {"general": q * x}),
    (lambda: nc.softmax("q x", over="x"), {"special": q * x, "general": 5 * q * x}),
    (lambda: nc.elementwise("exp", "q x"), {"special": q * x}),
    (lambda: nc.elementwise("add", "q x, x -> q x"), {"general": q * x}),
    (lambda: nc.elementwise("relu", "q x"), {"general": q * x}),
    (lambda: nc.elementwise("id", "q x"), {}),
    (lambda: nc.reduce("max", "q x -> q"), {"general": q * x}),
    (lambda: nc.cast("q x", to="fp8"), {"general": q * x}),
    (lambda: nc.split("q d", along="q", parts=(1, 2)), {}),
    (lambda: nc.transfer("load", nc.types("q d").inside[0]), {}),
    (lambda: nc.library.attention(), {"tensor": 4 * q * x * d, "special": q * x, "general": 5 * q * x}),
    (lambda: nc.library.multi_head_attention(),
     {"tensor": 4 * h * q * x * d, "special": h * q * x, "general": 5 * h * q * x}),
])
def test_flops_are_item_cost_times_weave_sizes(build, expected, helpers):
    got = flops(build(), helpers)
    assert {k: v for k, v in got.items() if v != 0} == {k: sympy.expand(v) for k, v in expected.items()}
    assert set(got) <= set(PIPELINES)


def test_contraction_flops_per_item(helpers):
    box = nc.einsum("q d, x d -> q x").boxes[0]
    core = core_of(box.data, box.dom, box.cod)
    assert core.inputs == ((nc.Axis("d"),), (nc.Axis("d"),)) and core.outputs == ((),)
    assert kind_of("contract").item_flops(core) == {"tensor": 2 * d}
    assert helpers.weave_sizes(box) == q * x


def test_flops_pipelines_are_validated(scratch_kinds):
    nc.declare("badflops", lambda xs, core: [xs[0]], flops=lambda core: {"vector": 1})
    box = nc.apply("badflops", "q").boxes[0]
    with pytest.raises(nc.SignatureError, match=r"'badflops' .* unknown pipeline 'vector'.*tensor"):
        kind_of("badflops").item_flops(core_of(box.data, box.dom, box.cod))


# --------------------------------------------------------------------------- SoftMax forms (Table 4, errata D-08)
def aux_box(beta):
    return nc.apply("softmax_aux", "q x, q, q -> q x, q, q, q", core="x", params={"beta": beta})


def unscaled_box(beta):
    return nc.apply("softmax_unscaled", "q x, q, q -> q x, q, q, q", core="x", params={"beta": beta})


def chunks_of(X, sizes):
    return np.split(X, np.cumsum(sizes)[:-1], axis=1)


CHUNKINGS = [(7,), (3, 4), (1, 1, 5), (2, 2, 2, 1), (1,) * 7]


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_auxiliary_softmax_folded_over_chunks_is_softmax(chunks, scale, helpers, rng):
    beta = 0.7
    X = rng.normal(size=(3, 7)) * scale
    aux = aux_box(beta)
    mu, z = np.full(3, -np.inf), np.zeros(3)          # Initialize() = (−∞, 0, 0)
    ys = []
    for Xk in chunks_of(X, chunks):
        y, mu, dz, z_new = nc.evaluate(aux, Xk, mu, z)
        ys = [yp * (dz / z_new)[:, None] for yp in ys]  # y' ← y'·δz'/z on prior values
        ys.append(y)
        z = z_new
    got = np.concatenate(ys, axis=1)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, helpers.softmax(beta * X), rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(mu, (beta * X).max(axis=1))


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_unscaled_softmax_folded_over_chunks_is_softmax(chunks, scale, helpers, rng):
    beta = 0.7
    X = rng.normal(size=(3, 7)) * scale
    uns = unscaled_box(beta)
    mu, z = np.full(3, -np.inf), np.zeros(3)
    ss = []
    for Xk in chunks_of(X, chunks):
        s, mu, delta, z = nc.evaluate(uns, Xk, mu, z)
        ss = [sp * delta[:, None] for sp in ss]        # y' ← y'·δ on prior values
        ss.append(s)
    got = np.concatenate(ss, axis=1) / z[:, None]     # tail: y ← y/z
    np.testing.assert_allclose(got, helpers.softmax(beta * X), rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(z, np.exp(beta * X - (beta * X).max(axis=1, keepdims=True)).sum(axis=1))


@pytest.mark.parametrize("scale", [1.0, 1e3])
def test_unscaled_softmax_streams_a_contraction(scale, helpers, rng):
    """Online softmax: o ← δ·o + s·V_k over key chunks, o/z at the tail, is SoftMax(βQKᵀ)V."""
    beta = 0.5
    S, V = rng.normal(size=(4, 9)) * scale, rng.normal(size=(9, 3))
    uns = unscaled_box(beta)
    mu, z, o = np.full(4, -np.inf), np.zeros(4), np.zeros((4, 3))
    start = 0
    for size in (2, 4, 3):
        s, mu, delta, z = nc.evaluate(uns, S[:, start:start + size], mu, z)
        o = delta[:, None] * o + s @ V[start:start + size]
        start += size
    np.testing.assert_allclose(o / z[:, None], helpers.softmax(beta * S) @ V, rtol=1e-10)


def test_table_4_literal_update_is_wrong(helpers, rng):
    """Errata D-08: the printed 'y′ *= y′ δz′/z' (squaring y′) does not give SoftMax; the intended update does."""
    X = rng.normal(size=(2, 6))
    aux = aux_box(1.0)
    mu, z = np.full(2, -np.inf), np.zeros(2)
    literal, intended = [], []
    for Xk in chunks_of(X, (3, 3)):
        y, mu, dz, z_new = nc.evaluate(aux, Xk, mu, z)
        literal = [yp * (yp * (dz / z_new)[:, None]) for yp in literal] + [y]
        intended = [yp * (dz / z_new)[:, None] for yp in intended] + [y]
        z = z_new
    want = helpers.softmax(X)
    np.testing.assert_allclose(np.concatenate(intended, axis=1), want, rtol=1e-12)
    assert not np.allclose(np.concatenate(literal, axis=1), want)


def test_softmax_forms_flops_add_the_rescale_factor(helpers):
    """Table 4's online forms compute δ = exp(μ′ − μ) once per row on top of SoftMax's exps
    (paper Table 3: s_x + s_x/u_x exps), and SoftMax₁ leaves the division by z to the tail."""
    q, x = nc.symbol("q"), nc.symbol("x")
    base = flops(nc.softmax("q x", over="x"), helpers)
    assert base == {"special": q * x, "general": 5 * q * x}
    assert flops(aux_box(1), helpers) == {"special": q * x + q, "general": 5 * q * x + 2 * q}
    assert flops(unscaled_box(1), helpers) == {"special": q * x + q, "general": 4 * q * x + 2 * q}


# --------------------------------------------------------------------------- casts
def bf16_reference(a32):
    """Round float32 to bfloat16 (nearest, ties to even) by bit manipulation."""
    bits = np.asarray(a32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def fp8_e4m3_table():
    values = []
    for e in range(16):
        for m in range(8):
            if e == 15 and m == 7:
                continue  # NaN in e4m3fn
            values.append(m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(values)  # increasing; index parity = mantissa parity


def fp8_reference(a):
    table = fp8_e4m3_table()
    out = []
    for v in np.asarray(a, dtype=np.float64).ravel():
        mag = min(abs(v), 448.0)
        k = int(np.searchsorted(table, mag))
        if k == len(table):
            best = len(table) - 1
        elif k == 0 or table[k] == mag:
            best = k
        else:
            lo, hi = table[k - 1] - mag, table[k] - mag
            best = k - 1 if -lo < hi else k if hi < -lo else (k - 1 if (k - 1) % 2 == 0 else k)
        out.append(np.copysign(table[best], v))
    return np.array(out).reshape(np.shape(a))


def test_cast_fp16_rounds_like_numpy_half(rng):
    X = (rng.normal(size=(4, 5)) * 100).astype(np.float32)
    got = nc.evaluate(nc.cast("q x", to="fp16"), X)
    np.testing.assert_array_equal(got.astype(np.float32), X.astype(np.float16).astype(np.float32))
    assert not np.array_equal(got.astype(np.float32), X)


def test_cast_bf16_rounds_to_nearest_even(rng):
    X = (rng.normal(size=200) * 10.0 ** rng.integers(-20, 20, size=200)).astype(np.float32)
    got = nc.evaluate(nc.cast("n", to="bf16"), X)
    np.testing.assert_array_equal(got, bf16_reference(X))
    # 1 + 2⁻⁸ is a tie between 1 and 1 + 2⁻⁷: even mantissa wins
    ties = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8], dtype=np.float32)
    np.testing.assert_array_equal(nc.evaluate(nc.cast("n", to="bf16"), ties), [1.0, 1 + 2 * 2.0 ** -7])


def test_cast_fp8_rounds_to_e4m3_and_saturates(rng):
    X = rng.normal(size=300) * 10.0 ** rng.uniform(-3, 3, size=300)
    got = nc.evaluate(nc.cast("n", to="fp8"), X)
    np.testing.assert_array_equal(got.astype(np.float64), fp8_reference(X))
    special = np.array([1 / 3, 17.0, 250.0, 448.0, 1000.0, -1000.0, 2.0 ** -9, 2.0 ** -11, 0.0])
    np.testing.assert_array_equal(nc.evaluate(nc.cast("n", to="fp8"), special),
                                  [0.34375, 16.0, 256.0, 448.0, 448.0, -448.0, 2.0 ** -9, 0.0, 0.0])


def test_cast_then_compute(rng):
    """A cast in a diagram really loses precision: matmul on fp16-rounded inputs."""
    A, B = rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    d = (nc.cast("a b", to="fp16") @ nc.cast("b c", to="fp16")) >> nc.einsum("a b, b c -> a c", dtype="fp16")
    got = nc.evaluate(d, A, B)
    want = A.astype(np.float16).astype(np.float64) @ B.astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-3)
    assert not np.allclose(got, A @ B, rtol=1e-7, atol=0)


# --------------------------------------------------------------------------- a user-declared primitive
def _cumsum_check(core):
    if len(core.inputs) != 1 or len(core.inputs[0]) != 1 or core.inputs != core.outputs:
        raise nc.SignatureError(f"cumsum: the item signature is Rᵃ → Rᵃ, got {core.inputs} → {core.outputs}")


def test_user_declared_primitive_end_to_end(scratch_kinds, helpers, rng):
    kind = nc.declare("cumsum", lambda xs, core: [np.cumsum(xs[0], axis=-1)],
                      flops=lambda core: {"general": core.inputs[0][0].size}, check=_cumsum_check,
                      accumulator=nc.Accumulator("sum", lambda shape: np.zeros(shape), np.add),
                      doc="Running sum along one axis.")
    assert nc.engine.KINDS["cumsum"] is kind
    c = nc.apply("cumsum", "q x -> q x", core="x")
    assert c.boxes[0].data.kind == "cumsum" and c.boxes[0].data.weave_names == ("q",)
    X = rng.normal(size=(3, 5))
    np.testing.assert_allclose(nc.evaluate(c, X), np.cumsum(X, axis=1))
    # composes, weaves and counts like a built-in
    d = nc.softmax("q x", over="x") >> c
    w = nc.weave(d, "h", position=1)
    helpers.well_typed(w)
    Y = rng.normal(size=(3, 2, 5))  # q h x
    np.testing.assert_allclose(nc.evaluate(w, Y), np.cumsum(helpers.softmax(Y), axis=-1), rtol=1e-12)
    np.testing.assert_allclose(nc.evaluate(w, Y)[..., -1], 1.0)
    assert flops(w, helpers)["general"] == sympy.expand(5 * q * h * x + q * h * x)
    # its check runs on construction
    with pytest.raises(nc.SignatureError, match=r"cumsum: the item signature is Rᵃ → Rᵃ"):
        nc.apply("cumsum", "q x -> q")


def test_a_kind_requires_its_parameters_by_name(scratch_kinds, rng):
    """``requires=`` in the record: a box built without one of them is refused naming the kind and the parameter,
    whichever constructor builds it; the built-ins' (scale's c, cast's dtype) are read from the same record."""
    nc.declare("leaky", lambda xs, core: [np.where(xs[0] > 0, xs[0], core.value(core.params["alpha"]) * xs[0])],
               flops=lambda core: {"general": 2}, requires=("alpha",))
    for params in (None, {"beta": 0.1}):
        with pytest.raises(nc.SignatureError, match=r"a box of kind 'leaky' carries the parameter\(s\) \['alpha'\], "
                                                    r"which were not given; pass params=\{'alpha': …\} \(it requires "
                                                    r"\['alpha'\]\)"):
            nc.apply("leaky", "n -> n", params=params)
    X = rng.normal(size=6)
    np.testing.assert_allclose(nc.evaluate(nc.apply("leaky", "n -> n", params={"alpha": 0.1}), X),
                               np.where(X > 0, X, 0.1 * X))
    with pytest.raises(nc.SignatureError, match=r"a box of kind 'scale' carries the parameter\(s\) \['c'\]"):
        nc.apply("scale", "n -> n")
    with pytest.raises(nc.SignatureError, match=r"a box of kind 'cast' carries the parameter\(s\) \['dtype'\]"):
        nc.apply("cast", "n -> n")
    with pytest.raises(nc.SignatureError, match=r"elementwise 'shift' needs const=<number>"):
        nc.elementwise("shift", "n")
    with pytest.raises(nc.SignatureError, match=r"elementwise 'exp' takes no const"):
        nc.elementwise("exp", "n", const=2)
    assert {k for k in KINDS if kind_of(k).requires} == {"leaky", "scale", "shift", "cast", "floordiv_by", "mod_by"}
    for bad in ("alpha", ("alpha", 3)):
        with pytest.raises(nc.SignatureError, match=r"kind 'bad': requires names its required parameters, a tuple "
                                                    r"of identifiers such as \('alpha',\)"):
            nc.declare("bad", lambda xs, core: [xs[0]], requires=bad)


def test_user_primitive_name_clash_and_replace(scratch_kinds):
    nc.declare("twice", lambda xs, core: [2 * xs[0]], flops=lambda core: {"general": 1})
    with pytest.raises(nc.SignatureError, match=r"'twice' is already declared; pass replace=True"):
        nc.declare("twice", lambda xs, core: [3 * xs[0]])
    nc.declare("twice", lambda xs, core: [3 * xs[0]], replace=True)
    np.testing.assert_array_equal(nc.evaluate(nc.apply("twice", "n"), np.ones(2)), [3.0, 3.0])


def test_a_users_map_declared_with_its_arity_is_built_by_elementwise(scratch_kinds, rng):
    """``nc.elementwise`` builds any kind whose record gives an arity (a user's two-operand map broadcasting a bias
    through its signature), checked against numpy; a kind without one is refused by name, as a wrong count is."""
    nc.declare("hypot2", lambda xs, core: [np.sqrt(xs[0] ** 2 + xs[1] ** 2)], flops=lambda core: {"general": 3},
               arity=2, shape="circle")
    f = nc.elementwise("hypot2", "q d, d -> q d")
    x, b = rng.normal(size=(3, 4)), rng.normal(size=4)
    np.testing.assert_allclose(nc.evaluate(f, x, b), np.hypot(x, b))
    assert "hypot2" in str(pytest.raises(nc.errors.UnknownPrimitiveError, nc.elementwise, "nomap", "q").value)
    nc.declare("nomap", lambda xs, core: [xs[0]])
    with pytest.raises(nc.errors.UnknownPrimitiveError, match=r"unknown elementwise map 'nomap'.*arity="):
        nc.elementwise("nomap", "q")
    with pytest.raises(nc.errors.SignatureError, match=r"'hypot2' takes 2 input\(s\)"):
        nc.elementwise("hypot2", "q, q, q -> q")
    with pytest.raises(nc.errors.SignatureError, match="arity is an elementwise map's number of operands"):
        nc.declare("bad_arity", lambda xs, core: [xs[0]], arity=0)
