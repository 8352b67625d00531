"""Log-sum-exp: the reduction ``log Σ exp x`` and its online step (the log-partition of a SoftMax).

================================  ===========================================  =======================
kind                              item signature                               FLOPs per item (n = |a|)
================================  ===========================================  =======================
``reduce_logsumexp``              Rᵃ → R: ``μ + log Σ exp(x − μ)``, μ = max x   special n + 1, gen 3n + 1
``logsumexp_online``              (Rⁿ, μ′: R, z′: R) → (μ: R, z: R)             special n + 1, gen 3n + 2
================================  ===========================================  =======================

The online step is the SoftMax's (paper Table 4, SoftMax₁) without its output: ``μ = max(μ′, max x)``,
``δ = exp(μ′ − μ)`` (0 when ``μ′ = −∞``), ``z = δ·z′ + Σ exp(x − μ)``.  Folded over the slices of ``x``
from ``(−∞, 0)`` and finished by ``μ + log z`` it is the reduction (the form in
:mod:`napkin_cat.algorithms.online`; its proof in ``proofs/``)::

    lse(x₁ ⧺ x₂) == μ + log z   where (μ, z) = step(x₂, step(x₁, −∞, 0))

>>> import numpy as np
>>> from napkin_cat.syntax.primitive import kind_of, Core
>>> from napkin_cat.syntax.axis import Axis
>>> v = Axis("v", 3)
>>> kind_of("reduce_logsumexp").impl([np.array([[0., 0., np.log(2)], [-np.inf] * 3])], Core(((v,),), ((),)))[0]
array([1.38629436,       -inf])
"""
from __future__ import annotations

import numpy as np

from napkin_cat.errors import SignatureError
from napkin_cat.syntax.printed import structured
from napkin_cat.syntax.primitive import Core, declare


def _numel(axes):
    n = 1
    for a in axes:
        n = n * a.size
    return n


def _last(core_axes):
    return tuple(range(-len(core_axes), 0))


def _finite(m):
    return np.where(np.isfinite(m), m, 0.0)


def logsumexp(x, axes):
    """``log Σ exp x`` over ``axes``, stable (the max subtracted), −∞ for an empty or all −∞ row."""
    m = np.max(x, axis=axes, keepdims=True)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - _finite(m)), axis=axes, keepdims=True)) + _finite(m)
    return np.squeeze(out, axis=axes)


def _reduce_check(core: Core):
    if not (len(core.inputs) == 1 and len(core.outputs) == 1 and core.outputs[0] == () and len(core.inputs[0]) >= 1):
        raise SignatureError("reduce_logsumexp: the item signature is Rᵃ → R (reduce at least one axis to an item)")


def _reduce_impl(xs, core: Core):
    return [logsumexp(np.asarray(xs[0], float), _last(core.inputs[0]))]


def _reduce_flops(core: Core):
    n = _numel(core.inputs[0])
    return {"special": n + 1, "general": 3 * n + 1}


def _reduce_vjp(ctx, box, ins, outs, ybar):
    """x̄ = ȳ · exp(x − y): the SoftMax of x, weighted by the cotangent of its row."""
    (yb,), x = ybar, ctx.x(ins[0])
    y = ctx.broadcast(ctx.x(outs[0]), x.array)
    return [ctx.ew("mul", ctx.broadcast(yb, x.array), ctx.ew("exp", ctx.ew("sub", x, y)))]


declare("reduce_logsumexp", _reduce_impl, flops=_reduce_flops, check=_reduce_check, label="LSE", shape="reduce",
        forms=structured("logsumexp"),
        doc="log Σ exp over the core axes (stable: μ + log Σ exp(x − μ)).",
        vjp=_reduce_vjp, constant=lambda box, c: -np.inf if c[0] == -np.inf else None)


def online_step(x, mu_prev, z_prev, axes):
    """``(μ, z)`` after one more slice ``x`` (−∞-safe: a slice of −∞ leaves the state as it is)."""
    mu = np.maximum(np.max(x, axis=axes), mu_prev)
    safe = _finite(mu)
    with np.errstate(invalid="ignore"):
        delta = np.where(np.isneginf(mu_prev), 0.0, np.exp(mu_prev - safe))
    return mu, delta * z_prev + np.sum(np.exp(x - np.expand_dims(safe, axes)), axis=axes)


def _online_check(core: Core):
    if not (len(core.inputs) == 3 and core.outputs == ((), ()) and core.inputs[1:] == ((), ())
            and len(core.inputs[0]) >= 1):
        raise SignatureError("logsumexp_online: the item signature is (Rⁿ, μ′: R, z′: R) → (μ: R, z: R)")


def _online_impl(xs, core: Core):
    return list(online_step(np.asarray(xs[0], float), xs[1], xs[2], _last(core.inputs[0])))


def _online_flops(core: Core):
    n = _numel(core.inputs[0])
    return {"special": n + 1, "general": 3 * n + 2}


declare("logsumexp_online", _online_impl, flops=_online_flops, check=_online_check, label="LSE₁", shape="reduce",
        forms=structured("logsumexp_online"),
        doc="One slice of an online log-sum-exp: μ = max(μ′, max x), z = δz′ + Σ exp(x − μ), δ = exp(μ′ − μ).")

__all__ = ["logsumexp", "online_step"]
