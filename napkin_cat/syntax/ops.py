"""The built-in primitive kinds (paper §2, Table 4).

Each kind is item-level: its numpy implementation acts on the trailing core
axes and broadcasts over leading batch (weave) dimensions.

=================  =======================  ==================  ==================
kind               item signature           FLOPs per item      accumulator
=================  =======================  ==================  ==================
contract           Rᵏ ⊗ Rᵏ → R              tensor 2k           sum
softmax            Rˣ → Rˣ (β)              special x, gen 5x   —
softmax_aux        Rˣ⊗R⊗R → Rˣ⊗R⊗R⊗R         spec. x+1, 5x+2     —
softmax_unscaled   Rˣ⊗R⊗R → Rˣ⊗R⊗R⊗R         spec. x+1, 4x+2     —
exp, log, add, …   R^n → R                  1 (special/general) —
fma                R⊗R⊗R → R (a·b + c)      general 2           —
sum, max, min      Rᵃ → R                   a                   sum / max / min
count              Rᵃ → R (a)               0                   sum
split, join        Rᵃ ↔ Rᵃ¹ ⊗ Rᵃ²           0                   —
load, save         R@ℓ → R@ℓ±1              0                   —
cast               R:fp32 → R:fp16 …        general 1           —
=================  =======================  ==================  ==================

Each declaration carries the kind's other parts with it: its vector-Jacobian product
(:mod:`napkin_cat.syntax.vjp`), its interval image (:mod:`napkin_cat.syntax.interval`) and its constant
rule (``constant(box, c)``: the output's one value when the inputs are the constants ``c``), each where
the kind has one; whether a kernel may write its output over an input (``in_place``: the maps, casts,
renames and the SoftMax family), the symbol drawn in its box (``+``, ``Σ``, a cast's ``→fp16``) and the
parameters a box of it must carry (``requires``: ``scale``'s and ``shift``'s ``c``).

>>> import numpy as np
>>> from napkin_cat.syntax.primitive import kind_of, Core
>>> from napkin_cat.syntax.axis import Axis
>>> x = Axis("x", 3)
>>> y, = kind_of("softmax").impl([np.array([[0., 0., 1e3]])], Core(((x,),), ((x,),), {"beta": 1}))
>>> y.round(3).tolist()
[[0.0, 0.0, 1.0]]
"""
from __future__ import annotations

import math

import numpy as np

import sympy

from napkin_cat.errors import ShapeError, SignatureError
from napkin_cat.syntax import interval as iv
from napkin_cat.syntax.printed import Fold, Structured, printed, structured
from napkin_cat.syntax.primitive import Accumulator, Addend, Core, declare
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.vjp import linear, no_cotangent, on, partials, pointwise
from napkin_cat.syntax.weave import build_box

INF = math.inf


def _numel(axes):
    n = 1
    for a in axes:
        n = n * a.size
    return n


def _require(cond, kind, msg):
    if not cond:
        raise SignatureError(f"{kind}: {msg}")


# --------------------------------------------------------------------------- constant rules
# ``constant(box, c)``: the one value of the output when the inputs are the constants ``c`` (None: not constant),
# else None.  Data are finite: ``a + (−∞) = −∞`` and ``0 · a = 0`` for any value ``a`` of an input.
def _passes(box, c):
    return c[0]


def _constant_sum(vals):
    """``Σ vals``: an infinite term of one sign decides it whatever the others are."""
    infinite = [v for v in vals if v is not None and math.isinf(v)]
    if len(set(infinite)) == 1:
        return infinite[0]
    return sum(vals) if all(v is not None for v in vals) and not infinite else None


def _zero_absorbs(box, c):
    return 0.0 if any(v == 0 for v in c if v is not None) else None


def _all_equal(value):
    def rule(box, c):
        return value if all(v == value for v in c) else None
    return rule


def _scale_constant(box, c):
    k = box.data.param("c", 1)
    positive = sympy.sympify(k).is_positive
    if c[0] is None or positive is None:
        return None
    return c[0] if math.isinf(c[0]) and positive else (0.0 if c[0] == 0 else None)


# --------------------------------------------------------------------------- accumulators
# printed: the fold in C (CUDA's too) and Triton; ``{max}``/``{min}`` propagate NaN in C as numpy does, so OpenMP's
# max reduction (which drops it) is no reduction of theirs
SUM = Accumulator("sum", lambda shape, dtype=float: np.zeros(shape, dtype), np.add,
                  forms={"c": Fold("{0} + {1}", reduce="+"), "triton": Fold("{0} + {1}", reduce="tl.sum")}, merge="add")
