"""Index structure: positions, comparisons, selection and gathers (masks and biases as diagrams).

A mask or a bias is not an input array: it is a diagram computed from the *positions* of the axes it
varies along.  The kinds:

=====================  ===========================  ============================================  =========
kind                   item signature               meaning                                       FLOPs
=====================  ===========================  ============================================  =========
``position``           () → R  (weaved over ``a``)  the index of the item along ``a`` (iota)       0
``le lt ge gt eq ne``  R ⊗ R → R (bool)             a comparison                                  general 1
``and or`` / ``not``   R ⊗ R → R / R → R            logic on masks                                general 1
``where``              R ⊗ R → R                    ``c ? a : other`` (``other`` a constant)      general 1
``select``             R ⊗ R ⊗ R → R                ``c ? a : b``                                 general 1
``gather``             Rᵛ ⊗ R → R                   ``x[t]``: take along ``v`` at an int index    general 1
                                                    (each woven over its own axes: a table read
                                                    at positions computed over other axes)
=====================  ===========================  ============================================  =========

A position inside a Grid or a Stream that partitions its axis is the *global* position: the tile's start
plus the index within it (``Core.offset``, which every functor sets from the tile it runs).  A gather
inside a Stream along its axis reads a slice: it contributes only where the index falls in the slice,
and 0 elsewhere, so its accumulator is the sum::

    gather(x₁ ⧺ x₂, t) == gather(x₁, t) + gather(x₂, t − |x₁|)        position_a[i] == offset_a + i

>>> import numpy as np, napkin_cat as nc
>>> causal = nc.Builder(nc.Ty())
>>> qi, xi = causal(position("q", q=3)), causal(position("x", x=3))
>>> mask = causal.build(causal(compare("le", "x, q -> q x", q=3, x=3), xi, qi))
>>> nc.evaluate(mask).astype(int).tolist()
[[1, 0, 0], [1, 1, 0], [1, 1, 1]]
>>> g = gather("n v, n -> n")
>>> nc.evaluate(g, np.arange(6.).reshape(2, 3), np.array([2, 0])).tolist()
[2.0, 3.0]
"""
from __future__ import annotations

import numpy as np

from napkin_cat.errors import IndexingError, SignatureError
from napkin_cat.syntax import interval as iv
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.adapter import Diagram
from napkin_cat.syntax.axis import Axis, check_name
from napkin_cat.syntax.dtype import BOOL, FP32, INT32, as_dtype
from napkin_cat.syntax.printed import printed, structured
from napkin_cat.syntax.maps import elementwise_check, require
from napkin_cat.syntax.ops import SUM
from napkin_cat.syntax.primitive import Core, Weave, declare
from napkin_cat.syntax.vjp import no_cotangent
from napkin_cat.syntax.weave import build_box
from napkin_cat.syntax.construct import axes_for, parse


def _items(name, arity):
    return elementwise_check(name, arity, example="a signature such as 'x, q -> q x'")


# --------------------------------------------------------------------------- positions
def _position_check(core: Core):
    require(core.inputs == () and core.outputs == ((),), "position",
            "the item signature is () → R: no input, one item, weaved over the axis it numbers")


def _position_impl(xs, core: Core):
    """Each weave's positions, broadcast: only the axis the box numbers varies (one weave in practice)."""
    if not core.weaves:
        raise SignatureError("position: the box numbers no axis (it must be weaved over one)")
    axis = core.weaves[-1]          # the innermost weave is the axis numbered; outer ones only copy it
    n = int(core.value(axis.size))
    shape = [1] * len(core.weaves)
    shape[-1] = n
    return [core.positions(axis.name, n).reshape(shape)]


def _position_interval(ins, box, tile_of):
    """The positions of the tile the numbered axis is in: ``[start, start + extent − 1]``."""
    axis = box.cod.inside[0].axes[0]
    return iv.tile(*tile_of(axis.name, axis.size))


declare("position", _position_impl, flops=lambda core: {}, check=_position_check, label="pos", shape="circle",
        forms=structured("position"),
        doc="The position of each index along the axis it is weaved over (iota); global inside a partition.",
        vjp=no_cotangent, interval=_position_interval, locates=lambda box: box.cod.inside[0].axes[0].name)

