"""Skipped trips: a stream's slice on which a mask is never true contributes nothing, so it is not run.

FlashAttention's causal path and FlexAttention's block masks skip every tile that is entirely masked.
Here that is a property of the stream's schedule, read off the diagram:

1. a **mask** is the condition of a ``where`` or ``select`` in the stream's head or trip, computed by
   its ops from positions (and, through ``and``, from anything);
2. it is **neutral when false**: with the condition false everywhere, constant propagation through the
   trip's maps (a masked score is −∞; ``exp(−∞) = 0``; a product with 0 is 0; ``where(m, v, other=v) = v``
   whatever another mask ``m`` is, …) brings every reducer's
   contribution to its identity: the monoid's (0 for a sum, −∞ for a max), or an accumulator form's
   no-op (scores of −∞ leave the online SoftMax's μ, z and o, and the online log-sum-exp, as they are);
3. on a tile, **interval arithmetic** (:mod:`.intervals`) from the tile's positions to the condition says
   whether it is never true there.

The law, proved in ``proofs/test_skipping.py`` (random masks, tiles, data, ragged sizes)::

    skipped(tile) ⟹ trip(state, tile) == state          hence    run with skips == run without

``Skip.skipped(tile_of)`` is one condition for every functor: ``tile_of(axis, size)`` gives the tile an axis
is in, ``(start, extent)``, as numbers (a run, the cost at sizes) or sympy expressions (the plan's
per-trip test, the symbolic count of the trips that run).

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.schedule import schedule_of
>>> att = nc.library.causal_attention(q=8, x=8, d=4)
>>> s = schedule_of(nc.stream(att, "x", "s_x").boxes[0].arg.boxes[0])
>>> sorted(s.skip.axes), s.skip.skipped(lambda a, n: (4, 4) if a == "x" else (0, 2))
(['q', 'x'], True)
>>> s.skip.skipped(lambda a, n: (0, 4) if a == "x" else (2, 2))
False
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import sympy

from napkin_cat.algorithms.intervals import MAYBE, Truth, all_of, any_of, evaluate, negate

INF = math.inf


@dataclass(frozen=True)
class Mask:
    """A condition (value id ``value``) made by ``ops`` (``(box, ins, outs)``, in order) from positions of ``axes``."""

    value: int
    ops: tuple
    axes: frozenset

    def truth(self, tile_of) -> Truth:
        """The condition on the tile: always true, possibly true (a bool, an array of them, or a sympy condition)."""
        truth = evaluate(self.ops, tile_of).get(self.value)
        return truth if isinstance(truth, Truth) else MAYBE

    def never(self, tile_of):
        """Whether the condition is false everywhere on the tile."""
        return negate(self.truth(tile_of).possibly)


@dataclass(frozen=True)
class Skip:
    """The masks of a stream whose trips may be skipped (each one alone makes a trip neutral when never true)."""

    axis: str
    masks: tuple

    @property
    def axes(self) -> frozenset:
        """The axes whose positions decide a skip."""
        return frozenset().union(*(m.axes for m in self.masks))

    def skipped(self, tile_of):
        """Whether the trip on the tiles ``tile_of`` gives is skipped (some mask never true there)."""
        return any_of(*(m.never(tile_of) for m in self.masks))

    def verdict(self, tile_of) -> tuple:
        """``(skipped, everywhere)`` on the tiles ``tile_of`` gives: some mask is never true there, and every mask
        is always true there.  On a part of those tiles a trip is then skipped, and runs, too: interval arithmetic
        is inclusion-monotone (a part's intervals lie in the whole's), so what is never true on the whole is never
        on a part, and what is always true on the whole is on each part."""
        truths = [m.truth(tile_of) for m in self.masks]
        return any_of(*(negate(t.possibly) for t in truths)), all_of(*(t.always for t in truths))


# ---------------------------------------------------------------------------------------------- constants
def _const_of(kind, box, c, ins):
    """The constant value of an op's output when its inputs ``c`` (None: not constant) are, else None.
    Data are finite: ``a + (−∞) = −∞`` and ``0 · a = 0`` for any value ``a`` of an input."""
    if kind in ("id", "load", "save", "cast", "rename"):
        return c[0]
    if kind == "where":          # where(m, v, other=v) = v whatever m is
        other = float(box.data.param("other", -INF))
        return (other if c[1] == other else None) if c[0] is None else (c[1] if c[0] else other)
    if kind == "select":
        return (c[1] if c[1] is not None and c[1] == c[2] else None) if c[0] is None else (c[1] if c[0] else c[2])
    if kind in ("add", "sub", "shift"):
        vals = list(c) if kind != "shift" else [c[0], float(box.data.param("c", 0)) if c[0] is not None else None]
        if kind == "sub" and vals[1] is not None:
            vals[1] = -vals[1]
        infinite = [v for v in vals if v is not None and math.isinf(v)]
        if len(set(infinite)) == 1:
            return infinite[0]
        return sum(vals) if all(v is not None for v in vals) and not infinite else None
    if kind in ("mul", "contract", "reduce_sum"):
        return 0.0 if any(v == 0 for v in c if v is not None) else None
    if kind == "gather":
        return 0.0 if c[0] == 0 else None
    if kind == "scale":
        k = box.data.param("c", 1)
        positive = sympy.sympify(k).is_positive
        if c[0] is None or positive is None:
            return None
        return c[0] if math.isinf(c[0]) and positive else (0.0 if c[0] == 0 else None)
    if kind == "exp":
        return 0.0 if c[0] == -INF else None
    if kind in ("reduce_max", "reduce_logsumexp", "max"):
        return -INF if all(v == -INF for v in c) else None
    if kind in ("reduce_min", "min"):
        return INF if all(v == INF for v in c) else None
    return None


def _constants(ops, start: dict) -> dict:
    out = dict(start)
    for box, ins, outs in ops:
        if (outs and outs[0] in out) or getattr(box, "data", None) is None:   # a region: not a constant
            continue
        v = _const_of(box.data.kind, box, [out.get(i) for i in ins], ins)
        if v is not None:
            out[outs[0]] = v
    return out


def _neutral(r, consts) -> bool:
    """Whether reducer ``r`` leaves its state unchanged given the constants of its inputs."""
    if r.kind == "monoid":
        box, ins = r.op.box, r.op.ins
        v = _const_of(box.data.kind, box, [consts.get(i) for i in ins], ins)
        return v is not None and v == float(r.accumulator.identity(()))
    rule = getattr(r.form, "neutral", None)
    return r.kind == "step" and rule is not None and bool(rule([consts.get(v) for v in r.inputs]))


def _ancestry(ops, value, made_by_reducers) -> tuple | None:
    """The ops among ``ops`` that ``value`` depends on, in order; None when it depends on a reducer's result."""
    producer = {v: k for k, (_, _, outs) in enumerate(ops) for v in outs}
    need, seen = [value], set()
    while need:
        v = need.pop()
        if v in made_by_reducers:
            return None
        k = producer.get(v)
        if k is None or k in seen:
            continue
        seen.add(k)
        need += list(ops[k][1])
    return tuple(ops[k] for k in sorted(seen))


