"""Vector-Jacobian products of the primitive kinds, each a small diagram on the box's wires.

A rule is ``rule(ctx, box, ins, outs, ybar) -> [x̄ᵢ or None]``: ``ins``/``outs`` are the box's value ids
(``ctx.x(v)`` the forward value in the gradient diagram, recomputed on first use), ``ybar`` a cotangent
wire per output (None: zero).  With ``ȳ`` the cotangent of ``y = f(x)``:

=========================  ====================================================================
kind                       x̄
=========================  ====================================================================
contract Σ Πᵢ xᵢ           x̄ᵢ = Σ ȳ · Π_{j≠i} xⱼ over the axes xᵢ lacks (an einsum), broadcast
                           over the axes no other operand carries
softmax (β, over X)        β · y ⊙ (ȳ − Σ_X ȳ ⊙ y)  (with a saved contraction z of y: Σ_X ȳ ⊙ y = Σ z̄ ⊙ z,
                           the adjoint identity of :mod:`.saved`)
add, sub, mul, div, fma    ȳ, ±ȳ, ȳ·b and ȳ·a, ȳ/b and −ȳ·a/b², (ȳ·b, ȳ·a, ȳ) — each summed over the
                           axes its operand was broadcast along
max, min (binary)          ȳ·H(a − b), ȳ·(1 − H(a − b)) (H the Heaviside step; min swaps a and b)
exp, tanh, sigmoid, …      ȳ·f′(x), f′ written with primitives (exp: y; tanh: 1 − y²; sigmoid: y(1 − y);
                           silu, gelu (tanh form), sqrt, rsqrt, recip, square, scale, shift, neg, relu: H(x))
reduce sum / mean          ȳ broadcast back (mean: divided by the count)
reduce max / min           ȳ broadcast where x equals the result: (1 − H(y − x)) (ties share it)
reduce logsumexp           ȳ broadcast · exp(x − y) (the SoftMax of x)
log, abs                   ȳ/x, ȳ·(2H(x) − 1)
where, select              ȳ where the mask holds (0 elsewhere); select's b: ȳ − ā; the mask: none
gather                     ȳ at the index: ``where(position_v = t, ȳ, 0)`` (a scatter); the index: none
position, comparisons,     none: their derivative is zero (integers, masks, and a count that does not
and, or, not, count        depend on the values)
cast, rename, id           ȳ cast back, renamed back, as it is
split / join               the parts joined (zeros for parts without a cotangent) / ȳ split
=========================  ====================================================================

A user's kind brings its own (``nc.declare(..., vjp=rule)``); a kind without one is refused by name.
"""
from __future__ import annotations

import sympy

from napkin_cat.errors import NapkinError, NoVJPError
from napkin_cat.syntax.adapter import Array
from napkin_cat.syntax.dtype import BOOL
from napkin_cat.syntax.indices import COMPARISONS, LOGICAL, position
from napkin_cat.syntax.primitive import KINDS, Weave
from napkin_cat.syntax.weave import build_box


