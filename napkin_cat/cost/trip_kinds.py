"""Which trips a masked loop runs at concrete sizes, and at which tile extents: what the memory at sizes reads.

The cost at sizes (:mod:`napkin_cat.cost.numeric`) decides each masked loop's trips on every tile
(:func:`~napkin_cat.cost.at_sizes.running_slices`); its memory is the symbolic columns at the sizes
(:mod:`napkin_cat.cost.columns`), which hold a trip's data as written, at full tiles.  A trip the mask skips
holds nothing, one it allows whole never makes the mask (the runner leaves those maps out), and a trip of a
kind may run only on a short tile: :class:`TripKinds` notes what ran where, and the columns are walked at
each extent where something ran, each loop's trip counted as it runs there.
"""
from __future__ import annotations

__all__ = ["TripKinds"]


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
