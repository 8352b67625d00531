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

from napkin_cat.errors import ShapeError, SignatureError
from napkin_cat.syntax.printed import Fold, Structured, printed, structured
from napkin_cat.syntax.primitive import Accumulator, Addend, Core, declare
from napkin_cat.syntax.dtype import as_dtype


def _numel(axes):
    n = 1
    for a in axes:
        n = n * a.size
    return n


def _require(cond, kind, msg):
    if not cond:
        raise SignatureError(f"{kind}: {msg}")


# --------------------------------------------------------------------------- accumulators
# printed: the fold in C (CUDA's too) and Triton; ``{max}``/``{min}`` propagate NaN in C as numpy does, so OpenMP's
# max reduction (which drops it) is no reduction of theirs
SUM = Accumulator("sum", lambda shape, dtype=float: np.zeros(shape, dtype), np.add,
                  forms={"c": Fold("{0} + {1}", reduce="+"), "triton": Fold("{0} + {1}", reduce="tl.sum")})
MAX = Accumulator("max", lambda shape, dtype=float: np.full(shape, -np.inf, dtype), np.maximum,
                  forms={"c": Fold("{max}({0}, {1})"), "triton": Fold("{max}({0}, {1})", reduce="tl.max")})
MIN = Accumulator("min", lambda shape, dtype=float: np.full(shape, np.inf, dtype), np.minimum,
                  forms={"c": Fold("{min}({0}, {1})"), "triton": Fold("{min}({0}, {1})", reduce="tl.min")})

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


declare("contract", _contract_impl, flops=_contract_flops, check=_contract_check,
        accumulator=SUM, labelled=_contract_labelled, label="·", shape="contract", forms=structured("contract"),
        doc="Contraction (dot product): the sum over shared core axes of the product of the operands.")

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


declare("softmax", _softmax_impl, flops=_softmax_flops, check=_softmax_check, label="SoftMax",
        shape="triangle", forms=structured("softmax"),
        doc="SoftMax with inverse temperature β: y = exp(βx − μ)/Σ exp(βx − μ).")


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
        label="SoftMax₀", shape="triangle", forms=structured("online_softmax", normalised=True),
        doc="Auxiliary SoftMax (Table 4): returns y = s/z with (μ, δz′, z); prior y′ ← y′·δz′/z.")