MAX = Accumulator("max", lambda shape, dtype=float: np.full(shape, -np.inf, dtype), np.maximum,
                  forms={"c": Fold("{max}({0}, {1})"), "triton": Fold("{max}({0}, {1})", reduce="tl.max")}, merge="max")
MIN = Accumulator("min", lambda shape, dtype=float: np.full(shape, np.inf, dtype), np.minimum,
                  forms={"c": Fold("{min}({0}, {1})"), "triton": Fold("{min}({0}, {1})", reduce="tl.min")}, merge="min")

# --------------------------------------------------------------------------- contraction
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _contract_check(core: Core):
    _require(len(core.inputs) >= 1, "contract", "needs at least one operand")
    _require(len(core.outputs) == 1 and core.outputs[0] == (), "contract",
             f"the item output is the scalar R, got core outputs {core.outputs}")
    names = {a.name for axes in core.inputs for a in axes} | {a.name for a in core.weaves}
    _require(len(names) <= len(_LETTERS), "contract",
             f"names {len(names)} distinct axes, more than the {len(_LETTERS)} labels numpy's einsum (its numpy "
             f"meaning) has; contract in steps of at most {len(_LETTERS)} axes")


def _contract_impl(xs, core: Core):
    letters = {}
    for axes in core.inputs:
        for a in axes:
            letters.setdefault(a.name, _LETTERS[len(letters)])
    subs = ",".join("..." + "".join(letters[a.name] for a in axes) for axes in core.inputs)
    return [np.einsum(subs + "->...", *xs, optimize=len(xs) > 2)]


def _contract_labelled(xs, in_names, out_names):
    letters = {}
    for names in (*in_names, *out_names):
        for n in names:
            letters.setdefault(n, _LETTERS[len(letters)])
    subs = ",".join("".join(letters[n] for n in names) for names in in_names)
    out = "".join(letters[n] for n in out_names[0])
    return [np.einsum(f"{subs}->{out}", *xs, optimize=True)]


def _contract_flops(core: Core):
    contracted = {a.name: a for axes in core.inputs for a in axes}
    k = _numel(contracted.values())
    n = len(core.inputs)
    if n >= 2 and contracted:
        return {"tensor": n * k}
    if n >= 2:
        return {"general": n - 1}
    return {"general": k} if contracted else {}


def _contract_vjp(ctx, box, ins, outs, ybar):
    """``x̄ᵢ = Σ ȳ · Π_{j≠i} xⱼ`` over the axes ``xᵢ`` lacks (an einsum), broadcast over the axes no other operand
    carries; one operand: ``ȳ`` broadcast back."""
    (yb,) = ybar
    xs = [ctx.x(v) for v in ins]
    if len(xs) == 1:
        out = [ctx.broadcast(yb, xs[0].array)]
    else:
        out = [ctx.contract([yb] + xs[:i] + xs[i + 1:], x.array) for i, x in enumerate(xs)]
    if ctx.saved is not None:
        for v, c in zip(ins, out):
            if ins.count(v) == 1:
                ctx.saved.note(v, c, outs[0], yb)
    return out


declare("contract", _contract_impl, flops=_contract_flops, check=_contract_check,
        accumulator=SUM, labelled=_contract_labelled, label="·", shape="contract", forms=structured("contract"),
        doc="Contraction (dot product): the sum over shared core axes of the product of the operands.",
        vjp=_contract_vjp, constant=_zero_absorbs)

# --------------------------------------------------------------------------- SoftMax family


def _last_axes(core_axes):
    return tuple(range(-len(core_axes), 0)) if core_axes else ()


def _softmax_check(core: Core):
    _require(len(core.inputs) == 1 and len(core.outputs) == 1, "softmax", "takes one array to one array")
    _require(core.inputs[0] == core.outputs[0] and len(core.inputs[0]) >= 1, "softmax",
             f"the item signature is Rˣ → Rˣ over the softmax axis, got {core.inputs} → {core.outputs}")


def _softmax_impl(xs, core: Core):
    beta = core.value(core.params.get("beta", 1))
    ax = _last_axes(core.inputs[0])
    z = beta * xs[0]
    mu = np.max(z, axis=ax, keepdims=True)
    mu = np.where(np.isfinite(mu), mu, 0.0)
    s = np.exp(z - mu)
    return [s / np.sum(s, axis=ax, keepdims=True)]


