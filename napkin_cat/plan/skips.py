"""A stream's trips decided by its masks: skipped, run whole without the mask, or run as written (paper §6).

A mask read from data decides each trip by the data's block mask (:class:`BlockSkip`, a
:class:`~napkin_cat.plan.ir.StreamLoop`'s ``data``); a mask from positions decides which trips are true on every
pair (:class:`FullTrips`, its ``full_trips``).  On a full trip the statements that make only the mask (``made``)
are left out and its conditions read as true; the law, where the trip is full::

    body without made, conditions := true   computes what   body   computes      (where(true, s, −∞) = s)

The runners, the printers and :mod:`napkin_cat.plan.blocks` (the block mask's table) read these.

>>> BlockSkip.of((("x", 0, 4),), None, ()).conditions
frozenset()
"""
from __future__ import annotations

from dataclasses import dataclass

from napkin_cat.algorithms.skipping import made_only_for
from napkin_cat.plan.ir import ACCESS, Access, Free, blocks, reads, walk, writes


@dataclass(frozen=True)
class BlockSkip:
    """A stream's skip test by the data's block mask (a mask read from data, :mod:`napkin_cat.algorithms.skipping`):
    the one statement of it every runner and printer reads (:mod:`napkin_cat.plan.blocks` makes its table).

    ``box``: the trip's tile on the mask's axes, ``((axis, start, extent), …)``.  ``condition``: the variable of
    the mask the block mask is of, true on every pair of a *full* trip (None where several masks read data: a full
    trip then runs as a partial one); ``copies``: the other variables the trip makes equal to it (the mask made
    again for another product, :func:`~napkin_cat.algorithms.skipping.equal_values`).  ``made``: the variables the
    trip makes only for that mask (the condition and its copies, the operands only they read, their loads): a full
    trip makes none of them and reads the condition and its copies as true.
    Per trip, by its block's state::

        none     the trip is skipped (no pair allowed: it would change nothing)
        full     the body without the statements that write only ``made``, ``condition`` read as true
        partial  the body as written
    """

    box: tuple
    condition: str | None = None
    made: frozenset = frozenset()
    copies: frozenset = frozenset()

    @classmethod
    def of(cls, box: tuple, condition: str | None, body: tuple, copies=()) -> "BlockSkip":
        """The skip test of a trip ``body`` whose mask is ``condition`` (a variable the body writes, or None) and
        ``copies`` (variables equal to it, None for one made inline): ``made`` grown back from the condition and
        its copies through every variable the body writes and only mask makers read."""
        stmts = [s for s in walk(body) if not isinstance(s, Free)]
        written = {v for s in stmts for v in writes(s)}
        if condition is None or condition not in written:
            return cls(tuple(box), None, frozenset())
        copies = frozenset(v for v in copies if v in written) - {condition}
        made = made_only_for(((reads(s), writes(s), not blocks(s)) for s in stmts), {condition, *copies})
        return cls(tuple(box), condition, frozenset(made), copies)

    @property
    def conditions(self) -> frozenset:
        """The variables a full trip reads as true: the condition and its copies."""
        return frozenset() if self.condition is None else self.copies | {self.condition}

    @property
    def axes(self) -> tuple:
        return tuple(a for a, _, _ in self.box)

    def omits(self, stmt) -> bool:
        """Whether a full trip leaves ``stmt`` out: a simple statement that writes only variables of the mask."""
        w = writes(stmt)
        return self.condition is not None and not blocks(stmt) and bool(w) and set(w) <= self.made


@dataclass(frozen=True)
class FullTrips:
    """The trips of a stream on which a mask from positions is true on every pair (:class:`StreamLoop`'s
    ``full_trips``): ``when``, a condition on the loop indices (sympy; interval arithmetic on the trip's positions,
    :meth:`~napkin_cat.algorithms.skipping.Skip.verdict`'s *everywhere*), and ``mask``, the :class:`BlockSkip`
    (its ``box`` empty) that says which variables the trip makes only for that mask (``made``) and which it reads
    as true (``conditions``).  The law, where ``when`` holds: the body without ``made``, the conditions read as
    true, computes what the body computes (``where(true, s, −∞) = s``).

    >>> import napkin_cat as nc
    >>> p = nc.plan(nc.stream(nc.library.causal_attention(q=8, x=8, d=4), "x", "s_x"), {"s_x": 4})
    >>> from napkin_cat.plan.ir import StreamLoop
    >>> (s,) = [s for s in walk(p.body) if isinstance(s, StreamLoop)]
    >>> s.full_trips.when, sorted(s.full_trips.made)        # every x of the trip ≤ the first q (all of q here)
    (i_x*s_x + Min(s_x, -i_x*s_x + 8) - 1 <= 0, ['le13', 'position12'])
    """

    when: object
    mask: BlockSkip

    @property
    def conditions(self) -> frozenset:
        return self.mask.conditions

    @property
    def made(self) -> frozenset:
        return self.mask.made

    def omits(self, stmt) -> bool:
        return self.mask.omits(stmt)


#: what each reads and writes (:func:`~napkin_cat.plan.ir.access`): no variable.  A skip test reads the block table;
#: the full trips are a test of the loop indices
ACCESS[BlockSkip] = ACCESS[FullTrips] = lambda s: Access()

__all__ = ["BlockSkip", "FullTrips"]
