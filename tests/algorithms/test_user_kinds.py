"""A user's kinds get from their one declaration what the built-in kinds get from theirs: a VJP (``nc.grad``), an
interval image (a mask built with them from positions lets a stream skip tiles) and a constant rule (what makes a
masked trip neutral).  Four kinds the library does not have, each declared once below with ``nc.declare``:

* ``user_softplus``: ``log(1 + eˣ)``, increasing;
* ``user_leaky_relu``: ``max(x, αx)`` with a parameter ``alpha`` (0 ≤ α ≤ 1), increasing;
* ``user_clamp``: ``min(max(x, lo), hi)`` with parameters ``lo`` and ``hi``, increasing;
* ``user_band``: the mask ``|a − b| ≤ w`` of two positions, with a parameter ``w`` (a helper like ``le``);
* ``user_ramp``: ``x[i] + i``, which reads the absolute index ``i`` (``locates`` names its axis).

Each is checked by a second route: numpy from the mathematics, central finite differences and torch.autograd
for the VJPs, every tile of a small grid for the intervals (an increasing map's image is exact, so the truth on a
tile is what the tile holds), and for the skips the transfers counted by the runner, equal to ``nc.cost`` and to
a count made here from the mask's values.  A kind declared without a part is refused by name where that part is
needed (a VJP) and skips nothing where it is optional (an interval image, a constant rule).
"""
from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest
import sympy

import napkin_cat as nc
from napkin_cat.algorithms.intervals import evaluate as intervals
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.syntax import interval as iv
from napkin_cat.syntax.vjp import no_cotangent, pointwise
from napkin_cat.syntax.wiring import trace_values

ALPHA, LO, HI, W = 0.1, 2, 5, 1


def _items(name, arity):
    def check(core):
        if len(core.inputs) != arity or any(a != () for a in core.inputs + core.outputs):
            raise nc.SignatureError(f"{name}: an elementwise map of {arity} item(s); weave every axis")
    return check


def _softplus_end(x):
    return sympy.log(1 + sympy.exp(x)) if isinstance(x, sympy.Basic) else np.logaddexp(0.0, x)


def _leaky_prime(ctx, box, xi, yo):
    """α + (1 − α)·H(x)."""
    alpha = box.data.param("alpha")
    return ctx.const("shift", ctx.const("scale", ctx.ew("step", ctx.x(xi)), 1 - alpha), alpha)


def _clamp_prime(ctx, box, xi, yo):
    """H(x − lo)·H(hi − x)."""
    x = ctx.x(xi)
    lo, hi = box.data.param("lo"), box.data.param("hi")
    return ctx.ew("mul", ctx.ew("step", ctx.const("shift", x, -lo)), ctx.ew("step", ctx.const("shift", ctx.ew("neg", x),
                                                                                                hi)))


def _ramp_impl(xs, core):
    """x[i] + i, ``i`` counted on the whole axis: the tile the box runs in starts at ``core.offset``."""
    axis = core.weaves[-1]
    start, n = core.offset(axis.name), int(core.value(axis.size))
    return [xs[0] + np.arange(start, start + n, dtype=np.float64)]


def _band_interval(ins, box, tile_of):
    return iv.less_equal(iv.absolute(iv.sub(*ins)), iv.point(box.data.param("w")))


