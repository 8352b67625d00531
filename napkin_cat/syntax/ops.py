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

from napkin_cat.errors import ShapeError
from napkin_cat.syntax import interval as iv
from napkin_cat.syntax.printed import Fold, Structured, printed, structured
from napkin_cat.syntax.primitive import Accumulator, Core, declare
from napkin_cat.syntax.dtype import as_dtype
from napkin_cat.syntax.vjp import no_cotangent
from napkin_cat.syntax.weave import build_box
from napkin_cat.syntax.maps import (ARITY, BINARY, ELEMENTWISE, TERNARY, UNARY,  # noqa: F401
                                     all_equal, passes, require, scale_constant, zero_absorbs)

INF = math.inf


def _numel(axes):
    n = 1
    for a in axes:
        n = n * a.size
    return n


# --------------------------------------------------------------------------- accumulators
# printed: the fold in C (CUDA's too) and Triton; ``{max}``/``{min}`` propagate NaN in C as numpy does, so OpenMP's
# max reduction (which drops it) is no reduction of theirs
def _zeros(shape, dtype=float):          # the accumulators' starts are module functions: a plan pickles (to ranks)
    return np.zeros(shape, dtype)


def _minus_inf(shape, dtype=float):
    return np.full(shape, -np.inf, dtype)


def _plus_inf(shape, dtype=float):
    return np.full(shape, np.inf, dtype)


SUM = Accumulator("sum", _zeros, np.add,
                  forms={"c": Fold("{0} + {1}", reduce="+"), "triton": Fold("{0} + {1}", reduce="tl.sum")}, merge="add")
MAX = Accumulator("max", _minus_inf, np.maximum,
                  forms={"c": Fold("{max}({0}, {1})"), "triton": Fold("{max}({0}, {1})", reduce="tl.max")}, merge="max")
MIN = Accumulator("min", _plus_inf, np.minimum,
                  forms={"c": Fold("{min}({0}, {1})"), "triton": Fold("{min}({0}, {1})", reduce="tl.min")}, merge="min")