declare("softmax_unscaled", _unscaled_impl, flops=_online_flops(divides=False),
        check=_aux_check("softmax_unscaled"),
        label="SoftMax₁", shape="triangle", forms=structured("online_softmax"),
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


# name: (function(*xs, core), pipeline, printed forms: C (CUDA's too) and Triton, ``{max}``, ``{min}``, ``{exp}`` the
# dialect's helpers: in C ``nc_fmax``, ``nc_fmin`` propagate NaN as numpy does, in CUDA selects)
UNARY = {
    "id": (lambda x, c: x, None, printed("{0}", "{0}")),
    "exp": (lambda x, c: np.exp(x), "special", printed("{exp}({0})", "tl.exp({0})")),
    "log": (lambda x, c: _log(x), "special", printed("logf({0})", "tl.log({0})")),
    "abs": (lambda x, c: np.abs(x), "general", printed("fabsf({0})", "tl.abs({0})")),
    "neg": (lambda x, c: -x, "general", printed("(-{0})", "(-{0})")),
    "relu": (lambda x, c: np.maximum(x, 0), "general", printed("{max}({0}, 0.0f)", "tl.maximum({0}, 0.0)")),
    "gelu": (lambda x, c: _gelu(x), "special", printed("nc_gelu({0})", "nc_gelu({0})")),
    "silu": (lambda x, c: _silu(x), "special", printed("nc_silu({0})", "({0} * tl.sigmoid({0}))")),
    "sigmoid": (lambda x, c: _sigmoid(x), "special", printed("nc_sigmoid({0})", "tl.sigmoid({0})")),
    "tanh": (lambda x, c: np.tanh(x), "special", printed("tanhf({0})", "nc_tanh({0})")),
    "sqrt": (lambda x, c: np.sqrt(x), "special", printed("sqrtf({0})", "tl.sqrt({0})")),
    "rsqrt": (lambda x, c: 1.0 / np.sqrt(x), "special", printed("(1.0f / sqrtf({0}))", "tl.rsqrt({0})")),
    "recip": (lambda x, c: 1.0 / x, "special", printed("(1.0f / {0})", "(1.0 / {0})")),
    "square": (lambda x, c: x * x, "general", printed("({0} * {0})", "({0} * {0})")),
    "scale": (lambda x, c: c.value(c.params.get("c", 1)) * x, "general",
              printed("({c} * {0})", "({c} * {0})", defaults={"c": 1.0})),
    "shift": (lambda x, c: x + c.value(c.params.get("c", 0)), "general",
              printed("({0} + {c})", "({0} + {c})", defaults={"c": 0.0})),
    "step": (lambda x, c: np.greater(x, 0).astype(np.result_type(x, np.float32)), "general",  # Heaviside H(x)
             printed("({0} > 0.0f ? 1.0f : 0.0f)", "tl.where({0} > 0.0, 1.0, 0.0)")),
}
BINARY = {
    "add": (np.add, "general", printed("({0} + {1})", "({0} + {1})")),
    "sub": (np.subtract, "general", printed("({0} - {1})", "({0} - {1})")),
    "mul": (np.multiply, "general", printed("({0} * {1})", "({0} * {1})")),
    "div": (np.divide, "general", printed("({0} / {1})", "({0} / {1})")),
    "max": (np.maximum, "general", printed("{max}({0}, {1})", "tl.maximum({0}, {1})")),
    "min": (np.minimum, "general", printed("{min}({0}, {1})", "tl.minimum({0}, {1})")),
}
#: fused multiply-add ``a·b + c``: one instruction, a multiply and an add (the paper's "multiply-add", §5.6)
TERNARY = {
    "fma": (lambda a, b, c: a * b + c, "general", 2, printed("fmaf({0}, {1}, {2})", "tl.fma({0}, {1}, {2})")),
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


def _unary_kind(name, fn, pipeline, forms):
    declare(name, lambda xs, core, fn=fn: [fn(xs[0], core)],
            flops=(lambda core, p=pipeline: {p: 1} if p else {}),
            check=_elementwise_check(name, 1), label=name, shape="circle",
            doc=f"Elementwise {name} on items.", forms=forms)


def _binary_kind(name, fn, pipeline, forms):
    declare(name, lambda xs, core, fn=fn: [fn(xs[0], xs[1])],
            flops=lambda core, p=pipeline: {p: 1},
            check=_elementwise_check(name, 2), label=name, shape="circle",
            doc=f"Elementwise {name} of two items.", addends=ADDENDS.get(name, ()), forms=forms)


def _ternary_kind(name, fn, pipeline, flops, forms):
    declare(name, lambda xs, core, fn=fn: [fn(xs[0], xs[1], xs[2])],
            flops=lambda core, p=pipeline, n=flops: {p: n},
            check=_elementwise_check(name, 3), label=name, shape="circle",
            doc=f"Elementwise {name} of three items.", addends=ADDENDS.get(name, ()), forms=forms)


for _name, (_fn, _p, _forms) in UNARY.items():
    _unary_kind(_name, _fn, _p, _forms)
for _name, (_fn, _p, _forms) in BINARY.items():
    _binary_kind(_name, _fn, _p, _forms)
for _name, (_fn, _p, _n, _forms) in TERNARY.items():
    _ternary_kind(_name, _fn, _p, _n, _forms)

# --------------------------------------------------------------------------- reductions
#: name: (function, accumulator, printed structure: the fold a reduction prints, a mean divided by the count)
REDUCTIONS = {
    "sum": (np.sum, SUM, structured("reduce", fold=SUM)),
    "max": (np.max, MAX, structured("reduce", fold=MAX)),
    "min": (np.min, MIN, structured("reduce", fold=MIN)),
    "mean": (np.mean, None, structured("reduce", fold=SUM, mean=True)),
}


def _reduce_check(name):
    def check(core: Core):
        _require(len(core.inputs) == 1 and len(core.outputs) == 1 and core.outputs[0] == ()
                 and len(core.inputs[0]) >= 1, f"reduce_{name}",
                 "the item signature is Rᵃ → R (reduce at least one axis to an item)")
    return check


for _name, (_fn, _acc, _forms) in REDUCTIONS.items():
    declare(f"reduce_{_name}",
            lambda xs, core, fn=_fn: [fn(xs[0], axis=_last_axes(core.inputs[0]))],
            flops=lambda core: {"general": _numel(core.inputs[0])},
            check=_reduce_check(_name), accumulator=_acc, label=_name, shape="reduce", forms=_forms,
            doc=f"Reduction by {_name} over the core axes.")


def _count_impl(xs, core: Core):
    """How many values the core axes hold (a float, one per row): what a running mean divides by."""
    x = xs[0]
    axes = _last_axes(core.inputs[0])
    return [np.sum(np.ones(np.shape(x)), axis=axes)]


declare("reduce_count", _count_impl, flops=lambda core: {}, check=_reduce_check("count"), accumulator=SUM,
        label="count", shape="reduce", forms=structured("count"),
        doc="The number of values over the core axes (a chunk's extent: a running mean's weight).")

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


declare("split", _split_impl, check=_split_check, label="split", shape="split",
        forms={"c": Structured("split")},     # Triton's block tensors cannot be cut at a runtime offset
        doc="Split an axis into consecutive slices (paper Fig. primitive_weaving).")
declare("join", _join_impl, check=_join_check, label="join", shape="join", forms={"c": Structured("join")},
        doc="Join slices along an axis (inverse of split).")

# --------------------------------------------------------------------------- transfers and casts


def _item_check(name):
    def check(core: Core):
        _require(len(core.inputs) == 1 and len(core.outputs) == 1 and core.inputs[0] == ()
                 and core.outputs[0] == (), name, "acts on items; weave every axis")
    return check


declare("load", lambda xs, core: [xs[0]], check=_item_check("load"), label="load", shape="transfer",
        doc="Transfer to the level below (numpy: identity; cost: the array's size).")
declare("save", lambda xs, core: [xs[0]], check=_item_check("save"), label="save", shape="transfer",
        doc="Transfer to the level above (numpy: identity; cost: the array's size).")
declare("cast", lambda xs, core: [as_dtype(core.params["dtype"]).quantize(xs[0])],
        flops=lambda core: {"general": 1}, check=_item_check("cast"), label="cast", shape="circle",
        forms=printed("{0}", "{0}"),      # the store converts
        doc="Convert between number formats (numpy: round to the target format).")

# --------------------------------------------------------------------------- reindexing


def _rename_check(core: Core):
    _require(len(core.inputs) == 1 and len(core.outputs) == 1, "rename", "takes one array to one array")
    a, b = core.inputs[0], core.outputs[0]
    _require(len(a) == len(b) and all(x.size == y.size for x, y in zip(a, b)), "rename",
             f"renames axes of equal sizes position by position, got {a} → {b}")


declare("rename", lambda xs, core: [xs[0]], check=_rename_check, label="rename", shape="circle",
        forms=structured("rename"),
        doc="Rename axes (a reindexing: same values, new axis names).")
