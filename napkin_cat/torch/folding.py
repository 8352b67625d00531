"""Numbers known when a model is traced: folded, simplified, or closed constants beside an array (no input).

A tensor whose every element is one number known when the model is traced (``known``: the positions along a
dimension of size 1, FlexAttention's ``h`` with one head, are all 0) has no wire until it is used: an elementwise
operation of known tensors is *folded* (its box evaluated on the numbers, :meth:`Folding.folded`), ``and``, ``or``,
``where`` and ``select`` of a known mask are simplified (:meth:`Folding.simplified_logical`, :meth:`Folding.picked`),
and a known number that meets an array is the closed constant beside it (:meth:`Folding.constant`: no input), so a
mask made of such numbers and positions stays a mask of positions; anywhere else it is a scalar input, as any number
is (:meth:`Folding.wired`)::

    fold(f, k₁, …, kₙ) = evaluate(f, k₁, …, kₙ)
    true ∧ m = m      false ∨ m = m      true ∨ m = true      false ∧ m = false
    where(true, a, c) = a      select(true, a, b) = a      select(false, a, b) = b

:class:`Folding` is the part of a :class:`~napkin_cat.torch.translate.Translation` that does this (it calls the
translation's operations ``position``, ``pointwise``, ``cast``, ``view`` and ``input``).

>>> import numpy as np, napkin_cat as nc
>>> from napkin_cat.torch.translate import Translation
>>> t = Translation()
>>> two, three = t.known(2, nc.INT32), t.known(3, nc.INT32)
>>> t.pointwise("add", two, three).known                       # folded: 2 + 3, no box
5
>>> x = t.input("x", (3,), nc.INT32, claims=[[(2, "n")]])
>>> t.logical("or", t.compare("lt", three, two), t.compare("le", x, two)).known is None   # false ∨ m = m
True
"""
from __future__ import annotations

import numbers

import numpy as np

from napkin_cat.semantics.evaluate import evaluate
from napkin_cat.syntax.dtype import BOOL, INT32, as_dtype
from napkin_cat.torch.traced import Signature, Tensor


