"""Masks and biases of attention as diagrams computed from positions (never q×x input arrays).

=====================  ======================================  =================================
function               computes                                inputs
=====================  ======================================  =================================
``causal_mask``        ``x ≤ q``                               none: positions of q and x
``window_mask(w)``     ``|q − x| ≤ w``  (``q − w ≤ x ≤ q + w``) none
``prefix_lm_mask(P)``  ``x ≤ q ∨ x < P``                       none
``document_mask``      ``seg_q = seg_x``                       segment ids of q and x (int32)
``alibi_bias(slope)``  ``slope · (x − q)``                     none
=====================  ======================================  =================================

Each is a diagram whose one output is a ``bool`` mask (``fp32`` for a bias) over ``q × x``; composed
into attention by :func:`napkin_cat.library.masked.masked_attention`.

>>> import napkin_cat as nc
>>> nc.evaluate(window_mask(1, q=4, x=4)).astype(int).tolist()
[[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]]
>>> nc.evaluate(alibi_bias(0.5, q=2, x=3)).tolist()
[[0.0, 0.5, 1.0], [-0.5, 0.0, 0.5]]
>>> nc.evaluate(prefix_lm_mask(2, q=4, x=4)).astype(int).tolist()
[[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
>>> window_mask(-1)
Traceback (most recent call last):
...
napkin_cat.errors.IndexingError: window_mask: the window w = -1 is negative; a sliding window keeps ...
"""
from __future__ import annotations

from napkin_cat.errors import IndexingError
from napkin_cat.library.sizing import sizes_named_by, given_sizes
from napkin_cat.syntax.adapter import Diagram, Ty
from napkin_cat.syntax.axis import LARGEST_SIZE
from napkin_cat.syntax.builder import Builder
from napkin_cat.syntax.construct import cast, elementwise, types
from napkin_cat.syntax.dtype import INT32
from napkin_cat.syntax.indices import compare, logical, position


def _positions(b: Builder, s: dict):
    return b(position("q", **sizes_named_by("q", s))), b(position("x", **sizes_named_by("x", s)))


def causal_mask(q=None, x=None) -> Diagram:
    """``x ≤ q``: a query sees the keys at or before its position."""
    s = given_sizes(q=q, x=x)
    b = Builder(Ty())
    qi, xi = _positions(b, s)
    return b.build(b(compare("le", "x, q -> q x", **s), xi, qi))


def window_mask(window, q=None, x=None) -> Diagram:
    """``|q − x| ≤ w``: a query sees the keys within ``w`` positions of its own (``w ≥ 0``, an int)."""
    if isinstance(window, bool) or not hasattr(window, "__index__") or not 0 <= int(window) <= LARGEST_SIZE:
        why = "not an integer" if isinstance(window, bool) or not hasattr(window, "__index__") else \
            ("negative" if int(window) < 0 else "more than 2^64 positions")
        raise IndexingError(f"window_mask: the window w = {window!r} is {why}; a sliding window keeps the keys with "
                            f"|q − x| ≤ w, w an integer 0 … 2^64")
    w = int(window)
    s = given_sizes(q=q, x=x)
    b = Builder(Ty())
    qi, xi = _positions(b, s)
    lo = b(elementwise("shift", "q", const=int(-w), dtype=INT32, **sizes_named_by("q", s)), qi)
    hi = b(elementwise("shift", "q", const=int(w), dtype=INT32, **sizes_named_by("q", s)), qi)
    after = b(compare("le", "q, x -> q x", **s), lo, xi)
    before = b(compare("le", "x, q -> q x", **s), xi, hi)
    return b.build(b(logical("and", "q x, q x -> q x", **s), after, before))


def _prefix(prefix, x) -> int:
    """``prefix`` as an int ``0 ≤ P ≤ x`` (``x`` the key axis's size where it is a number), else IndexingError."""
    whole = not isinstance(prefix, bool) and hasattr(prefix, "__index__")
    if not whole or not 0 <= int(prefix) <= LARGEST_SIZE:
        why = "not an integer" if not whole else ("negative" if int(prefix) < 0 else "more than 2^64 positions")
        raise IndexingError(f"prefix_lm_mask: the prefix P = {prefix!r} is {why}; a prefix-LM lets every query see the "
                            f"keys x < P (and causally x ≤ q), P an integer 0 … the key axis's size")
    if hasattr(x, "__index__") and not isinstance(x, bool) and int(prefix) > int(x):
        raise IndexingError(f"prefix_lm_mask: the prefix P = {int(prefix)} is longer than the key axis x = {int(x)}; "
                            f"the prefix is the first P keys, 0 ≤ P ≤ {int(x)}")
    return int(prefix)


def prefix_lm_mask(prefix, q=None, x=None) -> Diagram:
    """``x ≤ q ∨ x < P``: causal, and every query also sees the first ``P`` keys (the prefix, read both ways).

    ``P`` is an int ``0 ≤ P ≤ x`` (``P = 0``: the causal mask).  The bound ``P`` enters as an array over ``q``,
    ``0·q + P``, so interval arithmetic on a tile reads it exactly: a tile of keys is skipped iff it lies after
    the prefix and after every query of the tile.
    """
    p = _prefix(prefix, x)
    s = given_sizes(q=q, x=x)
    b = Builder(Ty())
    qi, xi = _positions(b, s)
    zero = b(elementwise("scale", "q", const=0, dtype=INT32, **sizes_named_by("q", s)), qi)
    bound = b(elementwise("shift", "q", const=p, dtype=INT32, **sizes_named_by("q", s)), zero)
    causal = b(compare("le", "x, q -> q x", **s), xi, qi)
    prefixed = b(compare("lt", "x, q -> q x", **s), xi, bound)
    return b.build(b(logical("or", "q x, q x -> q x", **s), causal, prefixed))


def document_mask(q=None, x=None) -> Diagram:
    """``seg_q = seg_x``: a query sees the keys of its own document (segment ids as int32 inputs)."""
    s = given_sizes(q=q, x=x)
    b = Builder(types("q", dtype=INT32, **sizes_named_by("q", s)) @ types("x", dtype=INT32, **sizes_named_by("x", s)))
    seg_q, seg_x = b.inputs
    return b.build(b(compare("eq", "q, x -> q x", **s), seg_q, seg_x))


def alibi_bias(slope=0.125, q=None, x=None) -> Diagram:
    """ALiBi's bias ``slope · (x − q)`` (Press et al.: a linear penalty on the distance to earlier keys)."""
    s = given_sizes(q=q, x=x)
    b = Builder(Ty())
    qi, xi = _positions(b, s)
    dist = b(elementwise("sub", "x, q -> q x", dtype=INT32, **s), xi, qi)
    dist = b(cast("q x", to="fp32", dtype=INT32, **s), dist)
    return b.build(b(elementwise("scale", "q x", const=slope, **s), dist))


__all__ = ["causal_mask", "window_mask", "prefix_lm_mask", "document_mask", "alibi_bias"]
