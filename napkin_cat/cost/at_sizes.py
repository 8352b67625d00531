"""The context of the cost at concrete sizes: the tiles a fold at sizes stands for, and which of them run.

The cost at sizes (:mod:`napkin_cat.cost.numeric`) folds a partition's inside once per distinct tile extent: a
partition of ``a`` into tiles of ``g`` is ``⌊a/g⌋`` full tiles and, where ``g`` does not divide ``a``, one of
``a mod g`` (:func:`tile_extents`).  Its context :class:`At` binds the tile's symbol to the extent and stands for
``count`` alike tiles at once; a masked stream's slice is counted on the tiles where its mask may be true, decided as
the runner decides it (:func:`running_slices`)::

    Σ_tiles C(tile) = ⌊a/g⌋ · C(g) + C(a mod g)          (no mask reads where the tiles lie)
    runs(slice)     = #{t ∈ tiles : the mask does not skip the slice on t}  (a masked stream's trips)

>>> import napkin_cat as nc
>>> from napkin_cat.algorithms.bubbles import Grid
>>> (g,) = [b for b in nc.group(nc.library.matmul(), "a", "g_a").boxes if isinstance(b, Grid)]
>>> env = {sympy.Symbol("a", positive=True, integer=True): 7, sympy.Symbol("g_a", positive=True, integer=True): 3}
>>> [(extent, len(starts)) for extent, starts in tile_extents(g, env)]
[(3, 2), (1, 1)]
>>> At(env).bound(g, 3, range(0, 6, 3)).tiles
{'a': (array([0, 3]), 3)}
"""
from __future__ import annotations

import contextlib
import hashlib
import threading
from contextvars import ContextVar

import numpy as np
import sympy

from napkin_cat.algorithms.bubbles import Region, Stream
from napkin_cat.algorithms.schedule import schedule_of
from napkin_cat.cost.exact_arithmetic import value
from napkin_cat.cost.record import Cost, join_links
from napkin_cat.errors import NapkinError
from napkin_cat.syntax.flat import layers
from napkin_cat.syntax.interval import negate
from napkin_cat.syntax.relabel import PLAIN, Relabelling

__all__ = ["COUNTS_KEPT", "MAX_TILES", "PAIRS", "At", "RunningCounts", "add", "count_key", "count_running",
           "counts_kept", "integer", "kept_counts", "reads_positions_inside", "running_area", "running_slices",
           "skip_axes", "tile_extents", "whole_slices"]


def integer(expr, env) -> int:
    """``expr`` at ``env``, an int: evaluated in exact Python arithmetic (:func:`.exact_arithmetic.value`, no
    sympy substitution per tiling, the value kept per the ints the expression reads); a size missing, or a value that
    is not an integer, is refused."""
    if isinstance(expr, int):
        return expr
    v = value(expr, env)
    if not isinstance(v, int):
        raise NapkinError(f"{expr} is {v} at the sizes {env}, not an integer: a size is missing or not an int")
    return v


def add(total: Cost, part: Cost, times: int = 1) -> Cost:
    """``total`` plus ``times`` runs of ``part``, in place: H, H in bytes and FLOPs added per key, the links joined
    (:func:`~napkin_cat.cost.record.join_links`); memory is not added (the columns count it)."""
    times = int(times)
    for mine, theirs in ((total.H, part.H), (total.H_bytes, part.H_bytes), (total.flops, part.flops)):
        for k, v in theirs.items():
            mine[k] = mine.get(k, 0) + v * times
    if part.link is not None:
        total.link = join_links(total.link, part.link if times == 1 else part.link.scaled(times))
    return total


#: the most tiles whose starts the cost at sizes holds at once (a masked stream decides each where it lies):
#: 2^26 starts are half a GiB of int64 per axis, the most a cost should ask of this machine
MAX_TILES = 1 << 26