class Context:
    """The gradient diagram under construction: forward values on demand and builders of small boxes."""

    def __init__(self, builder, value, saved=None):
        self.b, self.x = builder, value
        self.saved = saved            # the forward's saved outputs and their laws (:mod:`.saved`), or None
        self.cots: dict = {}          # value id -> the cotangent contributions reaching it so far

    # ------------------------------------------------------------------ boxes on wires
    def box(self, kind: str, wires, out_axes, *, params=None, dtype=None):
        """A ``kind`` box weaved over ``out_axes`` (each carried by the inputs that have it)."""
        first = wires[0].array
        out = Array(tuple(out_axes), first.level, dtype or first.dtype)
        names = [a.name for a in out_axes]
        core = {a.name for w in wires for a in w.array.axes if a.name not in names}
        weaves = [Weave(n, tuple(i for i, w in enumerate(wires) if n in w.array.names)) for n in reversed(names)]
        if kind == "contract" or kind.startswith("reduce_"):
            pass
        elif core:
            raise NapkinError(f"{kind}: inputs carry {sorted(core)} which the output {names} lacks")
        box = build_box(kind, [w.array for w in wires], [out], weaves, params)
        return self.b(box, *wires)

    def ew(self, kind: str, *wires, params=None, like=None):
        """An elementwise map over the axes of ``like`` (default: the first wire's)."""
        return self.box(kind, list(wires), (like or wires[0]).array.axes, params=params)

    def const(self, kind, wire, c):
        return self.ew(kind, wire, params={"c": c})

    def contract(self, wires, out: Array):
        """``Σ Π wires`` over every axis ``out`` lacks, then broadcast to the axes no wire carries."""
        have = {a.name for w in wires for a in w.array.axes}
        inner = tuple(a for a in out.axes if a.name in have)
        y = self.box("contract", list(wires), inner, dtype=out.dtype)
        return self.broadcast(y, out) if len(inner) < len(out.axes) else y

    def broadcast(self, wire, out: Array):
        """``wire`` repeated along the axes of ``out`` it lacks (the other axes kept, in ``out``'s order)."""
        extra = [a for a in wire.array.axes if a.name not in out.names]
        if extra:
            raise NapkinError(f"cannot broadcast {wire.array} to {out}: it carries {[a.name for a in extra]}")
        if wire.array.names == out.names:
            return wire
        return self.box("id", [wire], out.axes)

    def sum_to(self, wire, target: Array):
        """``wire`` summed over the axes ``target`` lacks (undoing a broadcast), in ``target``'s order."""
        if wire.array.names == target.names:
            return wire
        if set(wire.array.names) == set(target.names):
            return self.permute(wire, target)
        return self.box("reduce_sum", [wire], tuple(a for a in target.axes))

    def permute(self, wire, target: Array):
        return self.box("id", [wire], target.axes)

    def add(self, a, c):
        return self.ew("add", a, c)

    def total(self, wires, array: Array):
        """The sum of the cotangents reaching one value (None if none does)."""
        if not wires:
            return None
        out = wires[0] if wires[0].array.names == array.names else self.permute(wires[0], array)
        for w in wires[1:]:
            out = self.add(out, w if w.array.names == array.names else self.permute(w, array))
        return out

    def zeros_like(self, wire):
        return self.const("scale", wire, 0)

    def one_minus(self, wire):
        return self.const("shift", self.ew("neg", wire), 1)


# ---------------------------------------------------------------------- the rules
def _contract(ctx, box, ins, outs, ybar):
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


def _softmax(ctx, box, ins, outs, ybar):
    (yb,), (x,) = ybar, [ctx.x(v) for v in ins]
    y = ctx.x(outs[0])
    rows = tuple(a for a in x.array.axes if a.name in box.data.weave_names)
    s = None if ctx.saved is None else ctx.saved.pairing(ctx, box, ins, outs, ctx.cots.get(outs[0]))
    if s is None:                      # Σ_X ȳ ⊙ y (or Σ z̄ ⊙ z by the adjoint identity, :mod:`.saved`)
        s = ctx.box("reduce_sum", [ctx.ew("mul", yb, y)], rows)
    u = ctx.box("sub", [yb, s], x.array.axes)
    g = ctx.ew("mul", y, u)
    beta = box.data.param("beta", 1)
    return [g if beta == 1 else ctx.const("scale", g, beta)]


def _broadcast_binary(ctx, box, ins, ybar, fa, fb):
    a, c = (ctx.x(v) for v in ins)
    (yb,) = ybar
    return [ctx.sum_to(fa(yb, a, c), a.array), ctx.sum_to(fb(yb, a, c), c.array)]


def _binary(name):
    def rule(ctx, box, ins, outs, ybar):
        out = ybar[0]

        def on(kind, *ws):
            return ctx.box(kind, list(ws), out.array.axes)
        if name == "add":
            fa, fb = (lambda y, a, c: y), (lambda y, a, c: y)
        elif name == "sub":
            fa, fb = (lambda y, a, c: y), (lambda y, a, c: ctx.ew("neg", y))
        elif name == "mul":
            fa, fb = (lambda y, a, c: on("mul", y, c)), (lambda y, a, c: on("mul", y, a))
        elif name == "div":
            fa = lambda y, a, c: on("div", y, c)                                  # noqa: E731
            fb = lambda y, a, c: ctx.ew("neg", on("div", on("mul", y, a), on("mul", c, c)))   # noqa: E731
        else:                                                                # max, min: H(a − b) picks a
            def pick(y, a, c, first):
                h = on("step", on("sub", a, c) if name == "max" else on("sub", c, a))
                return on("mul", y, h if first else ctx.one_minus(h))
            fa, fb = (lambda y, a, c: pick(y, a, c, True)), (lambda y, a, c: pick(y, a, c, False))
        return _broadcast_binary(ctx, box, ins, ybar, fa, fb)
    return rule


