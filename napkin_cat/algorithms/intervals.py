"""Interval arithmetic on a diagram: the range of every value on a tile, from the positions that tile holds.

A value computed from positions by affine and monotone maps (sums, differences, shifts and scalings,
``abs``, ``max``, ``min``, ``exp``, ``log``) lies in an interval whose ends are read off the tile's first
and last positions; a comparison of two intervals is *always* true, *possibly* true, or never.  That is
what decides that a mask is constant on a tile (:mod:`.skipping`).  The arithmetic is one code for every
functor: ends are Python numbers (the numpy run), numpy arrays (many tiles at once, element by element: the
cost at sizes counts every tile's trips in one pass) or sympy expressions in loop indices and sizes (the
symbolic cost, the plan's trip test), where a comparison is a sympy condition.

The law (checked in ``proofs/``): for every value ``v`` of a tile and every element ``e`` of it::

    lo(v) ≤ e ≤ hi(v)          always(m) ⟹ m[e]          m[e] ⟹ possibly(m)

>>> hull = RULES["sub"]([Interval(4, 7), Interval(0, 3)], None)
>>> hull, RULES["le"]([Interval(8, 9), Interval(0, 7)], None)
(Interval(lo=1, hi=7), Truth(always=False, possibly=False))
>>> import sympy
>>> i = sympy.Symbol("i", integer=True, nonnegative=True)
>>> RULES["le"]([Interval(4 * i, 4 * i + 3), Interval(0, 5)], None).possibly
4*i <= 5
>>> import numpy as np
>>> RULES["le"]([Interval(np.array([0, 4, 8]), np.array([3, 7, 11])), Interval(0, 5)], None).possibly
array([ True,  True, False])
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

import numpy as np
import sympy

INF = math.inf


def _symbolic(*xs) -> bool:
    return any(isinstance(x, sympy.Basic) for x in xs)


def _arrays(*xs) -> bool:
    return any(isinstance(x, np.ndarray) for x in xs)


def lo_of(*xs):
    """The least of ``xs`` (a number, an array element by element, or a sympy ``Min``)."""
    if _symbolic(*xs):
        return sympy.Min(*xs)
    return reduce(np.minimum, xs) if _arrays(*xs) else min(xs)


def hi_of(*xs):
    """The greatest of ``xs``."""
    if _symbolic(*xs):
        return sympy.Max(*xs)
    return reduce(np.maximum, xs) if _arrays(*xs) else max(xs)


def le(a, b):
    """``a ≤ b`` as a bool (an array of them), or a sympy condition with the ``Max``/``Min`` of either side
    unfolded (so that a condition on affine ends stays a conjunction or disjunction of linear inequalities)."""
    if not _symbolic(a, b):
        return a <= b
    if isinstance(a, sympy.Max):
        return all_of(*(le(x, b) for x in a.args))
    if isinstance(a, sympy.Min):
        return any_of(*(le(x, b) for x in a.args))
    if isinstance(b, sympy.Min):
        return all_of(*(le(a, x) for x in b.args))
    if isinstance(b, sympy.Max):
        return any_of(*(le(a, x) for x in b.args))
    return sympy.Le(a, b)


def lt(a, b):
    """``a < b`` (on integer positions: ``a ≤ b − 1`` is the same; kept strict for real values)."""
    if not _symbolic(a, b):
        return a < b
    if isinstance(a, sympy.Max):
        return all_of(*(lt(x, b) for x in a.args))
    if isinstance(a, sympy.Min):
        return any_of(*(lt(x, b) for x in a.args))
    if isinstance(b, sympy.Min):
        return all_of(*(lt(a, x) for x in b.args))
    if isinstance(b, sympy.Max):
        return any_of(*(lt(a, x) for x in b.args))
    return sympy.Lt(a, b)


def all_of(*cs):
    if _symbolic(*cs):
        return sympy.And(*cs)
    return reduce(np.logical_and, cs) if _arrays(*cs) else all(cs)


def any_of(*cs):
    if _symbolic(*cs):
        return sympy.Or(*cs)
    return reduce(np.logical_or, cs) if _arrays(*cs) else any(cs)


def negate(c):
    if _symbolic(c):
        return sympy.Not(c)
    return np.logical_not(c) if _arrays(c) else not c


@dataclass(frozen=True)
class Interval:
    """Every value lies in ``[lo, hi]`` (ends numbers or sympy expressions; ±∞ when unknown)."""

    lo: object
    hi: object


@dataclass(frozen=True)
class Truth:
    """A mask on a tile: ``always`` every element is true, ``possibly`` some element may be."""

    always: object
    possibly: object


UNKNOWN = Interval(-INF, INF)
MAYBE = Truth(False, True)


def _known(ins, cls):
    """Whether every input is known (an unknown one is None: nothing is known of its values)."""
    return all(isinstance(x, cls) for x in ins)


def _param(box, key, default):
    v = box.data.param(key, default) if box is not None else default
    return v


def _monotone(f):
    """A nondecreasing map of one interval."""
    def rule(ins, box):
        (a,) = ins
        return Interval(f(a.lo, box), f(a.hi, box)) if _known(ins, Interval) else None
    return rule


def _scale(ins, box):
    (a,) = ins
    if not _known(ins, Interval):
        return None
    c = _param(box, "c", 1)
    c = sympy.sympify(c) if isinstance(c, sympy.Basic) else c
    positive = c.is_nonnegative if isinstance(c, sympy.Basic) else c >= 0
    if positive is None:
        return UNKNOWN
    lo, hi = _times(a.lo, c), _times(a.hi, c)
    return Interval(lo, hi) if positive else Interval(hi, lo)


def _times(x, c):
    """``x · c`` with ``±∞ · 0 = 0`` (an unknown end times a zero scale is the zero it makes)."""
    if isinstance(x, np.ndarray):
        infinite = np.isinf(x)
        if not infinite.any():
            return x * c
        return np.where(infinite, x if c > 0 else (-x if c < 0 else 0.0), np.where(infinite, 0.0, x) * c)
    if x in (INF, -INF) or (isinstance(x, sympy.Basic) and x.is_infinite):
        return x if c > 0 else (-x if c < 0 else 0)
    return x * c


def _shift(x, box):
    c = _param(box, "c", 0)
    return x + c


def _sym_exp(x, box):
    if _symbolic(x):
        return sympy.exp(x)
    if _arrays(x):
        return np.where(x == INF, INF, np.exp(np.minimum(x, 700.0)))
    return 0.0 if x == -INF else math.exp(min(x, 700.0)) if x != INF else INF


def _sym_log(x, box):
    if _symbolic(x):
        return sympy.log(x)
    if _arrays(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x <= 0, -INF, np.log(np.maximum(x, np.finfo(float).tiny)))
    return -INF if x <= 0 else math.log(x) if x != INF else INF


def _add(ins, box):
    a, b = ins
    return Interval(a.lo + b.lo, a.hi + b.hi) if _known(ins, Interval) else None


def _sub(ins, box):
    a, b = ins
    return Interval(a.lo - b.hi, a.hi - b.lo) if _known(ins, Interval) else None


def _neg(ins, box):
    (a,) = ins
    return Interval(-a.hi, -a.lo) if _known(ins, Interval) else None


def _abs(ins, box):
    (a,) = ins
    if not _known(ins, Interval):
        return None
    return Interval(hi_of(a.lo, -a.hi, 0), hi_of(-a.lo, a.hi))


def _extreme(pick):
    def rule(ins, box):
        a, b = ins
        if not _known(ins, Interval):
            return None
        f = lo_of if pick == "min" else hi_of
        return Interval(f(a.lo, b.lo), f(a.hi, b.hi))
    return rule


def _compare(kind):
    def rule(ins, box):
        a, b = ins
        if not _known(ins, Interval):
            return MAYBE
        if kind == "le":
            return Truth(le(a.hi, b.lo), le(a.lo, b.hi))
        if kind == "lt":
            return Truth(lt(a.hi, b.lo), lt(a.lo, b.hi))
        if kind in ("ge", "gt"):
            return _compare("le" if kind == "ge" else "lt")([b, a], box)
        overlap = all_of(le(a.lo, b.hi), le(b.lo, a.hi))
        point = all_of(le(a.hi, a.lo), le(b.hi, b.lo), le(a.lo, b.lo), le(b.lo, a.lo))
        if kind == "eq":
            return Truth(point, overlap)
        return Truth(negate(overlap), negate(point))
    return rule


def _and(ins, box):
    a, b = (x if isinstance(x, Truth) else MAYBE for x in ins)
    return Truth(all_of(a.always, b.always), all_of(a.possibly, b.possibly))


def _or(ins, box):
    a, b = (x if isinstance(x, Truth) else MAYBE for x in ins)
    return Truth(any_of(a.always, b.always), any_of(a.possibly, b.possibly))


def _not(ins, box):
    (a,) = ins
    a = a if isinstance(a, Truth) else MAYBE
    return Truth(negate(a.possibly), negate(a.always))


def _same(ins, box):
    return ins[0]


def _hull(ins, box):
    vals = [x for x in ins if isinstance(x, Interval)]
    if len(vals) != len(ins):
        return None
    return Interval(lo_of(*(v.lo for v in vals)), hi_of(*(v.hi for v in vals)))


def _where(ins, box):
    a = ins[1]
    other = float(_param(box, "other", -INF))
    return _hull([a, Interval(other, other)], box) if isinstance(a, Interval) else None


#: kind → ``rule(intervals of the inputs, box) -> Interval | Truth | None`` (None: nothing is known); a kind
#: missing here is unknown on every tile (a user's kind may register its rule)
RULES = {
    "id": _same, "load": _same, "save": _same, "cast": _same, "rename": _same,
    "add": _add, "sub": _sub, "neg": _neg, "abs": _abs, "scale": _scale, "shift": _monotone(_shift),
    "max": _extreme("max"), "min": _extreme("min"), "exp": _monotone(_sym_exp), "log": _monotone(_sym_log),
    "le": _compare("le"), "lt": _compare("lt"), "ge": _compare("ge"), "gt": _compare("gt"),
    "eq": _compare("eq"), "ne": _compare("ne"), "and": _and, "or": _or, "not": _not,
    "where": _where, "select": lambda ins, box: _hull(ins[1:], box),
}


def position(axis_tile) -> Interval:
    """The positions of a tile ``(start, extent)``: ``[start, start + extent − 1]``."""
    start, extent = axis_tile
    return Interval(start, start + extent - 1)


def evaluate(ops, tile_of) -> dict:
    """The intervals of the values the ops ``[(box, ins, outs)]`` make, in order: a ``position`` box reads
    ``tile_of(axis, size)`` (its tile's ``(start, extent)``), other kinds their :data:`RULES` (unknown inputs
    and kinds give nothing)."""
    known: dict = {}
    for box, ins, outs in ops:
        kind = box.data.kind
        if kind == "position":
            axis = box.cod.inside[0].axes[0]
            value = position(tile_of(axis.name, axis.size))
        else:
            rule = RULES.get(kind)
            value = rule([known.get(v) for v in ins], box) if rule is not None else None
        if value is not None:
            known[outs[0]] = value
    return known


__all__ = ["Interval", "Truth", "RULES", "UNKNOWN", "evaluate", "position", "le", "lt", "all_of", "any_of",
           "negate", "lo_of", "hi_of"]