DECLARATIONS = {
    "user_softplus": dict(
        impl=lambda xs, core: [np.logaddexp(0.0, xs[0])], flops=lambda core: {"special": 2, "general": 1},
        check=_items("user_softplus", 1),
        vjp=pointwise(lambda ctx, box, xi, yo: ctx.ew("sigmoid", ctx.x(xi))),
        interval=iv.increasing(_softplus_end), constant=lambda box, c: 0.0 if c[0] == -np.inf else None),
    "user_leaky_relu": dict(
        impl=lambda xs, core: [np.where(xs[0] > 0, xs[0], core.value(core.params["alpha"]) * xs[0])],
        flops=lambda core: {"general": 2}, check=_items("user_leaky_relu", 1), vjp=pointwise(_leaky_prime),
        interval=iv.increasing(lambda x, alpha: iv.hi_of(x, iv.times(x, alpha)))),
    "user_clamp": dict(
        impl=lambda xs, core: [np.clip(xs[0], core.params["lo"], core.params["hi"])],
        flops=lambda core: {"general": 2}, check=_items("user_clamp", 1), vjp=pointwise(_clamp_prime),
        interval=iv.increasing(lambda x, lo, hi: iv.lo_of(iv.hi_of(x, lo), hi))),
    "user_band": dict(
        impl=lambda xs, core: [np.abs(xs[0] - xs[1]) <= core.params["w"]], flops=lambda core: {"general": 3},
        check=_items("user_band", 2), vjp=no_cotangent, interval=_band_interval),
    "user_ramp": dict(impl=_ramp_impl, flops=lambda core: {"general": 1}, check=_items("user_ramp", 1),
                      locates=lambda box: box.cod.inside[0].axes[0].name),
}


@pytest.fixture(scope="module", autouse=True)
def kinds():
    """Each kind declared once, with every part next to it; removed after this module."""
    made = [nc.declare(name, **parts) for name, parts in DECLARATIONS.items()]
    yield made
    for k in made:
        del nc.engine.KINDS[k.name]


def softplus(sig, **kw):
    return nc.apply("user_softplus", sig, **kw)


def leaky(sig, **kw):
    return nc.apply("user_leaky_relu", sig, params={"alpha": ALPHA}, **kw)


def clamp(sig, **kw):
    return nc.apply("user_clamp", sig, params={"lo": LO, "hi": HI}, **kw)


# ---------------------------------------------------------------------------------------------- numpy and VJPs
MATHS = {"user_softplus": (softplus, lambda x: np.log1p(np.exp(x))),
         "user_leaky_relu": (leaky, lambda x: np.maximum(x, ALPHA * x)),
         "user_clamp": (clamp, lambda x: np.minimum(np.maximum(x, LO), HI))}


def _away_from_kinks(rng, shape):
    """Values at least 0.05 from the kinks (0 for leaky ReLU, lo and hi for clamp), where f is smooth."""
    x = rng.uniform(-2, 7, shape)
    for k in (0, LO, HI):
        x = np.where(np.abs(x - k) < 0.05, x + 0.1, x)
    return x


