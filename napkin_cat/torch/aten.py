"""The ATen operations napkin-cat translates, each as the library's boxes: a table from the operation's name to a
rule written on :class:`~napkin_cat.torch.translate.Translation`'s operations (``ATEN``).

======================================  =========================================================================
ATen operations                         boxes
======================================  =========================================================================
mm, bmm, matmul, einsum, linear, addmm  one contraction (``nc.einsum``), plus the bias
softmax, log_softmax                    ``nc.softmax``; ``x − logsumexp(x)``
add sub mul div (tensor or number)      ``add`` … ``div``; with a number ``shift`` / ``scale``
exp log tanh sigmoid relu silu sqrt     the maps of the same name; ``gelu`` is ``gelu_erf`` (exact) or, with
rsqrt neg abs reciprocal, pow 2 …       ``approximate='tanh'``, ``gelu``; ``pow`` by 2, 3, ½, −½, −1: ``square``, …;
sin cos erf, maximum minimum            ``maximum`` / ``minimum``
to (a dtype), _to_copy                  ``nc.cast`` where exact: an integer or bool to a real format, bool to int
gt ge lt le eq ne, logical ops, where   ``nc.compare`` (a number: a closed constant), ``nc.logical``,
masked_fill                             ``nc.where`` / ``nc.select``
sum mean amax amin max min logsumexp    ``nc.reduce`` (``max.dim``'s values; its indices are refused when used)
gather, index_select, embedding         ``nc.gather`` (one index per row; the table read at the indices)
index (x[i, j] by integer tensors)      one ``nc.gather`` per index (a table read at positions)
floor_divide, remainder                 ``floordiv`` / ``mod`` (``floordiv_by`` / ``mod_by`` with a number)
layer_norm, rms_norm                    decomposed: mean, sub, square, mean, shift ε, rsqrt, mul (γ), add (β)
var, std, var_mean, std_mean            decomposed: mean, sub, square, mean, scale n/(n − correction), sqrt:
                                        :mod:`~napkin_cat.torch.moments`
cross_entropy_loss, nll_loss            ``logsumexp − gather`` (``−gather``), its mean or sum (targets in [0, v)):
                                        :mod:`~napkin_cat.torch.losses`
clamp                                   ``max`` then ``min`` with its bounds
new_ones zeros full scalar_tensor …     a number known at translation: :mod:`~napkin_cat.torch.filled`
scaled_dot_product_attention            the library's attention: ``softmax_β(Q Kᵀ) V``, ``is_causal`` a mask
                                        from positions (``x ≤ q``), a bool mask by ``where``, a float one added
views                                   transpose, permute, t, unsqueeze, squeeze, expand, a view or reshape
                                        that only adds or drops size-1 dimensions, contiguous, clone, dropout(0)
======================================  =========================================================================

A reshape that splits or merges axes (``(n, h·d) → (n, h, d)``) has no box yet and is refused, as is every
operation not in the table: :class:`~napkin_cat.errors.UnsupportedOperationError` naming it and where it is.

An integer operand of a float result (``q_idx * 0.5``) is cast first: torch's type promotion.

>>> [op for op in sorted(ATEN) if op.startswith(("floor", "remainder", "index."))]
['floor_divide.Scalar', 'floor_divide.default', 'index.Tensor', 'remainder.Scalar', 'remainder.Tensor']
"""
from __future__ import annotations

import math
import numbers

import sympy

from napkin_cat.syntax.dtype import BOOL, INT32
from napkin_cat.syntax.maps import GELU_APPROXIMATIONS
from napkin_cat.torch.equations import explicit
from napkin_cat.torch.filled import FILLED
from napkin_cat.torch.losses import LOSSES
from napkin_cat.torch.moments import MOMENTS
from napkin_cat.torch.traced import Tensor
from napkin_cat.torch.translate import Translation

#: ATen operation (``"mm.default"``, the name after ``aten.``) → its rule ``rule(t, *args, **kwargs)``
ATEN: dict = {**LOSSES, **MOMENTS, **FILLED}
#: checks that compute nothing (torch.export records them beside the operations): skipped
CHECKS = {"_assert_tensor_metadata.default", "_assert_scalar.default", "sym_constrain_range_for_size.default",
          "_assert_async.msg"}
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def rule(*names):
    def register(fn):
        for n in names:
            ATEN[n] = fn
        return fn
    return register


