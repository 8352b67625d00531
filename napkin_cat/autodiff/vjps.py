"""The context a vector-Jacobian product writes in, and the lookup of a box's product in its kind's record.

Each primitive kind declares its VJP with itself (``declare(..., vjp=rule)``: the built-in ones in
:mod:`napkin_cat.syntax.ops`, :mod:`napkin_cat.syntax.indices` and :mod:`napkin_cat.syntax.logsumexp`; the rule
protocol in :mod:`napkin_cat.syntax.vjp`); a user's kind brings its own the same way, and a kind without one
is refused by name (:class:`NoVJPError`, a :class:`~napkin_cat.errors.MissingPartError`).  With ``ȳ`` the
cotangent of ``y = f(x)``, the built-in products are:

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
gather                     ȳ at the index: ``where(position_v = t, ȳ, 0)`` (a scatter), summed over the
                           index's axes the table lacks (a table read at many positions); the index: none
position, comparisons,     none: their derivative is zero (integers, masks, and a count that does not
and, or, not, count        depend on the values)
cast, rename, id           ȳ cast back, renamed back, as it is
split / join               the parts joined (zeros for parts without a cotangent) / ȳ split
=========================  ====================================================================

>>> import napkin_cat as nc
>>> vjp_of(nc.elementwise("exp", "q").boxes[0]) is nc.engine.KINDS["exp"].vjp
True
"""
from __future__ import annotations

from napkin_cat.errors import NapkinError, NoVJPError
from napkin_cat.syntax.array import Array
from napkin_cat.syntax.dtype import FP32
from napkin_cat.syntax.primitive import Weave, kind_of
from napkin_cat.syntax.weave import build_box


#: the kinds that sum, whose cotangent is kept in fp32 when its operands are narrower (bf16, fp16, fp8): a
#: product's accumulator is fp32 on the tensor cores, and ``dP − D`` (attention's backward) subtracts two sums of
#: one size, which a 16-bit result of each would leave with a few bits (FlashAttention-2 keeps dP and D in fp32);
#: the gradient's outputs are converted back to their inputs' formats (:func:`~napkin_cat.autodiff.grad.grad`), a
#: map of cotangents keeps its widest operand's format (``dS = P ⊙ (dP − D)`` in fp32), and a product's operands
#: are rounded to one format, the narrowest (dS to bf16 once for ``dQ = dS·K``, as FlashAttention-2 does)
SUMS = ("contract", "reduce_sum")


class Context:
    """The gradient diagram under construction: forward values on demand and builders of small boxes."""

    def __init__(self, builder, value, saved=None):
        self.b, self.x = builder, value
        self.saved = saved            # the forward's saved outputs and their laws (:mod:`.saved`), or None
        self.cots: dict = {}          # value id -> the cotangent contributions reaching it so far

    # ------------------------------------------------------------------ boxes on wires
    def box(self, kind: str, wires, out_axes, *, params=None, dtype=None):
        """A ``kind`` box weaved over ``out_axes`` (each carried by the inputs that have it); the axes of the
        inputs that ``out_axes`` lacks are the box's core axes, which its kind's signature check accepts (a
        contraction or a reduction sums them) or refuses (an elementwise map)."""
        first = wires[0].array
        floats = [w.array.dtype for w in wires if w.array.dtype.family == "float"]
        if dtype is None and first.dtype.family == "float":
            dtype = max(floats, key=lambda t: t.bytes)      # a map of cotangents keeps its widest operand's format
        dtype = dtype or first.dtype
        if kind in SUMS and dtype.family == "float" and dtype.bytes < FP32.bytes:
            dtype = FP32                      # a sum of cotangents accumulates in fp32 (see SUMS)
        out = Array(tuple(out_axes), first.level, dtype)
        names = [a.name for a in out_axes]
        weaves = [Weave(n, tuple(i for i, w in enumerate(wires) if n in w.array.names)) for n in reversed(names)]
        box = build_box(kind, [w.array for w in wires], [out], weaves, params)
        return self.b(box, *wires)

    def ew(self, kind: str, *wires, params=None, like=None):
        """An elementwise map over the axes of ``like`` (default: the first wire's)."""
        return self.box(kind, list(wires), (like or wires[0]).array.axes, params=params)

    def const(self, kind, wire, c):
        return self.ew(kind, wire, params={"c": c})

    def contract(self, wires, out: Array):
        """``Σ Π wires`` over every axis ``out`` lacks, then broadcast to the axes no wire carries."""
        formats = {w.array.dtype for w in wires if w.array.dtype.family == "float"}
        if len(formats) > 1:                  # the product takes its operands in one format: the narrowest (the
            narrow = min(formats, key=lambda t: t.bytes)     # primal's), a wider cotangent rounded to it once
            wires = [w if w.array.dtype.family != "float" or w.array.dtype == narrow else self.b.convert(w, narrow)
                     for w in wires]
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


def vjp_of(box):
    """The VJP rule of a box: its kind's ``vjp`` part (:class:`NoVJPError` naming the kind and ``vjp=`` when it
    has none; a region has none either: differentiate before partitioning)."""
    data = getattr(box, "data", None)
    kind = getattr(data, "kind", None)
    if kind is None:
        what = "a region (Kernel, Grid or Stream)" if hasattr(box, "arg") else "a box with no primitive kind"
        raise NoVJPError(f"{box.name!r} is {what}: nc.grad differentiates function diagrams; differentiate "
                         "before partitioning and derive the backward algorithm from the gradient diagram")
    return kind_of(kind).part("vjp")