def _softmax_flops(core: Core):
    n = _numel(core.inputs[0])
    return {"special": n, "general": 5 * n}


def _softmax_vjp(ctx, box, ins, outs, ybar):
    """``x̄ = β · y ⊙ (ȳ − Σ_X ȳ ⊙ y)``; with a saved contraction z of y, ``Σ_X ȳ ⊙ y = Σ z̄ ⊙ z`` (the adjoint
    identity of :mod:`napkin_cat.autodiff.saved`)."""
    (yb,), (x,) = ybar, [ctx.x(v) for v in ins]
    y = ctx.x(outs[0])
    rows = tuple(a for a in x.array.axes if a.name in box.data.weave_names)
    s = None if ctx.saved is None else ctx.saved.pairing(ctx, box, ins, outs, ctx.cots.get(outs[0]))
    if s is None:
        s = ctx.box("reduce_sum", [ctx.ew("mul", yb, y)], rows)
    u = ctx.box("sub", [yb, s], x.array.axes)
    g = ctx.ew("mul", y, u)
    beta = box.data.param("beta", 1)
    return [g if beta == 1 else ctx.const("scale", g, beta)]


declare("softmax", _softmax_impl, flops=_softmax_flops, check=_softmax_check, label="SoftMax",
        shape="triangle", forms=structured("softmax"), in_place=True,
        doc="SoftMax with inverse temperature β: y = exp(βx − μ)/Σ exp(βx − μ).", vjp=_softmax_vjp)


def _aux_check(name):
    def check(core: Core):
        _require(len(core.inputs) == 3 and len(core.outputs) == 4, name,
                 "the item signature is (Rˣ, μ′: R, z′: R) → (Rˣ, μ: R, R, z: R)")
        _require(core.inputs[1:] == ((), ()) and core.outputs[1:] == ((), (), ()), name,
                 "the auxiliaries μ, δ, z are items (no core axes)")
        _require(core.inputs[0] == core.outputs[0] and len(core.inputs[0]) >= 1, name,
                 "the scores keep their softmax axis")
    return check


def _online_step(xs, core: Core):
    beta = core.value(core.params.get("beta", 1))
    ax = _last_axes(core.inputs[0])
    x, mu_prev, z_prev = xs
    bx = beta * x
    mu = np.maximum(np.max(bx, axis=ax), mu_prev)
    safe_mu = np.where(np.isfinite(mu), mu, 0.0)
    s = np.exp(bx - np.expand_dims(safe_mu, ax))
    with np.errstate(invalid="ignore"):
        delta = np.where(np.isneginf(mu_prev), 0.0, np.exp(mu_prev - safe_mu))
    z = delta * z_prev + np.sum(s, axis=ax)
    return s, mu, delta, z


def _aux_impl(xs, core: Core):
    """Auxiliary SoftMax₀ (Table 4, errata D-08): y = s/z and the prior-rescale factor δz′/z."""
    s, mu, delta, z = _online_step(xs, core)
    ax = _last_axes(core.inputs[0])
    dz = delta * xs[2]
    return [s / np.expand_dims(z, ax), mu, dz, z]


def _unscaled_impl(xs, core: Core):
    """Unscaled SoftMax₁ (Table 4, errata D-08): s = exp(βx − μ), δ = exp(μ′ − μ), z = δz′ + Σs."""
    s, mu, delta, z = _online_step(xs, core)
    return [s, mu, delta, z]


def _online_flops(divides: bool):
    """Table 4's online forms per row of n scores: βx, max with μ′, βx − μ, Σs + δz′ (general n each),
    μ′ − μ and δ·z′ (general 1 each); exp of the scores (special n) and δ = exp(μ′ − μ) (special 1);
    SoftMax₀ also divides s/z (general n)."""
    def flops(core: Core):
        n = _numel(core.inputs[0])
        return {"special": n + 1, "general": (5 if divides else 4) * n + 2}
    return flops


declare("softmax_aux", _aux_impl, flops=_online_flops(divides=True), check=_aux_check("softmax_aux"),
        label="SoftMax₀", shape="triangle", forms=structured("online_softmax", normalised=True), in_place=True,
        doc="Auxiliary SoftMax (Table 4): returns y = s/z with (μ, δz′, z); prior y′ ← y′·δz′/z.")
declare("softmax_unscaled", _unscaled_impl, flops=_online_flops(divides=False),
        check=_aux_check("softmax_unscaled"),
        label="SoftMax₁", shape="triangle", forms=structured("online_softmax"), in_place=True,
        doc="Unscaled SoftMax (Table 4): returns s with (μ, δ, z); prior y′ ← y′·δ, tail y ← y/z.")