class Folding:
    """The known numbers of a translation (see the module docstring): mixed into
    :class:`~napkin_cat.torch.translate.Translation`, whose ``node`` names a scalar input and whose ``values`` keep
    each scalar input's number."""

    def constant(self, value, dtype, like: Tensor | None = None) -> Tensor:
        """A number ``c`` the operation uses as a tensor beside ``like``: a closed value of the diagram where ``like``
        carries an axis and ``c`` is a Python number exact in ``dtype`` (an int32 integer, or any number in a float
        format), else a scalar input (``<node>_<k>``).

        The closed value is ``0·i + c`` over the positions ``i`` of ``like``'s last carried axis (cast to ``dtype``):
        it reads no input, so a mask made of positions and numbers (``q − x ≤ 256``) stays a mask of positions,
        decided on a tile by interval arithmetic (:mod:`napkin_cat.rewriting.closed`), and the kernels compute it
        instead of loading it.  Its one axis broadcasts against ``like``'s.

        >>> import numpy as np, napkin_cat as nc
        >>> from napkin_cat.torch.translate import Translation
        >>> t = Translation()
        >>> x = t.input("x", (3,), nc.INT32, claims=[[(2, "n")]])
        >>> d = t.build([t.compare("le", x, t.constant(1, nc.INT32, like=x))])
        >>> len(d.dom), nc.evaluate(d, np.array([0, 1, 2], dtype=np.int32)).tolist()   # x only: 1 is no input
        (1, [True, True, False])
        """
        at = [p for p, (c, k) in enumerate(zip(like.dims, like.carried)) if c is not None and k] \
            if like is not None else []
        exact = isinstance(value, numbers.Real) and not isinstance(value, bool) and dtype != BOOL and (
            not dtype.is_integer or (float(value).is_integer() and -2 ** 31 <= value < 2 ** 31))
        if at and exact:
            p = at[-1]
            i = self.position(like.dims[p])
            i = i if dtype == INT32 else self.cast(i, dtype)
            c = self.pointwise("shift", self.pointwise("scale", i, const=0), const=int(value) if dtype.is_integer
                               else value)
            return self.view(c, (like.dims[p],) + (None,) * (like.rank - 1 - p))
        if like is not None and exact:        # beside a tensor that carries no axis: known, wired where used
            return self.known(value, dtype)
        name = f"{self.node}_{sum(n.startswith(self.node + '_') for n in self.values)}"
        self.values[name] = value
        return self.input(name, (), dtype)

    def known(self, value, dtype, rank: int = 0) -> Tensor:
        """A tensor of ``rank`` size-1 dimensions whose element is the number ``value``, known now: no wire, no
        input, until an operation uses it (see the module docstring).

        >>> import numpy as np, napkin_cat as nc
        >>> from napkin_cat.torch.translate import Translation
        >>> t = Translation()
        >>> x = t.input("x", (3,), nc.INT32, claims=[[(2, "n")]])
        >>> h = t.known(0, nc.INT32)                                # the index along a dimension of size 1
        >>> true = t.compare("eq", h, t.constant(0, nc.INT32, like=h))
        >>> true.known                                              # 0 == 0, folded
        True
        >>> d = t.build([t.logical("and", true, t.compare("le", x, t.constant(1, nc.INT32, like=x)))])
        >>> len(d.dom), nc.evaluate(d, np.array([0, 1, 2], dtype=np.int32)).tolist()   # true ∧ m = m: x only
        (1, [True, True, False])
        """
        return Tensor((None,) * rank, (False,) * rank, dtype, known=value)

    def wired(self, x: Tensor) -> Tensor:
        """``x``, or where it is known, its number as a scalar input (the place nothing could fold it)."""
        if x.known is None:
            return x
        return self.view(self.constant(x.known, x.dtype), x.dims, x.carried)

    def folded(self, operands, make, dtype, rank: int) -> Tensor:
        """The elementwise box ``make`` of known operands evaluated on their numbers (numpy, the diagram's
        semantics): a known tensor of ``rank``."""
        box = make(Signature([[] for _ in operands], [[]], {}, lambda c: None))
        out = evaluate(box, *(np.asarray(x.known, dtype=numpy_type(x.dtype)) for x in operands))
        return self.known(np.asarray(out).item(), dtype, rank)

    def beside(self, operands) -> list:
        """The operands of an elementwise operation, each known one the closed constant beside the first operand
        that carries an axis (:meth:`constant`); as they are where none does."""
        like = next((x for x in operands if x.known is None and any(x.carried)), None)
        return [self.constant(x.known, x.dtype, like) if x.known is not None and like is not None else x
                for x in operands]

    def simplified_logical(self, op: str, masks) -> Tensor | None:
        """``and`` / ``or`` of a known mask and another: ``true ∧ m = m``, ``false ∨ m = m``, ``true ∨ m = true``,
        ``false ∧ m = false`` (the result as wide as the two); None where it does not simplify."""
        known = [m for m in masks if m.known is not None]
        if op not in ("and", "or") or len(known) != 1 or len(masks) != 2:
            return None
        (k,), (m,) = known, [m for m in masks if m.known is None]
        if bool(k.known) == (op == "or"):                 # the absorbing value
            return self.known(bool(k.known), BOOL, max(k.rank, m.rank))
        return m if m.rank >= k.rank else self.view(m, (None,) * (k.rank - m.rank) + m.dims)

    def picked(self, mask: Tensor, a: Tensor, b: Tensor | None = None) -> Tensor | None:
        """The operand a known mask picks: ``where(true, a, c) = a`` (``b`` None: the other side is a number),
        ``select(true, a, b) = a``, ``select(false, a, b) = b``; None where the mask is not known, picks the number,
        or broadcasts the operand wider (a mask of higher rank, or ``a`` and ``b`` of other dimensions).

        >>> import napkin_cat as nc
        >>> from napkin_cat.torch.translate import Translation
        >>> t = Translation()
        >>> x = t.input("x", (3,), nc.FP32, claims=[[(2, "n")]])
        >>> t.picked(t.known(True, nc.BOOL), x) is x, t.picked(t.known(False, nc.BOOL), x)
        (True, None)
        """
        if mask.known is None:
            return None
        if b is None:
            return a if mask.known and mask.rank <= a.rank else None
        chosen = a if mask.known else b
        same = (a.dims, a.carried) == (b.dims, b.carried)
        return chosen if mask.rank <= chosen.rank and same else None


def numpy_type(dtype):
    """The numpy type a known number of ``dtype`` is evaluated in: int32, bool, else float64 (numpy evaluates the
    diagram's real formats in float64)."""
    d = as_dtype(dtype)
    return np.bool_ if d == BOOL else np.int32 if d.is_integer else np.float64


__all__ = ["Folding", "numpy_type"]
