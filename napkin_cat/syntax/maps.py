"""The built-in elementwise maps (paper §2, Table 4: ``exp``, ``add``, ``fma``, …) and the constant rules the
primitive kinds share: each map declared once with every part of its record — numpy meaning, FLOPs pipeline, printed
forms, VJP, interval image, constant rule (:mod:`napkin_cat.syntax.primitive`).  :mod:`napkin_cat.syntax.ops`
declares the other built-in kinds and re-exports these tables.

>>> from napkin_cat.syntax.primitive import kind_of
>>> kind_of("exp").arity, kind_of("fma").arity, sorted(BINARY)[:3]
(1, 3, ['add', 'div', 'max'])
>>> constant_sum([1.0, -math.inf, 2.0]), zero_absorbs(None, [0.0, None])
(-inf, 0.0)
"""
from __future__ import annotations

import math

import numpy as np
import sympy

from napkin_cat.errors import SignatureError
from napkin_cat.syntax import interval as iv
from napkin_cat.syntax.printed import printed
from napkin_cat.syntax.primitive import Addend, Core, declare
from napkin_cat.syntax.vjp import linear, on, partials, pointwise

INF = math.inf


def require(cond, kind, msg):
    """A signature check's condition: :class:`~napkin_cat.errors.SignatureError` ``kind: msg`` when it fails."""
    if not cond:
        raise SignatureError(f"{kind}: {msg}")


# --------------------------------------------------------------------------- constant rules
# ``constant(box, c)``: the one value of the output when the inputs are the constants ``c`` (None: not constant),
# else None.  Data are finite: ``a + (−∞) = −∞`` and ``0 · a = 0`` for any value ``a`` of an input.
def passes(box, c):
    """The constant of the one input, unchanged (id, cast, rename)."""
    return c[0]


def constant_sum(vals):
    """``Σ vals``: an infinite term of one sign decides it whatever the others are."""
    infinite = [v for v in vals if v is not None and math.isinf(v)]
    if len(set(infinite)) == 1:
        return infinite[0]
    return sum(vals) if all(v is not None for v in vals) and not infinite else None


def zero_absorbs(box, c):
    """0 when an input is 0 (a product, a contraction, a sum of products)."""
    return 0.0 if any(v == 0 for v in c if v is not None) else None


def all_equal(value):
    """``value`` when every input is ``value`` (−∞ through a max, +∞ through a min)."""
    def rule(box, c):
        return value if all(v == value for v in c) else None
    return rule


def scale_constant(box, c):
    """``c·x``: ±∞ kept by a positive scale, 0 kept by any."""
    k = box.data.param("c", 1)
    positive = sympy.sympify(k).is_positive
    if c[0] is None or positive is None:
        return None
    return c[0] if math.isinf(c[0]) and positive else (0.0 if c[0] == 0 else None)


# --------------------------------------------------------------------------- elementwise maps


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _erf(x):
    """``erf`` in numpy (numpy has none): libm's, element by element, in ``x``'s format (float64 stays float64)."""
    x = np.asarray(x)
    kind = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    return np.frompyfunc(math.erf, 1, 1)(x.astype(np.float64)).astype(kind)


def _gelu_erf(x):
    """The exact GELU, torch's ``gelu(x, approximate="none")``: ``x·Φ(x) = ½x(1 + erf(x/√2))``."""
    return 0.5 * x * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))


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


def _gelu_erf_prime(ctx, box, xi, yo):
    """d/dx x·Φ(x) = Φ(x) + x·φ(x), with Φ(x) = ½(1 + erf(x/√2)) and φ(x) = exp(−x²/2)/√(2π)."""
    x = ctx.x(xi)
    cdf = ctx.const("scale", ctx.const("shift", ctx.ew("erf", ctx.const("scale", x, 1 / math.sqrt(2))), 1), 0.5)
    pdf = ctx.const("scale", ctx.ew("exp", ctx.const("scale", ctx.ew("square", x), -0.5)), 1 / math.sqrt(2 * math.pi))
    return ctx.ew("add", cdf, ctx.ew("mul", x, pdf))


def _erf_prime(ctx, box, xi, yo):
    """d/dx erf(x) = (2/√π)·exp(−x²)."""
    e = ctx.ew("exp", ctx.const("scale", ctx.ew("square", ctx.x(xi)), -1))
    return ctx.const("scale", e, 2 / math.sqrt(math.pi))


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
    return None if c[0] is None else constant_sum([c[0], float(box.data.param("c", 0))])