def _fma(ctx, box, ins, outs, ybar):
    a, c, t = (ctx.x(v) for v in ins)
    (yb,) = ybar
    axes = yb.array.axes
    return [ctx.sum_to(ctx.box("mul", [yb, c], axes), a.array), ctx.sum_to(ctx.box("mul", [yb, a], axes), c.array),
            ctx.sum_to(yb, t.array)]


def _unary(derivative):
    """``x̄ = ȳ · f′``, ``derivative(ctx, x, y)`` the wire of f′ (y computed only if it asks)."""
    def rule(ctx, box, ins, outs, ybar):
        return [ctx.ew("mul", ybar[0], derivative(ctx, box, ins[0], outs[0]))]
    return rule


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
    x = ctx.x(xi)
    s = ctx.ew("sigmoid", x)
    return ctx.ew("add", s, ctx.ew("mul", ctx.ew("mul", x, s), ctx.one_minus(s)))


#: f′ of the unary maps whose product with ȳ is computed (ȳ·f′)
UNARY = {
    "exp": lambda ctx, box, xi, yo: ctx.x(yo),
    "relu": lambda ctx, box, xi, yo: ctx.ew("step", ctx.x(xi)),
    "tanh": lambda ctx, box, xi, yo: ctx.one_minus(ctx.ew("square", ctx.x(yo))),
    "sigmoid": lambda ctx, box, xi, yo: ctx.ew("mul", ctx.x(yo), ctx.one_minus(ctx.x(yo))),
    "silu": _silu_prime,
    "gelu": _gelu_prime,
    "sqrt": lambda ctx, box, xi, yo: ctx.const("scale", ctx.ew("recip", ctx.x(yo)), 0.5),
    "rsqrt": lambda ctx, box, xi, yo: ctx.const("scale", ctx.ew("mul", ctx.ew("square", ctx.x(yo)), ctx.x(yo)),
                                                -0.5),
    "recip": lambda ctx, box, xi, yo: ctx.ew("neg", ctx.ew("square", ctx.x(yo))),
    "square": lambda ctx, box, xi, yo: ctx.const("scale", ctx.x(xi), 2),
    "log": lambda ctx, box, xi, yo: ctx.ew("recip", ctx.x(xi)),
    "abs": lambda ctx, box, xi, yo: ctx.const("shift", ctx.const("scale", ctx.ew("step", ctx.x(xi)), 2), -1),
}
#: the linear maps and the step: x̄ straight from ȳ
LINEAR = {
    "id": lambda ctx, box, yb, xi: yb,
    "shift": lambda ctx, box, yb, xi: yb,
    "neg": lambda ctx, box, yb, xi: ctx.ew("neg", yb),
    "scale": lambda ctx, box, yb, xi: ctx.const("scale", yb, box.data.param("c", 1)),
    "step": lambda ctx, box, yb, xi: ctx.zeros_like(ctx.x(xi)),
}


def _linear(f):
    def rule(ctx, box, ins, outs, ybar):
        return [f(ctx, box, ybar[0], ins[0])]
    return rule


def _reduce(name):
    def rule(ctx, box, ins, outs, ybar):
        (yb,), x = ybar, ctx.x(ins[0])
        back = ctx.broadcast(yb, x.array)
        if name == "sum":
            return [back]
        if name == "mean":
            n = sympy.Integer(1)
            for a in x.array.axes:
                if a.name not in yb.array.names:
                    n = n * a.size
            return [ctx.const("scale", back, 1 / n)]
        y = ctx.broadcast(ctx.x(outs[0]), x.array)
        gap = ctx.ew("sub", y, x) if name == "max" else ctx.ew("sub", x, y)
        return [ctx.ew("mul", back, ctx.one_minus(ctx.ew("step", gap)))]
    return rule


def _cast(ctx, box, ins, outs, ybar):
    x = ctx.x(ins[0])
    return [ctx.b.convert(ybar[0], x.array.dtype)]


def _rename(ctx, box, ins, outs, ybar):
    x = ctx.x(ins[0])
    (yb,) = ybar
    back = build_box("rename", [yb.array], [x.array.replace(dtype=yb.array.dtype)], [], None)
    return [ctx.b(back, yb)]


