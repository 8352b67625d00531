"""Which trips a masked loop runs: the trips it skips (:func:`loop_skip`, one test for the plan, the cost at sizes
and the symbolic cost), and at concrete sizes at which tile extents it runs them (:class:`TripKinds`).

A loop whose every reducer advances a masked sub-loop skips a trip on which every such sub-loop skips all of its
own: the trip's range along the sub-loop's axis is the union of its sub-trips' ranges, and interval arithmetic is
inclusion-monotone, so a mask never true on the union is never true on a sub-trip (:class:`SubLoops`).

The cost at sizes (:mod:`napkin_cat.cost.numeric`) decides each masked loop's trips on every tile
(:func:`~napkin_cat.cost.at_sizes.running_slices`); its memory is the symbolic columns at the sizes
(:mod:`napkin_cat.cost.columns`), which hold a trip's data as written, at full tiles.  A trip the mask skips
holds nothing, one it allows whole never makes the mask (the runner leaves those maps out), and a trip of a
kind may run only on a short tile: :class:`TripKinds` notes what ran where, and the columns are walked at
each extent where something ran, each loop's trip counted as it runs there.
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.algorithms.schedule import AdvanceGrid, AdvanceKernel
from napkin_cat.syntax.interval import all_of, any_of

__all__ = ["SubLoops", "TripKinds", "loop_skip"]


def loop_skip(schedule):
    """The trips the loop ``schedule`` (a :class:`~napkin_cat.algorithms.schedule.StreamSchedule`: a stream's, a
    sub-loop's, or a diagram's run once inside a nested region) skips: its own masks' (:attr:`~napkin_cat.algorithms.
    schedule.StreamSchedule.skip`, a :class:`~napkin_cat.algorithms.skipping.Skip`); else, where every reducer
    advances (through kernels and groups) a loop that skips trips by masks from positions, those loops'
    (:class:`SubLoops`); else None: every trip runs.  Cached on the schedule.  The law::

        trip(state, tile) == state   where   ∀ reducer r: loop_skip(r's sub-loop).skipped(tile)

    (the tile's range along a sub-loop's axis the union of its sub-trips': each sub-trip is skipped, so neutral, and
    the trip's other ops only feed its reducers).  A split stream's (its parts each need a trip) and a sliced one's
    (every trip writes its slice) are None, as :func:`~napkin_cat.algorithms.skipping.skip_of` has them.

    >>> import napkin_cat as nc
    >>> from napkin_cat.algorithms.schedule import schedule_of
    >>> sub = nc.stream(nc.stream(nc.library.causal_attention(q=8, x=8, d=2), "x", 4), "x", 2)
    >>> outer = schedule_of(sub.boxes[0].arg.boxes[0])
    >>> outer.skip is None, type(loop_skip(outer)).__name__
    (True, 'SubLoops')
    >>> loop_skip(outer).skipped(lambda a, n: (4, 4) if a == "x" else (0, 2)), loop_skip(outer).skipped(
    ...     lambda a, n: (0, 4) if a == "x" else (2, 2))
    (True, False)
    >>> loop_skip(schedule_of(nc.stream(nc.stream(nc.library.attention(q=8, x=8, d=2), "x", 4), "x", 2)
    ...                       .boxes[0].arg.boxes[0])) is None                      # no mask: every trip runs
    True
    """
    found = schedule.__dict__.get("_loop_skip", _UNSET)
    if found is _UNSET:
        found = schedule.__dict__["_loop_skip"] = _loop_skip(schedule)
    return found


_UNSET = object()


def _loop_skip(schedule):
    own = schedule.skip if schedule.region is not None else None
    if own is not None or schedule.parts is not None or schedule.sliced or not schedule.reducers:
        return own
    inner = []
    for r in schedule.reducers:
        node = r.advance if r.kind == "nested" else None
        while isinstance(node, (AdvanceKernel, AdvanceGrid)):
            node = node.child
        skip = loop_skip(node.schedule) if node is not None else None
        if skip is None or not skip.axes:
            return None           # a reducer no mask from positions makes neutral: every trip may change it
        inner.append(skip)
    return SubLoops(schedule.axis, tuple(inner))


@dataclass(frozen=True)
class SubLoops:
    """The trips of a loop along ``axis`` skipped by its reducers' sub-loops (:func:`loop_skip`): ``inner``, each
    reducer's sub-loop's skip (a :class:`~napkin_cat.algorithms.skipping.Skip`, or a ``SubLoops`` again).  A trip is
    skipped where every one of them is skipped on the trip's tiles, and runs on every part of a block of trips where
    some one has every mask always true there (:meth:`verdict`, monotone as each inner one is).  It reads the masks
    from positions only: a mask from data decides a sub-loop's own trips by the data's table, never an outer trip.
    The trip makes no mask of its own: it never runs whole (:meth:`whole`), its masks are in ``inner``."""

    axis: str
    inner: tuple
    masks = ()              # (the trip's own: none; a plan's full trips need one the trip makes)
    data = ()
    data_axes = ()
    density = None

    @property
    def axes(self) -> frozenset:
        """The axes whose positions decide a skipped trip: the sub-loops' masks'."""
        return frozenset().union(*(s.axes for s in self.inner))

    def active(self, block_mask=None) -> bool:
        return True

    def verdict(self, tile_of, block_mask=None) -> tuple:
        """``(skipped, everywhere)`` on the tiles ``tile_of`` gives (:meth:`~napkin_cat.algorithms.skipping.Skip.
        verdict`): every sub-loop skips all its trips there; some sub-loop runs every one of its trips there."""
        verdicts = [s.verdict(tile_of) for s in self.inner]
        return all_of(*(v[0] for v in verdicts)), any_of(*(v[1] for v in verdicts))

    def skipped(self, tile_of, block_mask=None):
        """Whether the trip on the tiles ``tile_of`` gives is skipped (every sub-loop skips all of its trips)."""
        return self.verdict(tile_of)[0]

    def whole(self, trip) -> None:
        """None: no mask of the trip's own is made in it, so none is left out of it."""
        return None


class TripKinds:
    """Which trips each masked loop (a stream, or a sub-loop) runs at the sizes, and at which tile extents: per loop,
    the sizes it was decided at (``env``: every tile around it and its own bound to the extents of the tiles it ran
    in) with the kinds of trip that ran there, partial (neither skipped nor allowed whole by its mask: run as
    written, the mask made) or whole (the maps that make only the mask, :meth:`~napkin_cat.algorithms.skipping.Skip.
    whole`, left out, as the runner leaves them out).  What the memory at sizes reads: a walk of the columns at sizes
    ``W`` (the full sizes, or one of those ``env``) counts a loop's trip as it runs there (:meth:`at`)::

        kind(loop, W) = None       a partial trip runs at W, or the loop was never decided (its trip as written)
                      = "whole"    trips run at W, every one whole     (the trip without the mask's maps)
                      = "none"     no trip runs at W                    (no trip held)

    where a record at ``env`` runs at ``W`` if each size of ``env`` is ``W``'s or the full one (a tile at its full
    extent stands for the shorter too: what it holds is at most the full tile's).  Every column so counted is one a
    run holds, or less than one (arrays grow with their extents), and each a run holds is counted in the walk at its
    own ``env``: the most over the walks is the peak.  A loop is known by its axis and tile (a short tile's
    relabelled copy is the same loop); two loops of one axis and tile are one, their trips joined (never less).

    >>> from types import SimpleNamespace as Loop
    >>> kinds, full = TripKinds(), {"s_x": 4}
    >>> kinds.note(Loop(axis="x", size="s_x"), {"s_x": 4}, partial=False, whole=True)
    >>> kinds.note(Loop(axis="x", size="s_x"), {"s_x": 1}, partial=True, whole=False)
    >>> [kinds.at(w, full).kind(Loop(axis="x", size="s_x")) for w in kinds.walks(full)]
    ['whole', None]
    >>> kinds.at(full, full).kind(Loop(axis="x", size="u_x")) is None           # never decided: as written
    True
    """

    def __init__(self):
        self.seen: dict = {}     # loop key -> {(env items, partial, whole)}

    @staticmethod
    def key(region) -> tuple:
        return (region.axis, str(region.size))

    def note(self, region, env: dict, *, partial: bool, whole: bool) -> None:
        """Trips of ``region`` decided at ``env``: whether some ran partial, some whole (neither: none ran)."""
        runs = self.seen.setdefault(self.key(region), set())
        if partial or whole:
            runs.add((frozenset(env.items()), bool(partial), bool(whole)))

    def walks(self, full: dict) -> list:
        """The sizes to walk the columns at: ``full``, then each other ``env`` some loop's trips ran at."""
        out, known = [full], {frozenset(full.items())}
        for runs in self.seen.values():
            for env, _, _ in runs:
                if env not in known:
                    known.add(env)
                    out.append(dict(env))
        return out

    def at(self, walk: dict, full: dict) -> "_KindsAt":
        """The kinds of trip each loop runs in the walk at ``walk`` (``full``: the sizes every record is read by)."""
        return _KindsAt(self, walk, full)


class _KindsAt:
    """:meth:`TripKinds.at`: ``kind(region)`` in one walk."""

    def __init__(self, kinds: TripKinds, walk: dict, full: dict):
        self.kinds, self.walk, self.full = kinds, walk, full

    def kind(self, region) -> str | None:
        runs = self.kinds.seen.get(TripKinds.key(region))
        if runs is None:
            return None
        here = [(p, w) for env, p, w in runs
                if all(v == self.walk.get(k, v) or v == self.full.get(k) for k, v in env)]
        if any(p for p, _ in here):
            return None
        return "whole" if here else "none"
