"""The moments napkin-cat translates from ATen (rules of :data:`~napkin_cat.torch.aten.ATEN`, written on
:class:`~napkin_cat.torch.translate.Translation`'s operations): ``var``, ``std``, ``var_mean`` and ``std_mean``
(each of torch's overloads: ``unbiased``, ``correction``, ``dim``, ``keepdim``), decomposed into means::

    mean_D(x) = Σ_D x / n         var_D(x; c) = mean_D((x − mean_D(x))²) · n / (n − c)         std = √var

over the reduced dimensions ``D`` (``n`` elements, the product of their sizes; every dimension when ``dim`` is None
or empty), with the correction ``c`` (torch's default 1, Bessel's; ``unbiased=False`` is 0).  A correction not
below ``n`` (torch's result is NaN or ∞), or one other than 0 over a dimension of symbolic size (the factor
``n / (n − c)`` is no number the diagram can hold), is refused by name.

>>> sorted(MOMENTS)[:3]
['std.correction', 'std.default', 'std.dim']
"""
from __future__ import annotations

import sympy

from napkin_cat.torch.traced import Tensor
from napkin_cat.torch.translate import Translation


def reduced(x: Tensor, dims) -> list:
    """The dimensions reduced: ``dims`` (an int or a list, negative from the end), every one where None or empty."""
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        return list(range(x.rank))
    return sorted({p % max(x.rank, 1) for p in ([dims] if isinstance(dims, int) else dims)})


def moments(t: Translation, x: Tensor, dims, correction, keepdim: bool) -> tuple:
    """``(var_D(x; c), mean_D(x))`` (see the module docstring), each with the reduced dimensions kept (size 1) or
    dropped as ``keepdim`` says."""
    dims = reduced(x, dims)
    c = 1 if correction is None else correction
    n = 1
    for p in dims:
        k = x.dims[p] if p < x.rank else None
        n = n * (1 if k is None else t.classes.size[t.classes.find(k)])
    centred = t.pointwise("sub", x, t.reduce("mean", x, dims, keepdim=True))
    var = t.reduce("mean", t.pointwise("square", centred), dims, keepdim)
    if c != 0:
        if not sympy.sympify(n).is_Integer:
            t.refuse(f"its variance with correction {c} runs over {n} elements, a symbolic size: the factor n/(n − "
                     f"{c}) is no number (correction 0, unbiased=False, has none)")
        if c >= int(n):
            t.refuse(f"its variance with correction {c} runs over {int(n)} element(s): torch divides by "
                     f"max(0, n − {c}) = {max(0, int(n) - c)} (NaN or ∞); a correction below {int(n)} has a value")
        var = t.pointwise("scale", var, const=int(n) / (int(n) - c))
    return var, t.reduce("mean", x, dims, keepdim)


def correction_of(unbiased=True, correction=None):
    """torch's correction from ``unbiased`` (True: 1, False: 0) or ``correction`` (None: 1)."""
    return correction if correction is not None else int(bool(unbiased))


def variance(t: Translation, x: Tensor, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """``var.dim`` / ``var.correction`` / ``var.default``: the variance along ``dim``."""
    if isinstance(dim, bool):        # var.default(x, unbiased)
        dim, unbiased = None, dim
    return moments(t, x, dim, correction_of(unbiased, correction), keepdim)[0]


def deviation(t: Translation, x: Tensor, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """``std``: the square root of :func:`variance`."""
    return t.pointwise("sqrt", variance(t, x, dim, unbiased, keepdim, correction=correction))


def variance_mean(t: Translation, x: Tensor, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """``var_mean``: the variance and the mean; ``std_mean``: the standard deviation and the mean."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    var, mean = moments(t, x, dim, correction_of(unbiased, correction), keepdim)
    return (t.pointwise("sqrt", var) if t.op.startswith("std") else var), mean


#: ATen operation → its rule ``rule(t, *args, **kwargs)`` (merged into :data:`~napkin_cat.torch.aten.ATEN`)
MOMENTS = {f"{op}.{overload}": rule for op, rule in (("var", variance), ("std", deviation),
                                                      ("var_mean", variance_mean), ("std_mean", variance_mean))
           for overload in ("dim", "correction", "default")}

__all__ = ["MOMENTS", "moments", "reduced", "variance", "deviation", "variance_mean"]