# --------------------------------------------------------------------------- comparisons and logic
#: comparison kind → (numpy function, symbol, interval image: the truth of the comparison on a tile, printed forms:
#: C (CUDA's too) and Triton)
COMPARISONS = {
    "le": (np.less_equal, "≤", iv.image(iv.less_equal),
           printed("({0} <= {1} ? 1.0f : 0.0f)", "tl.where({0} <= {1}, 1.0, 0.0)")),
    "lt": (np.less, "<", iv.image(iv.less), printed("({0} < {1} ? 1.0f : 0.0f)", "tl.where({0} < {1}, 1.0, 0.0)")),
    "ge": (np.greater_equal, "≥", iv.image(lambda a, b: iv.less_equal(b, a)),
           printed("({0} >= {1} ? 1.0f : 0.0f)", "tl.where({0} >= {1}, 1.0, 0.0)")),
    "gt": (np.greater, ">", iv.image(lambda a, b: iv.less(b, a)),
           printed("({0} > {1} ? 1.0f : 0.0f)", "tl.where({0} > {1}, 1.0, 0.0)")),
    "eq": (np.equal, "=", iv.image(iv.equal), printed("({0} == {1} ? 1.0f : 0.0f)", "tl.where({0} == {1}, 1.0, 0.0)")),
    "ne": (np.not_equal, "≠", iv.image(iv.not_equal),
           printed("({0} != {1} ? 1.0f : 0.0f)", "tl.where({0} != {1}, 1.0, 0.0)")),
}
#: logical kind → (numpy function, arity, symbol, interval image, printed forms)
LOGICAL = {
    "and": (np.logical_and, 2, "∧", iv.image(iv.conjunction),
            printed("(({0} != 0.0f && {1} != 0.0f) ? 1.0f : 0.0f)", "tl.where(({0} != 0.0) & ({1} != 0.0), 1.0, 0.0)")),
    "or": (np.logical_or, 2, "∨", iv.image(iv.disjunction),
           printed("(({0} != 0.0f || {1} != 0.0f) ? 1.0f : 0.0f)", "tl.where(({0} != 0.0) | ({1} != 0.0), 1.0, 0.0)")),
    "not": (np.logical_not, 1, "¬", iv.image(iv.complement),
            printed("({0} == 0.0f ? 1.0f : 0.0f)", "tl.where({0} == 0.0, 1.0, 0.0)")),
}

for _name, (_fn, _label, _interval, _forms) in COMPARISONS.items():
    declare(_name, lambda xs, core, fn=_fn: [fn(xs[0], xs[1])], flops=lambda core: {"general": 1},
            check=_items(_name, 2), label=_label, shape="circle", doc=f"The comparison a {_label} b (a mask).",
            vjp=no_cotangent, interval=_interval, forms=_forms)
for _name, (_fn, _arity, _label, _interval, _forms) in LOGICAL.items():
    declare(_name, lambda xs, core, fn=_fn: [fn(*[np.asarray(x, bool) for x in xs])],
            flops=lambda core: {"general": 1}, check=_items(_name, _arity), label=_label, shape="circle",
            doc=f"Logical {_name} of masks.", vjp=no_cotangent, interval=_interval, forms=_forms)


def _where_impl(xs, core: Core):
    other = core.value(core.params.get("other", -np.inf))
    return [np.where(np.asarray(xs[0], bool), xs[1], other)]


def _masked(ctx, mask, yb):
    """``ȳ`` where ``mask`` holds, 0 elsewhere (the mask broadcast by the names it carries)."""
    return ctx.box("where", [mask, yb], yb.array.axes, params={"other": 0.0}, dtype=yb.array.dtype)


def _where_vjp(ctx, box, ins, outs, ybar):
    """``ā = ȳ`` where the mask holds (0 elsewhere); the mask: none."""
    (yb,) = ybar
    a = ctx.x(ins[1])
    return [None, ctx.sum_to(_masked(ctx, ctx.x(ins[0]), yb), a.array)]


def _where_interval(ins, box, tile_of):
    other = float(box.data.param("other", -np.inf))
    return iv.hull(ins[1], iv.point(other))


def _where_constant(box, c):
    """``where(m, v, other=v) = v`` whatever ``m`` is; with ``m`` constant, the side it picks."""
    other = float(box.data.param("other", -np.inf))
    return (other if c[1] == other else None) if c[0] is None else (c[1] if c[0] else other)