class At:
    """The context of :class:`~napkin_cat.cost.numeric.Concrete`: the sizes (symbol → int), the running total, and
    ``tiles``: each partitioned axis's tile ``(start, extent)``, where a mask decides which trips are skipped.

    A context may stand for ``count`` tiles at once, alike but for where they lie: a start is then an array with
    one entry per tile (every start an array of ``count`` entries, or one number for all).  Each box in it is
    counted ``count`` times, and a masked stream inside runs each of its slices on the tiles whose mask may be
    true there, decided for all of them at once (:func:`_count_running`)."""

    #: ``(p, A, empty, lane)``: device ``p`` of the ``A`` that hold a shard, whose shard this context counts (inside a
    #: device region: its collectives' link counts; ``empty``: ``(axis, shard size) → 0`` for its empty co-shards;
    #: ``lane``: which piece of the region's axis, under a non-contiguous order: its rings' link counted on lane 0), or
    #: None
    device = None
    #: the relabelling the boxes counted here are seen through (:class:`~napkin_cat.syntax.relabel.Relabelling`):
    #: inside a partition record (:attr:`~napkin_cat.algorithms.bubbles.Partition.relabelled`) its axis read as its
    #: tile, as the symbolic functor reads it (:mod:`napkin_cat.cost.scope`); none (``PLAIN``) outside every record
    view = PLAIN

    def __init__(self, env: dict, tiles: dict | None = None, count: int = 1, device=None, view: Relabelling = PLAIN):
        self.env, self.total, self.tiles, self.count = env, Cost(), dict(tiles or {}), count
        self.device, self.view = device, view

    def seeing(self, view: Relabelling) -> "At":
        """This context (its sizes, tiles, count and running total: what is counted in it adds to this one's total)
        with its boxes seen through ``view``; itself where ``view`` is its own."""
        if view is self.view:
            return self
        out = At(self.env, self.tiles, self.count, self.device, view)
        out.total = self.total
        return out

    def bound(self, region, extent: int, start=None) -> "At":
        """A context for a tile of ``extent`` (at ``start`` within the enclosing tile, if it matters): the
        tile's symbol reads the extent.  ``start`` an array: the context for each of those tiles in each tile
        this one stands for (``count · len(start)`` of them, the tiles of this context repeated outermost)."""
        env = dict(self.env)
        if isinstance(region.size, sympy.Symbol):
            env[region.size] = extent
        tiles, count = dict(self.tiles), self.count
        if start is None:
            return At(env, tiles, count, self.device, self.view)
        base = self.tiles.get(region.axis, (0, None))[0]
        if isinstance(start, range):
            if len(start) * count > MAX_TILES:
                raise NapkinError(f"the cost at sizes of a masked stream decides each tile where it lies: "
                                  f"{len(start) * count} tiles along {region.axis} (and the axes around it) are "
                                  f"more than {MAX_TILES}; take larger tiles ({region.size}) or a smaller axis")
            start = np.arange(start.start, start.stop, start.step, dtype=np.int64)
        if isinstance(start, np.ndarray):
            k = len(start)
            tiles = {a: (_repeated(s, k), e) for a, (s, e) in tiles.items()}
            base, start, count = _repeated(base, k), np.tile(start, count), count * k
        tiles[region.axis] = (base + start, extent)
        return At(env, tiles, count, self.device, self.view)

    def running(self, keep) -> "At":
        """The context of the tiles where ``keep`` (a bool, or an array over this context's tiles) holds."""
        keep = np.broadcast_to(np.asarray(keep, dtype=bool), (self.count,))
        return At(self.env, {a: (s[keep] if isinstance(s, np.ndarray) else s, e)
                             for a, (s, e) in self.tiles.items()}, int(np.count_nonzero(keep)), self.device,
                  self.view)

    def counting(self, count: int) -> "At":
        """This context standing for ``count`` tiles whose starts nothing reads."""
        return At(self.env, {a: t for a, t in self.tiles.items() if not isinstance(t[0], np.ndarray)}, count,
                  self.device, self.view)

    def tile_of(self, axis: str, size) -> tuple:
        """The tile ``axis`` is in: its partition's ``(start, extent)``, or the whole axis."""
        return self.tiles.get(axis) or (0, integer(size, self.env))