def is_number(v) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, bool)


# --------------------------------------------------------------------------------------------- contractions
@rule("mm.default", "bmm.default", "matmul.default")
def matmul(t: Translation, a: Tensor, b: Tensor):
    """torch.matmul's letters: batch dimensions broadcast from the right, ``…ij, …jk → …ik`` (a vector loses its)."""
    if a.rank == 0 or b.rank == 0:
        t.refuse("matmul of a 0-d tensor")
    nb = max(a.rank, b.rank, 2) - 2                  # a vector is promoted to a matrix, then loses its index
    batch = LETTERS[:nb]
    la = "J" if a.rank == 1 else batch[nb - (a.rank - 2):] + "IJ"
    lb = "J" if b.rank == 1 else batch[nb - (b.rank - 2):] + "JK"
    out = batch + ("I" if a.rank > 1 else "") + ("K" if b.rank > 1 else "")
    return t.contract([la, lb], out, [a, b])


@rule("einsum.default")
def einsum(t: Translation, equation: str, operands):
    """``torch.einsum``: each ``...`` spelled as letters of its own (broadcast from the right, as torch's), an
    equation without ``->`` given torch's implicit output (the ellipsis, then the letters used once, sorted)."""
    ins, out = explicit(t, equation.replace(" ", ""), [x.rank for x in operands])
    return t.contract(ins, out, list(operands))


@rule("linear.default")
def linear(t: Translation, x: Tensor, w: Tensor, b: Tensor | None = None):
    """``x Wᵀ + b``: ``…i, oi → …o``."""
    batch = LETTERS[:x.rank - 1]
    y = t.contract([batch + "I", "OI" if w.rank == 2 else "I"], batch + ("O" if w.rank == 2 else ""), [x, w])
    return y if b is None else t.pointwise("add", y, b)


@rule("addmm.default")
def addmm(t: Translation, bias: Tensor, a: Tensor, b: Tensor, *, beta=1, alpha=1):
    y = scaled(t, t.contract(["IJ", "JK"], "IK", [a, b]), alpha)
    return t.pointwise("add", y, scaled(t, bias, beta))


def scaled(t: Translation, x: Tensor, c) -> Tensor:
    return x if c == 1 else t.pointwise("scale", x, const=c)


# --------------------------------------------------------------------------------------------- softmax
@rule("softmax.int", "_softmax.default")
def softmax(t: Translation, x: Tensor, dim: int, *rest, **kw):
    return t.softmax(x, dim)


@rule("log_softmax.int", "_log_softmax.default")
def log_softmax(t: Translation, x: Tensor, dim: int, *rest, **kw):
    """``x − logsumexp(x)`` along ``dim``."""
    return t.pointwise("sub", x, t.reduce("logsumexp", x, [dim], keepdim=True))


@rule("logsumexp.default")
def logsumexp(t: Translation, x: Tensor, dims, keepdim=False):
    return t.reduce("logsumexp", x, list(dims), keepdim)


# --------------------------------------------------------------------------------------------- elementwise maps
UNARY = {"exp": "exp", "log": "log", "tanh": "tanh", "sigmoid": "sigmoid", "relu": "relu", "silu": "silu",
         "sqrt": "sqrt", "rsqrt": "rsqrt", "neg": "neg", "abs": "abs", "reciprocal": "recip", "square": "square",
         "sin": "sin", "cos": "cos", "erf": "erf", "special_erf": "erf"}


def unary(kind):
    return lambda t, x: t.pointwise(kind, promoted(t, x))


for _name, _kind in UNARY.items():
    rule(f"{_name}.default")(unary(_kind))


@rule("gelu.default")
def gelu(t: Translation, x: Tensor, approximate: str = "none"):
    """``F.gelu``: the exact ``x·Φ(x)`` (``approximate='none'``, the map ``gelu_erf``) or its tanh approximation
    (``'tanh'``, the map ``gelu``)."""
    if approximate not in GELU_APPROXIMATIONS:
        t.refuse(f"GELU with approximate={approximate!r}; torch's are {sorted(GELU_APPROXIMATIONS)}")
    return t.pointwise(GELU_APPROXIMATIONS[approximate], promoted(t, x))


