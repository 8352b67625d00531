"""The cost functor at concrete sizes, ceil-aware: ragged tiles count what they hold.

The symbolic cost multiplies a tile's cost by ``a/g`` trips; at sizes that ``g`` does not divide
the last tile is smaller.  Evaluated structurally instead, a partition of ``a`` into tiles of ``g``
costs ``⌊a/g⌋ · C(g) + C(a mod g)``, where ``C(e)`` is the cost of its inside with the tile's extent
bound to ``e`` (a stream's head and tail once, its body and each reducer's step per slice).  The
per-box costs are iocost's (:func:`~napkin_cat.cost.iocost.box_cost`); nothing is re-derived here.
Memory is the symbolic ``M`` at the sizes: the most live data is held while the tiles are full.

Where the tiles divide, this equals the symbolic cost substituted::

    at(d, sizes).H[ℓ] == cost(d).H[ℓ].subs(sizes)      (every tile divides its axis)

>>> import napkin_cat as nc
>>> mm = nc.group(nc.stream(nc.library.matmul(), "b", "s_b"), "a", "g_a")
>>> at(mm, {"a": 5, "b": 7, "c": 3, "g_a": 2, "s_b": 3}).H
{1: 113}
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from napkin_cat.algorithms.bubbles import Grid, Region, Stream
from napkin_cat.cost.iocost import box_cost, cost
from napkin_cat.algorithms.nesting import state_moves
from napkin_cat.syntax.adapter import Diagram, layers
from napkin_cat.syntax.axis import symbol
from napkin_cat.syntax.wiring import computes


@dataclass
class NumericCost:
    """``H``, ``H_bytes`` and ``M`` per level, ``flops`` per pipeline: ints at the given sizes."""

    H: dict = field(default_factory=dict)
    H_bytes: dict = field(default_factory=dict)
    M: dict = field(default_factory=dict)
    flops: dict = field(default_factory=dict)

    def add(self, other: "NumericCost", times: int = 1):
        for mine, theirs in ((self.H, other.H), (self.H_bytes, other.H_bytes), (self.flops, other.flops)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v * times
        return self


def _value(expr, env) -> int:
    v = sympy.sympify(expr).subs(env)
    return int(v)


def _box(box, env) -> NumericCost:
    c = box_cost(box)
    out = NumericCost()
    out.H = {l: _value(h, env) for l, h in c.H.items()}
    out.H_bytes = {l: _value(h, env) for l, h in c.H_bytes.items()}
    out.flops = {p: _value(f, env) for p, f in c.flops.items()}
    return out


def _tiles(box, env):
    """``[(extent, count)]`` of a partition's tiles at ``env`` (full tiles, then the ragged one)."""
    full, tile = _value(box.full_size(), env), _value(box.size, env)
    out = [(tile, full // tile)] if full // tile else []
    if full % tile:
        out.append((full % tile, 1))
    return out


def _bound(box, env, extent):
    inner = dict(env)
    if isinstance(box.size, sympy.Symbol):
        inner[box.size] = extent
    return inner


def _diagram(d: Diagram, env) -> NumericCost:
    total = NumericCost()
    for _, box in layers(d):
        if computes(box):
            total.add(_region(box, env) if isinstance(box, Region) else _box(box, env))
    return total


def _region(box, env) -> NumericCost:
    if isinstance(box, Grid):
        total = NumericCost()
        for extent, count in _tiles(box, env):
            total.add(_diagram(box.arg, _bound(box, env, extent)), count)
        return total
    if isinstance(box, Stream):
        return _stream(box, env)
    return _diagram(box.arg, env)


def _op(box, env):
    return _region(box, env) if isinstance(box, Region) else _box(box, env)


def _stream(box: Stream, env) -> NumericCost:
    plan = box.plan
    total = NumericCost()
    for i in plan.indices("head") + plan.indices("tail"):
        total.add(_op(plan.ops[i][0], env))
    for r in plan.reducers:
        if r.finish is not None:
            total.add(_diagram(r.finish, env))
    for extent, count in _tiles(box, env):
        total.add(_trip(plan, _bound(box, env, extent)), count)
    return total


def _trip(plan, env) -> NumericCost:
    """One slice of a stream plan: its maps and each reducer's accumulator."""
    trip = NumericCost()
    for i in plan.maps:
        trip.add(_op(plan.ops[i][0], env))
    for r in plan.reducers:
        if r.nest is not None:
            trip.add(_advance(r.nest, env))
        elif r.step is not None:
            trip.add(_diagram(r.step, env))
        else:
            trip.add(_op(plan.ops[r.op][0], env))
    return trip


def _advance(nest, env) -> NumericCost:
    """A nested reducer's trip at ``env`` (iocost's :func:`~napkin_cat.cost.iocost.advance_cost`, tile by tile)."""
    region = nest.region
    kind = getattr(region, "region", None)
    if kind == "kernel":
        total = _advance(nest.child, env)
        for s in nest.state:
            for direction in ("load", "save"):
                for step in state_moves(s.array, region.params["level"], direction):
                    total.add(_box(step, env))
        return total
    if kind == "grid":
        total = NumericCost()
        for extent, count in _tiles(region, env):
            total.add(_advance(nest.child, _bound(region, env, extent)), count)
        return total
    total = NumericCost()
    for i in nest.plan.indices("head"):
        total.add(_op(nest.plan.ops[i][0], env))
    if kind == "stream":
        for extent, count in _tiles(region, env):
            total.add(_trip(nest.plan, _bound(region, env, extent)), count)
        return total
    return total.add(_trip(nest.plan, env))


def at(diagram: Diagram, sizes: dict) -> NumericCost:
    """The cost of ``diagram`` at ``sizes`` (axis and tile names → ints), ragged tiles counted exactly."""
    env = {symbol(str(k)): int(v) for k, v in sizes.items()}
    out = _diagram(diagram, env)
    out.M = {l: _value(m, env) for l, m in cost(diagram).M.items()}
    out.H = {l: v for l, v in out.H.items() if v}
    out.H_bytes = {l: v for l, v in out.H_bytes.items() if v}
    out.flops = {p: v for p, v in out.flops.items() if v}
    return out