def _repeated(start, k: int):
    """Each entry of a start array ``k`` times in a row (a number stays: it is every tile's)."""
    return np.repeat(start, k) if isinstance(start, np.ndarray) else start


def skip_axes(region, *, data: bool = False) -> frozenset:
    """The axes whose positions decide a skipped trip in ``region`` or any region inside it (cached); with
    ``data`` (a block mask is given) the axes of the masks read from data too."""
    key = "_skip_axes_data" if data else "_skip_axes"
    cached = region.__dict__.get(key)
    if cached is None:
        found = set()
        skip = schedule_of(region).skip if isinstance(region, Stream) else None
        if skip is not None:
            found |= skip.axes | ({a for a, _ in skip.data_axes} if data else set())
        for _, box in layers(region.arg):
            if isinstance(box, Region):
                found |= skip_axes(box, data=data)
        cached = region.__dict__[key] = frozenset(found)
    return cached


def tile_extents(region, env, full=None) -> list:
    """``[(extent, starts)]`` of a partition's tiles at ``env``: the full tiles, then the shorter last one (the
    starts within the enclosing tile, as a ``range``: nothing is held per tile until a mask reads where they lie).
    ``full``: the partitioned axis's size as the region is seen (:meth:`~napkin_cat.algorithms.bubbles.Partition.
    seen`: a record inside another record of its axis sees the outer tile); by default as drawn.

    >>> from napkin_cat.algorithms.bubbles import Grid
    >>> import napkin_cat as nc
    >>> (g,) = [b for b in nc.group(nc.library.matmul(), "a", "g_a").boxes if isinstance(b, Grid)]
    >>> tile_extents(g, {sympy.Symbol(n, positive=True, integer=True): v for n, v in [("a", 2**62), ("g_a", 3)]})
    [(3, range(0, 4611686018427387903, 3)), (1, range(4611686018427387903, 4611686018427387904))]
    """
    full = integer(region.full_size() if full is None else full, env)
    tile = integer(region.size, env)
    whole = full // tile * tile
    out = [(tile, range(0, whole, tile))] if whole else []
    if full % tile:
        out.append((full % tile, range(whole, whole + 1)))
    return out


def reads_positions_inside(region, data: bool) -> bool:
    """Whether a region nested in ``region`` skips trips on a mask (so it reads where its tiles lie)."""
    return any(skip_axes(box, data=data) for _, box in layers(region.arg) if isinstance(box, Region))


#: the most (tile, slice) pairs a masked stream's skip test takes in one array operation
PAIRS = 1 << 20