# --------------------------------------------------------------------------- elementwise maps


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _log(x):
    with np.errstate(divide="ignore"):      # log 0 = −∞ (an empty log-sum-exp), as the kernels compute it
        return np.log(x)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu_prime(ctx, box, xi, yo):
    """d/dx ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³): ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3·0.044715x²)."""
    x = ctx.x(xi)
    k = sympy.sqrt(2 / sympy.pi)
    x2 = ctx.ew("square", x)
    u = ctx.const("scale", ctx.ew("add", x, ctx.const("scale", ctx.ew("mul", x2, x), 0.044715)), k)
    t = ctx.ew("tanh", u)
    left = ctx.const("scale", ctx.const("shift", t, 1), 0.5)
    du = ctx.const("scale", ctx.const("shift", ctx.const("scale", x2, 3 * 0.044715), 1), k)
    right = ctx.const("scale", ctx.ew("mul", ctx.ew("mul", x, ctx.one_minus(ctx.ew("square", t))), du), 0.5)
    return ctx.ew("add", left, right)


def _silu_prime(ctx, box, xi, yo):
    """d/dx x·σ(x) = σ + x·σ(1 − σ)."""
    x = ctx.x(xi)
    s = ctx.ew("sigmoid", x)
    return ctx.ew("add", s, ctx.ew("mul", ctx.ew("mul", x, s), ctx.one_minus(s)))


def _abs_prime(ctx, box, xi, yo):
    """d/dx |x| = 2H(x) − 1."""
    return ctx.const("shift", ctx.const("scale", ctx.ew("step", ctx.x(xi)), 2), -1)


def _rsqrt_prime(ctx, box, xi, yo):
    """d/dx x^(−½) = −½ y³."""
    y = ctx.x(yo)
    return ctx.const("scale", ctx.ew("mul", ctx.ew("square", y), y), -0.5)


def _shift_constant(box, c):
    return None if c[0] is None else _constant_sum([c[0], float(box.data.param("c", 0))])