@rule("pow.Tensor_Scalar")
def power(t: Translation, x: Tensor, exponent):
    """``x ** e`` for e in 1, 2, 3, ½, −½, −1 (the maps napkin-cat has)."""
    if exponent == 1:
        return x
    if exponent == 3:
        return t.pointwise("mul", t.pointwise("square", x), x)
    kinds = {2: "square", 0.5: "sqrt", -0.5: "rsqrt", -1: "recip"}
    if exponent not in kinds:
        t.refuse(f"x ** {exponent}: napkin-cat raises to the powers 1, 2, 3, 0.5, -0.5 and -1 only")
    return t.pointwise(kinds[exponent], x)


def promoted(t: Translation, x):
    """``x`` in the operation's result format (torch's type promotion: an integer tensor times a float, an integer
    ``exp``, compute in the float format): cast where they differ, else ``x`` itself (a number stays a number)."""
    if not isinstance(x, Tensor) or getattr(t, "dtype", None) is None or t.dtype == BOOL or x.dtype == t.dtype:
        return x
    if not x.dtype.is_integer and not t.dtype.is_integer:
        t.refuse(f"it mixes a {x.dtype.name} tensor into a {t.dtype.name} result; napkin-cat converts formats only "
                 f"by an explicit .to()")
    return t.cast(x, t.dtype)


def binary(kind: str, with_number):
    """A map of two tensors; a number as the second operand goes to ``with_number(t, x, c)``; an integer operand
    of a float result is cast first (:func:`promoted`)."""
    def translate(t: Translation, a, b, *, alpha=1):
        a, b = promoted(t, a), promoted(t, b)
        if is_number(b):
            return with_number(t, a, b * alpha)
        if not isinstance(a, Tensor):
            t.refuse(f"its first operand is the number {a!r}")
        return t.pointwise(kind, a, scaled(t, b, alpha))
    return translate


rule("add.Tensor", "add.Scalar")(binary("add", lambda t, x, c: x if c == 0 else t.pointwise("shift", x, const=c)))
rule("sub.Tensor", "sub.Scalar")(binary("sub", lambda t, x, c: x if c == 0 else t.pointwise("shift", x, const=-c)))
rule("mul.Tensor", "mul.Scalar")(binary("mul", lambda t, x, c: scaled(t, x, c)))
rule("div.Tensor", "div.Scalar")(binary("div", lambda t, x, c: scaled(t, x, sympy.Rational(1) / sympy.sympify(c)
                                                                   if isinstance(c, int) else 1 / c)))


@rule("rsub.Scalar", "rsub.Tensor")
def rsub(t: Translation, x: Tensor, c, *, alpha=1):
    """``c − alpha·x``."""
    x, c = promoted(t, x), promoted(t, c)
    if not is_number(c):
        return t.pointwise("sub", c, scaled(t, x, alpha))
    return t.pointwise("shift", t.pointwise("neg", scaled(t, x, alpha)), const=c)


@rule("maximum.default", "minimum.default", "clamp_min.default", "clamp_max.default")
def extremum(t: Translation, a: Tensor, b):
    kind = "max" if t.op in ("maximum.default", "clamp_min.default") else "min"
    a, b = promoted(t, a), promoted(t, b)
    return t.pointwise(kind, a, scalar(t, b, a))


@rule("clamp.default", "clamp.Tensor")
def clamp(t: Translation, x: Tensor, lo=None, hi=None):
    """``x.clamp(lo, hi)`` = ``min(max(x, lo), hi)`` (a bound None: none that side)."""
    x = promoted(t, x)
    x = x if lo is None else t.pointwise("max", x, scalar(t, promoted(t, lo), x))
    return x if hi is None else t.pointwise("min", x, scalar(t, promoted(t, hi), x))


@rule("floor_divide.default", "floor_divide.Scalar", "remainder.Tensor", "remainder.Scalar", "div.Tensor_mode")
def division(t: Translation, a, b, *, rounding_mode="floor"):
    """``a // b`` and ``a % b`` (Python's: floor division, the remainder takes b's sign;
    :mod:`napkin_cat.syntax.division`); by a number, ``floordiv_by`` / ``mod_by``.
    ``div(rounding_mode='trunc')`` rounds toward 0: refused."""
    if rounding_mode != "floor":
        t.refuse(f"division with rounding_mode={rounding_mode!r}; napkin-cat divides with rounding_mode='floor' "
                 f"(a // b) or true division (a / b)")
    if not isinstance(a, Tensor):
        t.refuse(f"its first operand is the number {a!r}")
    kind = "mod" if t.op.startswith("remainder") else "floordiv"
    a, b = promoted(t, a), promoted(t, b)
    if is_number(b):
        if b == 0:
            t.refuse(f"{'a remainder' if kind == 'mod' else 'a floor division'} by the number 0")
        return t.pointwise(kind + "_by", a, const=b)
    return t.pointwise(kind, a, b)


