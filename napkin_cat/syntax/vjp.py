"""Vector-Jacobian products: what a kind's ``vjp=`` part is, and the builders the elementwise kinds share.

A kind's VJP is a rule ``vjp(ctx, box, ins, outs, ybar) -> [x̄ᵢ or None]`` that writes the cotangent of each
input as a small diagram on the gradient's wires: ``ins``/``outs`` are the box's value ids, ``ybar`` one
cotangent wire per output (None: zero), and a None in the result is a zero cotangent.  With ``ȳ`` the
cotangent of ``y = f(x)``, the rule returns ``x̄ = ȳ · ∂f/∂x`` (summed over what ``x`` was broadcast along).

``ctx`` builds the wires (:class:`napkin_cat.autodiff.vjps.Context` is the one ``nc.grad`` passes):

=============================================  ===============================================================
``ctx.x(v)``                                   the forward value ``v`` (computed in the gradient on first use)
``ctx.ew(kind, *wires, params=, like=)``       an elementwise map over the axes of ``like`` (the first wire's)
``ctx.const(kind, wire, c)``                   ``scale`` / ``shift`` by the constant ``c``
``ctx.box(kind, wires, out_axes, params=,      a ``kind`` box weaved over ``out_axes`` (a reduction or
dtype=)``                                      contraction sums the axes the output lacks)
``ctx.contract(wires, array)``                 ``Σ Π wires`` over the axes ``array`` lacks, broadcast to it
``ctx.broadcast(wire, array)``                 ``wire`` repeated along the axes of ``array`` it lacks
``ctx.sum_to(wire, array)``                    ``wire`` summed over the axes ``array`` lacks
``ctx.one_minus(w)``, ``ctx.zeros_like(w)``    ``1 − w``, ``0 · w``
``ctx.b``                                      the gradient's :class:`~napkin_cat.syntax.builder.Builder`
``ctx.saved``                                  what the forward saved (``grad(f, saved=True)``), or None
=============================================  ===============================================================

The builders below cover the shapes most kinds have: a map of one input (:func:`pointwise`: ȳ·f′), a
linear map of one input (:func:`linear`), a map of two inputs broadcast against each other
(:func:`partials`), and a piecewise constant map (:func:`no_cotangent`).

>>> rule = pointwise(lambda ctx, box, x, y: ctx.x(y))        # exp: f′ = f
>>> callable(rule), no_cotangent(None, None, [0, 1], [2], [None])
(True, [None, None])
"""
from __future__ import annotations


def pointwise(derivative):
    """``x̄ = ȳ · f′`` for a map of one input, ``derivative(ctx, box, x, y)`` the wire of ``f′`` (``x``, ``y`` the
    value ids of the input and the output: read ``ctx.x(y)`` only when ``f′`` is written with ``f``)."""
    def rule(ctx, box, ins, outs, ybar):
        return [ctx.ew("mul", ybar[0], derivative(ctx, box, ins[0], outs[0]))]
    return rule


def linear(transpose):
    """``x̄ = transpose(ctx, box, ȳ, x)`` for a map of one input linear (or affine) in it."""
    def rule(ctx, box, ins, outs, ybar):
        return [transpose(ctx, box, ybar[0], ins[0])]
    return rule


def partials(first, second):
    """``(ā, b̄)`` of ``y = f(a, b)``: ``first(ctx, ȳ, a, b)`` and ``second(ctx, ȳ, a, b)`` (wires over ``ȳ``'s axes),
    each summed back over the axes its operand was broadcast along."""
    def rule(ctx, box, ins, outs, ybar):
        a, b = (ctx.x(v) for v in ins)
        (yb,) = ybar
        return [ctx.sum_to(first(ctx, yb, a, b), a.array), ctx.sum_to(second(ctx, yb, a, b), b.array)]
    return rule


def on(ctx, kind, y, *wires):
    """A ``kind`` map of ``wires`` over the axes of the cotangent ``y`` (its operands broadcast to them)."""
    return ctx.box(kind, list(wires), y.array.axes)


def no_cotangent(ctx, box, ins, outs, ybar):
    """Positions, comparisons, logic and counts are piecewise constant: no cotangent flows back."""
    return [None] * len(ins)


__all__ = ["pointwise", "linear", "partials", "on", "no_cotangent"]