# name: (function(x, core), pipeline, its other parts: printed forms (C, CUDA's too, and Triton; ``{max}``, ``{exp}``:
# the dialect's helpers), VJP (ȳ·f′ or a linear map's transpose), interval image, constant rule)
UNARY = {
    "id": (lambda x, c: x, None,
           dict(forms=printed("{0}", "{0}"),
                vjp=linear(lambda ctx, box, yb, xi: yb), interval=iv.image(iv.same), constant=_passes)),
    "exp": (lambda x, c: np.exp(x), "special",
            dict(forms=printed("{exp}({0})", "tl.exp({0})"),
                 vjp=pointwise(lambda ctx, box, xi, yo: ctx.x(yo)), interval=iv.increasing(iv.exp_end),
                 constant=lambda box, c: 0.0 if c[0] == -INF else None)),
    "log": (lambda x, c: _log(x), "special",
            dict(forms=printed("logf({0})", "tl.log({0})"),
                 vjp=pointwise(lambda ctx, box, xi, yo: ctx.ew("recip", ctx.x(xi))),
                 interval=iv.increasing(iv.log_end))),
    "abs": (lambda x, c: np.abs(x), "general",
            dict(forms=printed("fabsf({0})", "tl.abs({0})"),
                 vjp=pointwise(_abs_prime), interval=iv.image(iv.absolute))),
    "neg": (lambda x, c: -x, "general",
            dict(forms=printed("(-{0})", "(-{0})"),
                 vjp=linear(lambda ctx, box, yb, xi: ctx.ew("neg", yb)), interval=iv.image(iv.neg))),
    "relu": (lambda x, c: np.maximum(x, 0), "general",
             dict(forms=printed("{max}({0}, 0.0f)", "tl.maximum({0}, 0.0)"),
                  vjp=pointwise(lambda ctx, box, xi, yo: ctx.ew("step", ctx.x(xi))))),
    "gelu": (lambda x, c: _gelu(x), "special", dict(forms=printed("nc_gelu({0})", "nc_gelu({0})"),
                                                    vjp=pointwise(_gelu_prime))),
    "silu": (lambda x, c: _silu(x), "special", dict(forms=printed("nc_silu({0})", "({0} * tl.sigmoid({0}))"),
                                                    vjp=pointwise(_silu_prime))),
    "sigmoid": (lambda x, c: _sigmoid(x), "special",
                dict(forms=printed("nc_sigmoid({0})", "tl.sigmoid({0})"),
                     vjp=pointwise(lambda ctx, box, xi, yo: ctx.ew("mul", ctx.x(yo), ctx.one_minus(ctx.x(yo)))))),
    "tanh": (lambda x, c: np.tanh(x), "special",
             dict(forms=printed("tanhf({0})", "nc_tanh({0})"),
                  vjp=pointwise(lambda ctx, box, xi, yo: ctx.one_minus(ctx.ew("square", ctx.x(yo)))))),
    "sqrt": (lambda x, c: np.sqrt(x), "special",
             dict(forms=printed("sqrtf({0})", "tl.sqrt({0})"),
                  vjp=pointwise(lambda ctx, box, xi, yo: ctx.const("scale", ctx.ew("recip", ctx.x(yo)), 0.5)))),
    "rsqrt": (lambda x, c: 1.0 / np.sqrt(x), "special",
              dict(forms=printed("(1.0f / sqrtf({0}))", "tl.rsqrt({0})"), vjp=pointwise(_rsqrt_prime))),
    "recip": (lambda x, c: 1.0 / x, "special",
              dict(forms=printed("(1.0f / {0})", "(1.0 / {0})"),
                   vjp=pointwise(lambda ctx, box, xi, yo: ctx.ew("neg", ctx.ew("square", ctx.x(yo)))))),
    "square": (lambda x, c: x * x, "general",
               dict(forms=printed("({0} * {0})", "({0} * {0})"),
                    vjp=pointwise(lambda ctx, box, xi, yo: ctx.const("scale", ctx.x(xi), 2)))),
    "scale": (lambda x, c: c.value(c.params.get("c", 1)) * x, "general",
              dict(forms=printed("({c} * {0})", "({c} * {0})", defaults={"c": 1.0}), requires=("c",),
                   vjp=linear(lambda ctx, box, yb, xi: ctx.const("scale", yb, box.data.param("c", 1))),
                   interval=lambda ins, box, tile_of: iv.scaled(ins[0], box.data.param("c", 1)),
                   constant=_scale_constant)),
    "shift": (lambda x, c: x + c.value(c.params.get("c", 0)), "general",
              dict(forms=printed("({0} + {c})", "({0} + {c})", defaults={"c": 0.0}), requires=("c",),
                   vjp=linear(lambda ctx, box, yb, xi: yb), interval=iv.increasing(lambda x, c=0: x + c),
                   constant=_shift_constant)),
    "step": (lambda x, c: np.greater(x, 0).astype(np.result_type(x, np.float32)), "general",  # Heaviside H(x)
             dict(forms=printed("({0} > 0.0f ? 1.0f : 0.0f)", "tl.where({0} > 0.0, 1.0, 0.0)"),
                  vjp=linear(lambda ctx, box, yb, xi: ctx.zeros_like(ctx.x(xi))))),
}


def _picks(larger: bool):
    """``(ā, b̄)`` of ``max(a, b)`` (``larger``) or ``min(a, b)``: ȳ·H(a − b) and ȳ·(1 − H(a − b)) (H the Heaviside
    step; min swaps a and b)."""
    def pick(first):
        def partial(ctx, y, a, b):
            h = on(ctx, "step", y, on(ctx, "sub", y, a, b) if larger else on(ctx, "sub", y, b, a))
            return on(ctx, "mul", y, y, h if first else ctx.one_minus(h))
        return partial
    return partials(pick(True), pick(False))


# name: (function(a, b), pipeline, its other parts)
BINARY = {
    "add": (np.add, "general",
            dict(forms=printed("({0} + {1})", "({0} + {1})"), symbol="+",
                 vjp=partials(lambda ctx, y, a, b: y, lambda ctx, y, a, b: y), interval=iv.image(iv.add),
                 constant=lambda box, c: _constant_sum(c))),
    "sub": (np.subtract, "general",
            dict(forms=printed("({0} - {1})", "({0} - {1})"), symbol="−",
                 vjp=partials(lambda ctx, y, a, b: y, lambda ctx, y, a, b: ctx.ew("neg", y)), interval=iv.image(iv.sub),
                 constant=lambda box, c: _constant_sum([c[0], None if c[1] is None else -c[1]]))),
    "mul": (np.multiply, "general",
            dict(forms=printed("({0} * {1})", "({0} * {1})"), symbol="×",
                 vjp=partials(lambda ctx, y, a, b: on(ctx, "mul", y, y, b),
                              lambda ctx, y, a, b: on(ctx, "mul", y, y, a)),
                 constant=_zero_absorbs)),
    "div": (np.divide, "general",
            dict(forms=printed("({0} / {1})", "({0} / {1})"), symbol="÷",
                 vjp=partials(lambda ctx, y, a, b: on(ctx, "div", y, y, b),
                              lambda ctx, y, a, b: ctx.ew("neg", on(ctx, "div", y, on(ctx, "mul", y, y, a),
                                                                    on(ctx, "mul", y, b, b)))))),
    "max": (np.maximum, "general",
            dict(forms=printed("{max}({0}, {1})", "tl.maximum({0}, {1})"),
                 vjp=_picks(larger=True), interval=iv.image(iv.maximum), constant=_all_equal(-INF))),
    "min": (np.minimum, "general",
            dict(forms=printed("{min}({0}, {1})", "tl.minimum({0}, {1})"),
                 vjp=_picks(larger=False), interval=iv.image(iv.minimum), constant=_all_equal(INF))),
}