def _split(ctx, box, ins, outs, ybar):
    parts = [yb if yb is not None else ctx.zeros_like(ctx.x(o)) for o, yb in zip(outs, ybar)]
    x = ctx.x(ins[0])
    join = build_box("join", [p.array for p in parts], [x.array], [], None)
    return [ctx.b(join, *parts)]


def _join(ctx, box, ins, outs, ybar):
    (yb,) = ybar
    xs = [ctx.x(v) for v in ins]
    split = build_box("split", [yb.array], [x.array for x in xs], [], None)
    made = ctx.b(split, yb)
    return list(made) if isinstance(made, tuple) else [made]


def _logsumexp(ctx, box, ins, outs, ybar):
    """x̄ = ȳ · exp(x − y): the SoftMax of x, weighted by the cotangent of its row."""
    (yb,), x = ybar, ctx.x(ins[0])
    y = ctx.broadcast(ctx.x(outs[0]), x.array)
    return [ctx.ew("mul", ctx.broadcast(yb, x.array), ctx.ew("exp", ctx.ew("sub", x, y)))]


def _masked(ctx, mask, yb):
    """``ȳ`` where ``mask`` holds, 0 elsewhere (the mask broadcast by the names it carries)."""
    return ctx.box("where", [mask, yb], yb.array.axes, params={"other": 0.0}, dtype=yb.array.dtype)


def _where(ctx, box, ins, outs, ybar):
    (yb,) = ybar
    a = ctx.x(ins[1])
    return [None, ctx.sum_to(_masked(ctx, ctx.x(ins[0]), yb), a.array)]


def _select(ctx, box, ins, outs, ybar):
    (yb,) = ybar
    abar = _masked(ctx, ctx.x(ins[0]), yb)
    bbar = ctx.ew("sub", yb, abar)
    return [None, ctx.sum_to(abar, ctx.x(ins[1]).array), ctx.sum_to(bbar, ctx.x(ins[2]).array)]


def _gather(ctx, box, ins, outs, ybar):
    """x̄[…, v] = ȳ[…] where v = t[…] (a scatter written as a mask of positions); no cotangent for the index."""
    (yb,), x, t = ybar, ctx.x(ins[0]), ctx.x(ins[1])
    (axis,) = [a for a in x.array.axes if a.name not in box.data.weave_names]
    pos = ctx.b(position(axis.name, level=x.array.level, **{axis.name: axis.size}))
    hit = ctx.box("eq", [pos, t], x.array.axes, dtype=BOOL)
    return [_masked(ctx, hit, ctx.broadcast(yb, x.array)), None]


def _zero(ctx, box, ins, outs, ybar):
    """Positions, comparisons and logic are piecewise constant: no cotangent flows back."""
    return [None] * len(ins)


RULES = {"contract": _contract, "softmax": _softmax, "fma": _fma, "cast": _cast, "rename": _rename,
         "split": _split, "join": _join,
         **{k: _binary(k) for k in ("add", "sub", "mul", "div", "max", "min")},
         **{k: _unary(d) for k, d in UNARY.items()}, **{k: _linear(f) for k, f in LINEAR.items()},
         **{f"reduce_{k}": _reduce(k) for k in ("sum", "mean", "max", "min")},
         "reduce_logsumexp": _logsumexp, "where": _where, "select": _select, "gather": _gather,
         **{k: _zero for k in ("position", "reduce_count", *COMPARISONS, *LOGICAL)}}


def vjp_of(box):
    """The VJP rule of a box: its kind's own (``nc.declare(..., vjp=)``), else the built-in table."""
    data = getattr(box, "data", None)
    kind = getattr(data, "kind", None)
    if kind is None:
        what = "a region (Kernel, Grid or Stream)" if hasattr(box, "arg") else "a box with no primitive kind"
        raise NoVJPError(f"{box.name!r} is {what}: nc.grad differentiates function diagrams; differentiate "
                         "before partitioning and derive the backward algorithm from the gradient diagram")
    own = getattr(KINDS.get(kind), "vjp", None)
    if own is not None:
        return own
    if kind not in RULES:
        raise NoVJPError(f"the primitive {box.name!r} (kind {kind!r}) has no vector-Jacobian product: declare "
                         f"it with nc.declare(..., vjp=rule); built-in VJPs: {sorted(RULES)}")
    return RULES[kind]