@pytest.mark.parametrize("name", sorted(MATHS))
def test_a_users_map_evaluates_as_its_mathematics_and_its_vjp_agrees_with_finite_differences(name):
    make, maths = MATHS[name]
    f = make("n m", n=3, m=4)
    rng = np.random.default_rng(5)
    x, ybar = _away_from_kinks(rng, (3, 4)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(nc.evaluate(f, x), maths(x), rtol=1e-12)
    g = nc.evaluate(nc.grad(f), x, ybar)
    eps, v = 1e-6, rng.standard_normal((3, 4))
    fd = (np.sum(ybar * maths(x + eps * v)) - np.sum(ybar * maths(x - eps * v))) / (2 * eps)
    assert float(np.sum(g * v)) == pytest.approx(fd, rel=1e-6, abs=1e-8)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch.autograd needs torch")
def test_the_vjps_of_a_users_maps_agree_with_torch_autograd():
    """``y = clamp(leaky(softplus(x) − 2))`` (all three chained: the gradient diagram composes their VJPs)."""
    import torch
    b = nc.Builder(nc.types("n m", n=3, m=4))
    (x,) = b.inputs
    s = b(nc.elementwise("shift", "n m", const=-2, n=3, m=4), b(softplus("n m", n=3, m=4), x))
    f = b.build(b(clamp("n m", n=3, m=4), b(leaky("n m", n=3, m=4), s)))
    rng = np.random.default_rng(11)
    xs, ybar = rng.uniform(-3, 8, (3, 4)), rng.standard_normal((3, 4))
    t = torch.tensor(xs, requires_grad=True)
    y = torch.clamp(torch.nn.functional.leaky_relu(torch.nn.functional.softplus(t) - 2, ALPHA), LO, HI)
    y.backward(torch.tensor(ybar))
    np.testing.assert_allclose(nc.evaluate(f, xs), y.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(nc.evaluate(nc.grad(f), xs, ybar), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_a_band_mask_passes_the_cotangent_where_it_holds_and_has_none_itself():
    """``y_q = Σ_x where(|q − x| ≤ w, v, 0)``: ``v̄[q, x] = ȳ[q]`` on the band, 0 off it (numpy's band)."""
    q, x = 5, 6
    b = nc.Builder(nc.types("q x"))
    (v,) = b.inputs
    m = b(_band())
    f = b.build(b(nc.reduce("sum", "q x -> q"), b(nc.where("q x, q x -> q x", other=0.0), m, v)))
    band = np.abs(np.subtract.outer(np.arange(q), np.arange(x))) <= W
    rng = np.random.default_rng(2)
    vs, ybar = rng.standard_normal((q, x)), rng.standard_normal(q)
    np.testing.assert_allclose(nc.evaluate(f, vs), np.where(band, vs, 0).sum(1), rtol=1e-12)
    np.testing.assert_allclose(nc.evaluate(nc.grad(f), vs, ybar), np.where(band, ybar[:, None], 0.0), rtol=1e-12)


# ---------------------------------------------------------------------------------------------- masks and intervals
def _positions(b):
    return b(nc.position("q")), b(nc.position("x"))


def _band():
    """``|q − x| ≤ w``, the user's helper on two positions."""
    b = nc.Builder(nc.Ty())
    qi, xi = _positions(b)
    return b.build(b(nc.apply("user_band", "q, x -> q x", params={"w": W}, dtype="int32", out_dtype="bool"), qi, xi))


def _before_clamped():
    """``x ≤ clamp(q, lo, hi)``: the user's map on a position (int32)."""
    b = nc.Builder(nc.Ty())
    qi, xi = _positions(b)
    return b.build(b(nc.compare("le", "x, q -> q x"), xi, b(clamp("q", dtype="int32"), qi)))


def _monotone_before(make):
    """``f(x) ≤ f(q)`` for an increasing ``f`` of the positions cast to fp32 (the causal mask, through ``f``)."""
    def mask():
        b = nc.Builder(nc.Ty())
        qi, xi = _positions(b)
        fq = b(make("q"), b(nc.cast("q", to="fp32", dtype="int32"), qi))
        fx = b(make("x"), b(nc.cast("x", to="fp32", dtype="int32"), xi))
        return b.build(b(nc.compare("le", "x, q -> q x", dtype="fp32"), fx, fq))
    return mask


MASKS = {
    "band": (_band, lambda i, j: abs(i - j) <= W),
    "clamp": (_before_clamped, lambda i, j: j <= min(max(i, LO), HI)),
    "leaky_relu": (_monotone_before(leaky), lambda i, j: j <= i),
    "softplus": (_monotone_before(softplus), lambda i, j: j <= i),
}


def _truth_table(name, q, x):
    return np.array([[MASKS[name][1](i, j) for j in range(x)] for i in range(q)])


@pytest.mark.parametrize("x, s_x", [(8, 2), (9, 4)])
def test_a_users_kind_that_reads_absolute_indices_runs_at_each_tiles_start_in_a_plan(x, s_x):
    """Σᵢ (vᵢ + i) streamed over slices of ``x``: the plan's runner gives the ramp each slice's
    start (``locates``), so it computes the whole axis's sum (numpy, from the formula), ragged last slice too."""
    d = nc.apply("user_ramp", "x -> x", x=x) >> nc.reduce("sum", "x -> ", x=x)
    v = np.random.default_rng(0).normal(size=x)
    expected = (v + np.arange(x)).sum()
    assert nc.evaluate(d, v) == pytest.approx(expected)
    p = nc.plan(nc.stream(d, "x", "s_x"), {"s_x": s_x})
    out, _ = p.run(v)
    assert out == pytest.approx(expected, rel=1e-12)


def test_a_users_prepared_implementation_runs_in_the_plan_and_impl_in_evaluate(scratch_kinds):
    """``prepared`` is what the plan's runner calls on each tile (built once per statement); ``nc.evaluate`` keeps
    ``impl``.  A kind whose prepared form differs from impl (here on purpose, to tell the two apart) shows which ran."""
    built = []

    def prepared(box):
        built.append(box.name)
        return lambda xs: [3 * xs[0]]
    nc.declare("user_thrice", lambda xs, core: [2 * xs[0]], flops=lambda core: {"general": 1},
               check=_items("user_thrice", 1), prepared=prepared)
    d = nc.apply("user_thrice", "x -> x", x=6)
    v = np.arange(6.0)
    np.testing.assert_array_equal(nc.evaluate(d, v), 2 * v)
    np.testing.assert_array_equal(nc.plan(nc.stream(d >> nc.reduce("sum", "x -> ", x=6), "x", "s_x"),
                                          {"s_x": 2})(v), 3 * v.sum())
    assert built == ["user_thrice"]                        # built once, run on the three slices


@pytest.mark.parametrize("name", sorted(MASKS))
def test_a_mask_built_with_a_users_kind_is_exact_on_every_tile(name):
    """On every tile of a 7 × 7 grid, always ⟺ every element is true and possibly ⟺ some element is (the images
    of increasing maps and of |a − b| are exact on integer positions); the mask itself is the mathematics'."""
    q = x = 7
    mask = nc.substitute(MASKS[name][0](), q=q, x=x)
    whole = _truth_table(name, q, x)
    np.testing.assert_array_equal(nc.evaluate(mask).astype(bool), whole)
    ops, _, (out,) = trace_values(mask)
    spans = [(s, n) for s in range(7) for n in range(1, 8 - s)]
    for (q0, qn), (x0, xn) in itertools.product(spans[::3], spans[::2]):
        truth = intervals(ops, lambda a, n: (q0, qn) if a == "q" else (x0, xn))[out]
        tile = whole[q0:q0 + qn, x0:x0 + xn]
        assert (bool(truth.always), bool(truth.possibly)) == (tile.all(), tile.any()), (name, q0, qn, x0, xn)


def _flash(att):
    return nc.group(nc.stream(att, "x", "s_x"), "q", "g_q")


@pytest.mark.parametrize("name, sizes", [("band", dict(q=9, x=10, d=2, g_q=3, s_x=2)),
                                         ("clamp", dict(q=8, x=8, d=1, g_q=2, s_x=2)),
                                         ("leaky_relu", dict(q=7, x=9, d=2, g_q=2, s_x=3)),
                                         ("softplus", dict(q=8, x=8, d=1, g_q=2, s_x=2))])
def test_a_mask_built_with_a_users_kind_lets_a_stream_skip_its_tiles(name, sizes):
    """Flash attention with the mask: the run that skips computes masked attention; the numpy run and the plan's
    runner move what ``nc.cost`` counts, which is Q and O once plus K and V for each (q-group, x-slice) tile
    where the mask (numpy, from its definition) is true somewhere."""
    att = nc.library.masked_attention(MASKS[name][0]())
    alg = _flash(att)
    assert schedule_of(nc.stream(att, "x", "s_x").boxes[0].arg.boxes[0]).skip is not None
    q, x, d, g, s = (sizes[k] for k in ("q", "x", "d", "g_q", "s_x"))
    rng = np.random.default_rng(4)
    Q, K, V = rng.normal(size=(q, d)), rng.normal(size=(x, d)), rng.normal(size=(x, d))
    counted = {}
    with np.errstate(invalid="ignore"):
        got = nc.evaluate(alg, Q, K, V, sizes={"g_q": g, "s_x": s}, counters=counted)
        want = nc.evaluate(att, Q, K, V)
        planned, run = nc.plan(alg, sizes).run(Q, K, V)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(planned, want, rtol=1e-9, atol=1e-12, equal_nan=True)
    whole = _truth_table(name, q, x)
    tiles = [(i, j) for i in range(0, q, g) for j in range(0, x, s) if whole[i:i + g, j:j + s].any()]
    moved = 2 * q * d + sum(2 * min(s, x - j) * d for _, j in tiles)
    assert counted == run.transfers == nc.cost(alg, sizes=sizes).H == {1: moved}
    assert len(tiles) < -(-q // g) * -(-x // s)             # some tile is skipped


def test_a_mask_cast_to_numbers_and_multiplied_in_skips_too():
    """``Σ_x v · cast(band)``: a mask applied by a product, not a ``where``, makes a trip neutral (0 · v = 0)."""
    b = nc.Builder(nc.types("q x"))
    (v,) = b.inputs
    m = b(nc.cast("q x", to="fp32", dtype="bool"), b(_band()))
    d = b.build(b(nc.reduce("sum", "q x -> q"), b(nc.elementwise("mul", "q x, q x -> q x"), v, m)))
    alg = _flash(d)
    skip = schedule_of(nc.stream(d, "x", "s_x").boxes[0].arg.boxes[0]).skip
    assert skip is not None and skip.axes == {"q", "x"}
    rng = np.random.default_rng(8)
    vs = rng.normal(size=(8, 8))
    counted, every = {}, {}
    got = nc.evaluate(alg, vs, sizes={"g_q": 2, "s_x": 2}, counters=counted)
    nc.evaluate(alg, vs, sizes={"g_q": 2, "s_x": 2}, counters=every, skip=False)
    band = _truth_table("band", 8, 8)
    np.testing.assert_allclose(got, np.where(band, vs, 0).sum(1), rtol=1e-12)
    assert counted == nc.cost(alg, sizes={"q": 8, "x": 8, "g_q": 2, "s_x": 2}).H
    assert counted[1] < every[1]


# ---------------------------------------------------------------------------------------------- missing parts
def test_a_kind_without_a_part_is_refused_where_it_is_needed_and_skips_nothing_where_it_is_optional(scratch_kinds):
    for name, like in {"user_bare_clamp": "user_clamp", "user_bare_softplus": "user_softplus"}.items():
        parts = DECLARATIONS[like]           # the same numpy meaning, FLOPs and check; no VJP, image or constant
        nc.declare(name, parts["impl"], flops=parts["flops"], check=parts["check"])
    k = nc.engine.KINDS["user_bare_clamp"]
    for part in ("vjp", "interval", "constant"):
        with pytest.raises(nc.MissingPartError, match=f"kind 'user_bare_clamp' has no .*: declare it with {part}="):
            k.part(part)
    f = nc.apply("user_bare_clamp", "n", params={"lo": LO, "hi": HI}, n=3)
    with pytest.raises(nc.NoVJPError, match="kind 'user_bare_clamp' has no vector-Jacobian product: declare it "
                                            "with vjp="):
        nc.grad(f)
    # without an interval image, the mask x ≤ clamp(q) is unknown on a tile: legal, it only skips nothing
    b = nc.Builder(nc.Ty())
    qi, xi = _positions(b)
    qc = b(nc.apply("user_bare_clamp", "q", params={"lo": LO, "hi": HI}, dtype="int32"), qi)
    att = nc.library.masked_attention(b.build(b(nc.compare("le", "x, q -> q x"), xi, qc)))
    assert _skip(att) is None
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(6, 2)), rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    np.testing.assert_allclose(nc.evaluate(_flash(att), Q, K, V, sizes={"g_q": 2, "s_x": 2}),
                               nc.evaluate(att, Q, K, V), rtol=1e-12)
    # without a constant rule, softplus(−∞) is not known to be 0: the masked sum's trips are not neutral
    assert _skip(_masked_softplus_sum("user_softplus")) is not None
    assert _skip(_masked_softplus_sum("user_bare_softplus")) is None


def _skip(d):
    return schedule_of(nc.stream(d, "x", "s_x").boxes[0].arg.boxes[0]).skip


def _masked_softplus_sum(kind):
    """``Σ_x softplus(where(band, v, −∞))``: each masked score's softplus is 0, if the kind says so."""
    b = nc.Builder(nc.types("q x"))
    (v,) = b.inputs
    masked = b(nc.where("q x, q x -> q x"), b(_band()), v)
    return b.build(b(nc.reduce("sum", "q x -> q"), b(nc.apply(kind, "q x"), masked)))