def _fma_vjp(ctx, box, ins, outs, ybar):
    """``a·b + t``: ``(ȳ·b, ȳ·a, ȳ)``, each summed back over what its operand was broadcast along."""
    a, c, t = (ctx.x(v) for v in ins)
    (yb,) = ybar
    axes = yb.array.axes
    return [ctx.sum_to(ctx.box("mul", [yb, c], axes), a.array), ctx.sum_to(ctx.box("mul", [yb, a], axes), c.array),
            ctx.sum_to(yb, t.array)]


#: fused multiply-add ``a·b + c``: one instruction, a multiply and an add (the paper's "multiply-add", §5.6)
TERNARY = {
    "fma": (lambda a, b, c: a * b + c, "general", 2, dict(forms=printed("fmaf({0}, {1}, {2})", "tl.fma({0}, {1}, {2})"),
                                                          vjp=_fma_vjp)),
}
#: operands a kind adds to the rest of its result (``f(…, t) = rest(…) + t``): ``a + b`` adds either to the
#: other, ``fma`` adds ``c`` to ``a·b``
ADDENDS = {
    "add": (Addend(0, "id", (1,)), Addend(1, "id", (0,))),
    "fma": (Addend(2, "mul", (0, 1)),),
}
ELEMENTWISE = sorted(set(UNARY) | set(BINARY) | set(TERNARY))
ARITY = {**dict.fromkeys(UNARY, 1), **dict.fromkeys(BINARY, 2), **dict.fromkeys(TERNARY, 3)}


def _elementwise_check(name, arity):
    def check(core: Core):
        _require(len(core.inputs) == arity and len(core.outputs) == 1, name,
                 f"is an elementwise map on {arity} item(s) to one item")
        _require(all(a == () for a in core.inputs + core.outputs), name,
                 "acts on items: every axis must be weaved (use an einops string such as 'q x')")
    return check


def _unary_kind(name, fn, pipeline, parts):
    declare(name, lambda xs, core, fn=fn: [fn(xs[0], core)],
            flops=(lambda core, p=pipeline: {p: 1} if p else {}),
            check=_elementwise_check(name, 1), label=name, shape="circle", arity=1, in_place=True,
            doc=f"Elementwise {name} on items.", **parts)


def _binary_kind(name, fn, pipeline, parts):
    declare(name, lambda xs, core, fn=fn: [fn(xs[0], xs[1])],
            flops=lambda core, p=pipeline: {p: 1},
            check=_elementwise_check(name, 2), label=name, shape="circle", arity=2, in_place=True,
            doc=f"Elementwise {name} of two items.", addends=ADDENDS.get(name, ()), **parts)


def _ternary_kind(name, fn, pipeline, flops, parts):
    declare(name, lambda xs, core, fn=fn: [fn(xs[0], xs[1], xs[2])],
            flops=lambda core, p=pipeline, n=flops: {p: n},
            check=_elementwise_check(name, 3), label=name, shape="circle", arity=3, in_place=True,
            doc=f"Elementwise {name} of three items.", addends=ADDENDS.get(name, ()), **parts)


for _name, (_fn, _p, _parts) in UNARY.items():
    _unary_kind(_name, _fn, _p, _parts)
for _name, (_fn, _p, _parts) in BINARY.items():
    _binary_kind(_name, _fn, _p, _parts)
for _name, (_fn, _p, _n, _parts) in TERNARY.items():
    _ternary_kind(_name, _fn, _p, _n, _parts)