def running_slices(skip, ctx: At, region, extent: int, starts, positions: bool, block_mask=None) -> At:
    """The context of the slices of ``extent`` at ``starts`` (evenly spaced) that ``skip`` does not skip, over
    every tile ``ctx`` stands for.  With ``positions`` (a mask inside reads where they lie) each (tile, slice)
    pair is tested, in chunks of at most :data:`PAIRS`; else only how many run is kept (:func:`_count_running`).
    ``block_mask``: the data's, which decides the masks read from data (:meth:`~napkin_cat.algorithms.skipping.
    Skip.verdict`)."""
    if not positions:
        return ctx.bound(region, extent).counting(_count_running(skip, ctx, region, extent, starts, block_mask))
    per = max(1, PAIRS // max(ctx.count, 1))
    parts = []
    for k in range(0, len(starts), per):
        pairs = ctx.bound(region, extent, starts[k:k + per])
        parts.append(pairs.running(negate(skip.skipped(pairs.tile_of, block_mask))))
    first = parts[0]
    arrays = [a for a, (s, _) in first.tiles.items() if isinstance(s, np.ndarray)]
    tiles = dict(first.tiles)
    tiles.update({a: (np.concatenate([p.tiles[a][0] for p in parts]), first.tiles[a][1]) for a in arrays})
    return At(first.env, tiles, sum(p.count for p in parts), first.device, first.view)


#: the most counts one call keeps (:class:`RunningCounts`; a search counts one tiling once per structure and assignment)
COUNTS_KEPT = 4096


class RunningCounts:
    """The counts of running (tile, slice) pairs one call has made (:func:`count_running`), by :func:`count_key`:
    everything a count depends on, so a count kept is the count.  At most ``limit`` (the oldest goes first), locked.

    A store belongs to a call: :func:`counts_kept` installs one for the call's duration (``nc.derive``, ``nc.cost``
    at sizes, ``nc.optimal``'s integer search, every fold at sizes), in the call's thread (a context variable), and
    a call nested in it reads the same; when the outermost ends the store goes with it, so no two calls (other
    sizes, masks or hardware) ever read each other's counts.

    >>> with counts_kept() as mine:
    ...     with counts_kept() as nested:
    ...         nested is mine
    True
    >>> kept_counts() is None                                  # outside every call: none
    True
    """

    def __init__(self, limit: int = COUNTS_KEPT):
        self.limit = limit
        self._counts: dict = {}
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            return self._counts.get(key)

    def put(self, key, count: int) -> int:
        with self._lock:
            while len(self._counts) >= self.limit:
                self._counts.pop(next(iter(self._counts)))
            self._counts[key] = count
        return count

    def __len__(self) -> int:
        return len(self._counts)


_KEPT: ContextVar = ContextVar("napkin_cat_running_counts", default=None)


def kept_counts() -> RunningCounts | None:
    """The store of the call running in this thread (:class:`RunningCounts`), or None outside every call."""
    return _KEPT.get()


@contextlib.contextmanager
def counts_kept():
    """The running counts of this call (:class:`RunningCounts`): the store of the call it is nested in, else a fresh
    one for its duration.  A context manager, and a decorator (a fresh store per outermost call)."""
    store = _KEPT.get()
    if store is not None:
        yield store
        return
    store = RunningCounts()
    token = _KEPT.set(store)
    try:
        yield store
    finally:
        _KEPT.reset(token)


def _digest(start) -> object:
    """A tile's start as a key: a number, or a digest of an array of them."""
    if isinstance(start, np.ndarray):
        return (len(start), hashlib.blake2b(np.ascontiguousarray(start, dtype=np.int64).tobytes(),
                                            digest_size=16).digest())
    return int(start)


def count_key(skip, ctx: At, region, extent: int, starts):
    """What :func:`count_running`'s answer depends on (without a block mask): the masks, and the tile each axis they
    read is in over the tiles ``ctx`` stands for (the axes read, :attr:`~napkin_cat.algorithms.skipping.Skip.reads`;
    an axis not tiled by its size at ``ctx.env``), the slices' axis, extent and starts, and how many tiles ``ctx``
    stands for."""
    read = dict(skip.reads)
    tiles = []
    for axis in sorted(set(read) | set(skip.axes) | {region.axis}):
        if axis in ctx.tiles:
            s, e = ctx.tiles[axis]
            tiles.append((axis, _digest(s), int(e)))
        elif axis != region.axis:
            tiles.append((axis, integer(read[axis], ctx.env) if axis in read else None))
    return (skip, region.axis, int(extent), int(starts[0]) if len(starts) else 0,
            int(starts[1] - starts[0]) if len(starts) > 1 else 0, len(starts), ctx.count, tuple(tiles))


def _count_running(skip, ctx: At, region, extent: int, starts, block_mask=None, whole=None) -> int:
    """:func:`count_running`, kept per :func:`count_key` in the call's store (:func:`kept_counts`; none, or a block
    mask given, the data's, which is no key: counted)."""
    store = _KEPT.get()
    if block_mask is not None or store is None:
        return count_running(skip, ctx, region, extent, starts, block_mask, whole)
    key = (count_key(skip, ctx, region, extent, starts), whole)
    found = store.get(key)
    if found is None:
        found = store.put(key, count_running(skip, ctx, region, extent, starts, whole=whole))
    return found


def whole_slices(skip, whole, ctx: At, inner: At, region, extent: int, starts, block_mask=None) -> int:
    """Of the (tile, slice) pairs that run (``inner``, :func:`running_slices`' context), how many its mask
    (``whole``, a :class:`~napkin_cat.algorithms.skipping.Whole`) allows whole: each pair decided where ``inner``
    holds where they lie, else counted over ``ctx``'s tiles and the slices at ``starts`` as the running ones are."""
    if any(isinstance(s, np.ndarray) for s, _ in inner.tiles.values()) or region.axis in inner.tiles:
        return int(np.count_nonzero(np.broadcast_to(np.asarray(whole.always(inner.tile_of, block_mask), dtype=bool),
                                                    (inner.count,))))
    return _count_running(skip, ctx, region, extent, starts, block_mask, whole)


def count_running(skip, ctx: At, region, extent: int, starts, block_mask=None, whole=None) -> int:
    """How many (tile, slice) pairs run, over the tiles ``ctx`` stands for and the slices of ``extent`` at
    ``starts`` (evenly spaced), each decided as the runner decides it (``skip.skipped`` on the slice).  With
    ``whole`` (the stream's :class:`~napkin_cat.algorithms.skipping.Whole`): how many of them run whole, its mask
    true on every pair (what a kernel runs without the mask's maps).

    Runs of consecutive slices are decided at once: on a block of them, where some mask is never true no slice
    runs, and where every mask is always true every slice runs (:meth:`~napkin_cat.algorithms.skipping.Skip.
    verdict`: interval arithmetic is inclusion-monotone); a block neither is halved, down to single slices.
    A band or a half-plane costs a few tests per tile and boundary, not one per slice."""
    step = int(starts[1] - starts[0]) if len(starts) > 1 else extent
    base = ctx.tiles.get(region.axis, (0, None))[0]
    tile = np.arange(ctx.count)
    lo, hi = np.zeros(ctx.count, dtype=np.int64), np.full(ctx.count, len(starts), dtype=np.int64)
    total = 0
    while len(tile):
        def tile_of(axis, size, tile=tile, lo=lo, hi=hi):
            if axis == region.axis:
                first = (base[tile] if isinstance(base, np.ndarray) else base) + int(starts[0]) + lo * step
                return first, (hi - lo - 1) * step + extent
            s, e = ctx.tile_of(axis, size)
            return (s[tile] if isinstance(s, np.ndarray) else s), e
        verdict = skip.verdict(tile_of, block_mask)
        if whole is not None:    # a block runs whole where it runs and the mask is true on every pair of it
            verdict = (verdict[0], whole.always(tile_of, block_mask))
        never, every = (np.broadcast_to(np.asarray(v, dtype=bool), tile.shape) for v in verdict)
        every = every & ~never
        width = hi - lo
        total += int(width[every].sum())
        if whole is None:        # a single slice neither skipped nor run whole by every mask: it runs
            total += int(np.count_nonzero(~never & ~every & (width == 1)))
        split = ~never & ~every & (width > 1)
        mid = (lo + hi) // 2
        tile, lo, hi = (np.concatenate([tile[split], tile[split]]), np.concatenate([lo[split], mid[split]]),
                        np.concatenate([mid[split], hi[split]]))
    return total



def running_area(skip, ctx: At, tiles: dict, block_mask=None) -> tuple:
    """``(run, total)``: of the tiles ``ctx`` stands for, cut along each axis ``a`` of ``tiles`` whose positions the
    masks read into blocks of ``tiles[a]`` (from the tile's start; the last one shorter), the area (the product of
    the cut axes' extents) of the blocks ``skip`` lets run, and the area of them all.  What a fold over those tiles
    costs when run as an algorithm of those tiles, which skips block by block as the runner does::

        run = Σ_{blocks b} |b| · [no mask is never true on b]          (total = Σ_b |b|)

    Decided as :func:`_count_running` decides slices: a box of blocks where some mask is never true runs none,
    where every mask is always true runs all (interval arithmetic is inclusion-monotone), else it is halved along
    its widest axis, down to single blocks (which run).  A causal mask costs a few tests per block on its diagonal.

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.schedule import schedule_of
    >>> att = nc.library.causal_attention(q=8, x=8, d=4)
    >>> skip = schedule_of(nc.stream(att, "x", "s_x").boxes[0].arg.boxes[0]).skip
    >>> running_area(skip, At({}, {"q": (0, 8), "x": (0, 8)}), {"q": 2, "x": 2})   # 10 of 4 × 4 blocks of 2 × 2
    (40, 64)
    >>> running_area(skip, At({}, {"q": (0, 8), "x": (0, 8)}), {"q": 8, "x": 8})   # one block: it runs whole
    (64, 64)
    """
    cut = [a for a in sorted(tiles) if a in skip.axes and a in ctx.tiles and int(tiles[a]) >= 1]
    if not cut:
        return (1, 1)
    n = max(ctx.count, 1)
    start, extent, width = {}, {}, {}
    for a in cut:
        s, e = ctx.tiles[a]
        start[a] = np.broadcast_to(np.asarray(s, dtype=np.int64), (n,))
        extent[a] = np.broadcast_to(np.asarray(e, dtype=np.int64), (n,))
        width[a] = -(-extent[a] // int(tiles[a]))
    total = int(np.prod([extent[a].astype(object) for a in cut], axis=0).sum())
    tile = np.arange(n)
    lo = {a: np.zeros(n, dtype=np.int64) for a in cut}
    hi = {a: width[a][tile].copy() for a in cut}
    run = 0
    while len(tile):
        def span(a, tile=tile, lo=lo, hi=hi):
            T, s, e = int(tiles[a]), start[a][tile], extent[a][tile]
            first = s + lo[a] * T
            return first, np.minimum(s + hi[a] * T, s + e) - first

        def tile_of(axis, size, tile=tile):
            if axis in start:
                return span(axis)
            s, e = ctx.tile_of(axis, size)
            return (s[tile] if isinstance(s, np.ndarray) else s), e
        never, every = (np.broadcast_to(np.asarray(v, dtype=bool), tile.shape)
                        for v in skip.verdict(tile_of, block_mask))
        every = every & ~never
        area = np.ones(len(tile), dtype=object)
        for a in cut:
            area = area * span(a)[1].astype(object)
        one = np.all([hi[a] - lo[a] == 1 for a in cut], axis=0)
        run += int(area[every].sum()) + int(area[~never & ~every & one].sum())
        split = ~never & ~every & ~one
        widths = np.stack([hi[a] - lo[a] for a in cut])
        along = np.argmax(widths, axis=0)
        nt, nlo, nhi = [tile[split]] * 2, {a: [] for a in cut}, {a: [] for a in cut}
        for k, a in enumerate(cut):
            mine = along[split] == k
            mid = (lo[a][split] + hi[a][split]) // 2
            nlo[a] += [lo[a][split], np.where(mine, mid, lo[a][split])]
            nhi[a] += [np.where(mine, mid, hi[a][split]), hi[a][split]]
        tile = np.concatenate(nt)
        lo = {a: np.concatenate(nlo[a]) for a in cut}
        hi = {a: np.concatenate(nhi[a]) for a in cut}
    return run, total
