"""A block mask: which pairs of tiles a mask read from data allows, computed from the data before a run.

A mask built from positions alone is decided on a tile by interval arithmetic (:mod:`.intervals`); a mask that
reads data (document ids, jagged offsets, coordinates gathered by position) is not: its truth on a tile is a
fact of the data.  FlexAttention computes that fact once per batch of data, before its kernel runs: its
``BlockMask`` holds, per (query block, key block), whether the mask is false everywhere there (the block is
skipped), true everywhere (the mask is not evaluated) or neither.

Here the fact is held at the finest grain, the mask's own elements, as their **summed-area table** ``S``
(``S[i, j] = Σ_{i' < i, j' < j} mask[i', j']``, one axis per axis of the mask), so one value answers for any
tiling (the tiles a search tries, a ragged last tile, tiles nested in tiles).  The allowed pairs of a box of
tiles are four lookups (``2^n`` for ``n`` axes, inclusion–exclusion)::

    allowed([a₀, a₁) × [b₀, b₁)) = S[a₁, b₁] − S[a₀, b₁] − S[a₁, b₀] + S[a₀, b₀]
    none ⟺ allowed = 0          full ⟺ allowed = (a₁ − a₀)(b₁ − b₀)          partial otherwise

:meth:`BlockMask.truth` is that verdict as a :class:`~napkin_cat.syntax.interval.Truth` (``possibly``: some pair
is allowed; ``always``: every pair is), on numbers or on arrays of tiles at once, which is what a stream's skip
test reads (:mod:`.skipping`); :meth:`BlockMask.states` is FlexAttention's per-block table at given tiles.

>>> import numpy as np
>>> seg = np.array([0, 0, 0, 1, 1, 2, 2, 2])                     # three documents
>>> bm = BlockMask.of(seg[:, None] == seg[None, :], ("q", "x"))
>>> bm.states({"q": 4, "x": 4}).tolist()                           # 0 none, 1 partial, 2 full
[[1, 1], [1, 1]]
>>> bm.states({"q": 2, "x": 2}).tolist()
[[2, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 2]]
>>> int(bm.allowed(lambda axis, size: (4, 4) if axis == "q" else (0, 4)))      # rows 4…7, columns 0…3
1
>>> bm.density({"q": 2, "x": 2})
0.625
"""
from __future__ import annotations

import itertools

import numpy as np

from napkin_cat.errors import ShapeError
from napkin_cat.syntax.interval import Truth

#: a block's states in :meth:`BlockMask.states` (FlexAttention: skipped, ``kv_indices``, ``full_kv_indices``)
NONE, PARTIAL, FULL = 0, 1, 2