declare("where", _where_impl, flops=lambda core: {"general": 1}, check=_items("where", 2), label="where",
        shape="circle", doc="c ? a : other, with a constant other (−∞ by default: a masked score).",
        forms=printed("({0} != 0.0f ? {1} : {other})", "tl.where({0} != 0.0, {1}, {other})",
                      defaults={"other": -np.inf}),
        vjp=_where_vjp, interval=_where_interval, constant=_where_constant)


def _select_vjp(ctx, box, ins, outs, ybar):
    """``ā = ȳ`` where the mask holds, ``b̄ = ȳ − ā``; the mask: none."""
    (yb,) = ybar
    abar = _masked(ctx, ctx.x(ins[0]), yb)
    bbar = ctx.ew("sub", yb, abar)
    return [None, ctx.sum_to(abar, ctx.x(ins[1]).array), ctx.sum_to(bbar, ctx.x(ins[2]).array)]


def _select_constant(box, c):
    return (c[1] if c[1] is not None and c[1] == c[2] else None) if c[0] is None else (c[1] if c[0] else c[2])


declare("select", lambda xs, core: [np.where(np.asarray(xs[0], bool), xs[1], xs[2])],
        flops=lambda core: {"general": 1}, check=_items("select", 3), label="select", shape="circle",
        doc="c ? a : b.", forms=printed("({0} != 0.0f ? {1} : {2})", "tl.where({0} != 0.0, {1}, {2})"),
        vjp=_select_vjp, interval=iv.image(lambda m, a, b: iv.hull(a, b)), constant=_select_constant)

# --------------------------------------------------------------------------- gather


def _gather_check(core: Core):
    require(len(core.inputs) == 2 and len(core.outputs) == 1 and core.outputs[0] == (), "gather",
            "the item signature is Rᵛ ⊗ R → R: an array along one axis and an index item to one item")
    require(len(core.inputs[0]) == 1 and core.inputs[1] == (), "gather",
            f"gathers along one axis of its first input at an item index, got core axes {core.inputs}")


def _gather_impl(xs, core: Core):
    """``x[t − offset]`` where the index falls in this slice of the axis, 0 elsewhere (so slices add up)."""
    x, t = np.asarray(xs[0]), np.asarray(xs[1])
    (axis,) = core.inputs[0]
    if not (np.issubdtype(t.dtype, np.integer) or np.issubdtype(t.dtype, np.bool_)):
        if not np.all(np.asarray(t) == np.rint(t)):
            raise IndexingError(f"gather along {axis.name!r}: the index input holds non-integers "
                                f"(dtype {t.dtype}); it must hold integer positions")
    n = x.shape[-1]
    local = core.local(axis.name, np.rint(t).astype(np.int64), n)
    inside = (local >= 0) & (local < n)
    batch = np.broadcast_shapes(x.shape[:-1], local.shape)
    xb = np.broadcast_to(x, batch + (n,))
    picked = np.take_along_axis(xb, np.broadcast_to(np.clip(local, 0, n - 1), batch)[..., None], -1)[..., 0]
    return [np.where(np.broadcast_to(inside, batch), picked, np.zeros((), x.dtype))]


def _gather_vjp(ctx, box, ins, outs, ybar):
    """``x̄[…, v] = Σ ȳ[…]`` over the items whose index is ``v`` (a scatter written as a mask of positions over the
    axes of ``x`` and of ``t``, summed over the index's axes that ``x`` is not woven over: a table read at many
    positions); no cotangent for the index."""
    (yb,), x, t = ybar, ctx.x(ins[0]), ctx.x(ins[1])
    (axis,) = [a for a in x.array.axes if a.name not in box.data.weave_names]
    pos = ctx.b(position(axis.name, level=x.array.level, **{axis.name: axis.size}))
    scattered = Array(x.array.axes + tuple(a for a in t.array.axes if a.name not in x.array.names), x.array.level,
                      x.array.dtype)
    hit = ctx.box("eq", [pos, t], scattered.axes, dtype=BOOL)
    return [ctx.sum_to(_masked(ctx, hit, ctx.broadcast(yb, scattered)), x.array), None]