# name: (function(x, core), pipeline, its other parts: printed forms (C, CUDA's too, and Triton; ``{max}``, ``{exp}``,
# ``{sqrt}``: the dialect's helpers, libm's in the kernel's real type; C's literals in float's spelling), VJP (ȳ·f′
# or a linear map's transpose), interval image, constant rule)
UNARY = {
    "id": (lambda x, c: x, None,
           dict(forms=printed("{0}", "{0}"),
                vjp=linear(lambda ctx, box, yb, xi: yb), interval=iv.image(iv.same), constant=passes)),
    "exp": (lambda x, c: np.exp(x), "special",
            dict(forms=printed("{exp}({0})", "tl.exp({0})"),
                 vjp=pointwise(lambda ctx, box, xi, yo: ctx.x(yo)), interval=iv.increasing(iv.exp_end),
                 constant=lambda box, c: 0.0 if c[0] == -INF else None)),
    "log": (lambda x, c: _log(x), "special",
            dict(forms=printed("{log}({0})", "tl.log({0})"),
                 vjp=pointwise(lambda ctx, box, xi, yo: ctx.ew("recip", ctx.x(xi))),
                 interval=iv.increasing(iv.log_end))),
    "abs": (lambda x, c: np.abs(x), "general",
            dict(forms=printed("{fabs}({0})", "tl.abs({0})"),
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
             dict(forms=printed("{tanh}({0})", "nc_tanh({0})"),
                  vjp=pointwise(lambda ctx, box, xi, yo: ctx.one_minus(ctx.ew("square", ctx.x(yo)))))),
    "sqrt": (lambda x, c: np.sqrt(x), "special",
             dict(forms=printed("{sqrt}({0})", "tl.sqrt({0})"),
                  vjp=pointwise(lambda ctx, box, xi, yo: ctx.const("scale", ctx.ew("recip", ctx.x(yo)), 0.5)))),
    "rsqrt": (lambda x, c: 1.0 / np.sqrt(x), "special",
              dict(forms=printed("(1.0f / {sqrt}({0}))", "tl.rsqrt({0})"), vjp=pointwise(_rsqrt_prime))),
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
                   constant=scale_constant)),
    "shift": (lambda x, c: x + c.value(c.params.get("c", 0)), "general",
              dict(forms=printed("({0} + {c})", "({0} + {c})", defaults={"c": 0.0}), requires=("c",),
                   vjp=linear(lambda ctx, box, yb, xi: yb), interval=iv.increasing(lambda x, c=0: x + c),
                   constant=_shift_constant)),
    "step": (lambda x, c: np.greater(x, 0).astype(np.result_type(x, np.float32)), "general",  # Heaviside H(x)
             dict(forms=printed("({0} > 0.0f ? 1.0f : 0.0f)", "tl.where({0} > 0.0, 1.0, 0.0)"),
                  vjp=linear(lambda ctx, box, yb, xi: ctx.zeros_like(ctx.x(xi))))),
    "sin": (lambda x, c: np.sin(x), "special",
            dict(forms=printed("sinf({0})", "tl.sin({0})"),
                 vjp=pointwise(lambda ctx, box, xi, yo: ctx.ew("cos", ctx.x(xi))),
                 interval=lambda ins, box, tile_of: iv.sine(ins[0]),
                 constant=lambda box, c: 0.0 if c[0] == 0 else None)),
    "cos": (lambda x, c: np.cos(x), "special",
            dict(forms=printed("cosf({0})", "tl.cos({0})"),
                 vjp=pointwise(lambda ctx, box, xi, yo: ctx.const("scale", ctx.ew("sin", ctx.x(xi)), -1)),
                 interval=lambda ins, box, tile_of: iv.sine(ins[0], math.pi / 2),
                 constant=lambda box, c: 1.0 if c[0] == 0 else None)),
    "erf": (lambda x, c: _erf(x), "special",
            dict(forms=printed("erff({0})", "tl.math.erf({0})"), vjp=pointwise(_erf_prime),
                 interval=iv.increasing(iv.erf_end),
                 constant=lambda box, c: None if c[0] is None else math.erf(c[0]))),
    # torch's gelu(approximate="none"); "gelu" is approximate="tanh" (GELU_APPROXIMATIONS)
    "gelu_erf": (lambda x, c: _gelu_erf(x), "special",
                 dict(forms=printed("(0.5f * {0} * (1.0f + erff({0} * 0.7071067811865476f)))",
                                    "(0.5 * {0} * (1.0 + tl.math.erf({0} * 0.7071067811865476)))"),
                      vjp=pointwise(_gelu_erf_prime),
                      constant=lambda box, c: 0.0 if c[0] in (0.0, -INF) else None)),
}
#: torch's ``gelu(x, approximate=…)`` → the kind computing it
GELU_APPROXIMATIONS = {"none": "gelu_erf", "tanh": "gelu"}


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
            dict(forms=printed("({0} + {1})", "({0} + {1})"), symbol="+", commutative=True,
                 vjp=partials(lambda ctx, y, a, b: y, lambda ctx, y, a, b: y), interval=iv.image(iv.add),
                 constant=lambda box, c: constant_sum(c),
                 addends=(Addend(0, "id", (1,)), Addend(1, "id", (0,))))),   # a + b adds either to the other
    "sub": (np.subtract, "general",
            dict(forms=printed("({0} - {1})", "({0} - {1})"), symbol="−",
                 vjp=partials(lambda ctx, y, a, b: y, lambda ctx, y, a, b: ctx.ew("neg", y)), interval=iv.image(iv.sub),
                 constant=lambda box, c: constant_sum([c[0], None if c[1] is None else -c[1]]))),
    "mul": (np.multiply, "general",
            dict(forms=printed("({0} * {1})", "({0} * {1})"), symbol="×", commutative=True,
                 vjp=partials(lambda ctx, y, a, b: on(ctx, "mul", y, y, b),
                              lambda ctx, y, a, b: on(ctx, "mul", y, y, a)),
                 constant=zero_absorbs)),
    "div": (np.divide, "general",
            dict(forms=printed("({0} / {1})", "({0} / {1})"), symbol="÷",
                 vjp=partials(lambda ctx, y, a, b: on(ctx, "div", y, y, b),
                              lambda ctx, y, a, b: ctx.ew("neg", on(ctx, "div", y, on(ctx, "mul", y, y, a),
                                                                    on(ctx, "mul", y, b, b)))))),
    "max": (np.maximum, "general",
            dict(forms=printed("{max}({0}, {1})", "tl.maximum({0}, {1})"),
                 vjp=_picks(larger=True), interval=iv.image(iv.maximum), constant=all_equal(-INF))),
    "min": (np.minimum, "general",
            dict(forms=printed("{min}({0}, {1})", "tl.minimum({0}, {1})"),
                 vjp=_picks(larger=False), interval=iv.image(iv.minimum), constant=all_equal(INF))),
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
    "fma": (lambda a, b, c: a * b + c, "general", 2,
            dict(forms=printed("{fma}({0}, {1}, {2})", "tl.fma({0}, {1}, {2})"), vjp=_fma_vjp,
                 addends=(Addend(2, "mul", (0, 1)),))),                       # a·b + c adds c to a·b
}
ELEMENTWISE = sorted(set(UNARY) | set(BINARY) | set(TERNARY))
ARITY = {**dict.fromkeys(UNARY, 1), **dict.fromkeys(BINARY, 2), **dict.fromkeys(TERNARY, 3)}