def scalar(t: Translation, value, like: Tensor) -> Tensor:
    """``value`` as a tensor: itself, or a number as a constant of ``like``'s format (closed: made from positions,
    :meth:`~napkin_cat.torch.translate.Translation.constant`)."""
    return value if isinstance(value, Tensor) else t.constant(value, like.dtype, like)


# --------------------------------------------------------------------------------------------- masks
COMPARISONS = ("gt", "ge", "lt", "le", "eq", "ne")
for _op in COMPARISONS:
    rule(f"{_op}.Tensor", f"{_op}.Scalar")(lambda t, a, b, _op=_op: t.compare(_op, a, scalar(t, b, a)))


@rule("logical_and.default", "logical_or.default", "bitwise_and.Tensor", "bitwise_or.Tensor", "__and__.Tensor",
      "__or__.Tensor")
def logic(t: Translation, a: Tensor, b: Tensor):
    if a.dtype != BOOL or b.dtype != BOOL:
        t.refuse("a logical operation on tensors that are not bool")
    return t.logical("and" if "and" in t.op else "or", a, b)


@rule("logical_not.default", "bitwise_not.default")
def negation(t: Translation, a: Tensor):
    if a.dtype != BOOL:
        t.refuse("a logical not of a tensor that is not bool")
    return t.logical("not", a)


@rule("where.self", "where.ScalarOther", "where.ScalarSelf")
def where(t: Translation, mask: Tensor, a, b):
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return t.select(mask, a, b)
    if isinstance(a, Tensor):
        return t.where(mask, a, float(b))
    if isinstance(b, Tensor):
        return t.where(t.logical("not", mask), b, float(a))
    t.refuse("torch.where of two numbers (a tensor made of constants)")


@rule("masked_fill.Scalar")
def masked_fill(t: Translation, x: Tensor, mask: Tensor, value):
    """``mask ? value : x``."""
    return t.where(t.logical("not", mask), x, float(value))


# --------------------------------------------------------------------------------------------- reductions
def all_dims(x: Tensor, dims):
    return list(range(x.rank)) if dims is None or (not isinstance(dims, int) and len(dims) == 0) else \
        ([dims] if isinstance(dims, int) else list(dims))


def reduction(kind: str):
    def translate(t: Translation, x: Tensor, dims=None, keepdim=False, *, dtype=None):
        return t.reduce(kind, x, all_dims(x, dims), keepdim)
    return translate


rule("sum.dim_IntList", "sum.default")(reduction("sum"))
rule("mean.dim", "mean.default")(reduction("mean"))
rule("amax.default", "max.default")(reduction("max"))
rule("amin.default", "min.default")(reduction("min"))


class Indices:
    """``max.dim``'s second output, the argmax: refused where the model reads it."""


@rule("max.dim", "min.dim")
def extremum_along(t: Translation, x: Tensor, dim: int, keepdim=False):
    return t.reduce("max" if t.op == "max.dim" else "min", x, [dim], keepdim), Indices()


# --------------------------------------------------------------------------------------------- indexing
@rule("gather.default")
def gather(t: Translation, x: Tensor, dim: int, index: Tensor, *, sparse_grad=False):
    return t.gather(x, dim, index)


@rule("index_select.default")
def index_select(t: Translation, x: Tensor, dim: int, index: Tensor):
    """``x.index_select(dim, index)``: ``x`` viewed with ``dim`` first, read at ``index`` (a gather), viewed back."""
    dim %= x.rank
    if x.dims[dim] is None:
        t.refuse("index_select along a dimension of size 1 (a broadcast, not a lookup)")
    others = [p for p in range(x.rank) if p != dim]
    y = t.index(t.view(x, (x.dims[dim],) + tuple(x.dims[p] for p in others)), [index])
    n = index.rank
    return t.view(y, y.dims[n:n + dim] + y.dims[:n] + y.dims[n + dim:])