def _gathered_axis(box) -> str:
    """The axis a gather reads along: its first operand's one axis that is not woven."""
    (axis,) = [a for a in box.dom.inside[0].names if a not in box.data.weave_names]
    return axis


declare("gather", _gather_impl, flops=lambda core: {"general": 1}, check=_gather_check, accumulator=SUM,
        label="gather", shape="box", forms=structured("gather"),
        doc="x[t]: the value of the first input at the integer index t along its core axis (0 outside a slice).",
        vjp=_gather_vjp, constant=lambda box, c: 0.0 if c[0] == 0 else None, locates=_gathered_axis)


# --------------------------------------------------------------------------- constructors
def _axes(names, sizes, kind):
    out = []
    for n in names:
        check_name(n)
        out.append(Axis(n, sizes.get(n)))
    return out


def _parse(signature: str, kind: str, arity: int):
    ins, outs = parse(signature)
    if outs is None and len(ins) == 1:      # "q x": every operand and the output over the same axes
        ins, outs = [list(ins[0])] * arity, [list(ins[0])]
    if outs is None or len(ins) != arity or len(outs) != 1:
        raise SignatureError(f"{kind} takes {arity} input(s) to one output, e.g. "
                             f"{'x, q -> q x' if arity == 2 else 'q x -> q x'}; got {signature!r}")
    for i, names in enumerate(ins):
        for n in names:
            if n not in outs[0]:
                raise SignatureError(f"{kind}: input {i} axis {n!r} is not in the output {outs[0]}; "
                                     f"{kind} keeps every axis")
    return ins, outs[0], set()


def _elementwise(kind, signature, dtypes, out_dtype, level, sizes, params=None) -> Diagram:
    arity = len(dtypes)
    ins, out, _ = _parse(signature, kind, arity)
    unknown = set(sizes) - set(out)
    if unknown:
        raise SignatureError(f"sizes given for {sorted(unknown)} which {signature!r} does not name")
    axes = axes_for(ins + [out], sizes)
    dom = [Array(tuple(axes[n] for n in names), level, as_dtype(dt)) for names, dt in zip(ins, dtypes)]
    cod = [Array(tuple(axes[n] for n in out), level, as_dtype(out_dtype))]
    weaves = [Weave(n, tuple(i for i, names in enumerate(ins) if n in names)) for n in reversed(out)]
    return build_box(kind, dom, cod, weaves, params)


def position(axis: str, *, level: int = 0, dtype=INT32, **sizes) -> Diagram:
    """The positions ``0 … n−1`` of ``axis``: a box with no input whose output is weaved over ``axis``.

    >>> position("x", x=4).cod
    Ty(Array(x[4]:int32))
    """
    if isinstance(axis, Axis):
        sizes.setdefault(axis.name, axis.size)
        axis = axis.name
    check_name(axis)
    unknown = set(sizes) - {axis}
    if unknown:
        raise SignatureError(f"position of {axis!r}: sizes given for {sorted(unknown)}, which it does not name")
    if not as_dtype(dtype).is_integer:
        raise IndexingError(f"position of {axis!r}: positions are integers; dtype {as_dtype(dtype).name} is not "
                            f"(use int32, and cast the result to compute with it)")
    return build_box("position", [], [Array((Axis(axis, sizes.get(axis)),), level, as_dtype(dtype))],
                     [Weave(axis, ())])


def compare(op: str, signature: str, *, dtype=INT32, level: int = 0, **sizes) -> Diagram:
    """A comparison (``le lt ge gt eq ne``) of two arrays of ``dtype`` into a ``bool`` mask, broadcast by names.

    >>> compare("le", "x, q -> q x").cod
    Ty(Array(q×x:bool))
    """
    if op not in COMPARISONS:
        raise SignatureError(f"unknown comparison {op!r}; comparisons are {sorted(COMPARISONS)}")
    return _elementwise(op, signature, [dtype, dtype], BOOL, level, sizes)


def logical(op: str, signature: str, *, level: int = 0, **sizes) -> Diagram:
    """``and`` / ``or`` of two masks, ``not`` of one.

    >>> logical("and", "q x, q x -> q x").dom
    Ty(Array(q×x:bool), Array(q×x:bool))
    """
    if op not in LOGICAL:
        raise SignatureError(f"unknown logical operation {op!r}; they are {sorted(LOGICAL)}")
    return _elementwise(op, signature, [BOOL] * LOGICAL[op][1], BOOL, level, sizes)


