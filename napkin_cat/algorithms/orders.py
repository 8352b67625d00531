"""The order of a device region's shards (issue 37): which pieces of a sharded axis each device holds.

An order cuts an axis of ``n`` values in ``C(P)`` chunks (``np.array_split``'s cut) and gives device ``p`` the chunks
``pieces(p, P)``, in increasing position; device ``p``'s shard is those chunks joined, in that order::

    contiguous   C = P     device p: chunk p                     (np.array_split's shards)
    zigzag       C = 2P    device p: chunks p and 2P − 1 − p     (ring-flash-attention's, torch's context-parallel
                                                                  load balancer)

Under a causal mask the queries of contiguous shard ``p`` see ``p + 1`` of the ``P`` key shards, so the last device
does ``P`` times the first one's work; zigzag pairs an early chunk with a late one, and device ``p``'s query chunks
see ``(p + 1) + (2P − p) = 2P + 1`` key chunks, the same for every ``p``.  The order is a fact of the region
(``Shard.params["order"]``, the ring's too), read by the numpy run (each piece at its own positions), the cost (each
piece's folds, their masks decided at their positions), the link counts (a shard's size is its pieces') and the
distributed run.

>>> zigzag = order_of("zigzag")
>>> [zigzag.pieces(p, 4) for p in range(4)]
[(0, 7), (1, 6), (2, 5), (3, 4)]
>>> device_pieces(10, 4, "zigzag")[0], device_extents(10, 4, "zigzag")       # 8 chunks: 2, 2, 1, 1, 1, 1, 1, 1
(((0, 2), (9, 10)), [3, 3, 2, 2])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from napkin_cat.errors import ArgumentError, DeviceError
from napkin_cat.syntax.collectives import shard_bounds


@dataclass(frozen=True)
class Order:
    """``chunks(P)``: how many chunks the axis is cut in; ``pieces(p, P)``: the chunks device ``p`` holds, in
    increasing position."""

    name: str
    chunks: Callable
    pieces: Callable
    doc: str = ""


ORDERS = {
    "contiguous": Order("contiguous", lambda P: P, lambda p, P: (p,), "device p holds chunk p of P"),
    "zigzag": Order("zigzag", lambda P: 2 * P, lambda p, P: (p, 2 * P - 1 - p),
                    "device p holds chunks p and 2P − 1 − p of 2P"),
}

CONTIGUOUS = "contiguous"


def order_of(name) -> Order:
    """The order named ``name`` (None: contiguous), else ArgumentError listing the orders known."""
    if name is None:
        return ORDERS[CONTIGUOUS]
    if isinstance(name, Order):
        return name
    if not isinstance(name, str) or name not in ORDERS:   # a list of devices is no order's name (nor hashable)
        raise ArgumentError(f"order={name!r}: a device region's shards are ordered as one of {sorted(ORDERS)}")
    return ORDERS[name]


class Pieces(tuple):
    """One device's shard of an axis as pieces ``((start, stop), …)`` in the order they are joined (a non-contiguous
    order's shard; a contiguous one is a plain ``(start, stop)``).

    >>> Pieces(((0, 2), (9, 10))).extent, Pieces(((0, 2), (9, 10))).positions().tolist()
    (3, [0, 1, 9])
    """

    @property
    def extent(self) -> int:
        return sum(hi - lo for lo, hi in self)

    def positions(self) -> np.ndarray:
        return np.concatenate([np.arange(lo, hi, dtype=np.int64) for lo, hi in self])


def extent(span) -> int:
    """How many values a shard holds: a ``(start, stop)`` or :class:`Pieces`."""
    return span.extent if isinstance(span, Pieces) else span[1] - span[0]


def pieces_of(span) -> tuple:
    """A shard's pieces ``((start, stop), …)``: a ``(start, stop)`` is one."""
    return tuple(span) if isinstance(span, Pieces) else (tuple(span),)


def cut(x, position: int, span):
    """``x``'s values along ``position`` in the shard ``span`` (its pieces joined in order)."""
    def one(lo, hi):
        idx = [slice(None)] * np.ndim(x)
        idx[position] = slice(lo, hi)
        return x[tuple(idx)]
    parts = pieces_of(span)
    return one(*parts[0]) if len(parts) == 1 else np.concatenate([one(lo, hi) for lo, hi in parts], axis=position)


def check_chunks(full: int, devices: int, name, axis: str) -> None:
    """DeviceError where ``full`` values of ``axis`` are fewer than the order's chunks (a non-contiguous order gives
    every chunk a value; the contiguous one leaves devices beyond the values idle)."""
    o = order_of(name)
    if o.name != CONTIGUOUS and isinstance(full, int) and isinstance(devices, int) and full < o.chunks(devices):
        raise DeviceError(f"the {o.name} order cuts {axis!r} in {o.chunks(devices)} chunks over {devices} devices "
                          f"({o.doc}), but {axis!r} has {full} values: give it at least {o.chunks(devices)}, or the "
                          f"contiguous order")


def device_pieces(full: int, devices: int, name=None) -> list:
    """Per device ``p``, its pieces ``((start, stop), …)`` of an axis of ``full`` values under the order ``name``."""
    o = order_of(name)
    b = shard_bounds(full, o.chunks(devices))
    return [tuple((b[c], b[c + 1]) for c in o.pieces(p, devices)) for p in range(devices)]


def device_extents(full: int, devices: int, name=None) -> list:
    """Per device, how many values of the axis its shard holds under the order ``name``."""
    return [sum(hi - lo for lo, hi in ps) for ps in device_pieces(full, devices, name)]


def device_span(full: int, devices: int, p: int, name=None):
    """Device ``p``'s shard: ``(start, stop)`` under the contiguous order, else its :class:`Pieces`."""
    ps = device_pieces(full, devices, name)[p]
    return ps[0] if order_of(name).name == CONTIGUOUS else Pieces(ps)


__all__ = ["Order", "ORDERS", "CONTIGUOUS", "order_of", "Pieces", "extent", "pieces_of", "cut", "check_chunks",
           "device_pieces", "device_extents", "device_span"]