@rule("index.Tensor")
def index(t: Translation, x: Tensor, indices):
    """``x[i₀, …, i_{m−1}]`` (advanced indexing of the leading dimensions by integer tensors, which broadcast):
    ``y[…, r] = x[i₀[…], …, i_{m−1}[…], r]``, one gather per index (a captured table read at positions: a document
    id, a per-head slope, a relative bias), its FLOPs one per item read, not the table's length.  A negative index
    counts from the end, as torch's: read at ``i mod n`` where the example has one
    (:func:`napkin_cat.torch.exported.mark_wraps`); an index outside ``[−n, n)`` (``[0, n)`` where the example
    has none negative) is refused on the example's values (:func:`napkin_cat.torch.exported.check_indices`); the
    diagram's gather reads 0 there."""
    if any(i is None for i in indices) or not all(isinstance(i, Tensor) for i in indices):
        t.refuse("indexing with a slice (:) before an index tensor, or by a bool mask; napkin-cat indexes the leading "
                 "dimensions by integer tensors")
    if any(i.dtype == BOOL for i in indices):
        t.refuse("indexing by a bool mask (its result's size depends on the values)")
    m = len(indices)
    if m > x.rank or any(x.dims[k] is None for k in range(m)):
        t.refuse(f"it indexes {m} dimensions of a tensor of shape {tuple(t.size_of(x))} (a dimension of size 1 is "
                 f"no lookup)")
    sizes = t.size_of(x)
    if any(not isinstance(sizes[k], int) for k in t.wraps):
        t.refuse("a negative index into a table of symbolic size (counted from an end the trace does not know)")
    return t.index(x, [t.pointwise("mod_by", i, const=sizes[k]) if k in t.wraps else i for k, i in enumerate(indices)])


@rule("embedding.default")
def embedding(t: Translation, weight: Tensor, indices: Tensor, padding_idx=-1, *rest):
    """``weight[indices]``: the table's rows read at the indices (a gather)."""
    if weight.dims[0] is None:
        t.refuse("an embedding table of one row")
    return t.index(weight, [indices])


# --------------------------------------------------------------------------------------------- layers
def normalise(t: Translation, x: Tensor, k: int, eps: float, *, centre: bool) -> Tensor:
    """``(x − mean) / sqrt(var + ε)`` over the last ``k`` dimensions (``x / sqrt(mean x² + ε)`` uncentred)."""
    dims = list(range(x.rank - k, x.rank))
    if centre:
        x = t.pointwise("sub", x, t.reduce("mean", x, dims, keepdim=True))
    var = t.reduce("mean", t.pointwise("square", x), dims, keepdim=True)
    return t.pointwise("mul", x, t.pointwise("rsqrt", t.pointwise("shift", var, const=eps)))


