"""Interval arithmetic on a diagram: the range of every value on a tile, from the positions that tile holds.

Each op's interval is its kind's *interval image* (``declare(..., interval=…)``, read from the record) of its
inputs' intervals; a ``position`` reads the tile its axis is in.  A value computed from positions by affine
and monotone maps (sums, differences, shifts and scalings, ``abs``, ``max``, ``min``, ``exp``, ``log``, a
user's monotone kind) lies in an interval whose ends are read off the tile's first and last positions; a
comparison of two intervals is *always* true, *possibly* true, or never.  That is what decides that a mask
is constant on a tile (:mod:`.skipping`).  The ends are Python numbers (the numpy run), numpy arrays (many
tiles at once: the cost at sizes counts every tile's trips in one pass) or sympy expressions in loop indices
and sizes (the symbolic cost, the plan's trip test); the types and their arithmetic are
:mod:`napkin_cat.syntax.interval`'s.

A kind without an interval image is legal: nothing is known of its output on a tile (skipping is an
optimisation), so the image is read with ``kind.part("interval", default=None)``, never refused.

The law (checked in ``proofs/``): for every value ``v`` of a tile and every element ``e`` of it::

    lo(v) ≤ e ≤ hi(v)          always(m) ⟹ m[e]          m[e] ⟹ possibly(m)

>>> import napkin_cat as nc
>>> from napkin_cat.syntax.wiring import trace_values
>>> ops, _, (out,) = trace_values(nc.library.causal_mask(q=8, x=8))
>>> evaluate(ops, lambda axis, size: (4, 4) if axis == "x" else (0, 2))[out]     # x in 4…7, q in 0…1
Truth(always=False, possibly=False)
>>> sorted(tiles_read(ops, out))
['q', 'x']
"""
from __future__ import annotations

from napkin_cat.syntax.primitive import kind_of


def evaluate(ops, tile_of) -> dict:
    """The intervals (or truths) of the values the ops ``[(box, ins, outs)]`` make, in order: each op's kind's
    interval image of its inputs' (``tile_of(axis, size)`` the tile ``(start, extent)`` an axis is in); an
    unknown input, or a kind without an image, gives nothing."""
    return _evaluate(ops, tile_of, None)


def tiles_read(ops, value) -> frozenset:
    """The axes whose tiles the interval (or truth) of ``value`` reads, through the images that are known: what
    its truth on a tile depends on (empty when nothing is known of it, or it is known whatever the tile)."""
    reads: dict = {}
    _evaluate(ops, None, reads)
    return frozenset(reads.get(value, ()))


def _evaluate(ops, tile_of, reads) -> dict:
    """:func:`evaluate`; with a dict ``reads``, on a probe tile ``(0, 1)`` of every axis, noting for each known value
    the axes its image read, its own and its known inputs'."""
    known: dict = {}
    for box, ins, outs in ops:
        kind = getattr(getattr(box, "data", None), "kind", None)      # None: a region, of which nothing is known
        rule = None if kind is None else kind_of(kind).part("interval", default=None)
        if rule is None:
            continue
        read: set = set()

        def probe(axis, size):
            read.add(axis)
            return (0, 1)
        value = rule([known.get(v) for v in ins], box, tile_of if reads is None else probe)
        if value is not None:
            known[outs[0]] = value
            if reads is not None:
                reads[outs[0]] = read.union(*(reads.get(v, ()) for v in ins))
    return known


__all__ = ["evaluate", "tiles_read"]