# --------------------------------------------------------------------------- reductions
def _broadcast_back(ctx, box, ins, outs, ybar):
    """The sum's: ``x̄ = ȳ`` broadcast back along the reduced axes."""
    return [ctx.broadcast(ybar[0], ctx.x(ins[0]).array)]


def _mean_vjp(ctx, box, ins, outs, ybar):
    """The mean's: ``ȳ`` broadcast back, divided by the count of the reduced axes."""
    (yb,), x = ybar, ctx.x(ins[0])
    back = ctx.broadcast(yb, x.array)
    n = sympy.Integer(1)
    for a in x.array.axes:
        if a.name not in yb.array.names:
            n = n * a.size
    return [ctx.const("scale", back, 1 / n)]


def _extremum_vjp(larger: bool):
    """The max's (``larger``) or min's: ``ȳ`` broadcast where ``x`` equals the result, ``1 − H(y − x)`` (ties share
    it)."""
    def rule(ctx, box, ins, outs, ybar):
        (yb,), x = ybar, ctx.x(ins[0])
        back = ctx.broadcast(yb, x.array)
        y = ctx.broadcast(ctx.x(outs[0]), x.array)
        gap = ctx.ew("sub", y, x) if larger else ctx.ew("sub", x, y)
        return [ctx.ew("mul", back, ctx.one_minus(ctx.ew("step", gap)))]
    return rule


# name: (function, accumulator, its other parts)
REDUCTIONS = {
    "sum": (np.sum, SUM, dict(forms=structured("reduce", fold=SUM), vjp=_broadcast_back, constant=_zero_absorbs,
                              symbol="Σ")),
    "max": (np.max, MAX, dict(forms=structured("reduce", fold=MAX),
                              vjp=_extremum_vjp(larger=True), constant=_all_equal(-INF))),
    "min": (np.min, MIN, dict(forms=structured("reduce", fold=MIN),
                              vjp=_extremum_vjp(larger=False), constant=_all_equal(INF))),
    "mean": (np.mean, None, dict(forms=structured("reduce", fold=SUM, mean=True), vjp=_mean_vjp)),
}


def _reduce_check(name):
    def check(core: Core):
        _require(len(core.inputs) == 1 and len(core.outputs) == 1 and core.outputs[0] == ()
                 and len(core.inputs[0]) >= 1, f"reduce_{name}",
                 "the item signature is Rᵃ → R (reduce at least one axis to an item)")
    return check


for _name, (_fn, _acc, _parts) in REDUCTIONS.items():
    declare(f"reduce_{_name}",
            lambda xs, core, fn=_fn: [fn(xs[0], axis=_last_axes(core.inputs[0]))],
            flops=lambda core: {"general": _numel(core.inputs[0])},
            check=_reduce_check(_name), accumulator=_acc, label=_name, shape="reduce",
            doc=f"Reduction by {_name} over the core axes.", **_parts)


def _count_impl(xs, core: Core):
    """How many values the core axes hold (a float, one per row): what a running mean divides by."""
    x = xs[0]
    axes = _last_axes(core.inputs[0])
    return [np.sum(np.ones(np.shape(x)), axis=axes)]


declare("reduce_count", _count_impl, flops=lambda core: {}, check=_reduce_check("count"), accumulator=SUM,
        label="count", shape="reduce", forms=structured("count"),
        doc="The number of values over the core axes (a chunk's extent: a running mean's weight).",
        vjp=no_cotangent)

# --------------------------------------------------------------------------- split / join


def _split_check(core: Core):
    _require(len(core.inputs) == 1 and len(core.inputs[0]) == 1, "split", "splits one axis of one array")
    name = core.inputs[0][0].name
    _require(len(core.outputs) >= 2 and all(len(o) == 1 and o[0].name == name for o in core.outputs),
             "split", f"every part keeps the axis name {name!r}")


def _sizes(axes, core):
    return [int(core.value(a.size)) if not isinstance(a.size, int) else a.size for a in axes]


def _split_impl(xs, core: Core):
    sizes = _sizes([o[0] for o in core.outputs], core)
    if sum(sizes) != xs[0].shape[-1]:
        raise ShapeError(f"split of axis {core.inputs[0][0].name!r}: parts {sizes} add up to {sum(sizes)}, "
                         f"but the array has {xs[0].shape[-1]} along it")
    return np.split(xs[0], np.cumsum(sizes)[:-1], axis=-1)