def where(signature: str, *, other=-np.inf, dtype=FP32, level: int = 0, **sizes) -> Diagram:
    """``mask ? a : other``: the first input a ``bool`` mask, the second values of ``dtype``.

    >>> where("q x, q x -> q x").dom
    Ty(Array(q×x:bool), Array(q×x))
    """
    return _elementwise("where", signature, [BOOL, dtype], dtype, level, sizes, {"other": float(other)})


def select(signature: str, *, dtype=FP32, level: int = 0, **sizes) -> Diagram:
    """``mask ? a : b``: the first input a ``bool`` mask, the others values of ``dtype``."""
    return _elementwise("select", signature, [BOOL, dtype, dtype], dtype, level, sizes)


def gather(signature: str, *, dtype=FP32, index_dtype=INT32, level: int = 0, **sizes) -> Diagram:
    """Take along one axis at an integer index: ``"n v, n -> n"`` is ``y[i] = x[i, t[i]]``.

    The gathered axis is the one axis of the first input missing from the output.  The output's axes are the
    table's other axes and the index's: a table read at positions computed over other axes (a relative bias
    ``"v, q x -> q x"`` is ``y[i, j] = x[t[i, j]]``; a per-head table ``"h v, q x -> h q x"``)::

        y[o] = x[o|ₓ, t[o|ₜ]]        o|ₓ, o|ₜ: the output index restricted to the table's, the index's axes

    >>> gather("n v, n -> n").dom
    Ty(Array(n×v), Array(n:int32))
    >>> import napkin_cat as nc
    >>> X, t = np.arange(5.) * 10, np.array([[0, 4], [2, 1]])
    >>> nc.evaluate(gather("v, q x -> q x"), X, t).tolist()
    [[0.0, 40.0], [20.0, 10.0]]
    >>> gather("n v, m -> n")
    Traceback (most recent call last):
    ...
    napkin_cat.errors.IndexingError: gather 'n v, m -> n': the index carries ['m'], which the output ['n'] does ...
    """
    ins, outs = parse(signature, arrow=True)
    if len(ins) != 2 or len(outs) != 1:
        raise SignatureError(f"gather takes an array and an index to one output, e.g. 'n v, n -> n'; "
                             f"got {signature!r}")
    (src, idx), (out,) = ins, outs
    if not as_dtype(index_dtype).is_integer:
        raise IndexingError(f"gather {signature!r}: the index must be an integer array; dtype "
                            f"{as_dtype(index_dtype).name} is not (use int32)")
    gathered = [n for n in src if n not in out]
    if len(gathered) != 1:
        raise IndexingError(f"gather {signature!r}: the first input must carry one axis the output does not, the "
                            f"axis gathered along; it carries {src} and the output {out}")
    if gathered[0] in idx:
        raise IndexingError(f"gather {signature!r}: the index carries the gathered axis {gathered[0]!r}; an index "
                            f"holds one position along it per output item, and carries only output axes")
    extra = [n for n in idx if n not in out]
    if extra:
        raise IndexingError(f"gather {signature!r}: the index carries {extra}, which the output {out} does not; "
                            f"every index axis is an output axis (one index per output item)")
    unread = [n for n in out if n not in src and n not in idx]
    if unread:
        raise IndexingError(f"gather {signature!r}: the output axes {unread} are in neither input; the output "
                            f"carries the table's axes but {gathered[0]!r} and the index's")
    unknown = set(sizes) - set(src) - set(idx)
    if unknown:
        raise SignatureError(f"sizes given for {sorted(unknown)} which {signature!r} does not name")
    axes = axes_for([src, idx, out], sizes)
    dom = [Array(tuple(axes[n] for n in src), level, as_dtype(dtype)),
           Array(tuple(axes[n] for n in idx), level, as_dtype(index_dtype))]
    cod = [Array(tuple(axes[n] for n in out), level, as_dtype(dtype))]
    weaves = [Weave(n, tuple(i for i, names in enumerate((src, idx)) if n in names)) for n in reversed(out)]
    return build_box("gather", dom, cod, weaves)


__all__ = ["COMPARISONS", "LOGICAL", "position", "compare", "logical", "where", "select", "gather"]