@rule("layer_norm.default")
def layer_norm(t: Translation, x: Tensor, shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    y = normalise(t, x, len(shape), eps, centre=True)
    y = y if weight is None else t.pointwise("mul", y, weight)
    return y if bias is None else t.pointwise("add", y, bias)


@rule("rms_norm.default")
def rms_norm(t: Translation, x: Tensor, shape, weight=None, eps=None):
    y = normalise(t, x, len(shape), t.eps if eps is None else eps, centre=False)
    return y if weight is None else t.pointwise("mul", y, weight)


@rule("scaled_dot_product_attention.default")
def attention(t: Translation, q: Tensor, k: Tensor, v: Tensor, attn_mask=None, dropout_p=0.0, is_causal=False, *,
              scale=None, enable_gqa=False):
    """``softmax_β(Q Kᵀ [masked]) V`` with β = ``scale`` or 1/√E, as ``nc.library.masked_attention`` builds it."""
    if dropout_p:
        t.refuse(f"attention with dropout_p={dropout_p}; napkin-cat's attention has no dropout (use 0, or eval())")
    if enable_gqa:
        t.refuse("attention with enable_gqa=True (query heads grouped over key heads: a reshape of the heads)")
    nb = max(q.rank, k.rank, v.rank) - 2
    batch = LETTERS[:nb]

    def of(x):
        return batch[nb - (x.rank - 2):]
    scores = t.contract([of(q) + "LE", of(k) + "SE"], batch + "LS", [q, k])
    size = t.classes.size[t.classes.find(q.dims[-1])] if q.dims[-1] is not None else 1
    beta = 1 / sympy.sqrt(size) if scale is None else scale
    if is_causal:
        rows = t.view(t.position(scores.dims[-2]), (scores.dims[-2], None))
        scores = t.where(t.compare("le", t.position(scores.dims[-1]), rows), scores, -math.inf)
    if isinstance(attn_mask, Tensor) and attn_mask.dtype == BOOL:
        scores = t.where(attn_mask, scores, -math.inf)
    elif isinstance(attn_mask, Tensor):      # softmax scales its input by β: the bias enters as bias/β
        scores = t.pointwise("add", scores, scaled(t, attn_mask, 1 / beta))
    p = t.softmax(scores, -1, beta)
    return t.contract([batch + "LS", of(v) + "SV"], batch + "LV", [p, v])


# --------------------------------------------------------------------------------------------- views
@rule("transpose.int")
def transpose(t: Translation, x: Tensor, a: int, b: int):
    dims = list(x.dims)
    a, b = a % x.rank, b % x.rank
    dims[a], dims[b] = dims[b], dims[a]
    return t.view(x, dims)


@rule("t.default", "numpy_T.default")
def transposed(t: Translation, x: Tensor):
    return t.view(x, x.dims[::-1])


@rule("permute.default")
def permute(t: Translation, x: Tensor, order):
    return t.view(x, [x.dims[p % x.rank] for p in order])


@rule("unsqueeze.default")
def unsqueeze(t: Translation, x: Tensor, dim: int):
    dim %= x.rank + 1
    return t.view(x, x.dims[:dim] + (None,) + x.dims[dim:])


@rule("squeeze.dim", "squeeze.dims", "squeeze.default")
def squeeze(t: Translation, x: Tensor, dims=None):
    dims = all_dims(x, dims)
    return t.view(x, [c for p, c in enumerate(x.dims) if not (p in [d % max(x.rank, 1) for d in dims] and c is None)])


@rule("view.default", "reshape.default", "_unsafe_view.default")
def reshape(t: Translation, x: Tensor, shape):
    """A view that only adds or drops size-1 dimensions (the others kept in order); splitting or merging an axis
    is refused."""
    kept = [c for c in x.dims if c is not None]
    sizes = [t.classes.size[t.classes.find(c)] for c in kept]
    target = [s for s in t.shape if s != 1]
    if [sympy.sympify(s) for s in sizes] != [sympy.sympify(s) for s in target]:
        t.refuse(f"it reshapes {tuple(t.size_of(x))} to {tuple(t.shape)}, splitting or merging axes; napkin-cat has "
                 f"no box that splits an axis in two or merges two yet (write the model with separate dimensions, "
                 f"an einsum over the heads for example)")
    it = iter(kept)
    return t.view(x, [None if s == 1 else next(it) for s in t.shape])


@rule("expand.default")
def expand(t: Translation, x: Tensor, sizes, *, implicit=False):
    return t.expanded(x, t.shape)


@rule("contiguous.default", "clone.default", "alias.default", "detach.default", "detach_.default",
      "lift_fresh_copy.default")
def same(t: Translation, x: Tensor, *rest, **kw):
    return x


@rule("dropout.default")
def dropout(t: Translation, x: Tensor, p: float, train: bool):
    if p and train:
        t.refuse(f"dropout with p={p} in training mode; napkin-cat's diagrams are deterministic (call .eval())")
    return x


@rule("_to_copy.default", "to.dtype")
def convert(t: Translation, x: Tensor, *rest, **kw):
    """``x.to(dtype)``: the same tensor within a format (int64 → int32 are one), an exact conversion by ``nc.cast``
    (an integer or a bool to a real format, ``(q_idx - kv_idx).float()``; a bool to an integer); a real to an
    integer or a bool (torch truncates, ``nc.cast`` rounds) and between real formats are refused."""
    if t.dtype == x.dtype:
        return x
    exact = (x.dtype == BOOL or x.dtype.is_integer) and not (t.dtype == BOOL or t.dtype.is_integer) or \
        (x.dtype == BOOL and t.dtype == INT32)
    if not exact:
        t.refuse(f"it converts a {x.dtype.name} tensor to {t.dtype.name}; napkin-cat converts an integer or a bool "
                 f"to a real format, and a bool to an integer (int32)")
    return t.cast(x, t.dtype)