def _join_check(core: Core):
    _require(len(core.outputs) == 1 and len(core.outputs[0]) == 1, "join", "joins into one axis of one array")
    name = core.outputs[0][0].name
    _require(len(core.inputs) >= 2 and all(len(i) == 1 and i[0].name == name for i in core.inputs),
             "join", f"every part carries the axis name {name!r}")


def _join_impl(xs, core: Core):
    shape = np.broadcast_shapes(*(x.shape[:-1] for x in xs))
    return [np.concatenate([np.broadcast_to(x, shape + x.shape[-1:]) for x in xs], axis=-1)]


def _split_vjp(ctx, box, ins, outs, ybar):
    """The parts' cotangents joined (zeros for a part without one)."""
    parts = [yb if yb is not None else ctx.zeros_like(ctx.x(o)) for o, yb in zip(outs, ybar)]
    x = ctx.x(ins[0])
    join = build_box("join", [p.array for p in parts], [x.array], [], None)
    return [ctx.b(join, *parts)]


def _join_vjp(ctx, box, ins, outs, ybar):
    """``ȳ`` split as the parts were joined."""
    (yb,) = ybar
    xs = [ctx.x(v) for v in ins]
    split = build_box("split", [yb.array], [x.array for x in xs], [], None)
    made = ctx.b(split, yb)
    return list(made) if isinstance(made, tuple) else [made]


declare("split", _split_impl, check=_split_check, label="split", shape="split",
        forms={"c": Structured("split")},     # Triton's block tensors cannot be cut at a runtime offset
        doc="Split an axis into consecutive slices (paper Fig. primitive_weaving).", vjp=_split_vjp)
declare("join", _join_impl, check=_join_check, label="join", shape="join", forms={"c": Structured("join")},
        doc="Join slices along an axis (inverse of split).", vjp=_join_vjp)

# --------------------------------------------------------------------------- transfers and casts


def _item_check(name):
    def check(core: Core):
        _require(len(core.inputs) == 1 and len(core.outputs) == 1 and core.inputs[0] == ()
                 and core.outputs[0] == (), name, "acts on items; weave every axis")
    return check


def _cast_vjp(ctx, box, ins, outs, ybar):
    """``ȳ`` cast back to the input's format."""
    return [ctx.b.convert(ybar[0], ctx.x(ins[0]).array.dtype)]


declare("load", lambda xs, core: [xs[0]], check=_item_check("load"), label="load", shape="transfer",
        doc="Transfer to the level below (numpy: identity; cost: the array's size).",
        interval=iv.image(iv.same), constant=_passes)
declare("save", lambda xs, core: [xs[0]], check=_item_check("save"), label="save", shape="transfer",
        doc="Transfer to the level above (numpy: identity; cost: the array's size).",
        interval=iv.image(iv.same), constant=_passes)
declare("cast", lambda xs, core: [as_dtype(core.params["dtype"]).quantize(xs[0])],
        flops=lambda core: {"general": 1}, check=_item_check("cast"), label="cast", shape="circle",
        forms=printed("{0}", "{0}"),      # the store converts
        in_place=True, symbol=lambda box: f"→{box.data.param('dtype')}", requires=("dtype",),
        doc="Convert between number formats (numpy: round to the target format).",
        vjp=_cast_vjp, interval=iv.image(iv.same), constant=_passes)

# --------------------------------------------------------------------------- reindexing


def _rename_check(core: Core):
    _require(len(core.inputs) == 1 and len(core.outputs) == 1, "rename", "takes one array to one array")
    a, b = core.inputs[0], core.outputs[0]
    _require(len(a) == len(b) and all(x.size == y.size for x, y in zip(a, b)), "rename",
             f"renames axes of equal sizes position by position, got {a} → {b}")


def _rename_vjp(ctx, box, ins, outs, ybar):
    """``ȳ`` renamed back."""
    x = ctx.x(ins[0])
    (yb,) = ybar
    back = build_box("rename", [yb.array], [x.array.replace(dtype=yb.array.dtype)], [], None)
    return [ctx.b(back, yb)]


def _rename_symbol(box):
    """The axes renamed, old → new (``k→x``)."""
    a, b = box.dom.inside[0].names, box.cod.inside[0].names
    return f"{' '.join(n for n in a if n not in b)}→{' '.join(n for n in b if n not in a)}"


declare("rename", lambda xs, core: [xs[0]], check=_rename_check, label="rename", shape="circle",
        forms=structured("rename"), in_place=True, renames=True, symbol=_rename_symbol,
        doc="Rename axes (a reindexing: same values, new axis names).",
        vjp=_rename_vjp, interval=iv.image(iv.same), constant=_passes)