class BlockMask:
    """The allowed pairs of a mask over ``axes`` (names, in the mask's order), as their summed-area table.

    Immutable: the table is read-only once built.  ``source``: where the library derived it from (a digest of the
    condition a plan drops on a full trip and of the data it read, :mod:`napkin_cat.plan.condition`), or None: a
    kernel then checks it against that condition on the data before reading it."""

    def __init__(self, axes: tuple, counts: np.ndarray, source: str | None = None):
        self.axes = tuple(axes)
        self.source = source
        counts = np.asarray(counts)
        counts = np.array(counts, dtype=counts.dtype if counts.dtype in (np.int32, np.int64) else np.int64)
        counts.setflags(write=False)
        self.counts = counts
        self.sizes = {a: n - 1 for a, n in zip(self.axes, counts.shape)}

    @classmethod
    def of(cls, mask, axes, source: str | None = None) -> "BlockMask":
        """The block mask of a boolean array ``mask`` whose axes are named ``axes`` (a string ``"q x"`` or names)."""
        axes = tuple(axes.split()) if isinstance(axes, str) else tuple(axes)
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise ShapeError(f"a block mask is read off a bool array (the mask's values), got {mask.dtype}")
        if mask.ndim != len(axes) or len(set(axes)) != len(axes):
            raise ShapeError(f"a block mask over axes {list(axes)} needs a bool array of {len(axes)} axes with "
                             f"distinct names, got one of shape {mask.shape}")
        # int32 where every inclusion-exclusion partial sum fits it (half the bytes and time of int64)
        counts = np.zeros(tuple(n + 1 for n in mask.shape), dtype=np.int32 if mask.size < 2 ** 30 else np.int64)
        inner = counts[(Ellipsis, *(slice(1, None) for _ in axes))]   # a view: the cumulative sums written in place
        if mask.ndim == 0:
            inner[...] = mask
        else:
            np.cumsum(mask, axis=0, dtype=counts.dtype, out=inner)
        for k in range(1, mask.ndim):
            np.cumsum(inner, axis=k, out=inner)
        return cls(axes, counts, source)

    def __repr__(self) -> str:
        total = int(self.counts[tuple(-1 for _ in self.axes)])
        return f"BlockMask({dict(self.sizes)}, allowed={total})"

    def allowed(self, tile_of):
        """The allowed pairs on the box of tiles ``tile_of(axis, size)`` gives (``(start, extent)`` per axis,
        numbers or arrays of them, one entry per box), clipped to the axes."""
        ends = []
        for a in self.axes:
            start, extent = tile_of(a, self.sizes[a])
            lo = np.clip(np.asarray(start, dtype=np.int64), 0, self.sizes[a])
            ends.append((lo, np.clip(lo + np.asarray(extent, dtype=np.int64), 0, self.sizes[a])))
        total = 0
        for corner in itertools.product((0, 1), repeat=len(self.axes)):
            index = tuple(ends[k][c] for k, c in enumerate(corner))
            sign = -1 if (len(corner) - sum(corner)) % 2 else 1
            total = total + sign * self.counts[index]
        return total

    def truth(self, tile_of) -> Truth:
        """On the box of tiles: ``possibly`` some pair is allowed, ``always`` every pair is (bools or arrays)."""
        n = self.allowed(tile_of)
        area = 1
        for a in self.axes:
            start, extent = tile_of(a, self.sizes[a])
            lo = np.clip(np.asarray(start, dtype=np.int64), 0, self.sizes[a])
            area = area * (np.clip(lo + np.asarray(extent, dtype=np.int64), 0, self.sizes[a]) - lo)
        possibly, always = n > 0, n == area
        if np.ndim(possibly) == 0:
            return Truth(bool(always), bool(possibly))
        return Truth(always, possibly)

    def states(self, tiles: dict) -> np.ndarray:
        """FlexAttention's block table at tiles ``{axis: tile}`` (an axis not named: one tile, the whole axis):
        per block :data:`NONE`, :data:`PARTIAL` or :data:`FULL`, one array axis per mask axis."""
        for a, t in tiles.items():
            if a not in self.sizes:
                raise ShapeError(f"a block mask's tile for axis {a!r}: the mask is over {list(self.axes)}")
            if not isinstance(t, (int, np.integer)) or not 1 <= t <= self.sizes[a]:
                raise ShapeError(f"a block mask's tile for axis {a!r} is {t!r}; legal: an int 1 … {self.sizes[a]}")
        tile = {a: int(tiles.get(a, self.sizes[a])) for a in self.axes}
        starts = np.meshgrid(*(np.arange(0, self.sizes[a], tile[a]) for a in self.axes), indexing="ij")
        where = dict(zip(self.axes, starts))
        t = self.truth(lambda a, size: (where[a], tile[a]))
        return np.where(t.always, FULL, np.where(t.possibly, PARTIAL, NONE))

    def density(self, tiles: dict) -> float:
        """The fraction of blocks at ``tiles`` that run (partial or full): what a skipping kernel moves and
        computes of what the dense one does, where the blocks are alike."""
        s = self.states(tiles)
        return float(np.count_nonzero(s != NONE) / s.size)

    def check(self, sizes: dict, what: str):
        """ShapeError unless every axis of this block mask has the size ``sizes`` gives it (name → int)."""
        for a in self.axes:
            if a not in sizes:
                raise ShapeError(f"the block mask is over axis {a!r}, which {what} lacks; its mask's axes are "
                                 f"{sorted(sizes)}")
            if int(sizes[a]) != self.sizes[a]:
                raise ShapeError(f"the block mask's axis {a!r} has size {self.sizes[a]}, {what} has "
                                 f"{a} = {sizes[a]}; build it from the data of those sizes")


__all__ = ["BlockMask", "NONE", "PARTIAL", "FULL"]