def elementwise_check(name: str, arity: int, *, example: str = "an einops string such as 'q x'"):
    """The signature check of an elementwise kind: ``arity`` items in, one item out, every axis weaved (``example``:
    how the error tells the user to write that).

    >>> from napkin_cat.syntax.primitive import Core
    >>> elementwise_check("add", 2)(Core(((), ()), ((),))) is None
    True
    >>> elementwise_check("add", 2)(Core(((), ()), (("q",),)))
    Traceback (most recent call last):
        ...
    napkin_cat.errors.SignatureError: add: acts on items: every axis must be weaved (use an einops string such as 'q x')
    """
    def check(core: Core):
        require(len(core.inputs) == arity and len(core.outputs) == 1, name,
                f"is an elementwise map on {arity} item(s) to one item")
        require(all(a == () for a in core.inputs + core.outputs), name,
                f"acts on items: every axis must be weaved (use {example})")
    return check


def _unary_kind(name, fn, pipeline, parts):
    declare(name, lambda xs, core, fn=fn: [fn(xs[0], core)],
            flops=(lambda core, p=pipeline: {p: 1} if p else {}),
            check=elementwise_check(name, 1), label=name, shape="circle", arity=1, in_place=True,
            doc=f"Elementwise {name} on items.", **parts)


def _binary_kind(name, fn, pipeline, parts):
    declare(name, lambda xs, core, fn=fn: [fn(xs[0], xs[1])],
            flops=lambda core, p=pipeline: {p: 1},
            check=elementwise_check(name, 2), label=name, shape="circle", arity=2, in_place=True,
            doc=f"Elementwise {name} of two items.", **parts)


def _ternary_kind(name, fn, pipeline, flops, parts):
    declare(name, lambda xs, core, fn=fn: [fn(xs[0], xs[1], xs[2])],
            flops=lambda core, p=pipeline, n=flops: {p: n},
            check=elementwise_check(name, 3), label=name, shape="circle", arity=3, in_place=True,
            doc=f"Elementwise {name} of three items.", **parts)


for _name, (_fn, _p, _parts) in UNARY.items():
    _unary_kind(_name, _fn, _p, _parts)
for _name, (_fn, _p, _parts) in BINARY.items():
    _binary_kind(_name, _fn, _p, _parts)
for _name, (_fn, _p, _n, _parts) in TERNARY.items():
    _ternary_kind(_name, _fn, _p, _n, _parts)