# --------------------------------------------------------------------------- contraction
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _contract_check(core: Core):
    require(len(core.inputs) >= 1, "contract", "needs at least one operand")
    require(len(core.outputs) == 1 and core.outputs[0] == (), "contract",
             f"the item output is the scalar R, got core outputs {core.outputs}")
    names = {a.name for axes in core.inputs for a in axes} | {a.name for a in core.weaves}
    require(len(names) <= len(_LETTERS), "contract",
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


def _contract_prepared(box):
    """Two operands with no shared batch axis: one BLAS call (``tensordot``), then the output's axis order."""
    if len(box.dom) != 2:
        return None
    (a, b), out = [arr.names for arr in box.dom.inside], box.cod.inside[0].names
    summed = [n for n in a if n in b and n not in out]
    # a tensordot sums only axes both operands carry, and keeps every other one: an axis only one operand
    # carries and the output lacks (summed alone), or a batch axis of both, is numpy's einsum's to do
    alone = [n for n in (*a, *b) if n not in out and not (n in a and n in b)]
    kept = [n for n in a if n not in summed] + [n for n in b if n not in summed]
    if [n for n in a if n in b and n in out] or alone or sorted(out) != sorted(kept):
        return None
    perm = [kept.index(n) for n in out]
    return _tensordot([a.index(n) for n in summed], [b.index(n) for n in summed], len(a), len(b),
                      None if perm == list(range(len(perm))) else perm)


def _tensordot(ia: list, ib: list, na: int, nb: int, perm):
    """``xs ↦ [np.tensordot(x, y, (ia, ib))]`` (then ``perm``) for operands of ranks ``na``, ``nb``, its axes
    worked out once: the summed axes moved last in ``x`` and first in ``y``, one ``np.dot`` of the two matrices,
    the kept axes restored (numpy's own steps, without its per-call argument checks).

    >>> x, y = np.arange(24.).reshape(2, 3, 4), np.arange(12.).reshape(4, 3)
    >>> bool((_tensordot([1, 2], [1, 0], 3, 2, None)([x, y])[0] == np.tensordot(x, y, ([1, 2], [1, 0]))).all())
    True
    """
    keep_a = [i for i in range(na) if i not in ia]
    pa, pb = keep_a + list(ia), list(ib) + [j for j in range(nb) if j not in ib]
    pa, pb = (None if p == sorted(p) else p for p in (pa, pb))
    ka, kb = len(keep_a), len(ib)

    def run(xs):
        x, y = np.asarray(xs[0]), np.asarray(xs[1])
        if pa is not None:
            x = x.transpose(pa)
        if pb is not None:
            y = y.transpose(pb)
        sa, sb = x.shape, y.shape
        k = math.prod(sa[ka:])
        r = np.dot(x.reshape(math.prod(sa[:ka]), k), y.reshape(k, math.prod(sb[kb:]))).reshape(sa[:ka] + sb[kb:])
        return [r if perm is None else r.transpose(perm)]
    return run


declare("contract", _contract_impl, flops=_contract_flops, check=_contract_check,
        accumulator=SUM, labelled=_contract_labelled, label="·", shape="contract", forms=structured("contract"),
        doc="Contraction (dot product): the sum over shared core axes of the product of the operands.",
        vjp=_contract_vjp, constant=zero_absorbs, prepared=_contract_prepared)

# --------------------------------------------------------------------------- SoftMax family


def _last_axes(core_axes):
    return tuple(range(-len(core_axes), 0)) if core_axes else ()


def _softmax_check(core: Core):
    require(len(core.inputs) == 1 and len(core.outputs) == 1, "softmax", "takes one array to one array")
    require(core.inputs[0] == core.outputs[0] and len(core.inputs[0]) >= 1, "softmax",
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
        require(len(core.inputs) == 3 and len(core.outputs) == 4, name,
                 "the item signature is (Rˣ, μ′: R, z′: R) → (Rˣ, μ: R, R, z: R)")
        require(core.inputs[1:] == ((), ()) and core.outputs[1:] == ((), (), ()), name,
                 "the auxiliaries μ, δ, z are items (no core axes)")
        require(core.inputs[0] == core.outputs[0] and len(core.inputs[0]) >= 1, name,
                 "the scores keep their softmax axis")
    return check


def _online_step(xs, core: Core):
    beta = core.value(core.params.get("beta", 1))
    ax = _last_axes(core.inputs[0])
    x, mu_prev, z_prev = xs
    bx = np.asarray(beta * x)
    mu = np.maximum(bx.max(axis=ax), mu_prev)
    safe_mu = np.where(np.isfinite(mu), mu, 0.0)
    s = np.exp(bx - safe_mu.reshape(safe_mu.shape + (1,) * len(ax)))     # μ broadcast back along the scores' axes
    with np.errstate(invalid="ignore"):
        delta = np.where(np.equal(mu_prev, -np.inf), 0.0, np.exp(mu_prev - safe_mu))
    z = delta * z_prev + s.sum(axis=ax)
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
    "sum": (np.sum, SUM, dict(forms=structured("reduce", fold=SUM), vjp=_broadcast_back, constant=zero_absorbs,
                              symbol="Σ")),
    "max": (np.max, MAX, dict(forms=structured("reduce", fold=MAX),
                              vjp=_extremum_vjp(larger=True), constant=all_equal(-INF))),
    "min": (np.min, MIN, dict(forms=structured("reduce", fold=MIN),
                              vjp=_extremum_vjp(larger=False), constant=all_equal(INF))),
    "mean": (np.mean, None, dict(forms=structured("reduce", fold=SUM, mean=True), vjp=_mean_vjp)),
}


def _reduce_check(name):
    def check(core: Core):
        require(len(core.inputs) == 1 and len(core.outputs) == 1 and core.outputs[0] == ()
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
    require(len(core.inputs) == 1 and len(core.inputs[0]) == 1, "split", "splits one axis of one array")
    name = core.inputs[0][0].name
    require(len(core.outputs) >= 2 and all(len(o) == 1 and o[0].name == name for o in core.outputs),
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
    require(len(core.outputs) == 1 and len(core.outputs[0]) == 1, "join", "joins into one axis of one array")
    name = core.outputs[0][0].name
    require(len(core.inputs) >= 2 and all(len(i) == 1 and i[0].name == name for i in core.inputs),
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
        doc="Split an axis into consecutive slices (paper Fig. primitive_weaving).", vjp=_split_vjp, sized=True)
declare("join", _join_impl, check=_join_check, label="join", shape="join", forms={"c": Structured("join")},
        doc="Join slices along an axis (inverse of split).", vjp=_join_vjp, sized=True)

# --------------------------------------------------------------------------- transfers and casts


def _item_check(name):
    def check(core: Core):
        require(len(core.inputs) == 1 and len(core.outputs) == 1 and core.inputs[0] == ()
                 and core.outputs[0] == (), name, "acts on items; weave every axis")
    return check


def _cast_vjp(ctx, box, ins, outs, ybar):
    """``ȳ`` cast back to the input's format."""
    return [ctx.b.convert(ybar[0], ctx.x(ins[0]).array.dtype)]


declare("load", lambda xs, core: [xs[0]], check=_item_check("load"), label="load", shape="transfer",
        doc="Transfer to the level below (numpy: identity; cost: the array's size).",
        interval=iv.image(iv.same), constant=passes)
declare("save", lambda xs, core: [xs[0]], check=_item_check("save"), label="save", shape="transfer",
        doc="Transfer to the level above (numpy: identity; cost: the array's size).",
        interval=iv.image(iv.same), constant=passes)
declare("cast", lambda xs, core: [as_dtype(core.params["dtype"]).quantize(xs[0])],
        flops=lambda core: {"general": 1}, check=_item_check("cast"), label="cast", shape="circle",
        forms=printed("{0}", "{0}"),      # the store converts
        in_place=True, symbol=lambda box: f"→{box.data.param('dtype')}", requires=("dtype",), conversion=True,
        doc="Convert between number formats (numpy: round to the target format).",
        vjp=_cast_vjp, interval=iv.image(iv.same), constant=passes)

# --------------------------------------------------------------------------- reindexing


def _rename_check(core: Core):
    require(len(core.inputs) == 1 and len(core.outputs) == 1, "rename", "takes one array to one array")
    a, b = core.inputs[0], core.outputs[0]
    require(len(a) == len(b) and all(x.size == y.size for x, y in zip(a, b)), "rename",
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
        vjp=_rename_vjp, interval=iv.image(iv.same), constant=passes)
