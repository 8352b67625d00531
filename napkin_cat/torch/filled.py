"""Tensors filled with one number (rules of :data:`~napkin_cat.torch.aten.ATEN`): ``new_ones``, ``new_zeros``,
``new_full``, ``ones``, ``zeros``, ``full``, ``scalar_tensor`` and ``ones_like``, ``zeros_like``, ``full_like``, each
a tensor whose every element is one number known when the model is traced
(:meth:`~napkin_cat.torch.folding.Folding.known`: no wire, no input until it is used)::

    new_full(x, shape, c)[i] = full(shape, c)[i] = full_like(y, c)[i] = c        (ones: c = 1, zeros: c = 0)

FlexAttention's own mask helpers build their masks from these: ``noop_mask`` is ``b.new_ones((), dtype=bool)``,
``and_masks(m₁, …)`` starts from ``new_ones`` and ``or_masks`` from ``new_zeros``, so that ``true ∧ m = m`` and
``false ∨ m = m`` fold them away (:meth:`~napkin_cat.torch.folding.Folding.simplified_logical`).  The number is
torch's in the result's format (``full((), 2.7, dtype=int)`` is 2, a bool is ``c != 0``).

>>> sorted(FILLED)[:3]
['full.default', 'full_like.default', 'new_full.default']
"""
from __future__ import annotations

from napkin_cat.syntax.dtype import BOOL
from napkin_cat.torch.traced import Tensor
from napkin_cat.torch.translate import Translation


def number(t: Translation, value):
    """``value`` in the result's format, as torch stores it: a bool ``value != 0``, an integer truncated."""
    if isinstance(value, Tensor):
        t.refuse("a tensor filled with the value of another tensor (napkin-cat fills with numbers)")
    if t.dtype == BOOL:
        return bool(value)
    return int(value) if t.dtype.is_integer else float(value)


def shaped(t: Translation, value) -> Tensor:
    """The known tensor of the result's shape (:attr:`Translation.shape`) whose elements are ``value``: each
    dimension of size other than 1 a new axis it does not carry (a broadcast)."""
    return t.expanded(t.known(number(t, value), t.dtype, len(t.shape)), t.shape)


def like(t: Translation, x: Tensor, value) -> Tensor:
    """The known tensor of ``x``'s dimensions whose elements are ``value`` (it carries none of them)."""
    if not isinstance(x, Tensor):
        t.refuse(f"a tensor shaped like {x!r}, which is no tensor")
    return t.view(t.known(number(t, value), t.dtype, x.rank), x.dims, (False,) * x.rank)


FILLED = {
    "new_ones.default": lambda t, x, size, **kw: shaped(t, 1),
    "new_zeros.default": lambda t, x, size, **kw: shaped(t, 0),
    "new_full.default": lambda t, x, size, value, **kw: shaped(t, value),
    "ones.default": lambda t, size, **kw: shaped(t, 1),
    "zeros.default": lambda t, size, **kw: shaped(t, 0),
    "full.default": lambda t, size, value, **kw: shaped(t, value),
    "scalar_tensor.default": lambda t, value, **kw: shaped(t, value),
    "ones_like.default": lambda t, x, **kw: like(t, x, 1),
    "zeros_like.default": lambda t, x, **kw: like(t, x, 0),
    "full_like.default": lambda t, x, value, **kw: like(t, x, value),
}

__all__ = ["FILLED"]