def skip_of(schedule) -> Skip | None:
    """The skip of a stream schedule (:class:`~napkin_cat.algorithms.schedule.StreamSchedule`), or None when
    no mask makes its trips neutral (or it writes sliced outputs, which every trip must write)."""
    if schedule.region is None or schedule.sliced or not schedule.reducers:
        return None
    maps = [it for it in schedule.trip if hasattr(it, "box")]
    ops = [(op.box, op.ins, op.outs) for op in (*schedule.head, *maps)]
    by_reducers = {v for r in schedule.reducers for v in r.outputs}
    masks, seen = [], set()
    for box, ins, _ in ops:
        if getattr(box, "data", None) is None or box.data.kind not in ("where", "select") or ins[0] in seen:
            continue
        seen.add(ins[0])
        consts = _constants([(o.box, o.ins, o.outs) for o in maps], {ins[0]: 0.0})
        if not all(_neutral(r, consts) for r in schedule.reducers):
            continue
        made = _ancestry(ops, ins[0], by_reducers)
        if made is None:
            continue
        axes = frozenset(b.cod.inside[0].axes[0].name for b, _, _ in made
                         if getattr(getattr(b, "data", None), "kind", None) == "position")
        if axes:
            masks.append(Mask(ins[0], made, axes))
    return Skip(schedule.axis, tuple(masks)) if masks else None


__all__ = ["Mask", "Skip", "skip_of"]
