"""Size bindings of one evaluation: axis and tile symbols to ints, and the transfer counters.

>>> import sympy
>>> from napkin_cat.syntax.axis import symbol
>>> env = Env({symbol("q"): 4})
>>> env.size(2 * symbol("q"), "twice q")
8
>>> env.size(symbol("g_q"), "the group size of 'q'")
Traceback (most recent call last):
...
napkin_cat.errors.ShapeError: the size of the group size of 'q' (g_q) is not known from the inputs: ...
"""
from __future__ import annotations

import numpy as np
import sympy

from napkin_cat.errors import ShapeError
from napkin_cat.syntax.array import Array


def bindings_for(env: dict, expr) -> dict:
    """The bindings of ``expr``'s symbols, where ``env`` binds them all by symbol (substituting them alone gives
    what substituting all of ``env`` gives, without sympy ordering the whole mapping); else ``env``."""
    free = expr.free_symbols
    some = {s: env[s] for s in free if s in env}
    return some if len(some) == len(free) else env


def substituted(env: dict, expr):
    """``expr`` with ``env``'s bindings substituted: a bound symbol looked up, else only ``expr``'s own symbols
    substituted (:func:`bindings_for`)."""
    if isinstance(expr, sympy.Symbol) and isinstance(env.get(expr), int):   # the common case, without subs
        return env[expr]
    return expr.subs(bindings_for(env, expr))


class Env(dict):
    """Bindings of size symbols to ints, shared by one evaluation.

    ``counters`` (optional) tallies the values each Load/Save really moves, per level.  ``tiles`` maps each
    partitioned axis to the tile being run, ``(start, extent)`` on the whole axis (a Grid's group, a
    Stream's slice): what a position or a gather reads, and what decides a skipped trip.  ``skip``: whether a
    stream's trips on which a mask makes the contribution neutral are skipped (they change nothing).  ``maps``:
    an axis whose values are not consecutive positions (a device's pieces under a non-contiguous order,
    :mod:`~napkin_cat.algorithms.orders`) → the position of each of its indices; its tiles are then indices into it.
    ``noise``: a numpy Generator with which every primitive's floating-point result is moved by a random relative
    ``δ`` (:func:`~napkin_cat.semantics.precision.perturbed`), or None.
    """

    counters = None
    noise = None
    tiles: dict = {}
    maps: dict = {}
    skip = True

    def child(self) -> "Env":
        """A copy for the inside of a region (new bindings stay inside; counters are shared)."""
        e = Env(self)
        e.counters, e.tiles, e.skip, e.maps, e.noise = self.counters, self.tiles, self.skip, self.maps, self.noise
        return e

    def interval(self, axis: str, size) -> tuple:
        """``(first position, extent)`` of the positions the tile of ``axis`` covers (the whole axis outside a
        partition of it); for a mapped axis the smallest interval holding its tile's positions, so that a trip
        skipped on it is skipped on every position it holds.

        >>> e = Env(); e.maps = {"q": np.array([0, 1, 9, 10])}
        >>> e.within("q", 1, 2).interval("q", 4)
        (1, 9)
        """
        start, n = self.tiles.get(axis) or (0, self.size(size, f"axis {axis!r}"))
        m = self.maps.get(axis)
        if m is None:
            return start, n
        seg = m[start:start + n]
        return int(seg.min()), int(seg.max() - seg.min() + 1)

    def within(self, axis: str, start: int, extent: int) -> "Env":
        """A child for the tile ``start : start + extent`` of ``axis`` (``start`` within the enclosing tile).

        >>> Env().within("q", 4, 2).within("q", 1, 1).tiles
        {'q': (5, 1)}
        """
        e = self.child()
        outer = self.tiles.get(axis, (0, None))[0]
        e.tiles = {**self.tiles, axis: (outer + int(start), int(extent))}
        return e

    @property
    def offsets(self) -> dict:
        """Axis → the global position of the current tile's first index."""
        return {a: s for a, (s, _) in self.tiles.items()}

    def size(self, expr, what: str) -> int:
        if isinstance(expr, int):
            return expr
        v = substituted(self, expr) if self else expr
        if isinstance(v, int):
            return v
        if not v.is_number:
            missing = sorted(str(s) for s in v.free_symbols)
            raise ShapeError(f"the size of {what} ({expr}) is not known from the inputs: "
                             f"pass sizes={{{', '.join(repr(m) + ': …' for m in missing)}}}")
        if not v.is_integer:
            raise ShapeError(f"the size of {what} is {expr} = {v}, not an integer")
        return int(v)

    def bind(self, array: Array, value: np.ndarray, where: str):
        if value.ndim != len(array.axes):
            raise ShapeError(f"{where}: expected an array of rank {len(array.axes)} with axes "
                             f"{list(array.names)}, got shape {value.shape}")
        for axis, n in zip(array.axes, value.shape):
            if n == 0:
                raise ShapeError(f"{where}: axis {axis.name!r} is empty (size 0, shape {value.shape}); every axis "
                                 f"has a positive size")
            size = axis.size
            if isinstance(size, int):
                if size != n:
                    raise ShapeError(f"{where}: axis {axis.name!r} has size {size}, but the array "
                                     f"has {n} along it (shape {value.shape})")
            elif isinstance(size, sympy.Symbol):
                if size in self and self[size] != n:
                    raise ShapeError(f"{where}: axis {axis.name!r} ({size}) is already bound to "
                                     f"{self[size]}, but this array has {n} along it")
                self[size] = n
            else:
                want = self.size(size, f"axis {axis.name!r}") if size.free_symbols <= set(self) else None
                if want is not None and want != n:
                    raise ShapeError(f"{where}: axis {axis.name!r} has size {size} = {want}, but the "
                                     f"array has {n} along it")
